"""A run as an A2A 1.0 task: the run events encoded as the task's status and artifact updates
(:class:`A2aTaskEncoder`), the run recorded as canonical messages so the next message of the task
or its context continues it (:class:`RunRecorder`), and a client's reply to an ``input-required``
task read as the approvals and answers it gives (:func:`a2a_reply`).

What the encoder reads of the run (the agent's run events): text (each text part of a model turn
becomes one artifact, streamed with ``append``; a retracted attempt's text -- a turn text stream's
reset, or a turn started again by another attempt -- replaces it with nothing), the calls as they
complete, ``ApprovalRequestedEvent`` (an approval the run ends waiting on) and
``ToolFinishedEvent`` with a ``waiting_for_reply`` suspend (a tool's question); either ends the
task ``TASK_STATE_INPUT_REQUIRED`` instead of ``TASK_STATE_COMPLETED``. Reasoning, usage and tool
results are not sent (A2A has no place for them in a task's output).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import msgspec

from ..completion import (
    ExtraEvent,
    FinishEvent,
    ProviderItemEvent,
    ReasoningEvent,
    TextEvent,
    ToolCallEvent,
    TurnCollector,
    UsageEvent,
)
from ..contracts import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolError,
    ToolMessage,
    ToolResult,
    ToolSuspend,
    tool_error_message,
)
from ..errors import ProviderError, UsageError
from ..textstream import TurnResetEvent, TurnTextEvent
from ._a2a_types import (
    A2aArtifact,
    A2aArtifactUpdate,
    A2aMessage,
    A2aPart,
    A2aStatusUpdate,
    A2aStreamResponse,
    A2aTaskState,
    A2aTaskStatus,
)
from ._common import CallOutput, RunEncoder
from ._input import (
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    EncoderInput,
    ToolCallDoneEvent,
    ToolFinishedEvent,
    TurnDoneEvent,
    TurnFailedEvent,
    TurnStartEvent,
)
from ._ui_request import ToolApproval
from ._ui_stream import approval_id

__all__ = ("A2aPending", "A2aTaskEncoder", "RunRecorder", "a2a_reply", "pending_message")

_JSON = msgspec.json.Encoder()


class A2aPending(msgspec.Struct, frozen=True, kw_only=True):
    """What an ``input-required`` task waits on: an ``approval`` of a call (``id`` is
    ``approval-<call id>``) or the answer to a tool's ``question``."""

    kind: str  # "approval" | "question"
    id: str
    tool_call_id: str
    tool_name: str
    arguments: str
    detail: str | None = None


def pending_message(pending: Sequence[A2aPending], *, message_id: str, task_id: str,
                    context_id: str) -> A2aMessage:
    """The agent's message of an ``input-required`` status: one text part saying what is asked
    and how to answer, then one data part per item (``{"kind", "id", "toolCallId", "toolName",
    "arguments"[, "detail"]}``)."""
    lines = []
    for p in pending:
        if p.kind == "approval":
            lines.append(f"Approve the call {p.tool_name}({p.arguments})?")
        else:
            lines.append(p.detail or f"{p.tool_name} asks for an answer.")
    if any(p.kind == "approval" for p in pending):
        lines.append('Reply "yes" or "no" (or a data part {"approved": true|false, '
                     '"reason"?: "..."}; {"approvals": {"<toolCallId>": true|false}} decides '
                     'each call); any other reply denies, with your text as the reason.')
    parts = [A2aPart(text="\n".join(lines))]
    for p in pending:
        item: dict[str, Any] = {"kind": p.kind, "id": p.id, "toolCallId": p.tool_call_id,
                                "toolName": p.tool_name, "arguments": _arguments(p.arguments)}
        if p.detail is not None:
            item["detail"] = p.detail
        parts.append(A2aPart(data=item, media_type="application/json"))
    return A2aMessage(message_id=message_id, role="ROLE_AGENT", parts=tuple(parts),
                      task_id=task_id, context_id=context_id)


def _arguments(text: str) -> Any:
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:
        return text


