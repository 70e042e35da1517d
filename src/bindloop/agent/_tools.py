"""Tools in the agent API: a ``define_tool`` tool with its static middleware, and ``call_tool``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..contracts import ToolDefinition, ToolError, ToolOutcome, ToolResult
from ..errors import UsageError
from ._errors import ToolCallFailedError
from ..tools import Tool, define_tool, tool_wire_definition
from ._context import optional_frame
from ._middleware import ToolContext, ToolMiddleware, run_tool_chain

__all__ = ("AgentTool", "as_agent_tool", "augment_tool", "call_tool")

_CURRENT: Any = object()  # AgentTool.run(agent_id=) default: read the current frame


class AgentTool:
    """A :class:`~bindloop.tools.Tool` with static middleware "burned in" (outermost first).

    Built by :func:`augment_tool`; :func:`~bindloop.agent.equip_tool` also takes a bare ``Tool``.
    Immutable: augmenting again returns a new one with the new layers outside the old."""

    __slots__ = ("definition", "middleware", "name", "tool")

    def __init__(self, tool: Tool[Any, Any], middleware: tuple[ToolMiddleware, ...]) -> None:
        self.tool = tool
        self.middleware = middleware
        self.definition: ToolDefinition = tool_wire_definition(tool)
        self.name: str = tool.name  # the tool's (a Tool is immutable), read on every prompt

    def __repr__(self) -> str:
        names = [m.name for m in self.middleware]
        return f"AgentTool({self.tool.name!r}, middleware={names})"

    async def run(self, raw: Any, *, call_id: str | None,
                  dynamic: Sequence[ToolMiddleware] = (),
                  agent_id: str | None | object = _CURRENT) -> ToolOutcome:
        """One call: dynamic layers (outer), then static layers, then the tool. The tool's context
        argument is the :class:`ToolContext` the middlewares saw; its ``agent_id`` is the given
        one, else the current agent's."""
        frame = optional_frame()
        if agent_id is _CURRENT:
            agent_id = frame.agent_id if frame is not None else None
        run = frame.run if frame is not None else None
        tool = self.tool
        ctx = ToolContext(tool.name, tool.description, tool.parameters, raw, call_id,
                          agent_id,  # type: ignore[arg-type]
                          run.session_id if run is not None else None,
                          run.trace_id if run is not None else None)
        if not dynamic and not self.middleware:
            return await tool.execute(raw, ctx)
        return await run_tool_chain((*dynamic, *self.middleware), ctx,
                                    lambda: tool.execute(raw, ctx))


def _check_layers(where: str, middlewares: Sequence[object]) -> tuple[ToolMiddleware, ...]:
    out = tuple(middlewares)
    for mw in out:
        if not isinstance(mw, ToolMiddleware):
            raise UsageError(f"{where}: {mw!r} is not a ToolMiddleware(name=, handler=)")
    return out  # type: ignore[return-value]


def as_agent_tool(where: str, tool: object) -> AgentTool:
    if isinstance(tool, AgentTool):
        return tool
    if isinstance(tool, Tool):
        return AgentTool(tool, ())
    if callable(tool):
        return AgentTool(define_tool(tool), ())
    raise UsageError(f"{where}: {tool!r} is not a tool; pass a typed function or make one with "
                     "bindloop.tools.define_tool")


def augment_tool(tool: Tool[Any, Any] | AgentTool | Callable[..., Any],
                 middlewares: Sequence[ToolMiddleware]) -> AgentTool:
    """``tool`` with static ``middlewares`` (first = outermost; placed outside any it already has).

    Static layers run inside the dynamic ones of ``equip_tool(..., middleware=)``: put replayable
    logic (retry, backoff) here and once-per-call side effects in the dynamic layer."""
    base = as_agent_tool("augment_tool", tool)
    return AgentTool(base.tool, (*_check_layers("augment_tool", middlewares), *base.middleware))


async def call_tool(tool: Tool[Any, Any] | AgentTool | Callable[..., Any],
                    args: Mapping[str, Any] | str | None = None) -> Any:
    """Run one tool directly, through its static middleware only (no tool-call-loop middleware,
    no dynamic layers): returns the result's raw ``content``.

    Raises :class:`~bindloop.agent.errors.ToolCallFailedError` when the tool answers with an error (bad
    arguments included) or suspends; exceptions from the tool body propagate unchanged."""
    agent_tool = as_agent_tool("call_tool", tool)
    outcome = await agent_tool.run(args, call_id=None)
    if isinstance(outcome, ToolResult):
        return outcome.content
    if isinstance(outcome, ToolError):
        raise ToolCallFailedError(f"tool {agent_tool.name!r} failed ({outcome.kind}): "
                                  f"{outcome.error}", outcome)
    raise ToolCallFailedError(f"tool {agent_tool.name!r} suspended ({outcome.mode}); call_tool "
                              "has no loop to wait in: run it through prompt_chat", outcome)


def check_dynamic(middlewares: Sequence[object]) -> tuple[ToolMiddleware, ...]:
    return _check_layers("equip_tool(middleware=...)", middlewares)
