"""The loop's own batch runner, handed to ``run_tool_batch`` (a tool-call-loop middleware).

:func:`wrap_tool_batch` carries out one :class:`~bindloop.lowlevel.WrapToolBatch`: it calls the
port with the turn's calls and a runner that runs whatever calls it is given exactly as the
unwired loop runs a batch — ``runs_serially`` calls first, alone, in order; the rest pooled per
tool name under ``batch_options``; once the signal fires nothing more starts and each call left is
answered ``not_run``; a fatal raise propagates — and answers with what the machine says the model
reads (:meth:`~bindloop.lowlevel.LoopMachine.outcome_of`, pure). Every call the runner was handed
is recorded, in the order the unwired loop would report it (each serial call as it is answered,
then the pool in call order), and sent back with the port's outcomes as
:class:`~bindloop.lowlevel.BatchWrapped`.

:class:`Raised` is how the driver's tool runner hands back a non-fatal raise: the exception is
turned into a :class:`~bindloop.lowlevel.ToolRaised` (``format_tool_exception`` asked) once the
pool it ran in is over, in call order — so what the model reads is formatted in one order on every
runtime, and a raising formatter never cancels the calls still running beside it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .._awaitable import isawaitable
from ..contracts import ToolCall, ToolOutcome
from ..errors import AbortedToolCallError, PortContractError
from ._pool import ToolBatchOptions, run_tool_calls_pooled_by_tool
from ..signal import AbortSignal
from ._effects import BatchWrapped, RanCall, ToolAnswer, ToolNotRun, ToolReturned
from ._machine import LoopMachine

__all__ = ("Raised", "RawAnswer", "id_of", "name_of", "wrap_tool_batch")


class Raised:
    """A call's non-fatal raise, caught by the driver's runner and not yet formatted."""

    __slots__ = ("error", "index", "ms")

    def __init__(self, index: int, error: Exception, ms: float) -> None:
        self.index = index
        self.error = error
        self.ms = ms


RawAnswer = ToolReturned | Raised
"""What the driver's runner gives for a call that ran."""


def id_of(item: tuple[int, ToolCall]) -> str:
    return item[1].id


def name_of(item: tuple[int, ToolCall]) -> str:
    return item[1].name


async def wrap_tool_batch(
    port: Any,
    calls: tuple[ToolCall, ...],
    *,
    run_one: Callable[[int, ToolCall], Awaitable[RawAnswer]],
    run_pooled_item: Callable[[tuple[int, ToolCall]], Awaitable[RawAnswer]],
    settle: Callable[[RawAnswer], ToolAnswer],
    runs_alone: Callable[[ToolCall], bool],
    signal: AbortSignal | None,
    options: ToolBatchOptions,
) -> BatchWrapped:
    """``port(calls, runner)`` awaited, and every call the runner ran; the runner refuses to run
    once the port has returned."""
    runs: list[RanCall] = []
    open_ = True
    outcome_of = LoopMachine.outcome_of

    async def runner(given: Sequence[ToolCall]) -> list[ToolOutcome]:
        if not open_:
            raise PortContractError("run_tool_batch's runner was called after the port "
                                    "returned; await it inside the port")
        todo = _runner_calls(given)
        outcomes: list[Any] = [None] * len(todo)
        pooled: list[tuple[int, ToolCall]] = []
        answer: ToolAnswer
        for i, call in enumerate(todo):
            if not runs_alone(call):
                pooled.append((i, call))
                continue
            if signal is not None and signal.aborted:
                answer = ToolNotRun(i, None if signal.reason is None else str(signal.reason))
            else:
                answer = settle(await run_one(i, call))
            runs.append(RanCall(call, answer))
            outcomes[i] = outcome_of(call, answer)
        if pooled:
            pool = await run_tool_calls_pooled_by_tool(
                pooled, run_pooled_item, tool_name=name_of, item_id=id_of, signal=signal,
                options=options)
            for (i, call), a in zip(pooled, pool):
                answer = ToolNotRun(i, a.reason) if isinstance(a, AbortedToolCallError) else settle(a)
                runs.append(RanCall(call, answer))
                outcomes[i] = outcome_of(call, answer)
        return outcomes  # every slot is filled: each call is serial or pooled

    pending = port(calls, runner)
    if not isawaitable(pending):
        raise PortContractError(
            f"run_tool_batch returned {type(pending).__name__} instead of an awaitable: "
            "wire an async function")
    try:
        outcomes = await pending
    finally:
        open_ = False
    return BatchWrapped(outcomes, runs)


def _runner_calls(calls: object) -> tuple[ToolCall, ...]:
    # What a run_tool_batch middleware handed the runner: tool calls the loop can run.
    if isinstance(calls, (str, bytes)) or not isinstance(calls, Sequence):
        raise PortContractError(f"run_tool_batch's runner was given {type(calls).__name__}; "
                                "expected a sequence of ToolCall")
    for k, call in enumerate(calls):
        if (not isinstance(call, ToolCall) or not isinstance(call.id, str) or not call.id
                or not isinstance(call.name, str) or not call.name
                or not isinstance(call.arguments, str)):
            # Named by type only: a call's arguments may hold what must not reach a log.
            raise PortContractError(f"run_tool_batch's runner was given a {type(call).__name__} "
                                    f"at [{k}] that is not a ToolCall with an id, a name and "
                                    "JSON arguments")
    return tuple(calls)