class A2aTaskEncoder(RunEncoder[A2aStreamResponse]):
    """Run events in, the task's updates out (each an :class:`A2aStreamResponse` with one
    ``statusUpdate`` or ``artifactUpdate``). ``start()`` says ``TASK_STATE_WORKING``; the end is
    ``finish()`` (``COMPLETED``, or ``INPUT_REQUIRED`` with :meth:`pending` when the run waits on
    approvals or answers), ``fail(text)`` (``FAILED``, the text as the status message) or
    ``abort()`` (``CANCELED``). ``now()`` stamps each status (``None``: no timestamp).
    ``known_calls``: calls of the conversation still open when the run starts (their outcomes
    need no announcement). Ids are ``<id_prefix>-<kind><n>`` (``id_prefix`` defaults to the task
    id; a later run of the same task takes another, so its artifacts add to the earlier ones):
    equal runs give equal updates."""

    _name = "A2aTaskEncoder"

    def __init__(self, task_id: str, context_id: str, *,
                 now: Callable[[], str | None] = lambda: None,
                 known_calls: Iterable[ToolCall] = (), id_prefix: str | None = None) -> None:
        known = tuple(known_calls)
        super().__init__(id_prefix or task_id, known_calls=(c.id for c in known))
        self.task_id = task_id
        self.context_id = context_id
        self._now = now
        self._calls_seen: dict[str, ToolCall] = {c.id: c for c in known}
        self._pending: dict[str, A2aPending] = {}
        self._text_started: set[str] = set()
        self._attempt: list[str] = []  # the text artifacts of the turn's current attempt
        self.state: A2aTaskState = "TASK_STATE_SUBMITTED"

    def pending(self) -> tuple[A2aPending, ...]:
        """The approvals and questions the run ended waiting on (in the order they came)."""
        return tuple(self._pending.values())

    # -- the run's edges ----------------------------------------------------------------------

    def start(self) -> list[A2aStreamResponse]:
        self._begin()
        return [self._status("TASK_STATE_WORKING")]

    def finish(self) -> list[A2aStreamResponse]:
        out = self._end()
        if self._pending:
            message = pending_message(tuple(self._pending.values()),
                                      message_id=self._next_id("status"), task_id=self.task_id,
                                      context_id=self.context_id)
            out.append(self._status("TASK_STATE_INPUT_REQUIRED", message))
        else:
            out.append(self._status("TASK_STATE_COMPLETED"))
        return out

    def fail(self, text: str) -> list[A2aStreamResponse]:
        out = self._end()
        out.append(self._status("TASK_STATE_FAILED", self._agent_text(text)))
        return out

    def abort(self) -> list[A2aStreamResponse]:
        out = self._end()
        out.append(self._status("TASK_STATE_CANCELED"))
        return out

    def _status(self, state: A2aTaskState, message: A2aMessage | None = None
                ) -> A2aStreamResponse:
        self.state = state
        return A2aStreamResponse(status_update=A2aStatusUpdate(
            task_id=self.task_id, context_id=self.context_id,
            status=A2aTaskStatus(state=state, message=message, timestamp=self._now())))

    def _agent_text(self, text: str) -> A2aMessage:
        return A2aMessage(message_id=self._next_id("status"), role="ROLE_AGENT",
                          parts=(A2aPart(text=text),), task_id=self.task_id,
                          context_id=self.context_id)

    def _artifact(self, part_id: str, text: str, *, append: bool, last: bool = False
                  ) -> A2aStreamResponse:
        return A2aStreamResponse(artifact_update=A2aArtifactUpdate(
            task_id=self.task_id, context_id=self.context_id, append=append, last_chunk=last,
            artifact=A2aArtifact(artifact_id=part_id, name="text", parts=(A2aPart(text=text),))))

    # -- RunEncoder hooks ------------------------------------------------------------------

    def _on_step_start(self, turn: int, out: list[A2aStreamResponse]) -> None:
        self._attempt = []

    def _on_step_end(self, turn: int, out: list[A2aStreamResponse]) -> None:
        pass

    def _on_text_start(self, out: list[A2aStreamResponse]) -> str:
        part_id = self._next_id("text")
        self._attempt.append(part_id)
        return part_id

    def _on_text(self, part_id: str, text: str, out: list[A2aStreamResponse]) -> None:
        first = part_id not in self._text_started
        self._text_started.add(part_id)
        out.append(self._artifact(part_id, text, append=not first))

    def _on_text_end(self, part_id: str, out: list[A2aStreamResponse]) -> None:
        out.append(self._artifact(part_id, "", append=True, last=True))

    def _on_reasoning_start(self, part_id: str, out: list[A2aStreamResponse]) -> None:
        pass

    def _on_reasoning(self, part_id: str, text: str, out: list[A2aStreamResponse]) -> None:
        pass

    def _on_reasoning_end(self, part_id: str, out: list[A2aStreamResponse]) -> None:
        pass

    def _on_call_start(self, call_id: str, name: str, out: list[A2aStreamResponse]) -> None:
        pass

    def _on_call_args(self, call_id: str, args: str, out: list[A2aStreamResponse]) -> None:
        pass

    def _on_call_done(self, call: ToolCall, streamed: bool, out: list[A2aStreamResponse]) -> None:
        self._calls_seen[call.id] = call

    def _on_output(self, event: CallOutput, out: list[A2aStreamResponse]) -> None:
        if isinstance(event, ApprovalRequestedEvent):
            self._pending[event.call_id] = A2aPending(
                kind="approval", id=approval_id(event.call_id), tool_call_id=event.call_id,
                tool_name=event.tool, arguments=event.arguments)
            return
        if isinstance(event, ApprovalDecidedEvent):  # a denial: the call never runs
            self._pending.pop(event.call_id, None)
            return
        call, outcome = event.call, event.outcome
        if isinstance(outcome, ToolSuspend) and outcome.mode == "waiting_for_reply":
            self._pending[call.id] = A2aPending(
                kind="question", id=call.id, tool_call_id=call.id, tool_name=call.name,
                arguments=call.arguments, detail=outcome.detail)
        else:
            self._pending.pop(call.id, None)  # answered after all

    def _on_call_abandoned(self, call_id: str, name: str, out: list[A2aStreamResponse]) -> None:
        pass  # calls are not shown: nothing to take back

    def _on_reset(self, event: TurnResetEvent, out: list[A2aStreamResponse]) -> None:
        # The attempt's text is retracted: each of its artifacts is replaced with nothing (A2A
        # has no retraction; a replacement without ``append`` is how an artifact changes).
        self._text = None
        for part_id in self._attempt:
            out.append(self._artifact(part_id, "", append=False, last=True))
        self._attempt = []

    def _on_other(self, turn: int, event: EncoderInput, out: list[A2aStreamResponse]) -> None:
        pass


