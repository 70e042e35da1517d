"""The loop's decisions as a synchronous state machine (sans-I/O).

The machine never awaits and never calls an I/O port. The driver pops effects
(:meth:`LoopMachine.next_effect`): *notices* it passes to a port, and at the end of each batch one
*request* it performs and answers with :meth:`LoopMachine.send`. Which answers a pending request
accepts, and which handler takes each, is one table (:data:`TRANSITIONS`, shown in docs/loop.md);
anything else is a :class:`~bindloop.errors.ProtocolError`. Every decision lives here — what the
model reads for a tool's raise or a call that never ran, whether a raise is fatal, which calls run
alone — so the same run is identical on every runtime and Hypothesis can explore it without an
event loop.

Invariants the machine keeps (and the property tests hunt for):

* every tool call of an accepted assistant turn gets exactly one tool message, in the model's order,
  except a suspended call, whose answer arrives later and is listed in ``state.open_suspends``;
* nothing is appended between an assistant tool-call message and the results of that batch — the
  one commit point (:meth:`LoopMachine._commit`) refuses it;
* ``state.totals`` is its seed folded (``accumulate_*``) with exactly what happened in this
  invocation, and ``stats`` is that invocation's part.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Literal, NoReturn

import msgspec

from ..contracts import (
    AuxiliarySpend,
    CompactionApplied,
    Message,
    ModelTurnResult,
    ReasoningPart,
    RunStats,
    ToolCall,
    ToolError,
    ToolMessage,
    ToolOutcome,
    ToolResult,
    ToolSuspend,
    ToolTime,
    accumulate_auxiliary_spend,
    accumulate_tool_call,
    accumulate_turn,
    tool_outcome_message,
)
from ..errors import (
    AbortedToolCallError,
    InvalidModelTurnError,
    PortContractError,
    ProtocolError,
    RunCancelledError,
    ToolFailure,
    UsageError,
)
from ._checks import check_bool, check_messages, check_outcome, check_usage
from ._effects import (
    AcceptToolMessage,
    Activate,
    ActivationPortMissing,
    Answer,
    AskNudge,
    BatchFinished,
    BlockedBySuspend,
    Boundary,
    BoundaryChecked,
    BoundaryDecided,
    CallModel,
    CheckBoundary,
    Compact,
    Compacted,
    DiscardedTurn,
    Effect,
    Finish,
    ModelReplied,
    NotifyAssistant,
    NotifyProgress,
    Nudged,
    NotRun,
    RaisedByTool,
    Reject,
    Request,
    RunTool,
    RunToolBatch,
    Settle,
    Settled,
    ToolAnswer,
    ToolMessageAccepted,
    ToolNotRun,
    ToolRaised,
    ToolReturned,
    reason_exception,
)
from ._types import ControlledStopReason, OpenSuspend, StepSettlement, ToolLoopState

__all__ = ("TRANSITIONS", "LoopMachine", "default_tool_exception_error", "tool_exception_error")

_CHECK: Final = CheckBoundary()
_BOUNDARY: Final = Boundary()
_COMPACT: Final = Compact()
_CALL: Final = CallModel()
_NUDGE: Final = AskNudge()
_SETTLE_END: Final = Settle(would_end=True)
_SETTLE_BATCH: Final = Settle(would_end=False)
_EMPTY_SETTLEMENT: Final = StepSettlement()
_DISCARDED: Final = DiscardedTurn()
_ZERO_STATS: Final = RunStats()
_ONE_CALL: Final = (0,)


def default_tool_exception_error(exc: Exception) -> ToolError:
    """What the model reads for a tool's raise when ``format_tool_exception`` is unwired: the type's
    name and a fixed text. The message stays with the host — it may hold a secret."""
    return ToolError(error=f"{type(exc).__name__}: the tool failed")


def tool_exception_error(error: Exception,
                         format_tool_exception: Callable[[Exception], ToolError] | None = None
                         ) -> ToolError:
    """The one rule for what the model reads when a tool raises (non-fatally): a
    :class:`~bindloop.errors.ToolFailure` keeps its message and kind; anything else goes through
    ``format_tool_exception``, or :func:`default_tool_exception_error` when that is unwired. Anyone
    turning a raise into a tool error outside the loop (a batch middleware runner) uses this too."""
    if isinstance(error, ToolFailure):
        return ToolError(error=error.message, kind=error.kind)
    if format_tool_exception is None:
        return default_tool_exception_error(error)
    formatted = format_tool_exception(error)
    if not isinstance(formatted, ToolError) or not isinstance(formatted.error, str):
        raise PortContractError(
            f"format_tool_exception returned {type(formatted).__name__}; expected a ToolError")
    return formatted


class LoopMachine:
    """One run's decisions. Construct, call :meth:`start`, then pop effects with
    :meth:`next_effect` and answer each request with :meth:`send`. ``stats`` is this invocation's
    contribution; ``state`` is updated in place (seed plus this invocation)."""

    __slots__ = (
        "_accept_queue", "_answers", "_batch_aborted", "_calls", "_effects",
        "_format_exception", "_has_accept_hook", "_has_compact", "_has_control",
        "_has_notify_assistant", "_has_nudge", "_has_plugins", "_has_progress", "_has_settle",
        "_has_skills", "_is_fatal", "_ordinal", "_pending", "_pooled", "_raised", "_runs_serially",
        "_last", "_model_ms", "_seed", "_seeded", "_serial", "_started", "_tool_ms", "_tools", "iterations",
        "max_iterations", "state", "stop_reason",
    )

    def __init__(
        self,
        state: ToolLoopState,
        max_iterations: int,
        *,
        runs_serially: Callable[[ToolCall], bool] | None = None,
        is_fatal_tool_error: Callable[[BaseException], bool] | None = None,
        format_tool_exception: Callable[[Exception], ToolError] | None = None,
        has_activate_plugins: bool = False,
        has_activate_skills: bool = False,
        has_compact: bool = False,
        has_settle: bool = False,
        has_nudge: bool = False,
        has_accept_hook: bool = False,
        has_notify_assistant: bool = False,
        has_progress: bool = False,
        has_control: bool = False,
    ) -> None:
        if not isinstance(state, ToolLoopState):
            raise UsageError(f"state must be a ToolLoopState, got {type(state).__name__}")
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
            raise UsageError(f"max_iterations must be an int, got {type(max_iterations).__name__}")
        if max_iterations < 0:
            raise UsageError(f"max_iterations must be >= 0, got {max_iterations}")
        self.state = state
        self.max_iterations = max_iterations
        self.iterations = 0
        # One fold: the accumulate_* functions update state.totals. This invocation's part is read
        # off it (integers by difference from the seed); its times are summed here in event order,
        # exactly as a fold from zero would sum them.
        # A run from zero (the common case) has nothing to subtract: its part *is* the totals, so
        # the separate sums below are kept only for a seeded run — or from the moment something
        # other than the machine folds into state.totals (a hook may): _last is the machine's own.
        self._seed = self._last = state.totals
        self._seeded = not _is_plain_zero(state.totals)
        self._model_ms = 0.0
        self._tool_ms = 0.0
        self._tools: dict[str, list[Any]] = {}  # name -> [calls, ms] of this invocation
        self.stop_reason: ControlledStopReason | None = None
        self._runs_serially = runs_serially
        self._is_fatal = is_fatal_tool_error
        self._format_exception = format_tool_exception
        self._has_plugins = has_activate_plugins
        self._has_skills = has_activate_skills
        self._has_compact = has_compact
        self._has_settle = has_settle
        self._has_nudge = has_nudge
        self._has_accept_hook = has_accept_hook
        self._has_notify_assistant = has_notify_assistant
        self._has_progress = has_progress
        self._has_control = has_control
        self._effects: deque[Effect] = deque()
        self._pending: Request | None = None
        self._started = False
        self._calls: tuple[ToolCall, ...] = ()
        self._answers: list[ToolOutcome | None] = []
        self._serial: deque[int] = deque()  # only ever emptied by popleft, so it can be reused
        self._pooled: tuple[int, ...] = ()
        self._batch_aborted = False
        self._accept_queue: deque[ToolMessage] = deque()
        self._raised: dict[str, Exception] = {}
        self._ordinal = 0

    # ---- the protocol --------------------------------------------------------------------------

    @property
    def phase(self) -> str:
        """What the machine waits for (for diagnostics): the pending request's name, ``"idle"``
        before :meth:`start`, ``"done"`` after :class:`Finish`."""
        if self._pending is not None:
            return type(self._pending).__name__
        return "done" if self.stop_reason is not None else "idle" if not self._started else "busy"

    @property
    def stats(self) -> RunStats:
        """This invocation's statistics so far (``state.totals`` less the seed it started with)."""
        t, s = self.state.totals, self._seed
        if not self._seeded:
            if t is self._last:
                return msgspec.structs.replace(t, tools=dict(t.tools))
            self._keep_own_sums()
        return RunStats(
            turns=t.turns - s.turns, tool_calls=t.tool_calls - s.tool_calls,
            input_tokens=t.input_tokens - s.input_tokens,
            output_tokens=t.output_tokens - s.output_tokens,
            cached_input_tokens=t.cached_input_tokens - s.cached_input_tokens,
            cost=t.cost - s.cost, model_ms=self._model_ms, tool_ms=self._tool_ms,
            tools={name: ToolTime(calls=calls, ms=ms) for name, (calls, ms) in self._tools.items()},
            reasoning_tokens=t.reasoning_tokens - s.reasoning_tokens,
            cache_write_tokens=t.cache_write_tokens - s.cache_write_tokens)

    @property
    def pending(self) -> Request | None:
        """The request awaiting an answer, or ``None``."""
        return self._pending

    def start(self) -> None:
        """Begin the run. A state with open suspends ends at once: nothing may happen until they are
        answered."""
        if self._started:
            raise ProtocolError("start() was already called")
        self._started = True
        if self.state.open_suspends:
            self._finish(self._suspend_reason())
        else:
            self._request(_CHECK)

    def next_effect(self) -> Effect:
        """The next thing the driver must do. Raises :class:`ProtocolError` when the machine is waiting
        for an answer the driver has not given."""
        try:
            return self._effects.popleft()
        except IndexError:
            raise ProtocolError(
                f"no effect pending: the loop machine is waiting for an answer in phase {self.phase!r}"
            ) from None

    def send(self, answer: Answer) -> None:
        """Answer the pending request. The answer's type must be one :data:`TRANSITIONS` lists for
        that request, and every effect before it must have been popped."""
        pending = self._pending
        # Each answer type answers exactly one request type, so one lookup finds both.
        try:
            request_type, handler = _ROUTES[type(answer)]
        except KeyError:
            self._refuse(answer)
        if request_type is not type(pending) or self._effects:
            self._refuse(answer)
        self._pending = None
        handler(self, pending, answer)

    def _refuse(self, answer: object) -> NoReturn:
        pending = self._pending
        if pending is None:
            raise ProtocolError(f"{type(answer).__name__} sent, but nothing is pending "
                                f"(phase {self.phase!r})") from None
        route = _ROUTES.get(type(answer))
        if route is None or route[0] is not type(pending):
            accepted = ", ".join(t.__name__ for t in TRANSITIONS[type(pending)])
            raise ProtocolError(f"{type(answer).__name__} does not answer "
                                f"{type(pending).__name__} (it accepts {accepted})") from None
        raise ProtocolError(f"{type(answer).__name__} sent before every effect was popped") from None

    def is_fatal(self, error: BaseException) -> bool:
        """Whether a tool's raise must end the run instead of becoming a tool error the model reads:
        :class:`~bindloop.errors.RunCancelledError` always, otherwise ``is_fatal_tool_error``. Asked
        by the driver the moment a call raises, so a fatal raise can cancel its batch."""
        if isinstance(error, RunCancelledError):
            return True
        predicate = self._is_fatal
        return predicate is not None and check_bool(predicate(error), "is_fatal_tool_error")

    def rejection_exception(self, reject: Reject) -> BaseException:
        """The exception ``on_tool_call_rejected`` receives for ``reject``: the tool's own for a raise,
        otherwise the documented error the reason stands for."""
        if isinstance(reject.reason, RaisedByTool):
            raised = self._raised.get(reject.tool_call_id)
            if raised is not None:
                return raised
        return reason_exception(reject.tool_call_id, reject.reason)

    # ---- plumbing ------------------------------------------------------------------------------

    def _keep_own_sums(self) -> None:
        # state.totals was folded by someone else: from here on this invocation's times are its own
        # sums, started from what the machine's folds (from zero) gave so far.
        part = self._last
        self._model_ms, self._tool_ms = part.model_ms, part.tool_ms
        self._tools = {name: [t.calls, t.ms] for name, t in part.tools.items()}
        self._seeded = True

    def _request(self, request: Request) -> None:
        self._pending = request
        self._effects.append(request)

    def _finish(self, reason: ControlledStopReason) -> None:
        self.stop_reason = reason
        self._effects.append(Finish(reason))

    def _progress(self) -> None:
        st = self.state
        self._effects.append(NotifyProgress(st.output_tokens, st.tool_calls))

    def _commit(self, message: Message) -> None:
        # The one place a message joins the transcript. From the tool-call turn until its batch's
        # results are in, nothing may be appended but the next owed result (in model order).
        owed = self._accept_queue
        if self._calls or (owed and message is not owed[0]):
            expected = "a result still running" if self._calls else f"the result {owed[0].tool_call_id!r}"
            raise ProtocolError(f"a {type(message).__name__} cannot join the transcript while "
                                f"{expected} is owed")
        if owed:
            owed.popleft()
        self.state.messages.append(message)

    # ---- handlers (one per row of TRANSITIONS) -------------------------------------------------

    def _boundary_checked(self, _: CheckBoundary, answer: BoundaryChecked) -> None:
        if answer.stop:
            self._finish("aborted")
        elif self.iterations >= self.max_iterations:
            self._finish("iteration_limit")
        elif self._has_compact:
            self._request(_COMPACT)
        else:
            self._before_model()

    def _before_model(self) -> None:
        # The settled boundary a custom driver may checkpoint at: after nudge, suspension and
        # compaction decisions, before the next model call. The run's first one is skipped — it is
        # the input the driver already holds.
        request = _BOUNDARY if self._has_control and self.iterations > 0 else _CALL
        self._pending = request  # _request inlined: this runs every turn
        self._effects.append(request)

    def _boundary_decided(self, _: Boundary, answer: BoundaryDecided) -> None:
        if answer.checkpoint:
            self._finish("checkpointed")
        else:
            self._request(_CALL)

    def _compacted(self, _: Compact, answer: Compacted) -> None:
        applied = answer.applied
        if applied is not None:
            if not isinstance(applied, CompactionApplied):
                raise PortContractError(
                    f"compact returned {type(applied).__name__}; expected CompactionApplied or None"
                )
            check_messages(applied.messages, "compact().messages")
            check_usage(applied.usage, "compact().usage")
            if isinstance(applied.cost, bool) or not isinstance(applied.cost, int):
                raise PortContractError(f"compact().cost must be an int, got {applied.cost!r}")
            st = self.state
            # A replacement happens only at a boundary, where no result is owed.
            st.messages[:] = applied.messages
            spend = AuxiliarySpend(usage=applied.usage, cost=applied.cost, model_ms=answer.ms)
            if st.totals is not self._last and not self._seeded:
                self._keep_own_sums()
            st.totals = self._last = accumulate_auxiliary_spend(st.totals, spend)
            st.counters = st.counters.after_compaction()
            if self._seeded:
                self._model_ms += answer.ms
        self._before_model()

    def _model_replied(self, _: CallModel, answer: ModelReplied) -> None:
        result = answer.result
        calls = _validate_turn(result)
        self.iterations += 1
        usage = result.usage
        st = self.state
        if st.totals is not self._last and not self._seeded:
            self._keep_own_sums()
        st.totals = self._last = accumulate_turn(st.totals, usage, cost=result.cost,
                                                 model_ms=answer.ms)
        st.counters = st.counters.after_turn(usage, len(calls))
        if self._seeded:
            self._model_ms += answer.ms
        if self._raised:
            self._raised = {}  # the previous batch's rejections have all been popped

        accept = result.accept_message
        if not accept and calls:
            self._effects.append(Reject(calls[0].id, _DISCARDED))
            accept = True
        if accept:
            message = result.to_message()
            self._commit(message)
            if self._has_notify_assistant:
                self._effects.append(NotifyAssistant(message))
        if not calls:
            if self._has_progress:
                self._progress()
            if self._has_settle:
                self._request(_SETTLE_END)
            else:
                self._after_would_end(delivered=False)
            return

        if self._has_progress:  # checked here: this runs twice a turn
            self._progress()
        self._calls = calls
        self._answers = [None] * len(calls)
        self._batch_aborted = False
        predicate = self._runs_serially
        if predicate is None:
            self._pooled = _ONE_CALL if len(calls) == 1 else tuple(range(len(calls)))
        else:
            serial: deque[int] = deque()
            pooled: list[int] = []
            for i, call in enumerate(calls):
                (serial if check_bool(predicate(call), "runs_serially") else pooled).append(i)
            self._serial, self._pooled = serial, tuple(pooled)
        self._next_tool_step()

    def _next_tool_step(self) -> None:
        if self._serial:
            i = self._serial.popleft()
            self._request(RunTool(i, self._calls[i]))
        elif self._pooled:
            pooled, self._pooled = self._pooled, ()
            if len(pooled) == 1:
                # One call has nothing to pool with: running it alone is the same semantics.
                request: Request = RunTool(pooled[0], self._calls[pooled[0]])
                self._pending = request  # _request inlined: the common turn
                self._effects.append(request)
            else:
                self._request(RunToolBatch(tuple((i, self._calls[i]) for i in pooled)))
        else:
            self._batch_done()

    def _tool_answered(self, _: RunTool, answer: ToolAnswer) -> None:
        self._record(answer)
        self._next_tool_step()

    def _batch_finished(self, request: RunToolBatch, answer: BatchFinished) -> None:
        answers = answer.answers
        if len(answers) != len(request.items):
            raise ProtocolError(f"BatchFinished has {len(answers)} answers for "
                                f"{len(request.items)} pooled calls")
        for a in answers:
            if type(a) not in _TOOL_ANSWERS:
                raise ProtocolError(f"expected a tool answer, got {type(a).__name__}")
            self._record(a)
        self._next_tool_step()

    def _record(self, answer: ToolAnswer) -> None:
        i = answer.index
        if not 0 <= i < len(self._answers) or self._answers[i] is not None:
            raise ProtocolError(f"tool result for index {i} is unexpected or duplicated")
        call = self._calls[i]
        outcome: ToolOutcome
        if isinstance(answer, ToolNotRun):
            outcome = ToolError(error=str(AbortedToolCallError(call.id, answer.reason)),
                                kind="not_run")
            self._batch_aborted = True
            self._effects.append(Reject(call.id, NotRun(answer.reason)))
        else:
            if isinstance(answer, ToolReturned):
                outcome = answer.outcome
                check_outcome(outcome, call.id)
            else:
                outcome = tool_exception_error(answer.error, self._format_exception)
                self._raised[call.id] = answer.error
                self._effects.append(Reject(call.id, RaisedByTool(type(answer.error).__name__)))
            ms = answer.ms
            st = self.state
            if st.totals is not self._last and not self._seeded:
                self._keep_own_sums()
            st.totals = self._last = accumulate_tool_call(st.totals, call.name, ms)
            if self._seeded:
                self._tool_ms += ms
                entry = self._tools.get(call.name)
                if entry is None:
                    self._tools[call.name] = [1, ms]
                else:
                    entry[0] += 1
                    entry[1] += ms
        self._answers[i] = outcome
        if isinstance(outcome, ToolResult):
            if outcome.activate_plugins:
                self._activation("plugins", outcome.activate_plugins, self._has_plugins, call.id)
            if outcome.activate_skills:
                self._activation("skills", outcome.activate_skills, self._has_skills, call.id)

    def _activation(self, kind: str, names: tuple[str, ...], wired: bool, call_id: str) -> None:
        if wired:
            self._effects.append(Activate(kind, names))
        else:
            self._effects.append(Reject(call_id, ActivationPortMissing(kind, names)))

    def _batch_done(self) -> None:
        calls = self._calls
        st = self.state
        queue = self._accept_queue
        for i, outcome in enumerate(self._answers):
            if outcome is None:
                raise ProtocolError(f"tool call {calls[i].id!r} was never answered")
            call = calls[i]
            if isinstance(outcome, ToolSuspend):
                st.open_suspends.append(OpenSuspend(
                    tool_call_id=call.id, tool_name=call.name, mode=outcome.mode,
                    detail=outcome.detail,
                ))
            else:
                queue.append(tool_outcome_message(call.id, outcome, call.name))
        self._answers = []
        self._calls = ()
        self._ordinal = 0
        if self._has_accept_hook:
            self._offer_next_message()
        else:
            while queue:
                self._commit(queue[0])
            self._batch_settled()

    def _offer_next_message(self) -> None:
        if self._accept_queue:
            self._request(AcceptToolMessage(self._accept_queue[0], self._ordinal))
        else:
            self._batch_settled()

    def _tool_message_accepted(self, _: AcceptToolMessage, __: ToolMessageAccepted) -> None:
        self._commit(self._accept_queue[0])
        self._ordinal += 1
        self._offer_next_message()

    def _batch_settled(self) -> None:
        if self._has_progress:
            self._progress()
        if self._batch_aborted:
            self._finish("aborted")
        elif self._has_settle:
            self._request(_SETTLE_BATCH)
        else:
            self._after_batch()

    def _settled(self, request: Settle, answer: Settled) -> None:
        # Delivered messages are appended in order; while a suspend is open only its answering tool
        # message is accepted, anything else is reported and dropped.
        settlement = answer.settlement
        if settlement is None:
            settlement = _EMPTY_SETTLEMENT
        elif not isinstance(settlement, StepSettlement):
            raise PortContractError(
                f"on_step_settled returned {type(settlement).__name__}; expected StepSettlement or None"
            )
        delivered = self._deliver(check_messages(settlement.messages,
                                                 "on_step_settled().messages"))
        if settlement.stop:
            self._finish("aborted")
        elif request.would_end:
            self._after_would_end(delivered)
        else:
            self._after_batch()

    def _deliver(self, messages: Sequence[Message]) -> bool:
        st = self.state
        delivered = False
        for message in messages:
            if st.open_suspends:
                if isinstance(message, ToolMessage):
                    for k, s in enumerate(st.open_suspends):
                        if s.tool_call_id == message.tool_call_id:
                            del st.open_suspends[k]
                            self._commit(message)
                            delivered = True
                            break
                    else:
                        self._block(message)
                else:
                    self._block(message)
            else:
                self._commit(message)
                delivered = True
        return delivered

    def _block(self, message: Message) -> None:
        open_id = self.state.open_suspends[0].tool_call_id
        self._effects.append(Reject(open_id, BlockedBySuspend(type(message).__name__)))

    def _after_batch(self) -> None:
        if self.state.open_suspends:
            self._finish(self._suspend_reason())
        else:
            self._pending = _CHECK  # _request inlined: every batch ends here
            self._effects.append(_CHECK)

    def _after_would_end(self, delivered: bool) -> None:
        # Real input outranks a nudge: a turn with more to answer was never stalled.
        if delivered:
            self._request(_CHECK)
        elif self._has_nudge:
            self._request(_NUDGE)
        else:
            self._finish("done")

    def _nudged(self, _: AskNudge, answer: Nudged) -> None:
        messages = answer.messages
        if messages is not None:
            check_messages(messages, "on_turn_would_end()")
        if messages:
            for message in messages:
                self._commit(message)
            self._request(_CHECK)
        else:
            self._finish("done")

    def _suspend_reason(self) -> Literal["waiting_for_reply", "resuming_later"]:
        # A person having to act is the more urgent thing for a host to surface.
        if any(s.mode == "waiting_for_reply" for s in self.state.open_suspends):
            return "waiting_for_reply"
        return "resuming_later"


