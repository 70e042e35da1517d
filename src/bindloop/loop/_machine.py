"""The loop's decisions as a synchronous state machine (sans-I/O).

The machine never awaits and never calls a port. The driver feeds it what happened (a boundary was
checked, the model replied, a tool finished, the host settled a step) and pops effects describing what
to do next (:meth:`LoopMachine.next_effect`). Every transition lives in this class, so the same run is
identical on every runtime and can be explored by Hypothesis without an event loop.

Invariants the machine keeps (and the property tests hunt for):

* every tool call of an accepted assistant turn gets exactly one tool message, in the model's order,
  except a suspended call, whose answer arrives later and is listed in ``state.open_suspends``;
* nothing is appended between an assistant tool-call message and the results of that batch;
* ``stats`` folds exactly what happened in this invocation and ``state`` is its seed plus the same.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Final, Literal, TypeAlias

import msgspec

from ..contracts import (
    AssistantMessage,
    AuxiliarySpend,
    CompactionApplied,
    Message,
    ModelTurnResult,
    ReasoningPart,
    RunStats,
    ToolCall,
    ToolMessage,
    ToolOutcome,
    ToolResult,
    ToolSuspend,
    accumulate_auxiliary_spend,
    accumulate_tool_call,
    accumulate_turn,
    empty_run_stats,
    tool_outcome_message,
)
from ..errors import (
    DiscardedTurnWithToolCallsError,
    InputBlockedBySuspendError,
    InvalidModelTurnError,
    MissingActivationPortError,
    PortContractError,
    ProtocolError,
    UsageError,
)
from ._checks import check_bool, check_messages, check_outcome, check_usage
from ._types import ControlledStopReason, OpenSuspend, StepSettlement, ToolLoopState

__all__ = (
    "AcceptToolMessage",
    "Activate",
    "AskNudge",
    "Boundary",
    "CallModel",
    "CheckBoundary",
    "Compact",
    "ControlledStopReason",
    "Effect",
    "Finish",
    "LoopMachine",
    "NotifyAssistant",
    "NotifyProgress",
    "Reject",
    "RunPooled",
    "RunSerial",
    "Settle",
    "ToolFinished",
)





# ---- effects: what the driver must do next ----------------------------------------------------

class CheckBoundary(msgspec.Struct, frozen=True):
    """Between iterations: run ``ensure_not_cancelled`` / ``throw_if_timed_out`` (they raise), then
    answer :meth:`LoopMachine.boundary_checked` with whether ``signal`` or ``should_stop`` asks to stop."""


class Compact(msgspec.Struct, frozen=True):
    """Offer the transcript to the compaction port; answer :meth:`LoopMachine.compacted`."""


class CallModel(msgspec.Struct, frozen=True):
    """Build the tool surface and call the model; answer :meth:`LoopMachine.model_replied`."""


class NotifyAssistant(msgspec.Struct, frozen=True):
    """Tell ``on_assistant_message`` about an accepted assistant message (no answer expected)."""

    message: AssistantMessage


class NotifyProgress(msgspec.Struct, frozen=True):
    """Tell ``on_progress_update`` the live totals (no answer expected)."""

    output_tokens: int
    tool_calls: int


class Reject(msgspec.Struct, frozen=True):
    """Report ``error`` through ``on_tool_call_rejected`` (no answer expected)."""

    tool_call_id: str
    error: BaseException


class Activate(msgspec.Struct, frozen=True):
    """Call ``activate_plugins`` or ``activate_skills`` with ``names`` (no answer expected)."""

    kind: str
    names: tuple[str, ...]


class RunSerial(msgspec.Struct, frozen=True):
    """Run one call alone (check the signal first); answer :meth:`LoopMachine.tool_finished`."""

    index: int
    call: ToolCall


class RunPooled(msgspec.Struct, frozen=True):
    """Run these calls concurrently, pooled per tool name; answer :meth:`LoopMachine.pooled_finished`."""

    items: tuple[tuple[int, ToolCall], ...]


class AcceptToolMessage(msgspec.Struct, frozen=True):
    """Await ``before_tool_message_accepted(message, ordinal)``; answer
    :meth:`LoopMachine.tool_message_accepted` (a raise ends the run with the message not appended)."""

    message: ToolMessage
    ordinal: int


class Settle(msgspec.Struct, frozen=True):
    """Await ``on_step_settled(would_end)``; answer :meth:`LoopMachine.settled`."""

    would_end: bool


class AskNudge(msgspec.Struct, frozen=True):
    """Await ``on_turn_would_end()``; answer :meth:`LoopMachine.nudged`."""


class Boundary(msgspec.Struct, frozen=True):
    """A settled boundary before the next model call (only with a control hook): the transcript is
    provider-valid and no call is pending. Answer :meth:`LoopMachine.boundary_decided`."""


class Finish(msgspec.Struct, frozen=True):
    """The run is over."""

    stop_reason: ControlledStopReason


Effect: TypeAlias = (
    CheckBoundary | Boundary | Compact | CallModel | NotifyAssistant | NotifyProgress | Reject | Activate
    | RunSerial | RunPooled | AcceptToolMessage | Settle | AskNudge | Finish
)


class ToolFinished(msgspec.Struct, frozen=True):
    """One call's fate. ``ran=False`` means the batch's signal kept it from starting (``outcome`` is
    then a ``not_run`` error); ``error`` is the exception a non-fatal raise was converted from."""

    index: int
    outcome: ToolOutcome
    ms: float = 0.0
    ran: bool = True
    error: BaseException | None = None


_CHECK: Final = CheckBoundary()
_BOUNDARY_EFFECT: Final = Boundary()
_COMPACT: Final = Compact()
_CALL: Final = CallModel()
_NUDGE: Final = AskNudge()
_SETTLE_END: Final = Settle(would_end=True)
_SETTLE_BATCH: Final = Settle(would_end=False)

# phases
(_IDLE, _BOUNDARY, _COMPACTING, _CONTROL, _MODEL, _SERIAL, _POOLED, _ACCEPT, _SETTLE, _NUDGING,
 _DONE) = range(11)
_PHASE_NAMES: Final = ("idle", "boundary", "compacting", "control", "model", "serial", "pooled",
                       "accepting", "settling", "nudging", "done")



class LoopMachine:
    """One run's decisions. Construct, call :meth:`start`, then alternate :meth:`next_effect` with the
    answer each effect asks for. ``stats`` is this invocation's contribution; ``state`` is mutated in
    place (seed plus this invocation)."""

    __slots__ = (
        "_accept_queue", "_answers", "_batch_aborted", "_calls", "_effects", "_has_accept_hook",
        "_has_control",
        "_has_compact", "_has_notify_assistant", "_has_nudge", "_has_plugins", "_has_progress",
        "_has_settle", "_has_skills", "_ordinal", "_phase", "_pooled", "_runs_serially",
        "_serial", "_settle_would_end", "iterations", "max_iterations", "state", "stats",
        "stop_reason",
    )

    def __init__(
        self,
        state: ToolLoopState,
        max_iterations: int,
        *,
        runs_serially: Callable[[ToolCall], bool] | None = None,
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
        self.stats: RunStats = empty_run_stats()
        self.stop_reason: ControlledStopReason | None = None
        self._runs_serially = runs_serially
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
        self._phase = _IDLE
        self._calls: tuple[ToolCall, ...] = ()
        self._answers: list[ToolFinished | None] = []
        self._serial: deque[int] = deque()
        self._pooled: list[int] = []
        self._batch_aborted = False
        self._accept_queue: deque[ToolMessage] = deque()
        self._ordinal = 0
        self._settle_would_end = False

    # ---- plumbing ------------------------------------------------------------------------------

    @property
    def phase(self) -> str:
        """The machine's phase name (for diagnostics)."""
        return _PHASE_NAMES[self._phase]

    def next_effect(self) -> Effect:
        """The next thing the driver must do. Raises :class:`ProtocolError` when the machine is waiting
        for an answer the driver has not given."""
        try:
            return self._effects.popleft()
        except IndexError:
            raise ProtocolError(
                f"no effect pending: the loop machine is waiting for an answer in phase {self.phase!r}"
            ) from None

    def _expect(self, phase: int, what: str) -> None:
        if self._phase != phase:
            raise ProtocolError(f"{what} is not valid in phase {self.phase!r}")

    def _finish(self, reason: ControlledStopReason) -> None:
        self.stop_reason = reason
        self._phase = _DONE
        self._effects.append(Finish(reason))

    def _progress(self) -> None:
        if self._has_progress:
            self._effects.append(NotifyProgress(self.state.output_tokens, self.state.tool_calls))

    def _to_boundary(self) -> None:
        self._phase = _BOUNDARY
        self._effects.append(_CHECK)

    # ---- transitions ---------------------------------------------------------------------------

    def start(self) -> None:
        """Begin the run. A state with open suspends ends at once: nothing may happen until they are
        answered."""
        self._expect(_IDLE, "start()")
        if self.state.open_suspends:
            self._finish(self._suspend_reason())
            return
        self._to_boundary()

    def boundary_checked(self, stop: bool) -> None:
        """The host was asked whether to stop (signal, ``should_stop``) and the raise-based ports ran."""
        self._expect(_BOUNDARY, "boundary_checked()")
        if stop:
            self._finish("aborted")
        elif self.iterations >= self.max_iterations:
            self._finish("iteration_limit")
        elif self._has_compact:
            self._phase = _COMPACTING
            self._effects.append(_COMPACT)
        else:
            self._before_model()

    def _before_model(self) -> None:
        # The settled boundary a custom driver may checkpoint at: after nudge, suspension and
        # compaction decisions, before the next model call. The run's first one is skipped — it is
        # the input the driver already holds.
        if self._has_control and self.iterations > 0:
            self._phase = _CONTROL
            self._effects.append(_BOUNDARY_EFFECT)
        else:
            self._phase = _MODEL
            self._effects.append(_CALL)

    def boundary_decided(self, checkpoint: bool) -> None:
        """The control hook answered a :class:`Boundary`: ``checkpoint`` ends the run as
        ``checkpointed`` (no model call is made), otherwise the model is called."""
        self._expect(_CONTROL, "boundary_decided()")
        if checkpoint:
            self._finish("checkpointed")
        else:
            self._phase = _MODEL
            self._effects.append(_CALL)

    def compacted(self, applied: CompactionApplied | None, ms: float) -> None:
        """The compaction port answered: ``None`` for no change, or the replacement transcript."""
        self._expect(_COMPACTING, "compacted()")
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
            st.messages[:] = applied.messages
            spend = AuxiliarySpend(usage=applied.usage, cost=applied.cost, model_ms=ms)
            st.totals = accumulate_auxiliary_spend(st.totals, spend)
            st.counters = st.counters.after_compaction()
            self.stats = accumulate_auxiliary_spend(self.stats, spend)
        self._before_model()

    def model_replied(self, result: ModelTurnResult, ms: float) -> None:
        """The model returned one turn, which took ``ms``."""
        self._expect(_MODEL, "model_replied()")
        calls = _validate_turn(result)
        self.iterations += 1
        usage = result.usage
        st = self.state
        st.totals = accumulate_turn(st.totals, usage, cost=result.cost, model_ms=ms)
        st.counters = st.counters.after_turn(usage)
        self.stats = accumulate_turn(self.stats, usage, cost=result.cost, model_ms=ms)

        accept = result.accept_message
        if not accept and calls:
            self._effects.append(Reject(calls[0].id, DiscardedTurnWithToolCallsError(
                "accept_message=False refused: the turn requested tools, whose results need the "
                "request to pair with; the turn was kept"
            )))
            accept = True
        if accept:
            message = result.to_message()
            st.messages.append(message)
            if self._has_notify_assistant:
                self._effects.append(NotifyAssistant(message))
        if not calls:
            self._progress()
            if self._has_settle:
                self._phase = _SETTLE
                self._settle_would_end = True
                self._effects.append(_SETTLE_END)
            else:
                self._after_would_end(delivered=False)
            return

        st.counters = st.counters.after_tool_calls(len(calls))
        self._progress()
        self._calls = calls
        self._answers = [None] * len(calls)
        self._batch_aborted = False
        predicate = self._runs_serially
        if predicate is None:
            self._serial = deque()
            self._pooled = list(range(len(calls)))
        else:
            serial: deque[int] = deque()
            pooled: list[int] = []
            for i, call in enumerate(calls):
                (serial if check_bool(predicate(call), "runs_serially") else pooled).append(i)
            self._serial, self._pooled = serial, pooled
        self._next_tool_step()

    def _next_tool_step(self) -> None:
        if self._serial:
            i = self._serial.popleft()
            self._phase = _SERIAL
            self._effects.append(RunSerial(i, self._calls[i]))
        elif self._pooled:
            pooled, self._pooled = self._pooled, []
            self._phase = _POOLED
            self._effects.append(RunPooled(tuple((i, self._calls[i]) for i in pooled)))
        else:
            self._batch_done()

    def _record(self, finished: ToolFinished) -> None:
        if not isinstance(finished, ToolFinished):
            raise ProtocolError(f"expected ToolFinished, got {type(finished).__name__}")
        i = finished.index
        if not 0 <= i < len(self._answers) or self._answers[i] is not None:
            raise ProtocolError(f"tool result for index {i} is unexpected or duplicated")
        outcome = finished.outcome
        check_outcome(outcome, self._calls[i].id)
        self._answers[i] = finished
        call = self._calls[i]
        if finished.ran:
            self.stats = accumulate_tool_call(self.stats, call.name, finished.ms)
            st = self.state
            st.totals = accumulate_tool_call(st.totals, call.name, finished.ms)
        else:
            self._batch_aborted = True
        if finished.error is not None:
            self._effects.append(Reject(call.id, finished.error))
        if isinstance(outcome, ToolResult):
            if outcome.activate_plugins:
                self._activation("plugins", outcome.activate_plugins, self._has_plugins, call.id)
            if outcome.activate_skills:
                self._activation("skills", outcome.activate_skills, self._has_skills, call.id)

    def _activation(self, kind: str, names: tuple[str, ...], wired: bool, call_id: str) -> None:
        if wired:
            self._effects.append(Activate(kind, names))
        else:
            self._effects.append(Reject(call_id, MissingActivationPortError(kind, names)))

    def tool_finished(self, finished: ToolFinished) -> None:
        """A serial call finished (or was not started because the signal fired)."""
        self._expect(_SERIAL, "tool_finished()")
        self._record(finished)
        self._next_tool_step()

    def pooled_finished(self, finished: Sequence[ToolFinished]) -> None:
        """Every pooled call finished or was not started; one entry per pooled call, any order."""
        self._expect(_POOLED, "pooled_finished()")
        for f in finished:
            self._record(f)
        self._next_tool_step()

    def _batch_done(self) -> None:
        calls = self._calls
        st = self.state
        queue = self._accept_queue
        for i, finished in enumerate(self._answers):
            if finished is None:
                raise ProtocolError(f"tool call {calls[i].id!r} was never answered")
            outcome = finished.outcome
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
            self._phase = _ACCEPT
            self._offer_next_message()
        else:
            st.messages.extend(queue)
            queue.clear()
            self._batch_settled()

    def _offer_next_message(self) -> None:
        if self._accept_queue:
            self._effects.append(AcceptToolMessage(self._accept_queue[0], self._ordinal))
        else:
            self._batch_settled()

    def tool_message_accepted(self) -> None:
        """``before_tool_message_accepted`` returned for the message last offered: append it."""
        self._expect(_ACCEPT, "tool_message_accepted()")
        self.state.messages.append(self._accept_queue.popleft())
        self._ordinal += 1
        self._offer_next_message()

    def _batch_settled(self) -> None:
        self._progress()
        if self._batch_aborted:
            self._finish("aborted")
        elif self._has_settle:
            self._phase = _SETTLE
            self._settle_would_end = False
            self._effects.append(_SETTLE_BATCH)
        else:
            self._after_batch()

    def settled(self, settlement: StepSettlement | None) -> None:
        """``on_step_settled`` answered. Delivered messages are appended in order; while a suspend is
        open only its answering tool message is accepted, anything else is reported as
        :class:`InputBlockedBySuspendError` and dropped."""
        self._expect(_SETTLE, "settled()")
        if settlement is None:
            settlement = StepSettlement()
        elif not isinstance(settlement, StepSettlement):
            raise PortContractError(
                f"on_step_settled returned {type(settlement).__name__}; expected StepSettlement or None"
            )
        delivered = self._deliver(check_messages(settlement.messages,
                                                 "on_step_settled().messages"))
        if settlement.stop:
            self._finish("aborted")
        elif self._settle_would_end:
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
                            st.messages.append(message)
                            delivered = True
                            break
                    else:
                        self._block(message)
                else:
                    self._block(message)
            else:
                st.messages.append(message)
                delivered = True
        return delivered

    def _block(self, message: Message) -> None:
        open_id = self.state.open_suspends[0].tool_call_id
        self._effects.append(Reject(open_id, InputBlockedBySuspendError(
            f"a {type(message).__name__} was delivered while tool call {open_id!r} is suspended; only "
            "the answering tool message is accepted until then (deliver it first)"
        )))

    def _after_batch(self) -> None:
        if self.state.open_suspends:
            self._finish(self._suspend_reason())
        else:
            self._to_boundary()

    def _after_would_end(self, delivered: bool) -> None:
        # Real input outranks a nudge: a turn with more to answer was never stalled.
        if delivered:
            self._to_boundary()
        elif self._has_nudge:
            self._phase = _NUDGING
            self._effects.append(_NUDGE)
        else:
            self._finish("done")

    def nudged(self, messages: Sequence[Message] | None) -> None:
        """``on_turn_would_end`` answered: messages continue the run, nothing ends it as ``done``."""
        self._expect(_NUDGING, "nudged()")
        if messages is not None:
            check_messages(messages, "on_turn_would_end()")
        if messages:
            self.state.messages.extend(messages)
            self._to_boundary()
        else:
            self._finish("done")

    def _suspend_reason(self) -> Literal["waiting_for_reply", "resuming_later"]:
        # A person having to act is the more urgent thing for a host to surface.
        if any(s.mode == "waiting_for_reply" for s in self.state.open_suspends):
            return "waiting_for_reply"
        return "resuming_later"


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