class RunRecorder:
    """The canonical messages a run added to its conversation, folded from the same events an
    encoder reads: each model turn's stream events folded into its assistant message (reasoning
    kept; the calls as the loop assembled them), each tool outcome its tool message after that
    turn, a denied call its refusal (``ApprovalDecidedEvent``). A call still waiting (an approval
    asked, a suspend) has no message: the reply
    to the ``input-required`` task answers it. Outcomes may arrive before their turn's end (the
    stream is read behind the loop); they are placed after their call's turn all the same."""

    def __init__(self) -> None:
        self._collector = TurnCollector()
        self._calls: list[ToolCall] = []
        self._turns: list[AssistantMessage] = []
        self._answers: dict[str, ToolMessage] = {}

    def feed(self, event: EncoderInput) -> None:
        if isinstance(event, (TurnStartEvent, TurnFailedEvent, TurnResetEvent)):
            self._collector = TurnCollector()  # a new attempt of the turn starts afresh
            if not isinstance(event, TurnResetEvent):
                self._calls = []
        elif isinstance(event, ToolCallDoneEvent):
            self._calls.append(event.tool_call)
        elif isinstance(event, TurnDoneEvent):
            turn = self._collector.result()
            if self._calls:
                turn = msgspec.structs.replace(turn, tool_calls=tuple(self._calls))
            if turn.text or turn.tool_calls or turn.reasoning:
                self._turns.append(turn.to_message())
            self._collector = TurnCollector()
            self._calls = []
        elif isinstance(event, ToolFinishedEvent):
            call, outcome = event.call, event.outcome
            if isinstance(outcome, ToolResult):
                self._answers[call.id] = ToolMessage(tool_call_id=call.id,
                                                     content=outcome.content)
            elif isinstance(outcome, ToolError):
                self._answers[call.id] = tool_error_message(call.id, outcome.error, outcome.kind)
        elif isinstance(event, ApprovalDecidedEvent):
            if not event.approved:  # what the model reads of a denial
                self._answers[event.call_id] = tool_error_message(
                    event.call_id, event.reason or "the user denied this tool call", "rejected")
        elif isinstance(event, TurnTextEvent):
            pass  # the retractable view of text the turn's own events carry
        elif isinstance(event, _STREAM_EVENTS):
            try:
                self._collector.observe(event)  # type: ignore[arg-type]
            except (ProviderError, UsageError):
                # Fragments the loop's own fold refused too: that turn fails there, and the
                # retry (or the run's failure) follows; the record only must not break the run.
                self._collector = TurnCollector()

    def messages(self, open_calls: Sequence[ToolCall] = ()) -> tuple[Message, ...]:
        """The run's messages: first the answers it gave to ``open_calls`` (calls of the
        conversation's last turn that waited when the run began: an approved call runs first),
        then each assistant turn followed by the answers to its calls."""
        out: list[Message] = []
        for call in open_calls:
            answer = self._answers.get(call.id)
            if answer is not None:
                out.append(msgspec.structs.replace(answer, name=call.name))
        for turn in self._turns:
            out.append(turn)
            for call in turn.tool_calls:
                answer = self._answers.get(call.id)
                if answer is not None:
                    out.append(msgspec.structs.replace(answer, name=call.name))
        return tuple(out)