_TOOL_ANSWERS: Final = frozenset({ToolReturned, ToolRaised, ToolNotRun})

_Handler = Callable[[LoopMachine, Any, Any], None]

TRANSITIONS: Final[Mapping[type, Mapping[type, _Handler]]] = MappingProxyType({
    CheckBoundary: MappingProxyType({BoundaryChecked: LoopMachine._boundary_checked}),
    Compact: MappingProxyType({Compacted: LoopMachine._compacted}),
    Boundary: MappingProxyType({BoundaryDecided: LoopMachine._boundary_decided}),
    CallModel: MappingProxyType({ModelReplied: LoopMachine._model_replied}),
    RunTool: MappingProxyType({ToolReturned: LoopMachine._tool_answered,
                               ToolRaised: LoopMachine._tool_answered,
                               ToolNotRun: LoopMachine._tool_answered}),
    RunToolBatch: MappingProxyType({BatchFinished: LoopMachine._batch_finished}),
    AcceptToolMessage: MappingProxyType({ToolMessageAccepted: LoopMachine._tool_message_accepted}),
    Settle: MappingProxyType({Settled: LoopMachine._settled}),
    AskNudge: MappingProxyType({Nudged: LoopMachine._nudged}),
})
"""The protocol: each request the machine can be waiting on, the answers it accepts, and the handler
each one runs. Every request type appears exactly once; notices are not here (they need no answer)."""

