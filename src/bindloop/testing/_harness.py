"""``loop_harness``: a ready ``ToolLoopParams`` over a scripted model, with dispatch recording."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from .._awaitable import isawaitable
from typing import Any

import msgspec

from ..contracts import ModelTurnResult, ToolCall, ToolError, ToolOutcome, ToolResult, ToolSuspend
from ..loop import ToolLoopParams
from ._clock import SteppingClock, stepping_clock
from ._script import ScriptedModel, fresh_state, scripted_model

__all__ = ("LoopHarness", "ToolFn", "loop_harness")

ToolFn = Callable[[dict[str, Any]], Any]
_JSON = msgspec.json.Encoder()
_OUTCOMES = (ToolResult, ToolError, ToolSuspend)


class LoopHarness:
    """``params`` is a complete :class:`ToolLoopParams`; ``ran`` lists the tool names the loop
    dispatched and ``side_effects`` those that completed without raising — the gap between them is
    the answer to every cancellation question. ``model`` is the scripted model, ``clock`` the
    stepping clock used as ``now`` (unless overridden)."""

    def __init__(self, params: ToolLoopParams, model: ScriptedModel, clock: SteppingClock) -> None:
        self.params = params
        self.model = model
        self.clock = clock
        self.ran: list[str] = []
        self.side_effects: list[str] = []

    @property
    def state(self) -> Any:
        return self.params.state


def _default_tool(call: ToolCall, args: dict[str, Any]) -> ToolOutcome:
    return ToolResult(content=f"{call.name} ok")


def loop_harness(
    script: Sequence[ModelTurnResult] | ScriptedModel,
    *,
    tools: Mapping[str, ToolFn] | None = None,
    **overrides: Any,
) -> LoopHarness:
    """A harness over ``script``. ``tools`` maps a tool name to ``fn(args) -> value`` (sync or
    async); a returned ToolResult / ToolError / ToolSuspend is used as is, anything else is
    JSON-encoded into a result. A name not in ``tools`` answers ``"<name> ok"``. Every
    :class:`ToolLoopParams` field can be overridden by keyword (``run_tool_call`` too — it is still
    recorded in ``ran`` / ``side_effects``). Default ``max_iterations`` is 50.
    """
    model = script if isinstance(script, ScriptedModel) else scripted_model(script)
    clock = stepping_clock()
    table = dict(tools or {})

    async def dispatch(call: ToolCall) -> ToolOutcome:
        fn = table.get(call.name)
        if fn is None:
            return _default_tool(call, {})
        args = msgspec.json.decode(call.arguments) if call.arguments.strip() else {}
        value = fn(args)
        if isawaitable(value):
            value = await value
        if isinstance(value, _OUTCOMES):
            return value
        return ToolResult(content=value if isinstance(value, str) else _JSON.encode(value).decode())

    inner = overrides.pop("run_tool_call", dispatch)
    base = ToolLoopParams(
        state=fresh_state(),
        call_model=model,
        run_tool_call=inner,
        max_iterations=50,
        now=clock,
    )
    params = msgspec.structs.replace(base, **overrides)
    harness = LoopHarness(params, model, clock)

    async def recorded(call: ToolCall) -> ToolOutcome:
        harness.ran.append(call.name)
        value = inner(call)
        outcome: ToolOutcome = await value if isawaitable(value) else value
        harness.side_effects.append(call.name)
        return outcome

    harness.params = msgspec.structs.replace(params, run_tool_call=recorded)
    return harness
