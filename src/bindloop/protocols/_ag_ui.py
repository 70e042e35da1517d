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

from ..completion import (
    FinishEvent,
    ReasoningEvent,
    TextEvent,
    ToolCallEvent,
    TurnResetEvent,
    TurnTextEvent,
    UsageEvent,
)
from ..contracts import ToolError, ToolResult, ToolSuspend, TurnUsage, content_text
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
from ._common import CallSlot, UsageLedger
from ._input import (
    StructuredDataEvent,
    ToolCallDoneEvent,
    TurnDoneEvent,
    TurnFailedEvent,
    TurnStartEvent,
    DataEvent,
    EncoderInput,
    StateDeltaEvent,
    StateSnapshotEvent,
    ToolDeniedEvent,
    ToolOutputEvent,
)

__all__ = ("AgUiEncoder",)


class _Turn:
    """The assistant message one turn builds (for the snapshot a reset sends)."""

    __slots__ = ("calls", "id", "text")

    def __init__(self, message_id: str) -> None:
        self.id = message_id
        self.text: list[str] = []
        self.calls: dict[str, AgUiToolCall] = {}


class AgUiEncoder:
    """Run events in, AG-UI events out (see the module docstring for the call order).

    ``messages`` are the conversation's messages as the client sent them (``RunAgentInput.messages``):
    only a reset's ``MESSAGES_SNAPSHOT`` repeats them, followed by what this run produced. A tool's
    result for a call not yet ended on the stream (tools report while the model's events are still
    being relayed) is held until its ``TOOL_CALL_END``.
    """

    __slots__ = ("_calls", "_counter", "_done_calls", "_held", "_input", "_interrupts",
                 "_next_turn", "_pending", "_produced", "_reasoning", "_reasoning_index",
                 "_run_id", "_started", "_step", "_text", "_thread_id", "_turn", "_usage", "done")

    def __init__(self, *, thread_id: str, run_id: str,
                 messages: tuple[AgUiMessage, ...] = ()) -> None:
        known = {c.id for m in messages if isinstance(m, AgUiAssistantMessage)
                 for c in (m.tool_calls or ())}
        if not thread_id or not run_id:
            raise ProtocolError("AgUiEncoder needs a non-empty thread_id and run_id")
        self._thread_id = thread_id
        self._run_id = run_id
        self._input = messages
        self._produced: list[_Turn | AgUiToolMessage] = []
        self._turn: _Turn | None = None
        self._counter = 0
        self._step: int | None = None
        self._next_turn = 0
        self._text: str | None = None
        self._reasoning: str | None = None
        self._reasoning_index = -1
        self._calls: dict[tuple[int, int], CallSlot] = {}
        self._done_calls: set[str] = known
        self._held: dict[str, list[ToolOutputEvent | ToolDeniedEvent]] = {}
        self._interrupts: list[AgUiInterrupt] = []
        self._pending: list[str] = []
        self._usage = UsageLedger()
        self._started = False
        self.done = False

    # -- the run's edges -----------------------------------------------------------------------

    def start(self) -> list[AgUiEvent]:
        if self._started:
            raise ProtocolError("AgUiEncoder.start() was already called")
        self._started = True
        return [RunStarted(thread_id=self._thread_id, run_id=self._run_id)]

    def finish(self, result: Any = None) -> list[AgUiEvent]:
        """``RUN_FINISHED``: an ``interrupt`` outcome naming each approval request and question
        (``waiting_for_reply``) when there are any; else success, with the calls left for the
        client (``resuming_later``) as ``pendingToolCallIds``. ``usage`` holds the run's tokens;
        ``result`` (any JSON but null) is passed on."""
        out = self._release_all()
        out += self._end_step()
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
                                  cached_input_tokens=usage.cached_input_tokens or None),)))
        self.done = True
        return out

    def abort(self) -> list[AgUiEvent]:
        """The run was stopped on purpose: ``RUN_FINISHED`` with the ``cancelled`` outcome."""
        out = self._release_all()
        out += self._end_step()
        out.append(RunFinished(thread_id=self._thread_id, run_id=self._run_id,
                               outcome=OutcomeCancelled()))
        self.done = True
        return out

    def fail(self, message: str, code: str | None = None) -> list[AgUiEvent]:
        out = self._release_all()
        out += self._end_step()
        out.append(RunError(message=message, code=code))
        self.done = True
        return out

    def usage(self) -> TurnUsage:
        """The run's tokens so far: each turn's usage folded, summed over turns."""
        return self._usage.total()

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

    # -- events --------------------------------------------------------------------------------

    def feed(self, event: EncoderInput, *, turn_index: int | None = None) -> list[AgUiEvent]:
        if not self._started or self.done:
            raise ProtocolError("AgUiEncoder.feed() needs start() first and nothing after the "
                                "run's end")
        out: list[AgUiEvent] = []
        if isinstance(event, TurnStartEvent):
            self._open_step(self._next_turn if turn_index is None else turn_index, out)
            return out
        if turn_index is not None and (self._step is None or turn_index > self._step):
            self._open_step(turn_index, out)
        turn = self._step if self._step is not None else 0
        if isinstance(event, (TextEvent, TurnTextEvent)):
            text = event.content if isinstance(event, TextEvent) else event.text
            if text:
                self._text_delta(text, out)
        elif isinstance(event, ReasoningEvent):
            self._reasoning_delta(event, out)
        elif isinstance(event, ToolCallEvent):
            self._tool_chunk(turn, event, out)
        elif isinstance(event, ToolCallDoneEvent):
            self._tool_done(turn, event, out)
        elif isinstance(event, UsageEvent):
            self._usage.record(turn, event.usage, event.snapshot)
        elif isinstance(event, TurnDoneEvent):
            self._close_parts(out)
        elif isinstance(event, FinishEvent):
            if event.usage is not None:
                self._usage.record(turn, event.usage, False)
            self._close_parts(out)
        elif isinstance(event, (ToolOutputEvent, ToolDeniedEvent)):
            if event.tool_call_id in self._done_calls:
                self._tool_output(event, out)
            else:
                self._held.setdefault(event.tool_call_id, []).append(event)
        elif isinstance(event, TurnResetEvent):
            self._reset(out)
        elif isinstance(event, StructuredDataEvent):
            out.append(Custom(name="structured", value={
                "status": event.status, "value": event.data, "isValid": event.is_valid}))
        elif isinstance(event, DataEvent):
            out.append(Custom(name=event.name, value=event.data))
        elif isinstance(event, StateSnapshotEvent):
            out.append(StateSnapshot(snapshot=event.state))
        elif isinstance(event, StateDeltaEvent):
            out.append(StateDelta(delta=event.patch))
        elif isinstance(event, TurnFailedEvent):
            self._close_parts(out)
        return out

    # -- internals ------------------------------------------------------------------------------

    def _next_id(self, kind: str) -> str:
        self._counter += 1
        return f"{self._run_id}-{kind}{self._counter}"

    def _open_step(self, turn: int, out: list[AgUiEvent]) -> None:
        if self._step is not None and self._step == turn:
            return
        out.extend(self._end_step())
        self._step = turn
        self._next_turn = turn + 1
        self._turn = _Turn(self._next_id("msg"))
        self._produced.append(self._turn)
        out.append(StepStarted(step_name=f"turn {turn}"))

    def _end_step(self) -> list[AgUiEvent]:
        out: list[AgUiEvent] = []
        self._close_parts(out)
        if self._step is not None:
            for (_, _), call in self._calls.items():
                if call.started and call.id is not None and call.id not in self._done_calls:
                    out.append(ToolCallEnd(tool_call_id=call.id))  # the turn ended before it did
                    self._done_calls.add(call.id)
            out.append(StepFinished(step_name=f"turn {self._step}"))
            self._step = None
        return out

    def _current(self, out: list[AgUiEvent]) -> _Turn:
        if self._step is None or self._turn is None:
            self._open_step(self._next_turn, out)
        assert self._turn is not None
        return self._turn

    def _close_parts(self, out: list[AgUiEvent]) -> None:
        if self._text is not None:
            out.append(TextMessageEnd(message_id=self._text))
            self._text = None
        if self._reasoning is not None:
            out.append(ReasoningMessageEnd(message_id=self._reasoning))
            out.append(ReasoningEnd(message_id=self._reasoning))
            self._reasoning = None

    def _text_delta(self, text: str, out: list[AgUiEvent]) -> None:
        turn = self._current(out)
        if self._reasoning is not None:
            self._close_parts(out)
        if self._text is None:
            self._text = turn.id
            out.append(TextMessageStart(message_id=turn.id))
        turn.text.append(text)
        out.append(TextMessageContent(message_id=turn.id, delta=text))

    def _reasoning_delta(self, event: ReasoningEvent, out: list[AgUiEvent]) -> None:
        self._current(out)
        if self._text is not None or (self._reasoning is not None
                                      and event.index != self._reasoning_index):
            self._close_parts(out)
        if not event.part.text:
            return
        if self._reasoning is None:
            self._reasoning = self._next_id("reasoning")
            self._reasoning_index = event.index
            out.append(ReasoningStart(message_id=self._reasoning))
            out.append(ReasoningMessageStart(message_id=self._reasoning, role="reasoning"))
        out.append(ReasoningMessageContent(message_id=self._reasoning, delta=event.part.text))

    def _tool_chunk(self, index: int, event: ToolCallEvent, out: list[AgUiEvent]) -> None:
        call = self._calls.setdefault((index, event.tool_call.index), CallSlot())
        announce = call.take(event.tool_call)
        if call.id in self._done_calls:
            call.args = []  # a fragment of a call already ended: nothing more may follow its end
            return
        if announce:
            turn = self._current(out)
            self._close_parts(out)
            out.append(ToolCallStart(tool_call_id=call.id or "", tool_call_name=call.name,
                                     parent_message_id=turn.id))
        args = call.pending_args()
        if args is not None:
            out.append(ToolCallArgs(tool_call_id=call.id or "", delta=args))

    def _tool_done(self, index: int, event: ToolCallDoneEvent, out: list[AgUiEvent]) -> None:
        tc = event.tool_call
        turn = self._current(out)
        if tc.id in self._done_calls and tc.id in turn.calls:
            return  # the same call reported twice
        started = any(c.started and c.id == tc.id for (t, _), c in self._calls.items()
                      if t == index)
        if not started:
            self._close_parts(out)
            out.append(ToolCallStart(tool_call_id=tc.id, tool_call_name=tc.name,
                                     parent_message_id=turn.id))
            out.append(ToolCallArgs(tool_call_id=tc.id, delta=tc.arguments))
        if tc.id not in self._done_calls:
            out.append(ToolCallEnd(tool_call_id=tc.id))
            self._done_calls.add(tc.id)
        turn.calls[tc.id] = AgUiToolCall(id=tc.id, function=AgUiFunction(name=tc.name,
                                                                          arguments=tc.arguments))
        for held in self._held.pop(tc.id, ()):
            self._tool_output(held, out)

    def _release_all(self) -> list[AgUiEvent]:
        """Results of calls never ended on the stream, sent at the end rather than lost."""
        out: list[AgUiEvent] = []
        for call_id in list(self._held):
            for held in self._held.pop(call_id):
                self._tool_output(held, out)
        return out

    def _tool_output(self, event: ToolOutputEvent | ToolDeniedEvent,
                     out: list[AgUiEvent]) -> None:
        if isinstance(event, ToolDeniedEvent):
            self._result(event.tool_call_id, event.reason or "the user denied this tool call",
                         out, error=True)
            return
        outcome = event.outcome
        if isinstance(outcome, ToolResult):
            content = outcome.content
            self._result(event.tool_call_id,
                         content if isinstance(content, str) else content_text(content), out)
        elif isinstance(outcome, ToolError):
            self._result(event.tool_call_id, outcome.error, out, error=True)
        elif isinstance(outcome, ToolSuspend) and event.approval_id is not None:
            self._interrupts.append(AgUiInterrupt(
                id=event.approval_id, reason="approval", message=outcome.detail,
                tool_call_id=event.tool_call_id))
        elif isinstance(outcome, ToolSuspend) and outcome.mode == "waiting_for_reply":
            self._interrupts.append(AgUiInterrupt(
                id=event.tool_call_id, reason="waiting_for_reply", message=outcome.detail,
                tool_call_id=event.tool_call_id))
        elif isinstance(outcome, ToolSuspend):
            # resuming_later: the result arrives from outside (a frontend tool the client runs).
            self._pending.append(event.tool_call_id)

    def _result(self, call_id: str, text: str, out: list[AgUiEvent], *,
                error: bool = False) -> None:
        self._close_parts(out)
        message_id = f"{call_id}-result"
        out.append(ToolCallResult(message_id=message_id, tool_call_id=call_id, content=text))
        self._produced.append(AgUiToolMessage(id=message_id, tool_call_id=call_id, content=text,
                                              error=text if error else None))

    def _reset(self, out: list[AgUiEvent]) -> None:
        turn = self._turn
        if turn is None or not turn.text:
            return
        self._close_parts(out)
        turn.text = []
        # The retry's text opens a new message: a client keyed by id never appends to the old one.
        self._turn = _Turn(self._next_id("msg"))
        self._turn.calls = turn.calls
        turn.calls = {}
        self._produced.append(self._turn)
        out.append(MessagesSnapshot(messages=self.messages()))
