"""The loop's decisions as a synchronous state machine (sans-I/O).

The machine never awaits and never calls a host callable: data in, data out, as in h11. The
driver pops effects (:meth:`LoopMachine.next_effect`): *notices* it passes to a port, and at the
end of each batch one *request* it performs and answers with :meth:`LoopMachine.send`. Which
answers each phase accepts and where each may lead is one table of data
(:data:`~bindloop.loop._phases.SUCCESSORS`, drawn in docs/loop.md); anything else, and anything
that raises while an answer is handled, moves the machine to ``ERROR``
(:mod:`bindloop.loop._protocol`). Every decision of the loop lives here — what a call that never
ran says, which calls pool, when a batch's results join the transcript, what ends the run — so the
same run is identical on every runtime and Hypothesis can explore it without an event loop.

The *host's* decisions arrive as data, each checked: which calls run alone and which call ends the
run as the answers to the decision requests :class:`~bindloop.lowlevel.PlanBatch` and
:class:`~bindloop.lowlevel.CheckFinal` (made only when ``runs_serially`` / ``is_final_call`` are in
``wired``); what the model reads for a tool's raise as the :class:`~bindloop.contracts.ToolError`
inside :class:`~bindloop.lowlevel.ToolRaised`. Whether a raise is fatal is settled by the driver
before anything is sent (:func:`~bindloop.lowlevel.is_fatal_raise`): a fatal raise never reaches
the machine.

Invariants the machine keeps (and the property tests hunt for):

* every tool call of an accepted assistant turn gets exactly one tool message, in the model's order,
  except a suspended call, whose answer arrives later and is listed in ``state.open_suspends``;
* nothing is appended between an assistant tool-call message and the results of that batch — the
  one commit point (:meth:`LoopMachine._commit`) refuses it;
* ``stats`` is this invocation folded from zero, and ``state.totals`` the seed folded with the same
  events (:class:`~bindloop.loop._ledger.RunLedger`);
* no exception object enters or stays in the machine: a raise arrives as a
  :class:`~bindloop.lowlevel.ToolRaised` of plain data, a rejection leaves as a
  :data:`~bindloop.lowlevel.RejectReason` value, and the driver keeps the tool's own exception for
  ``on_tool_call_rejected``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Final, Literal

from ..contracts import (
    AuxiliarySpend, CompactionApplied, Message, ModelTurnResult, RunStats, ToolCall, ToolMessage,
    ToolOutcome, ToolResult, ToolSuspend, tool_outcome_message)
from ..errors import PortContractError, ProtocolError, UsageError
from ._checks import (
    check_batch_outcomes, check_decisions, check_messages, check_outcome, check_resume_calls,
    check_turn, check_usage)
from ._effects import (
    AcceptToolMessage, Activate, ActivationPortMissing, Answer, AskNudge, BatchFinished,
    BatchPlanned, BatchWrapped, BlockedBySuspend, Boundary, BoundaryChecked, BoundaryDecided,
    CallModel, CheckBoundary, CheckFinal, Compact, Compacted, DiscardedTurn, Effect, FinalChecked,
    Finish, ModelReplied, NotifyAssistant, NotifyProgress, Nudged, NotRun, PlanBatch, RaisedByTool,
    RanCall, Reject, Request, RunTool, RunToolBatch, Settle, Settled, ToolAnswer,
    ToolMessageAccepted, ToolNotRun, ToolRaised, ToolReturned, WrapToolBatch)
from ._ledger import RunLedger
from ._phases import START_SUCCESSORS, SUCCESSORS, Phase
from ._protocol import MachineProtocol
from ._tool_errors import answer_outcome
from ._types import (
    WIRABLE, ActivationKind, ControlledStopReason, OpenSuspend, StepSettlement, ToolLoopState)

__all__ = ("LoopMachine",)

_CHECK: Final = CheckBoundary()
_BOUNDARY: Final = Boundary()
_COMPACT: Final = Compact()
_CALL: Final = CallModel()
_SETTLE_END: Final = Settle(would_end=True)
_SETTLE_BATCH: Final = Settle(would_end=False)
_EMPTY_SETTLEMENT: Final = StepSettlement()
_DISCARDED: Final = DiscardedTurn()
_ONE_CALL: Final = (0,)
_P_CHECK: Final = Phase.CHECK_BOUNDARY
_P_RUN_TOOL: Final = Phase.RUN_TOOL
_P_CALL: Final = Phase.CALL_MODEL
_P_DONE: Final = Phase.DONE
_P_ERROR: Final = Phase.ERROR
_TOOL_ANSWERS: Final = frozenset({ToolReturned, ToolRaised, ToolNotRun})


class LoopMachine(MachineProtocol):
    """One run's decisions. Construct, call :meth:`start`, then pop effects with
    :meth:`next_effect` and answer each request with :meth:`send`. ``wired`` names the optional
    ports (:data:`WIRABLE`) the driver will carry out; the machine emits no effect for any other.
    ``stats`` is this invocation's part; ``state`` is updated in place (seed plus this invocation);
    ``final_turn`` is the model turn that ended a ``done`` run. It takes no callable: with
    ``runs_serially`` / ``is_final_call`` in ``wired`` it asks for those decisions as requests."""

    __slots__ = (
        "_accept_queue", "_answers", "_batch_aborted", "_calls", "_final_batch", "_last_turn",
        "_ledger", "_ordinal", "_pooled", "_resume", "_resumed", "_serial", "final_turn", "iterations",
        "max_iterations",
        "state", "stop_reason", "wired",
    )

    def __init__(
        self,
        state: ToolLoopState,
        max_iterations: int,
        *,
        wired: frozenset[str] = frozenset(),
        resume_calls: Sequence[ToolCall] = (),
    ) -> None:
        if not isinstance(state, ToolLoopState):
            raise UsageError(f"state must be a ToolLoopState, got {type(state).__name__}")
        if isinstance(max_iterations, bool) or not isinstance(max_iterations, int):
            raise UsageError(f"max_iterations must be an int, got {type(max_iterations).__name__}")
        if max_iterations < 0:
            raise UsageError(f"max_iterations must be >= 0, got {max_iterations}")
        if not isinstance(wired, frozenset) or not wired <= WIRABLE:
            unknown = sorted(wired - WIRABLE) if isinstance(wired, frozenset) else wired
            raise UsageError(f"wired must be a frozenset of {sorted(WIRABLE)}; got {unknown!r}")
        # MachineProtocol's fields, set here rather than through super().__init__ (a run's setup).
        self._effects: deque[Effect] = deque()
        self._pending: Request | None = None
        self._phase = Phase.IDLE
        self._failure: str | None = None
        self.state = state
        self.max_iterations = max_iterations
        self.iterations = 0
        self.wired = wired
        self.stop_reason: ControlledStopReason | None = None
        self.final_turn: ModelTurnResult | None = None
        self._ledger = RunLedger(state)
        self._last_turn: ModelTurnResult | None = None
        self._calls: tuple[ToolCall, ...] = ()
        self._answers: list[ToolOutcome | None] = []
        self._serial: deque[int] = deque()  # only ever emptied by popleft, so it can be reused
        self._pooled: tuple[int, ...] = ()
        self._batch_aborted = False
        self._final_batch = False
        self._accept_queue: deque[ToolMessage] = deque()
        self._ordinal = 0
        self._resume = check_resume_calls(state.open_suspends, resume_calls) if resume_calls else ()
        self._resumed = False  # the run began with resume_calls: its first boundary is new state

    # ---- the protocol's other half: start, send, and what the driver may ask ------------------

    def send(self, answer: Answer) -> None:
        """Answer the pending request. The pair (phase, answer type) must be one the successor
        table lists, and every effect before it must have been popped. Whatever raises in here
        leaves the machine in ``ERROR``."""
        # Each answer type answers one phase, so one lookup finds the handler and checks the phase.
        try:
            phase, handler, successors = _ROUTES[type(answer)]
        except KeyError:
            handler = None  # refused below, outside this handler: no KeyError as its context
        if handler is None or phase is not self._phase or self._effects:
            self._refuse(answer)
        request = self._pending
        self._pending = None
        # ERROR while the handler runs: a handler that raises, or that leaves without a request
        # or a Finish, leaves the machine there.
        self._phase = _P_ERROR
        try:
            handler(self, request, answer)
        except BaseException as exc:
            self._fail(exc)
            raise
        if self._phase not in successors:
            error = ProtocolError(
                f"{type(answer).__name__} in phase {phase.value!r} led to "
                f"{self._phase.value!r}, which the successor table does not list")
            self._fail(error)
            raise error

    @property
    def stats(self) -> RunStats:
        """This invocation's statistics so far, folded from zero."""
        return self._ledger.part

    def start(self) -> None:
        """Begin the run. With ``resume_calls`` the run begins with them as its first batch (each
        answers its open suspend); otherwise a state with open suspends ends at once: nothing may
        happen until they are answered."""
        if self._phase is not Phase.IDLE:
            raise self._failed() if self._phase is Phase.ERROR else ProtocolError(
                "start() was already called")
        resume, self._resume = self._resume, ()
        if resume:
            self._resumed = True
            st = self.state
            st.open_suspends = [s for s in st.open_suspends
                                if all(c.id != s.tool_call_id for c in resume)]
            self._batch(resume)
        elif self.state.open_suspends:
            self._finish(self._suspend_reason())
        else:
            self._request(_CHECK)
        assert self._phase in START_SUCCESSORS

    outcome_of = staticmethod(answer_outcome)
    """What the model reads for a tool answer (:func:`~bindloop.loop._tool_errors.answer_outcome`)."""

    # ---- plumbing ------------------------------------------------------------------------------

    def _finish(self, reason: ControlledStopReason) -> None:
        self.stop_reason = reason
        self._phase = _P_DONE
        self._effects.append(Finish(reason))

    def _done(self) -> None:
        self.final_turn = self._last_turn
        self._finish("done")

    def _check(self) -> None:
        # _request inlined: every iteration passes here.
        self._pending = _CHECK
        self._phase = _P_CHECK
        self._effects.append(_CHECK)

    def _progress(self) -> None:
        st = self.state
        self._effects.append(NotifyProgress(st.output_tokens, st.requested_tool_calls))

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

    def _commit_owed(self) -> None:
        # Every owed result at once, in order: what committing them one by one would append.
        if self._calls:
            raise ProtocolError("tool results cannot join the transcript while a result is owed")
        owed = self._accept_queue
        self.state.messages.extend(owed)
        owed.clear()

    # ---- handlers (one per entry of SUCCESSORS) ------------------------------------------------

    def _boundary_checked(self, _: CheckBoundary, answer: BoundaryChecked) -> None:
        if answer.stop:
            self._finish("aborted")
        elif self.iterations >= self.max_iterations:
            self._finish("iteration_limit")
        elif "compact" in self.wired:
            self._request(_COMPACT)
        else:
            self._before_model()

    def _before_model(self) -> None:
        # The settled boundary a custom driver may checkpoint at: after nudge, suspension and
        # compaction decisions, before the next model call. The run's first one is skipped — it is
        # the input the driver already holds — unless the run began with resume_calls: the state
        # after that batch (the decided calls' results) is not.
        if (self.iterations > 0 or self._resumed) and "on_boundary" in self.wired:
            self._request(_BOUNDARY)
        else:  # _request inlined: every turn passes here
            self._pending = _CALL
            self._phase = _P_CALL
            self._effects.append(_CALL)

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
            self._ledger.auxiliary(AuxiliarySpend(usage=applied.usage, cost=applied.cost,
                                                  model_ms=answer.ms))
            st.counters = st.counters.after_compaction()
        self._before_model()

    def _model_replied(self, _: CallModel, answer: ModelReplied) -> None:
        result = answer.result
        calls = check_turn(result)
        self._last_turn = result
        self.iterations += 1
        usage = result.usage
        st = self.state
        self._ledger.turn(usage, result.cost, answer.ms)
        st.counters = st.counters.after_turn(usage, len(calls))
        wired = self.wired

        accept = result.accept_message
        if not accept and calls:
            self._effects.append(Reject(calls[0].id, _DISCARDED))
            accept = True
        if accept:
            message = result.to_message()
            self._commit(message)
            if "on_assistant_message" in wired:
                self._effects.append(NotifyAssistant(message))
        if "on_progress_update" in wired:
            self._progress()
        if not calls:
            self._would_end()
        else:
            self._batch(calls)

    def _batch(self, calls: tuple[ToolCall, ...]) -> None:
        # A batch begins (a turn's calls, or the resumed calls of open suspends: start()): the port
        # wraps it, or the host plans it, or it is pooled whole.
        self._calls = calls
        self._answers = [None] * len(calls)
        self._batch_aborted = self._final_batch = False
        wired = self.wired
        if "run_tool_batch" in wired:
            self._request(WrapToolBatch(calls))
        elif "runs_serially" in wired:
            self._request(PlanBatch(calls))
        else:
            self._pooled = _ONE_CALL if len(calls) == 1 else tuple(range(len(calls)))
            self._next_tool_step()

    def _batch_planned(self, request: PlanBatch, answer: BatchPlanned) -> None:
        flags = check_decisions(answer.serial, len(request.calls), "BatchPlanned", "runs_serially")
        serial: deque[int] = deque()
        pooled: list[int] = []
        for i, alone in enumerate(flags):
            (serial if alone else pooled).append(i)
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
                self._phase = _P_RUN_TOOL
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

    def _batch_wrapped(self, request: WrapToolBatch, answer: BatchWrapped) -> None:
        calls = request.calls
        outcomes = check_batch_outcomes(answer.outcomes, calls)
        for ran in answer.runs:
            if type(ran) is not RanCall or type(ran.answer) not in _TOOL_ANSWERS:
                raise ProtocolError(f"expected a RanCall of a tool answer, got {type(ran).__name__}")
            self._fold_run(ran.call, ran.answer)
        for i, call in enumerate(calls):
            self._apply(i, call, outcomes[i])
        self._batch_done()

    def _fold_run(self, call: ToolCall, answer: ToolAnswer) -> None:
        # A call that ran (or was kept from running): its time, and the rejection it owes.
        if isinstance(answer, ToolNotRun):
            self._batch_aborted = True
            self._effects.append(Reject(call.id, NotRun(answer.reason)))
            return
        if isinstance(answer, ToolRaised):
            name = answer.exception_type
            if type(name) is not str:
                raise PortContractError(f"ToolRaised.exception_type for call {call.id!r} must be "
                                        f"the exception's type name, got {type(name).__name__}")
            self._effects.append(Reject(call.id, RaisedByTool(name)))
        self._ledger.tool_call(call.name, answer.ms)

    def _record(self, answer: ToolAnswer) -> None:
        i = answer.index
        if not 0 <= i < len(self._answers) or self._answers[i] is not None:
            raise ProtocolError(f"tool result for index {i} is unexpected or duplicated")
        call = self._calls[i]
        if type(answer) is ToolReturned:  # the common answer, without the two calls below
            outcome = answer.outcome
            check_outcome(outcome, call)
            self._ledger.tool_call(call.name, answer.ms)
        else:
            outcome = answer_outcome(call, answer)
            self._fold_run(call, answer)
        self._apply(i, call, outcome)

    def _apply(self, i: int, call: ToolCall, outcome: ToolOutcome) -> None:
        # The outcome the transcript gets for call i, and its activations.
        self._answers[i] = outcome
        if isinstance(outcome, ToolResult):
            if outcome.activate_plugins:
                self._activation("plugins", outcome.activate_plugins, call.id)
            if outcome.activate_skills:
                self._activation("skills", outcome.activate_skills, call.id)

    def _activation(self, kind: ActivationKind, names: tuple[str, ...], call_id: str) -> None:
        if "activate" in self.wired:
            self._effects.append(Activate(kind, names))
        else:
            self._effects.append(Reject(call_id, ActivationPortMissing(kind, names)))

    def _batch_done(self) -> None:
        # Every call answered: the host's final-call verdict first (when wired), then the results.
        if "is_final_call" in self.wired:
            answers = self._answers
            if None in answers:
                self._queue_results()  # refuses: names the call never answered
            self._request(CheckFinal(self._calls, tuple(answers)))  # type: ignore[arg-type]
        else:
            self._queue_results()

    def _final_checked(self, request: CheckFinal, answer: FinalChecked) -> None:
        self._final_batch = any(check_decisions(answer.final, len(request.calls), "FinalChecked",
                                                "is_final_call"))
        self._queue_results()

    def _queue_results(self) -> None:
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
                    detail=outcome.detail, state=outcome.state,
                ))
            else:
                queue.append(tool_outcome_message(call.id, outcome, call.name))
        self._answers = []
        self._calls = ()
        self._ordinal = 0
        if "before_tool_message_accepted" in self.wired:
            self._offer_next_message()
        else:
            self._commit_owed()
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
        wired = self.wired
        if "on_progress_update" in wired:
            self._progress()
        if self._batch_aborted:
            self._finish("aborted")
        elif self._final_batch and not self.state.open_suspends:
            self._would_end()  # a final call: the batch ends the run as a turn without tools would
        elif "on_step_settled" in wired:
            self._request(_SETTLE_BATCH)
        else:
            self._after_batch()

    def _would_end(self) -> None:
        if "on_step_settled" in self.wired:
            self._request(_SETTLE_END)
        else:
            self._after_would_end(delivered=False)

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
        else:  # _check inlined: every batch ends here
            self._pending = _CHECK
            self._phase = _P_CHECK
            self._effects.append(_CHECK)

    def _after_would_end(self, delivered: bool) -> None:
        # Real input outranks a nudge: a turn with more to answer was never stalled.
        if delivered:
            self._check()
        elif "on_turn_would_end" in self.wired:
            assert self._last_turn is not None  # a run only would end after a model turn
            self._request(AskNudge(self._last_turn))
        else:
            self._done()

    def _nudged(self, _: AskNudge, answer: Nudged) -> None:
        messages = answer.messages
        if messages is not None:
            check_messages(messages, "on_turn_would_end()")
        if messages:
            for message in messages:
                self._commit(message)
            self._check()
        else:
            self._done()

    def _suspend_reason(self) -> Literal["waiting_for_reply", "resuming_later"]:
        # A person having to act is the more urgent thing for a host to surface.
        if any(s.mode == "waiting_for_reply" for s in self.state.open_suspends):
            return "waiting_for_reply"
        return "resuming_later"


