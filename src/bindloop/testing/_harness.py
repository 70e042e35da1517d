"""``loop_harness``: a ready ``ToolLoopParams`` over a scripted model, with dispatch recording."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._awaitable import isawaitable

import msgspec

from ..contracts import ModelTurnResult, ToolCall, ToolError, ToolOutcome, ToolResult, ToolSuspend
from ..loop import ToolLoopParams, ToolRunner
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
    runner: ToolRunner | None = None,
    **fields: Any,
) -> LoopHarness:
    """A harness over ``script``. ``tools`` maps a tool name to ``fn(args) -> value`` (sync or
    async); a returned ToolResult / ToolError / ToolSuspend is used as is, anything else is
    JSON-encoded into a result. A name not in ``tools`` answers ``"<name> ok"``.

    ``runner`` is the :class:`~bindloop.loop.ToolRunner` (its rules: serial calls, fatal raises,
    a batch wrapper, ...); one without ``run_tool_call`` runs the ``tools`` table. Whichever call
    runs is recorded in ``ran`` / ``side_effects``. Every other :class:`ToolLoopParams` field
    (``hooks``, ``signal``, ``state``, ``max_iterations``, ``now``, ...) can be given by keyword.
    Default ``max_iterations`` is 50.
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

    if runner is None:
        runner = ToolRunner()
    inner: Callable[[ToolCall], Any] = (runner.run_tool_call if "run_tool_call" in runner.wired
                                        else dispatch)
    recording = copy.copy(runner)  # the caller's runner stays as it was
    harness = LoopHarness(
        ToolLoopParams(**{"state": fresh_state(), "model": model, "runner": recording,
                          "max_iterations": 50, "now": clock, **fields}), model, clock)

    async def recorded(call: ToolCall) -> ToolOutcome:
        harness.ran.append(call.name)
        value = inner(call)
        outcome: ToolOutcome = await value if isawaitable(value) else value
        harness.side_effects.append(call.name)
        return outcome

    setattr(recording, "run_tool_call", recorded)
    recording.wired = recording.wired | {"run_tool_call"}
    return harness
