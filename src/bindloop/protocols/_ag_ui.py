"""The encoder from bindloop's run events to AG-UI 1.0 events.

One :class:`AgUiEncoder` per run: :meth:`~AgUiEncoder.start` (``RUN_STARTED``), :meth:`~AgUiEncoder.feed`
for every event, then one of :meth:`~AgUiEncoder.finish` (``RUN_FINISHED``, with an ``interrupt``
outcome when a tool suspended), :meth:`~AgUiEncoder.abort` (the ``cancelled`` outcome) or
:meth:`~AgUiEncoder.fail` (``RUN_ERROR``). Each model turn is a step (``STEP_STARTED`` /
``STEP_FINISHED``) with one assistant message: its text and its tool calls share the message id.
A retracted attempt (``TurnResetEvent``) ends its text message and is taken back with a
``MESSAGES_SNAPSHOT`` that no longer holds it -- AG-UI's own way to replace what a client holds.
"""

from __future__ import annotations

from typing import Any

from ..textstream import TurnResetEvent
from ..contracts import ToolCall, ToolError, ToolResult, content_text
from ..errors import ProtocolError
from ._ag_ui_types import (
    AgUiAssistantMessage,
    AgUiEvent,
    AgUiFunction,
    AgUiInterrupt,
    AgUiMessage,
    AgUiTokenUsage,
    AgUiToolCall,
    AgUiToolMessage,
    Custom,
    MessagesSnapshot,
    OutcomeCancelled,
    OutcomeInterrupt,
    OutcomeSuccess,
    ReasoningEnd,
    ReasoningMessageContent,
    ReasoningMessageEnd,
    ReasoningMessageStart,
    ReasoningStart,
    RunError,
    RunFinished,
    RunStarted,
    StateDelta,
    StateSnapshot,
    StepFinished,
    StepStarted,
    TextMessageContent,
    TextMessageEnd,
    TextMessageStart,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallResult,
    ToolCallStart,
)
from ._common import CallOutput, RunEncoder
from ._input import (
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    StructuredDataEvent,
    DataEvent,
    EncoderInput,
    StateDeltaEvent,
    StateSnapshotEvent,
)
from ._ui_stream import approval_id

__all__ = ("AgUiEncoder",)


class _Turn:
    """The assistant message one turn builds (for the snapshot a reset sends)."""

    __slots__ = ("calls", "id", "text")

    def __init__(self, message_id: str) -> None:
        self.id = message_id
        self.text: list[str] = []
        self.calls: dict[str, AgUiToolCall] = {}


