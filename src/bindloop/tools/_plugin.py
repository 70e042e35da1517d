"""Plugins: bundles of tools dispatched by name, generic over the host's invocation context."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from ..contracts import ToolDefinition, ToolError, ToolOutcome
from ..errors import UsageError
from ._tool import RawArguments, Tool, tool_wire_definition

__all__ = ("PluginSummary", "ToolPlugin", "ToolsPlugin", "plugin_from_tools", "summarize_plugin")

CtxT = TypeVar("CtxT")
CtxT_contra = TypeVar("CtxT_contra", contravariant=True)


class ToolPlugin(Protocol[CtxT_contra]):
    """What a registry holds. ``CtxT`` is the host's invocation context (its identity model, auth,
    signal, ...): the harness never looks inside it. Extend with your own fields by subclassing.

    ``execute`` dispatches by tool name and returns an outcome; an unknown name comes back as a
    ``not_found`` :class:`~bindloop.contracts.ToolError` (a resumed history may name a retired tool).
    """

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    def tool_definitions(self) -> Sequence[ToolDefinition]: ...

    async def execute(self, tool_name: str, arguments: RawArguments,
                      ctx: CtxT_contra) -> ToolOutcome: ...


class PluginSummary(msgspec.Struct, frozen=True, kw_only=True):
    """A catalog entry: enough for the model to decide whether to load the plugin."""

    name: str
    description: str
    tools: tuple[str, ...] = ()


def summarize_plugin(plugin: ToolPlugin[Any]) -> PluginSummary:
    """The catalog entry for ``plugin`` (tool names in the plugin's own order)."""
    return PluginSummary(name=plugin.name, description=plugin.description,
                         tools=tuple(d.name for d in plugin.tool_definitions()))


class ToolsPlugin(Generic[CtxT]):
    """A plugin over a flat list of :func:`~bindloop.tools.define_tool` tools. It only resolves
    names; validation lives on each tool, so calling a tool directly gives the same guarantee."""

    __slots__ = ("_definitions", "_tools", "description", "name")

    name: str
    description: str

    def __init__(self, *, name: str, description: str, tools: Sequence[Tool[Any, CtxT]]) -> None:
        table: dict[str, Tool[Any, CtxT]] = {}
        for tool in tools:
            if not isinstance(tool, Tool):
                raise UsageError(f"plugin {name!r}: {tool!r} is not a Tool (use define_tool)")
            if tool.name in table:
                raise UsageError(f"plugin {name!r} defines tool {tool.name!r} twice")
            table[tool.name] = tool
        self.name = name
        self.description = description
        self._tools = MappingProxyType(table)
        self._definitions = tuple(tool_wire_definition(t) for t in table.values())

    def __repr__(self) -> str:
        return f"ToolsPlugin(name={self.name!r}, tools={list(self._tools)!r})"

    @property
    def tools(self) -> Mapping[str, Tool[Any, CtxT]]:
        """The tools by name (read-only)."""
        return self._tools

    def tool_definitions(self) -> tuple[ToolDefinition, ...]:
        return self._definitions

    async def execute(self, tool_name: str, arguments: RawArguments, ctx: CtxT) -> ToolOutcome:
        tool = self._tools.get(tool_name)
        if tool is None:
            return ToolError(error=f"Unknown tool {tool_name!r} in plugin {self.name!r}",
                             kind="not_found")
        return await tool.execute(arguments, ctx)


def plugin_from_tools(*, name: str, description: str,
                      tools: Sequence[Tool[Any, CtxT]]) -> ToolsPlugin[CtxT]:
    """Bundle tools into a plugin that dispatches by tool name.

    Raises
    ------
    UsageError
        ``name`` is empty, an entry is not a :class:`Tool`, or two tools share a name.
    """
    if not isinstance(name, str) or not name:
        raise UsageError("plugin name must be a non-empty string")
    return ToolsPlugin(name=name, description=description, tools=tools)
