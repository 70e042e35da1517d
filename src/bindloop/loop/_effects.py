"""What the loop machine and its driver say to each other: requests, notices, answers, reasons.

A *request* needs an answer: the driver performs it and feeds the answer back through
:meth:`~bindloop.lowlevel.LoopMachine.send`. A *notice* needs none: the driver tells a port and moves
on. Every request and notice is a frozen, tagged Struct of plain data, so an effect trace encodes to
JSON (``msgspec.json.encode(effect)``); why a call was rejected is a :data:`RejectReason` value,
never an exception object. Answers are frozen Structs of plain data too: the host's decisions
(which calls run alone, which call ends the run, what the model reads for a raise, whether a raise
is fatal) are evaluated by the driver, which owns the ports, and arrive as values — the flags of
:class:`BatchPlanned` and :class:`FinalChecked`, the :class:`~bindloop.contracts.ToolError` and
type name in :class:`ToolRaised`. No exception object ever enters the machine.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import msgspec

from ..contracts import (
    AssistantMessage,
    CompactionApplied,
    Message,
    ModelTurnResult,
    ToolCall,
    ToolError,
    ToolMessage,
    ToolOutcome,
)
from ..errors import AbortedToolCallError, BindloopError
from ._errors import (
    DiscardedTurnWithToolCallsError,
    InputBlockedBySuspendError,
    MissingActivationPortError,
)
from ._types import ActivationKind, ControlledStopReason, StepSettlement

__all__ = (
    "AcceptToolMessage",
    "Activate",
    "ActivationPortMissing",
    "Answer",
    "AskNudge",
    "BatchFinished",
    "BatchWrapped",
    "BlockedBySuspend",
    "Boundary",
    "BoundaryChecked",
    "BatchPlanned",
    "BoundaryDecided",
    "CallModel",
    "CheckBoundary",
    "CheckFinal",
    "Compact",
    "Compacted",
    "DiscardedTurn",
    "Effect",
    "FinalChecked",
    "Finish",
    "ModelReplied",
    "Notice",
    "NotifyAssistant",
    "NotifyProgress",
    "Nudged",
    "NotRun",
    "PlanBatch",
    "RaisedByTool",
    "RanCall",
    "Reject",
    "RejectReason",
    "Request",
    "RunTool",
    "RunToolBatch",
    "Settle",
    "Settled",
    "ToolAnswer",
    "ToolMessageAccepted",
    "ToolNotRun",
    "ToolRaised",
    "ToolReturned",
    "WrapToolBatch",
)


# ---- requests: perform, then send() the answer the table accepts --------------------------------

class CheckBoundary(msgspec.Struct, frozen=True, tag=True):
    """Between iterations: poll the stop signal (a reason that is a ``RunTimeoutError`` or
    ``RunCancelledError`` is raised), then answer :class:`BoundaryChecked` with whether it fired."""


class Compact(msgspec.Struct, frozen=True, tag=True):
    """Offer the transcript to the compaction port; answer :class:`Compacted`."""


class Boundary(msgspec.Struct, frozen=True, tag=True):
    """A settled boundary before the next model call (only with a control hook): the transcript is
    provider-valid and no call is pending. Answer :class:`BoundaryDecided`."""


class CallModel(msgspec.Struct, frozen=True, tag=True):
    """Build the tool surface and call the model; answer :class:`ModelReplied`."""


class PlanBatch(msgspec.Struct, frozen=True, tag=True):
    """Only with ``runs_serially`` wired (and ``run_tool_batch`` not): ask ``runs_serially(call)``
    for each of the turn's ``calls``, in order; answer :class:`BatchPlanned` with the answers."""

    calls: tuple[ToolCall, ...]


class RunTool(msgspec.Struct, frozen=True, tag=True):
    """Run one call alone: if the batch's signal has fired, answer :class:`ToolNotRun` without
    starting it; otherwise run it and answer :class:`ToolReturned`, or :class:`ToolRaised` for a
    raise that :func:`~bindloop.lowlevel.is_fatal_raise` does not claim (a fatal one propagates
    and never reaches the machine)."""

    index: int
    call: ToolCall


class RunToolBatch(msgspec.Struct, frozen=True, tag=True):
    """Run these calls concurrently, pooled per tool name and bounded by the signal; answer
    :class:`BatchFinished` with one answer per call, in any order."""

    items: tuple[tuple[int, ToolCall], ...]


class WrapToolBatch(msgspec.Struct, frozen=True, tag=True):
    """Only with ``run_tool_batch`` wired, for every batch: hand all of the turn's ``calls`` (serial
    ones and a lone call included) to that port together with the loop's runner; answer
    :class:`BatchWrapped`."""

    calls: tuple[ToolCall, ...]