_Handler = Callable[[LoopMachine, Any, Any], None]

_HANDLERS: Final[Mapping[tuple[Phase, type], _Handler]] = MappingProxyType({
    (Phase.CHECK_BOUNDARY, BoundaryChecked): LoopMachine._boundary_checked,
    (Phase.COMPACT, Compacted): LoopMachine._compacted,
    (Phase.BOUNDARY, BoundaryDecided): LoopMachine._boundary_decided,
    (Phase.CALL_MODEL, ModelReplied): LoopMachine._model_replied,
    (Phase.PLAN_BATCH, BatchPlanned): LoopMachine._batch_planned,
    (Phase.RUN_TOOL, ToolReturned): LoopMachine._tool_answered,
    (Phase.RUN_TOOL, ToolRaised): LoopMachine._tool_answered,
    (Phase.RUN_TOOL, ToolNotRun): LoopMachine._tool_answered,
    (Phase.RUN_TOOL_BATCH, BatchFinished): LoopMachine._batch_finished,
    (Phase.WRAP_TOOL_BATCH, BatchWrapped): LoopMachine._batch_wrapped,
    (Phase.CHECK_FINAL, FinalChecked): LoopMachine._final_checked,
    (Phase.ACCEPT_TOOL_MESSAGE, ToolMessageAccepted): LoopMachine._tool_message_accepted,
    (Phase.SETTLE, Settled): LoopMachine._settled,
    (Phase.ASK_NUDGE, Nudged): LoopMachine._nudged,
})
assert _HANDLERS.keys() == SUCCESSORS.keys()

# Each answer type's phase, handler and successors (an answer type answers one phase only).
_ROUTES: Final[Mapping[type, tuple[Phase, _Handler, frozenset[Phase]]]] = MappingProxyType({
    answer: (phase, handler, SUCCESSORS[(phase, answer)])
    for (phase, answer), handler in _HANDLERS.items()
})
assert len(_ROUTES) == len(_HANDLERS)
