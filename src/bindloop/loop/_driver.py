"""``run_tool_loop``: the anyio driver that carries the machine's effects out through the ports.

The driver owns no decisions of the loop's. It pops an effect, performs it with the host's ports,
and sends the answer back; the only logic here is how a port is called (sync or async), how long it
took, and checking what a port returned. The host's decisions are asked here, where the ports are,
and sent as data: the runner's ``runs_serially`` and ``is_final_call`` answer the machine's
``PlanBatch`` and ``CheckFinal`` requests; the stop signal is polled at each ``CheckBoundary``; a
raise is judged the moment it happens (:func:`is_fatal_raise`: a fatal one propagates and cancels
its batch) and a non-fatal one is sent as the tool error the model reads
(:func:`tool_exception_error`) and its type's name, the exception itself kept here for the hooks'
``on_tool_call_rejected``. What a call that never ran says, and what the loop does with each
answer, are the machine's (:mod:`bindloop.lowlevel`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, cast, overload

import msgspec

from .._awaitable import isawaitable, resolve as _resolve
from ..contracts import ToolCall, ToolError, ToolOutcome
from ..errors import (
    AbortedToolCallError,
    PortContractError,
    RunCancelledError,
    RunTimeoutError,
    UsageError,
)
from ._pool import run_tool_calls_pooled_by_tool
from ._checks import check_bool, check_sync_result, check_tools
from ._effects import (
    AcceptToolMessage,
    Activate,
    AskNudge,
    BatchFinished,
    BatchPlanned,
    Boundary,
    BoundaryChecked,
    BoundaryDecided,
    CallModel,
    CheckBoundary,
    CheckFinal,
    Compact,
    Compacted,
    FinalChecked,
    Finish,
    ModelReplied,
    NotifyAssistant,
    NotifyProgress,
    Nudged,
    PlanBatch,
    RaisedByTool,
    Reject,
    RunTool,
    RunToolBatch,
    Settle,
    Settled,
    ToolAnswer,
    ToolMessageAccepted,
    ToolNotRun,
    ToolRaised,
    ToolReturned,
    WrapToolBatch,
    reason_exception,
)
from ._batch_port import Raised, RawAnswer, id_of, name_of, wrap_tool_batch
from ._machine import LoopMachine
from ._ports import LoopHooks, ToolLoopParams, ToolRunner
from ._tool_errors import is_fatal_raise, tool_exception_error
from ._types import (
    EFFECT_PORTS,
    ControlledToolLoopResult,
    LoopBoundary,
    LoopControl,
    ToolLoopResult,
)

__all__ = ("run_tool_loop",)

_EFFECT_PORTS: Final = frozenset(EFFECT_PORTS)
_RAISED_STOPS: Final = (RunTimeoutError, RunCancelledError)
_ON_BOUNDARY: Final = frozenset({"on_boundary"})
_ACCEPTED: Final = ToolMessageAccepted()
_GO: Final = BoundaryChecked(False)
_STOP: Final = BoundaryChecked(True)


@overload
async def run_tool_loop(params: ToolLoopParams) -> ToolLoopResult: ...


@overload
async def run_tool_loop(params: ToolLoopParams,
                        control: LoopControl) -> ControlledToolLoopResult: ...


async def run_tool_loop(
    params: ToolLoopParams, control: LoopControl | None = None
) -> ToolLoopResult | ControlledToolLoopResult:
    """Run the loop to a stop reason.

    With ``control``, its hook is awaited at every settled boundary and may end the run as
    ``checkpointed``; the result is then a :class:`ControlledToolLoopResult`.

    Returns the stop reason and this invocation's :class:`~bindloop.contracts.RunStats`; ``state`` is
    updated in place throughout. Raises a stop signal's :class:`~bindloop.errors.RunTimeoutError`
    or :class:`~bindloop.errors.RunCancelledError` reason, and whatever a port raises (the model, a
    fatal tool error, a failing ``before_tool_message_accepted`` or ``on_step_settled``) —
    ``state`` is then the only accounting that survives. Contract violations raise
    :class:`~bindloop.errors.UsageError` subclasses.
    """
    if not isinstance(params, ToolLoopParams):
        raise PortContractError(f"run_tool_loop expects ToolLoopParams, got {type(params).__name__}")
    p = params
    if control is not None and not isinstance(control, LoopControl):
        raise PortContractError(f"control must be a LoopControl, got {type(control).__name__}")
    runner, hooks = p.runner, p.hooks
    if not isinstance(runner, ToolRunner):
        raise PortContractError(f"runner must be a ToolRunner, got {type(runner).__name__}")
    if not isinstance(hooks, LoopHooks):
        raise PortContractError(f"hooks must be a LoopHooks, got {type(hooks).__name__}")
    tool_ports, hook_ports = runner.wired, hooks.wired
    if "run_tool_call" not in tool_ports:
        raise PortContractError("the runner has no run_tool_call: pass it "
                                "(ToolRunner(run_tool_call=...)) or override it in a subclass")
    wired = (tool_ports | hook_ports) & _EFFECT_PORTS
    if control is not None:
        wired |= _ON_BOUNDARY
    machine = LoopMachine(p.state, p.max_iterations, wired=wired, resume_calls=p.resume_calls)
    now = p.now
    signal = p.signal
    run_tool_call = runner.run_tool_call
    fatal = runner.is_fatal_tool_error if "is_fatal_tool_error" in tool_ports else None
    format_exception = (runner.format_tool_exception if "format_tool_exception" in tool_ports
                        else None)
    serially = runner.runs_serially if "runs_serially" in tool_ports else None
    build_tools = runner.build_tools if "build_tools" in tool_ports else None
    # Synchronous hooks: what they return is checked (an awaitable would never run).
    rejected: Callable[[str, BaseException], object] | None = (
        hooks.on_tool_call_rejected if "on_tool_call_rejected" in hook_ports else None)
    progress: Callable[[int, int], object] = hooks.on_progress_update
    complete = p.model.complete
    request = base_request = p.request
    if request.tools:
        raise UsageError("ToolLoopPorts.request carries no tools: the runner's build_tools "
                         "offers them on each call")
    offered: object = None  # the tools `request` was last built from
    state = p.state
    send = machine.send
    calls = _ToolCalls(now, run_tool_call, fatal, format_exception, serially)
    machine.start()
    while True:
        effect = machine.next_effect()
        kind = type(effect)
        if kind is CallModel:
            # Maybe-awaitable ports on the per-turn path are resolved inline: a resolve()
            # coroutine per call is a measurable share of a turn.
            if build_tools is not None:
                built = build_tools()
                if isawaitable(built):
                    built = await built
                if built is not offered or type(built) is not tuple:  # a tuple cannot change
                    tools = check_tools(built)
                    if tools != request.tools:  # the same tools again: the same request
                        request = (msgspec.structs.replace(base_request, tools=tools) if tools
                                   else base_request)
                    offered = built
            started = now()
            pending = complete(state.messages, request)
            if not isawaitable(pending):
                raise PortContractError(
                    f"model.complete returned {type(pending).__name__} instead of an awaitable")
            send(ModelReplied(await pending, now() - started))
        elif kind is CheckBoundary:
            if signal is not None and signal.poll():
                reason = signal.reason
                if isinstance(reason, _RAISED_STOPS):
                    raise reason
                send(_STOP)
            else:
                send(_GO)
        elif kind is RunTool:
            run: RunTool = effect  # type: ignore[assignment]  # narrowed by the type check above
            if signal is not None and signal.aborted:
                reason = None if signal.reason is None else str(signal.reason)
                send(ToolNotRun(run.index, reason))
            else:  # run_one inlined: one call per turn is the common case
                started = now()
                try:
                    result: Any = run_tool_call(run.call)
                    outcome = await result if isawaitable(result) else result
                except Exception as exc:
                    if is_fatal_raise(exc, fatal):
                        raise
                    answer: ToolAnswer = calls.raise_answer(run.index, exc, now() - started)
                else:
                    answer = ToolReturned(run.index, outcome, now() - started)
                send(answer)
        elif kind is RunToolBatch:
            assert isinstance(effect, RunToolBatch)
            answers = await run_tool_calls_pooled_by_tool(
                effect.items, calls.run_pooled_item, tool_name=name_of, item_id=id_of,
                signal=signal, options=runner.batch_options,
            )
            # Formatted here, in call order, once the pool is over (see _batch_port.Raised).
            # Loops and map(), not comprehensions over the driver's locals: a comprehension
            # is a closure, and each local it reads becomes a cell kept for the whole run.
            finished: list[ToolAnswer] = []
            for item, a in zip(effect.items, answers):
                finished.append(ToolNotRun(item[0], a.reason)
                                if isinstance(a, AbortedToolCallError) else calls.settle(a))
            send(BatchFinished(finished))
        elif kind is PlanBatch:
            assert isinstance(effect, PlanBatch) and serially is not None
            # Each answer checked as it comes (an async predicate's coroutine is closed at once);
            # the machine checks the data again, for drivers that do not.
            send(BatchPlanned([check_bool(answer, "runs_serially")
                               for answer in map(serially, effect.calls)]))
        elif kind is CheckFinal:
            assert isinstance(effect, CheckFinal)
            send(FinalChecked([check_bool(answer, "is_final_call") for answer in
                               map(runner.is_final_call, effect.calls, effect.outcomes)]))
        elif kind is WrapToolBatch:
            assert isinstance(effect, WrapToolBatch)
            send(await wrap_tool_batch(
                runner.run_tool_batch, effect.calls, run_one=calls.run_one,
                run_pooled_item=calls.run_pooled_item, settle=calls.settle,
                runs_alone=calls.runs_alone,
                signal=signal, options=runner.batch_options))
        elif kind is NotifyProgress:
            assert isinstance(effect, NotifyProgress)
            check_sync_result(
                progress(effect.output_tokens, effect.requested_tool_calls),
                "on_progress_update")
        elif kind is NotifyAssistant:
            assert isinstance(effect, NotifyAssistant)
            await _resolve(hooks.on_assistant_message(effect.message))
        elif kind is Reject:
            assert isinstance(effect, Reject)
            why = effect.reason
            error = (calls.raised.pop(0) if isinstance(why, RaisedByTool)
                     else reason_exception(effect.tool_call_id, why))
            if rejected is not None:
                check_sync_result(rejected(effect.tool_call_id, error), "on_tool_call_rejected")
        elif kind is Activate:
            assert isinstance(effect, Activate)
            await _resolve(hooks.activate(effect.kind, effect.names))
        elif kind is AcceptToolMessage:
            assert isinstance(effect, AcceptToolMessage)
            await _resolve(hooks.before_tool_message_accepted(effect.message, effect.ordinal))
            send(_ACCEPTED)
        elif kind is Settle:
            assert isinstance(effect, Settle)
            send(Settled(await _resolve(hooks.on_step_settled(effect.would_end))))
        elif kind is AskNudge:
            assert isinstance(effect, AskNudge)
            nudge: Any = hooks.on_turn_would_end(effect.turn)  # every prompt's last turn: inline
            send(Nudged(await nudge if isawaitable(nudge) else nudge))
        elif kind is Compact:
            started = now()
            applied = await _resolve(hooks.compact(state.messages))
            send(Compacted(applied, now() - started))
        elif kind is Boundary:
            assert control is not None
            decision = await _resolve(control.on_boundary(LoopBoundary(
                state=state, stats=machine.stats, iterations=machine.iterations)))
            if decision not in ("continue", "checkpoint"):
                raise PortContractError(
                    f"on_boundary returned {decision!r}; expected 'continue' or 'checkpoint'")
            send(BoundaryDecided(decision == "checkpoint"))
        else:
            assert isinstance(effect, Finish)
            if control is None:
                # Without a control hook the machine cannot reach "checkpointed".
                return ToolLoopResult(stop_reason=cast(Any, effect.stop_reason), stats=machine.stats,
                                      final_turn=machine.final_turn)
            await _resolve(control.on_boundary(LoopBoundary(
                state=state, stats=machine.stats, iterations=machine.iterations, final=True,
                stop_reason=effect.stop_reason)))
            return ControlledToolLoopResult(stop_reason=cast(Any, effect.stop_reason),
                                            stats=machine.stats, iterations=machine.iterations,
                                            final_turn=machine.final_turn)



class _ToolCalls:
    """How the driver calls the runner's tools, as one object per run rather than closures over
    the driver's frame: it lives across every await of the run, and each object it saves per run
    is one fewer for the cyclic collector to walk while many runs are in flight.

    ``raised`` holds the exceptions of the :class:`ToolRaised` answers made, in order: each
    ``RaisedByTool`` rejection the machine gives back takes the next one (no exception enters the
    machine)."""

    __slots__ = ("_fatal", "_format_exception", "_now", "_run_tool_call", "_serially", "raised")

    def __init__(self, now: Callable[[], float], run_tool_call: Callable[[ToolCall], Any],
                 fatal: Callable[[BaseException], bool] | None,
                 format_exception: Callable[[Exception], ToolError] | None,
                 serially: Callable[[ToolCall], object] | None) -> None:
        self._now = now
        self._run_tool_call = run_tool_call
        self._fatal = fatal
        self._format_exception = format_exception
        self._serially = serially
        self.raised: list[Exception] = []

    def raise_answer(self, index: int, exc: Exception, ms: float) -> ToolRaised:
        self.raised.append(exc)
        return ToolRaised(index, tool_exception_error(exc, self._format_exception),
                          type(exc).__name__, ms)

    def settle(self, answer: RawAnswer) -> ToolAnswer:
        if isinstance(answer, Raised):
            return self.raise_answer(answer.index, answer.error, answer.ms)
        return answer

    def runs_alone(self, call: ToolCall) -> bool:
        serially = self._serially
        return serially is not None and check_bool(serially(call), "runs_serially")

    async def run_one(self, index: int, call: ToolCall) -> RawAnswer:
        now = self._now
        started = now()
        try:
            value: Any = self._run_tool_call(call)
            outcome: ToolOutcome = await value if isawaitable(value) else value
        except Exception as exc:
            if is_fatal_raise(exc, self._fatal):
                raise
            return Raised(index, exc, now() - started)
        return ToolReturned(index, outcome, now() - started)

    async def run_pooled_item(self, item: tuple[int, ToolCall]) -> RawAnswer:
        return await self.run_one(item[0], item[1])