class CheckFinal(msgspec.Struct, frozen=True, tag=True):
    """Only with ``is_final_call`` wired, once every call of a batch is answered and before any of
    its results joins the transcript: ask ``is_final_call(call, outcome)`` for each pair, in
    model order (``outcomes[i]`` is what the transcript gets for ``calls[i]``); answer
    :class:`FinalChecked` with the answers."""

    calls: tuple[ToolCall, ...]
    outcomes: tuple[ToolOutcome, ...]


class AcceptToolMessage(msgspec.Struct, frozen=True, tag=True):
    """Await ``before_tool_message_accepted(message, ordinal)``; answer
    :class:`ToolMessageAccepted` (a raise ends the run with the message not appended)."""

    message: ToolMessage
    ordinal: int


class Settle(msgspec.Struct, frozen=True, tag=True):
    """Await ``on_step_settled(would_end)``; answer :class:`Settled`."""

    would_end: bool


class AskNudge(msgspec.Struct, frozen=True, tag=True):
    """Await ``on_turn_would_end(turn)``, ``turn`` being the model turn the run would end with;
    answer :class:`Nudged`."""

    turn: ModelTurnResult


Request: TypeAlias = (
    CheckBoundary | Compact | Boundary | CallModel | PlanBatch | RunTool | RunToolBatch
    | WrapToolBatch | CheckFinal | AcceptToolMessage | Settle | AskNudge
)


# ---- why a call was rejected: data, not exception objects ---------------------------------------

class RaisedByTool(msgspec.Struct, frozen=True, tag=True):
    """The tool raised (non-fatally); the model read a formatted tool error. Only the type's name is
    kept here: the message may hold a secret."""

    exception_type: str


class NotRun(msgspec.Struct, frozen=True, tag=True):
    """The batch's signal fired before the call started; ``reason`` is the signal's."""

    reason: str | None = None


class DiscardedTurn(msgspec.Struct, frozen=True, tag=True):
    """``accept_message=False`` on a turn that requested tools: the discard was refused."""


class BlockedBySuspend(msgspec.Struct, frozen=True, tag=True):
    """Input other than the answering tool message arrived while a suspend is open; not appended."""

    message_type: str


class ActivationPortMissing(msgspec.Struct, frozen=True, tag=True):
    """A tool asked to activate plugins or skills and the ``activate`` port is unwired."""

    kind: ActivationKind
    names: tuple[str, ...]


RejectReason: TypeAlias = (
    RaisedByTool | NotRun | DiscardedTurn | BlockedBySuspend | ActivationPortMissing
)


def reason_exception(tool_call_id: str, reason: RejectReason) -> BindloopError:
    """The exception ``on_tool_call_rejected`` receives for a machine-made rejection (everything but
    :class:`RaisedByTool`, whose exception is the tool's own)."""
    if isinstance(reason, NotRun):
        return AbortedToolCallError(tool_call_id, reason.reason)
    if isinstance(reason, ActivationPortMissing):
        return MissingActivationPortError(reason.kind, reason.names)
    if isinstance(reason, DiscardedTurn):
        return DiscardedTurnWithToolCallsError(
            "accept_message=False refused: the turn requested tools, whose results need the "
            "request to pair with; the turn was kept")
    if isinstance(reason, BlockedBySuspend):
        return InputBlockedBySuspendError(
            f"a {reason.message_type} was delivered while tool call {tool_call_id!r} is suspended; "
            "only the answering tool message is accepted until then (deliver it first)")
    raise TypeError(f"no machine-made exception for {type(reason).__name__}")


# ---- notices: tell a port, no answer ------------------------------------------------------------

class NotifyAssistant(msgspec.Struct, frozen=True, tag=True):
    """Tell ``on_assistant_message`` about an accepted assistant message."""

    message: AssistantMessage


class NotifyProgress(msgspec.Struct, frozen=True, tag=True):
    """Tell ``on_progress_update`` the live totals (tool calls requested so far)."""

    output_tokens: int
    requested_tool_calls: int


class Reject(msgspec.Struct, frozen=True, tag=True):
    """Report a rejection through ``on_tool_call_rejected``. The exception to hand it is the
    tool's own for :class:`RaisedByTool` — the driver kept it when it made the :class:`ToolRaised`
    answer (the rejections of one ``send()`` come in the order of the :class:`ToolRaised` in that
    answer) — and :func:`reason_exception` for every other reason."""

    tool_call_id: str
    reason: RejectReason


class Activate(msgspec.Struct, frozen=True, tag=True):
    """Call ``activate(kind, names)``."""

    kind: ActivationKind
    names: tuple[str, ...]