class AgUiEncoder(RunEncoder[AgUiEvent]):
    """Run events in, AG-UI events out (see the module docstring for the call order).

    ``messages`` are the conversation's messages as the client sent them (``RunAgentInput.messages``):
    only a reset's ``MESSAGES_SNAPSHOT`` repeats them, followed by what this run produced. A tool's
    result for a call not yet ended on the stream (tools report while the model's events are still
    being relayed) is held until its ``TOOL_CALL_END``.
    """

    _name = "AgUiEncoder"

    def __init__(self, *, thread_id: str, run_id: str,
                 messages: tuple[AgUiMessage, ...] = ()) -> None:
        if not thread_id or not run_id:
            raise ProtocolError("AgUiEncoder needs a non-empty thread_id and run_id")
        super().__init__(run_id, {c.id for m in messages if isinstance(m, AgUiAssistantMessage)
                                  for c in (m.tool_calls or ())})
        self._thread_id = thread_id
        self._run_id = run_id
        self._input = messages
        self._produced: list[_Turn | AgUiToolMessage] = []
        self._turn: _Turn | None = None
        self._interrupts: list[AgUiInterrupt] = []
        self._pending: list[str] = []

    # -- the run's edges -----------------------------------------------------------------------

    def start(self) -> list[AgUiEvent]:
        self._begin()
        return [RunStarted(thread_id=self._thread_id, run_id=self._run_id)]

    def finish(self, result: Any = None) -> list[AgUiEvent]:
        """``RUN_FINISHED``: an ``interrupt`` outcome naming each approval request and question
        (``waiting_for_reply``) when there are any; else success, with the calls left for the
        client (``resuming_later``) as ``pendingToolCallIds``. ``usage`` holds the run's tokens;
        ``result`` (any JSON but null) is passed on."""
        out = self._end()
        outcome: OutcomeInterrupt | OutcomeSuccess | None = None
        if self._interrupts:
            outcome = OutcomeInterrupt(interrupts=tuple(self._interrupts))
        elif self._pending:
            outcome = OutcomeSuccess(pending_tool_call_ids=tuple(self._pending))
        usage = self.usage()
        out.append(RunFinished(
            thread_id=self._thread_id, run_id=self._run_id, result=result, outcome=outcome,
            usage=(AgUiTokenUsage(input_tokens=usage.input_tokens,
                                  output_tokens=usage.output_tokens,
                                  total_tokens=usage.input_tokens + usage.output_tokens,
                                  reasoning_tokens=usage.reasoning_tokens or None,
                                  cached_input_tokens=usage.cached_input_tokens or None,
                                  cache_write_input_tokens=usage.cache_write_tokens or None),)))
        return out

    def abort(self) -> list[AgUiEvent]:
        """The run was stopped on purpose: ``RUN_FINISHED`` with the ``cancelled`` outcome."""
        out = self._end()
        out.append(RunFinished(thread_id=self._thread_id, run_id=self._run_id,
                               outcome=OutcomeCancelled()))
        return out

    def fail(self, message: str, code: str | None = None) -> list[AgUiEvent]:
        out = self._end()
        out.append(RunError(message=message, code=code))
        return out

    def messages(self) -> tuple[AgUiMessage, ...]:
        """The conversation as this run leaves it: the input messages, then each turn's assistant
        message (text and tool calls) and the tool results."""
        out: list[AgUiMessage] = list(self._input)
        for item in self._produced:
            if isinstance(item, _Turn):
                if item.text or item.calls:
                    out.append(AgUiAssistantMessage(
                        id=item.id, content="".join(item.text) or None,
                        tool_calls=tuple(item.calls.values()) or None))
            else:
                out.append(item)
        return tuple(out)

    # -- the wire -------------------------------------------------------------------------------

    def _current(self) -> _Turn:
        assert self._turn is not None, "a step is open"
        return self._turn

    def _on_step_start(self, turn: int, out: list[AgUiEvent]) -> None:
        self._turn = _Turn(self._next_id("msg"))
        self._produced.append(self._turn)
        out.append(StepStarted(step_name=f"turn {turn}"))

    def _on_step_end(self, turn: int, out: list[AgUiEvent]) -> None:
        for call_id in self._unfinished_calls():
            out.append(ToolCallEnd(tool_call_id=call_id))  # the turn ended before the call did
            self._complete.add(call_id)
        out.append(StepFinished(step_name=f"turn {turn}"))

    def _on_text_start(self, out: list[AgUiEvent]) -> str:
        turn = self._current()
        out.append(TextMessageStart(message_id=turn.id))
        return turn.id

    def _on_text(self, part_id: str, text: str, out: list[AgUiEvent]) -> None:
        self._current().text.append(text)
        out.append(TextMessageContent(message_id=part_id, delta=text))

    def _on_text_end(self, part_id: str, out: list[AgUiEvent]) -> None:
        out.append(TextMessageEnd(message_id=part_id))

    def _on_reasoning_start(self, part_id: str, out: list[AgUiEvent]) -> None:
        out.append(ReasoningStart(message_id=part_id))
        out.append(ReasoningMessageStart(message_id=part_id, role="reasoning"))

    def _on_reasoning(self, part_id: str, text: str, out: list[AgUiEvent]) -> None:
        out.append(ReasoningMessageContent(message_id=part_id, delta=text))

    def _on_reasoning_end(self, part_id: str, out: list[AgUiEvent]) -> None:
        out.append(ReasoningMessageEnd(message_id=part_id))
        out.append(ReasoningEnd(message_id=part_id))

    def _on_call_start(self, call_id: str, name: str, out: list[AgUiEvent]) -> None:
        out.append(ToolCallStart(tool_call_id=call_id, tool_call_name=name,
                                 parent_message_id=self._current().id))

    def _on_call_args(self, call_id: str, args: str, out: list[AgUiEvent]) -> None:
        out.append(ToolCallArgs(tool_call_id=call_id, delta=args))

    def _on_call_done(self, call: ToolCall, streamed: bool, out: list[AgUiEvent]) -> None:
        turn = self._current()
        if not streamed:
            out.append(ToolCallStart(tool_call_id=call.id, tool_call_name=call.name,
                                     parent_message_id=turn.id))
            out.append(ToolCallArgs(tool_call_id=call.id, delta=call.arguments))
        out.append(ToolCallEnd(tool_call_id=call.id))
        turn.calls[call.id] = AgUiToolCall(id=call.id, function=AgUiFunction(
            name=call.name, arguments=call.arguments))

    def _on_output(self, event: CallOutput, out: list[AgUiEvent]) -> None:
        if isinstance(event, ApprovalDecidedEvent):  # a denial (an approved call runs)
            self._result(event.call_id, event.reason or "the user denied this tool call",
                         out, error=True)
            return
        if isinstance(event, ApprovalRequestedEvent):
            self._interrupts.append(AgUiInterrupt(
                id=approval_id(event.call_id), reason="approval",
                message=f"approve {event.tool}?", tool_call_id=event.call_id))
            return
        call_id, outcome = event.call.id, event.outcome
        if isinstance(outcome, ToolResult):
            content = outcome.content
            self._result(call_id, content if isinstance(content, str) else content_text(content),
                         out)
        elif isinstance(outcome, ToolError):
            self._result(call_id, outcome.error, out, error=True)
        elif outcome is None:
            return  # a fatal raise: the run fails, and its end says so
        elif outcome.mode == "waiting_for_reply":
            self._interrupts.append(AgUiInterrupt(
                id=call_id, reason="waiting_for_reply", message=outcome.detail,
                tool_call_id=call_id))
        else:
            # resuming_later: the result arrives from outside (a frontend tool the client runs).
            self._pending.append(call_id)

    def _on_call_abandoned(self, call_id: str, name: str, out: list[AgUiEvent]) -> None:
        out.append(ToolCallEnd(tool_call_id=call_id))  # started, so it ends; no result follows

    def _result(self, call_id: str, text: str, out: list[AgUiEvent], *,
                error: bool = False) -> None:
        self._close_parts(out)
        message_id = f"{call_id}-result"
        out.append(ToolCallResult(message_id=message_id, tool_call_id=call_id, content=text))
        self._produced.append(AgUiToolMessage(id=message_id, tool_call_id=call_id, content=text,
                                              error=text if error else None))

    def _on_reset(self, event: TurnResetEvent, out: list[AgUiEvent]) -> None:
        turn = self._turn
        if turn is None or not turn.text:
            return
        self._close_parts(out)
        turn.text = []
        # The retry's text opens a new message: a client keyed by id never appends to the old one.
        self._turn = _Turn(self._next_id("msg"))
        self._turn.calls, turn.calls = turn.calls, {}
        self._produced.append(self._turn)
        out.append(MessagesSnapshot(messages=self.messages()))

    def _on_other(self, turn: int, event: EncoderInput, out: list[AgUiEvent]) -> None:
        if isinstance(event, StructuredDataEvent):
            out.append(Custom(name="structured", value={
                "status": event.status, "value": event.data, "isValid": event.is_valid}))
        elif isinstance(event, DataEvent):
            out.append(Custom(name=event.name, value=event.data))
        elif isinstance(event, StateSnapshotEvent):
            out.append(StateSnapshot(snapshot=event.state))
        elif isinstance(event, StateDeltaEvent):
            out.append(StateDelta(delta=event.patch))