_STREAM_EVENTS: tuple[type, ...] = (TextEvent, ToolCallEvent, ReasoningEvent, UsageEvent,
                                    FinishEvent, ExtraEvent, ProviderItemEvent)


def a2a_reply(message: A2aMessage, pending: Sequence[A2aPending]
              ) -> tuple[tuple[ToolApproval, ...], tuple[ToolMessage, ...]]:
    """A client's reply to an ``input-required`` task, as the approvals and tool answers the run
    continues with.

    Approvals: a data part ``{"approvals": {"<toolCallId>": bool | {"approved": bool,
    "reason"?: str}}}`` decides each call, ``{"approved": bool, "reason"?: str}`` all of them;
    else the reply's text approves all on ``yes``/``y``/``approve``/``approved``/``ok`` and
    denies on anything else (its text the reason the model reads -- an unclear reply never runs
    a tool). Questions: ``{"answers": {"<toolCallId>": value}}`` answers each; else the text (or
    the first data part, as JSON) answers all."""
    texts = [p.text for p in message.parts if p.text is not None]
    datas = [p.data for p in message.parts if p.data is not msgspec.UNSET]
    text = "\n".join(texts).strip()
    obj: dict[str, Any] = next((d for d in datas if isinstance(d, dict)), {})
    each_given = obj.get("approvals")
    each: dict[str, Any] = each_given if isinstance(each_given, dict) else {}
    answers_given = obj.get("answers")
    answers: dict[str, Any] = answers_given if isinstance(answers_given, dict) else {}
    approvals: list[ToolApproval] = []
    tool_messages: list[ToolMessage] = []
    for p in pending:
        if p.kind == "approval":
            approved, reason = _decision(each.get(p.tool_call_id, obj if "approved" in obj
                                                  else None), text)
            approvals.append(ToolApproval(approval_id=p.id, tool_call_id=p.tool_call_id,
                                          tool_name=p.tool_name, arguments=p.arguments,
                                          approved=approved, reason=reason))
        else:
            value: Any = answers.get(p.tool_call_id, msgspec.UNSET)
            if value is msgspec.UNSET:
                value = text if text or not datas else datas[0]
            content = value if isinstance(value, str) else _JSON.encode(value).decode()
            tool_messages.append(ToolMessage(tool_call_id=p.tool_call_id, content=content or "",
                                             name=p.tool_name))
    return tuple(approvals), tuple(tool_messages)


_YES = frozenset({"yes", "y", "approve", "approved", "ok", "okay", "allow", "true"})


def _decision(given: Any, text: str) -> tuple[bool, str | None]:
    if isinstance(given, bool):
        return given, None
    if isinstance(given, dict):
        reason = given.get("reason")
        return given.get("approved") is True, reason if isinstance(reason, str) else None
    if text.lower().rstrip(".!") in _YES:
        return True, None
    return False, text or None