# TRANSITIONS keyed by answer type (an answer type belongs to one request type), for send().
_ROUTES: Final[Mapping[type, tuple[type, _Handler]]] = MappingProxyType({
    answer: (request, handler)
    for request, accepted in TRANSITIONS.items() for answer, handler in accepted.items()
})


def _validate_turn(result: object) -> tuple[ToolCall, ...]:
    if not isinstance(result, ModelTurnResult):
        raise PortContractError(
            f"call_model returned {type(result).__name__}; expected ModelTurnResult"
        )
    calls = result.tool_calls
    if not isinstance(calls, tuple):
        raise InvalidModelTurnError(
            f"tool_calls must be a tuple of ToolCall, got {type(calls).__name__}"
        )
    if calls:
        seen: set[str] = set()
        for k, call in enumerate(calls):
            if not isinstance(call, ToolCall):
                raise InvalidModelTurnError(f"tool_calls[{k}] is {type(call).__name__}, not ToolCall")
            if not isinstance(call.id, str) or not call.id:
                raise InvalidModelTurnError(f"tool_calls[{k}] has no id (got {call.id!r})")
            if not isinstance(call.name, str) or not call.name:
                raise InvalidModelTurnError(f"tool_calls[{k}] ({call.id}) has no name")
            if not isinstance(call.arguments, str):
                raise InvalidModelTurnError(
                    f"tool_calls[{k}] ({call.id}) arguments must be the raw JSON string, got "
                    f"{type(call.arguments).__name__}"
                )
            if call.id in seen:
                raise InvalidModelTurnError(f"tool_calls[{k}] repeats id {call.id!r} within the turn")
            seen.add(call.id)
    check_usage(result.usage, "usage", InvalidModelTurnError)
    if result.text is not None and not isinstance(result.text, str):
        raise InvalidModelTurnError(f"text must be a str or None, got {type(result.text).__name__}")
    if not isinstance(result.accept_message, bool):
        raise InvalidModelTurnError(
            f"accept_message must be a bool, got {type(result.accept_message).__name__}")
    if result.reasoning != () and (not isinstance(result.reasoning, tuple) or not all(
            isinstance(r, ReasoningPart) for r in result.reasoning)):
        raise InvalidModelTurnError("reasoning must be a tuple of ReasoningPart")
    if isinstance(result.cost, bool) or not isinstance(result.cost, int):
        raise InvalidModelTurnError(f"cost must be an int in the host's unit, got {result.cost!r}")
    return calls


def _is_plain_zero(stats: RunStats) -> bool:
    # Exactly RunStats(), not merely equal to it: a seed of -0.0, 0 (int) or False would otherwise
    # come back in the invocation's stats, where a fold from zero gives 0.0 and 0.
    return (stats == _ZERO_STATS and not stats.tools
            and type(stats.turns) is int and type(stats.tool_calls) is int
            and type(stats.input_tokens) is int and type(stats.output_tokens) is int
            and type(stats.cached_input_tokens) is int and type(stats.cost) is int
            and type(stats.model_ms) is float and type(stats.tool_ms) is float
            and math.copysign(1.0, stats.model_ms) > 0 and math.copysign(1.0, stats.tool_ms) > 0)
