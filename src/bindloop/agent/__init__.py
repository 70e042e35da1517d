"""The agent API: hooks-style agents that run prompts on the tool loop (built on the wire models, the
turn text stream and session checkpoints; partial JSON reads a structured answer as it streams).
See docs/agent.md.

``create_agent`` makes an awaitable agent; inside its handler the ``equip_*`` / ``expect_*`` /
``on_stream`` hooks shape one generation's prompt, ``prompt_agent(schema)`` / ``prompt_chat()``
run it, ``reborn()`` starts another generation. ``run_with`` is the explicit root of a run (models,
providers, trace bus, snapshots).

The specialist areas are sub-namespaces, each with its full ``__all__``:
:mod:`bindloop.agent.approvals` (deciding suspended tool calls), :mod:`bindloop.agent.snapshots`
(record and replay a run), :mod:`bindloop.agent.limits` (rate and concurrency limits),
:mod:`bindloop.agent.middleware` (the onions around model, tool, agent and tool-call-loop),
:mod:`bindloop.agent.events` (the run's stream and trace events), :mod:`bindloop.agent.errors`
and :mod:`bindloop.agent.partial_json` (live structured output).
"""

from ._agent import (
    Agent as Agent,
    Reborn as Reborn,
    augment_agent as augment_agent,
    create_agent as create_agent,
    reborn as reborn,
)
from ._hooks import (
    equip_budget as equip_budget,
    equip_history as equip_history,
    equip_instruction as equip_instruction,
    equip_memo as equip_memo,
    equip_memory as equip_memory,
    equip_resource as equip_resource,
    equip_scope as equip_scope,
    equip_system as equip_system,
    equip_tool as equip_tool,
    equip_tool_call_loop_middleware as equip_tool_call_loop_middleware,
    expect_resource as expect_resource,
    expect_scope as expect_scope,
    expect_validator as expect_validator,
    on_event as on_event,
    on_stream as on_stream,
)
from ._middleware import augment_model as augment_model
from ._log import TOOL_LOGGER as TOOL_LOGGER, log_tool_error as log_tool_error
from ._observe import (
    ToolErrorHook as ToolErrorHook,
    ToolErrorReport as ToolErrorReport,
    prompt_stats as prompt_stats,
)
from ._prompt import (
    ChatResult as ChatResult,
    prompt_agent as prompt_agent,
    prompt_chat as prompt_chat,
)
from ._resume import resume_chat as resume_chat
from ._run import run_with as run_with
from ._turns import ToolChoiceContext as ToolChoiceContext, ToolChoicePolicy as ToolChoicePolicy
from ._text import TextStream as TextStream, stream_text as stream_text
from ._tools import AgentTool as AgentTool, augment_tool as augment_tool, call_tool as call_tool
from ._mcp import equip_mcp as equip_mcp

__all__ = (
    "TOOL_LOGGER",
    "Agent",
    "AgentTool",
    "ChatResult",
    "Reborn",
    "ToolChoiceContext",
    "ToolChoicePolicy",
    "ToolErrorHook",
    "ToolErrorReport",
    "TextStream",
    "augment_agent",
    "augment_model",
    "augment_tool",
    "call_tool",
    "create_agent",
    "equip_budget",
    "equip_history",
    "equip_instruction",
    "equip_memo",
    "equip_memory",
    "equip_resource",
    "equip_scope",
    "equip_system",
    "equip_tool",
    "equip_tool_call_loop_middleware",
    "expect_resource",
    "expect_scope",
    "expect_validator",
    "on_event",
    "on_stream",
    "prompt_agent",
    "prompt_chat",
    "log_tool_error",
    "prompt_stats",
    "reborn",
    "resume_chat",
    "run_with",
    "stream_text",
    "equip_mcp",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)

# The sub-namespaces load with the package (their modules are already loaded by the names above), so
# each object reports its public home from the first import on.
from . import approvals, errors, events, limits, middleware, partial_json, snapshots  # noqa: E402, F401