class Finish(msgspec.Struct, frozen=True, tag=True):
    """The run is over; the machine accepts nothing more."""

    stop_reason: ControlledStopReason


Notice: TypeAlias = NotifyAssistant | NotifyProgress | Reject | Activate | Finish

Effect: TypeAlias = Request | Notice


# ---- answers: what send() takes -----------------------------------------------------------------

class BoundaryChecked(msgspec.Struct, frozen=True, tag=True):
    """Answers :class:`CheckBoundary`: whether to stop (``aborted``)."""

    stop: bool


class Compacted(msgspec.Struct, frozen=True, tag=True):
    """Answers :class:`Compact`: ``None`` for no change, or the replacement transcript; ``ms`` is
    the port's time."""

    applied: CompactionApplied | None
    ms: float


class BoundaryDecided(msgspec.Struct, frozen=True, tag=True):
    """Answers :class:`Boundary`: ``checkpoint`` ends the run as ``checkpointed``."""

    checkpoint: bool


class ModelReplied(msgspec.Struct, frozen=True, tag=True):
    """Answers :class:`CallModel`: the turn and how long it took."""

    result: ModelTurnResult
    ms: float


class BatchPlanned(msgspec.Struct, frozen=True, tag=True):
    """Answers :class:`PlanBatch`: one ``runs_serially`` answer per call, in order, as the predicate
    returned it (the machine checks each is a bool: :class:`~bindloop.errors.PortContractError`
    naming the port). Calls answered ``True`` run first, alone, in order; the rest are pooled."""

    serial: Sequence[bool]


class ToolReturned(msgspec.Struct, frozen=True, tag=True):
    """One call returned ``outcome`` after ``ms``."""

    index: int
    outcome: ToolOutcome
    ms: float = 0.0


class ToolRaised(msgspec.Struct, frozen=True, tag=True):
    """One call raised (not fatally) after ``ms``: ``error`` is the tool error the model reads —
    :func:`~bindloop.lowlevel.tool_exception_error` of the exception, ``format_tool_exception``'s
    when wired — and ``exception_type`` the exception's type name (the rejection's
    :class:`RaisedByTool`). The exception itself stays with the driver."""

    index: int
    error: ToolError
    exception_type: str
    ms: float = 0.0


class ToolNotRun(msgspec.Struct, frozen=True, tag=True):
    """One call was never started because the batch's signal fired (``reason``: the signal's)."""

    index: int
    reason: str | None = None


ToolAnswer: TypeAlias = ToolReturned | ToolRaised | ToolNotRun


class BatchFinished(msgspec.Struct, frozen=True, tag=True):
    """Answers :class:`RunToolBatch`: one answer per pooled call, any order."""

    answers: Sequence[ToolAnswer]


class RanCall(msgspec.Struct, frozen=True, tag=True):
    """One call the loop's runner was handed inside ``run_tool_batch``: the call as it was given
    (a middleware may have rewritten it) and how it ended (``answer.index`` is its place in that
    call of the runner)."""

    call: ToolCall
    answer: ToolAnswer


class BatchWrapped(msgspec.Struct, frozen=True, tag=True):
    """Answers :class:`WrapToolBatch`: what ``run_tool_batch`` returned (one outcome per call, in
    order; checked by the machine) and every call its runner was handed, in the order the runner
    answered them — those, not the outcomes, are what ``stats`` counts and what is reported."""

    outcomes: object
    runs: Sequence[RanCall]


class FinalChecked(msgspec.Struct, frozen=True, tag=True):
    """Answers :class:`CheckFinal`: one ``is_final_call`` answer per call, in order, as the
    predicate returned it (each checked to be a bool). Any ``True`` makes the batch end the run as a
    turn that would end does."""

    final: Sequence[bool]


class ToolMessageAccepted(msgspec.Struct, frozen=True, tag=True):
    """Answers :class:`AcceptToolMessage`: the hook returned; append the message."""


class Settled(msgspec.Struct, frozen=True, tag=True):
    """Answers :class:`Settle` with what ``on_step_settled`` returned."""

    settlement: StepSettlement | None


class Nudged(msgspec.Struct, frozen=True, tag=True):
    """Answers :class:`AskNudge` with what ``on_turn_would_end`` returned."""

    messages: Sequence[Message] | None


Answer: TypeAlias = (
    BoundaryChecked | Compacted | BoundaryDecided | ModelReplied | BatchPlanned | ToolReturned
    | ToolRaised | ToolNotRun | BatchFinished | BatchWrapped | FinalChecked | ToolMessageAccepted
    | Settled | Nudged
)
