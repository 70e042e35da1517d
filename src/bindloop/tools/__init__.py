"""Tools: what a model calls and how a call is read and dispatched — tools from plain typed
functions or authored from msgspec Structs (:func:`define_tool`, :class:`Tool`), the context a call
runs with (:class:`ToolContext`), the one reader of a call's arguments (:func:`read_tool_arguments`,
:func:`parse_tool_call_arguments`), plugins (bundles of tools dispatched by name), progressive tool
disclosure (a registry instance, the catalog partition, restoring a persisted activation set), and
tool-call dedup for the dispatcher (replay identical re-calls, break tight loops)."""

from ._plugin import (
    PluginSummary as PluginSummary,
    ToolPlugin as ToolPlugin,
    ToolsPlugin as ToolsPlugin,
    plugin_from_tools as plugin_from_tools,
    summarize_plugin as summarize_plugin,
)
from ._registry import (
    PluginCatalog as PluginCatalog,
    ToolRegistry as ToolRegistry,
    create_tool_registry as create_tool_registry,
    initial_active_plugins as initial_active_plugins,
    partition_plugin_catalog as partition_plugin_catalog,
)
from ._rehydrate import (
    DropReason as DropReason,
    DroppedActivation as DroppedActivation,
    RehydratedActivation as RehydratedActivation,
    ResolveOutcome as ResolveOutcome,
    rehydrate_activation as rehydrate_activation,
)
from ._context import ToolContext as ToolContext
from ._tool import (
    RawArguments as RawArguments,
    Tool as Tool,
    ToolExecute as ToolExecute,
    define_tool as define_tool,
    tool_wire_definition as tool_wire_definition,
)

from ._dedup import (
    DEFAULT_BLOCK_REASON as DEFAULT_BLOCK_REASON,
    DedupMode as DedupMode,
    DedupRule as DedupRule,
    DedupVerdict as DedupVerdict,
    ToolCallDedup as ToolCallDedup,
    canonicalize_shell_command as canonicalize_shell_command,
)
from ._arguments import (
    ParsedArguments as ParsedArguments,
    ToolCallArguments as ToolCallArguments,
    UnparseableArguments as UnparseableArguments,
    UnsupportedToolCallType as UnsupportedToolCallType,
    parse_tool_call_arguments as parse_tool_call_arguments,
    read_tool_arguments as read_tool_arguments,
)

__all__ = (
    "DEFAULT_BLOCK_REASON",
    "DedupMode",
    "DedupRule",
    "DedupVerdict",
    "DropReason",
    "DroppedActivation",
    "PluginCatalog",
    "PluginSummary",
    "RawArguments",
    "RehydratedActivation",
    "ResolveOutcome",
    "Tool",
    "ToolCallDedup",
    "ToolContext",
    "ToolExecute",
    "ToolPlugin",
    "ToolRegistry",
    "ToolsPlugin",
    "canonicalize_shell_command",
    "create_tool_registry",
    "define_tool",
    "initial_active_plugins",
    "partition_plugin_catalog",
    "plugin_from_tools",
    "rehydrate_activation",
    "summarize_plugin",
    "tool_wire_definition",
    # The one reader of a tool call's arguments: tools, MCP tools, protocols (_arguments).
    "ParsedArguments",
    "ToolCallArguments",
    "UnparseableArguments",
    "UnsupportedToolCallType",
    "parse_tool_call_arguments",
    "read_tool_arguments",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
