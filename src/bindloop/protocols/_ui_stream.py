"""The encoder from bindloop's run events to the AI SDK UI message stream, v1.

One :class:`UIStreamEncoder` per response message: :meth:`~UIStreamEncoder.start`, then
:meth:`~UIStreamEncoder.feed` for every event of the run, then exactly one of
:meth:`~UIStreamEncoder.finish`, :meth:`~UIStreamEncoder.abort` or :meth:`~UIStreamEncoder.fail`.
Each call returns the chunks to send, in order; the host frames them (``sse_frame``) and ends the
body with ``SSE_DONE``. Ids of parts are derived from the message id and counters, so the same
events give the same bytes on every runtime.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from ..completion import (
    FinishEvent,
    FinishReason,
    ParsedArguments,
    ReasoningEvent,
    TextEvent,
    ToolCallEvent,
    TurnResetEvent,
    TurnTextEvent,
    UsageEvent,
    parse_tool_call_arguments,
)
from ..contracts import Content, ToolError, ToolResult, ToolSuspend, TurnUsage, content_text
from ..errors import ProtocolError
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
from ._ui_chunks import (
    UIAbort,
    UIChunk,
    UIData,
    UIError,
    UIFinish,
    UIFinishReason,
    UIFinishStep,
    UIReasoningDelta,
    UIReasoningEnd,
    UIReasoningStart,
    UIStart,
    UIStartStep,
    UITextDelta,
    UITextEnd,
    UITextStart,
    UIToolApprovalRequest,
    UIToolInputAvailable,
    UIToolInputDelta,
    UIToolInputError,
    UIToolInputStart,
    UIToolOutputAvailable,
    UIToolOutputDenied,
    UIToolOutputError,
)

__all__ = ("UIStreamEncoder", "usage_metadata")

_FINISH: Mapping[FinishReason, UIFinishReason] = MappingProxyType({
    "stop": "stop", "length": "length", "tool_calls": "tool-calls",
    "content_filter": "content-filter", "error": "error", "unknown": "other",
})


def usage_metadata(usage: TurnUsage) -> dict[str, int]:
    """A run's token counts as the AI SDK names them (``inputTokens``, ``outputTokens``,
    ``totalTokens``, ``cachedInputTokens``)."""
    out = {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
           "totalTokens": usage.input_tokens + usage.output_tokens}
    if usage.cached_input_tokens:
        out["cachedInputTokens"] = usage.cached_input_tokens
    return out


def tool_output_text(content: Content) -> str:
    """A tool result's content as the UI's ``output``: the text itself, unchanged (a client that
    sends the message back then gives the model the very bytes it read), or the text parts joined."""
    return content if isinstance(content, str) else content_text(content)


class UIStreamEncoder:
    """Run events in, UI message stream chunks out (see the module docstring for the call order).

    ``message_id`` is the assistant message the chunks build (continuing a message the client sent
    back -- after a client-side tool result or an approval -- means passing that message's id, and
    its tool call ids as ``known_calls``). A tool output for a call the stream has not announced yet
    (it is reported from a tool while the model's events are still being relayed) is held until
    the call's ``tool-input-available``, since a client refuses an output for an unknown call.
    Steps follow model turns: a ``start-step`` when a turn starts, its ``finish-step`` when the next
    one starts or the run ends, so a turn's tool outputs land in its step. A retracted attempt
    (``TurnResetEvent``) ends its text part and is announced as a ``data-bindloop-reset`` part:
    the protocol has no retraction of its own, so a client that hides the text parts of the step
    before that part (``data.retracted`` of them) shows only the retry.
    """

    __slots__ = ("_announced", "_attempt_parts", "_calls", "_counter", "_finish", "_held",
                 "_message_id", "_next_turn", "_reasoning", "_reasoning_index", "_resets",
                 "_started", "_step", "_text", "_usage", "done")

    def __init__(self, message_id: str, *, known_calls: Iterable[str] = ()) -> None:
        if not isinstance(message_id, str) or not message_id:
            raise ProtocolError("UIStreamEncoder needs a non-empty message_id")
        self._message_id = message_id
        self._counter = 0
        self._step: int | None = None
        self._next_turn = 0
        self._text: str | None = None
        self._reasoning: str | None = None
        self._reasoning_index = -1
        self._calls: dict[tuple[int, int], CallSlot] = {}
        self._usage = UsageLedger()
        self._finish: FinishReason | None = None
        self._attempt_parts: list[str] = []
        self._resets = 0
        self._started = False
        self._announced: set[str] = set(known_calls)
        self._held: dict[str, list[ToolOutputEvent | ToolDeniedEvent]] = {}
        self.done = False

    @property
    def message_id(self) -> str:
        return self._message_id

    def usage(self) -> TurnUsage:
        """The run's tokens so far: each turn's usage folded, summed over turns."""
        return self._usage.total()

    # -- the run's edges -----------------------------------------------------------------------

    def start(self, metadata: Any = None) -> list[UIChunk]:
        if self._started:
            raise ProtocolError("UIStreamEncoder.start() was already called")
        self._started = True
        return [UIStart(message_id=self._message_id, message_metadata=metadata)]

    def finish(self, *, finish_reason: UIFinishReason | None = None,
               metadata: dict[str, Any] | None = None) -> list[UIChunk]:
        """End the message: open parts closed, the last step finished, then ``finish`` with the
        finish reason (by default the last turn's) and ``{"usage": ...}`` merged into
        ``metadata`` as the message metadata."""
        out = self._release_all()
        out += self._end_step()
        reason = finish_reason or (None if self._finish is None else _FINISH[self._finish])
        meta = {"usage": usage_metadata(self.usage()), **(metadata or {})}
        out.append(UIFinish(finish_reason=reason, message_metadata=meta))
        self.done = True
        return out

    def abort(self, reason: str | None = None) -> list[UIChunk]:
        """The run was stopped on purpose (the stop endpoint): open parts closed, then ``abort``."""
        out = self._release_all()
        out += self._end_step()
        out.append(UIAbort(reason=reason))
        self.done = True
        return out

    def fail(self, error_text: str) -> list[UIChunk]:
        """The run failed: open parts closed, then ``error`` (``error_text`` is shown to the user:
        the exception's type and message, never a traceback)."""
        out = self._release_all()
        out += self._end_step()
        out.append(UIError(error_text=error_text))
        self.done = True
        return out

    # -- events --------------------------------------------------------------------------------

    def feed(self, event: EncoderInput, *, turn_index: int | None = None) -> list[UIChunk]:
        """The chunks for one event. ``turn_index`` (from :func:`agent_event_input`) opens a new
        step when it moves on; host facts (tool outputs, data, state) may leave it ``None``."""
        if not self._started or self.done:
            raise ProtocolError("UIStreamEncoder.feed() needs start() first and nothing after the "
                                "run's end")
        out: list[UIChunk] = []
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
            self._finish = event.finish_reason
            self._close_parts(out)
        elif isinstance(event, FinishEvent):
            self._finish = event.finish_reason
            if event.usage is not None:
                self._usage.record(turn, event.usage, False)
            self._close_parts(out)
        elif isinstance(event, (ToolOutputEvent, ToolDeniedEvent)):
            if event.tool_call_id in self._announced:
                self._tool_output(event, out)
            else:
                self._held.setdefault(event.tool_call_id, []).append(event)
        elif isinstance(event, TurnResetEvent):
            self._reset(event, out)
        elif isinstance(event, StructuredDataEvent):
            out.append(UIData(type="data-structured", id=f"structured-{turn}",
                              data={"status": event.status, "value": event.data,
                                    "isValid": event.is_valid}))
        elif isinstance(event, DataEvent):
            out.append(UIData(type=f"data-{event.name}", id=event.id, data=event.data,
                              transient=event.transient))
        elif isinstance(event, StateSnapshotEvent):
            out.append(UIData(type="data-state", id="state", data=event.state))
        elif isinstance(event, StateDeltaEvent):
            out.append(UIData(type="data-state-delta", data=list(event.patch), transient=True))
        elif isinstance(event, TurnFailedEvent):
            # A failed turn may be retried (a re-ask, with_retry); the run's own end says whether
            # it failed, so here only the turn's open parts are closed.
            self._close_parts(out)
        # ExtraEvent and an ErrorEvent of a turn carry nothing a UI message shows.
        return out

    # -- internals ------------------------------------------------------------------------------

    def _next_id(self, kind: str) -> str:
        self._counter += 1
        return f"{self._message_id}-{kind}{self._counter}"

    def _open_step(self, turn: int, out: list[UIChunk]) -> None:
        if self._step is not None and self._step == turn:
            return
        out.extend(self._end_step())
        self._step = turn
        self._next_turn = turn + 1
        self._finish = None
        self._attempt_parts = []
        out.append(UIStartStep())

    def _end_step(self) -> list[UIChunk]:
        out: list[UIChunk] = []
        self._close_parts(out)
        if self._step is not None:
            out.append(UIFinishStep())
            self._step = None
        return out

    def _ensure_step(self, out: list[UIChunk]) -> None:
        if self._step is None:
            self._open_step(self._next_turn, out)

    def _close_parts(self, out: list[UIChunk]) -> None:
        if self._text is not None:
            out.append(UITextEnd(id=self._text))
            self._text = None
        if self._reasoning is not None:
            out.append(UIReasoningEnd(id=self._reasoning))
            self._reasoning = None

    def _text_delta(self, text: str, out: list[UIChunk]) -> None:
        self._ensure_step(out)
        if self._reasoning is not None:
            out.append(UIReasoningEnd(id=self._reasoning))
            self._reasoning = None
        if self._text is None:
            self._text = self._next_id("text")
            self._attempt_parts.append(self._text)
            out.append(UITextStart(id=self._text))
        out.append(UITextDelta(id=self._text, delta=text))

    def _reasoning_delta(self, event: ReasoningEvent, out: list[UIChunk]) -> None:
        self._ensure_step(out)
        if self._text is not None:
            out.append(UITextEnd(id=self._text))
            self._text = None
        if self._reasoning is not None and event.index != self._reasoning_index:
            out.append(UIReasoningEnd(id=self._reasoning))
            self._reasoning = None
        if self._reasoning is None:
            if not event.part.text:
                return  # provenance alone (a signature) is nothing to show
            self._reasoning = self._next_id("reasoning")
            self._reasoning_index = event.index
            out.append(UIReasoningStart(id=self._reasoning))
        if event.part.text:
            out.append(UIReasoningDelta(id=self._reasoning, delta=event.part.text))

    def _tool_chunk(self, turn: int, event: ToolCallEvent, out: list[UIChunk]) -> None:
        call = self._calls.setdefault((turn, event.tool_call.index), CallSlot())
        announce = call.take(event.tool_call)
        if call.id in self._announced:
            call.args = []  # a fragment of a call whose input is already complete
            return
        if announce:
            self._ensure_step(out)
            self._close_parts(out)
            out.append(UIToolInputStart(tool_call_id=call.id or "", tool_name=call.name))
        args = call.pending_args()
        if args is not None:
            out.append(UIToolInputDelta(tool_call_id=call.id or "", input_text_delta=args))

    def _tool_done(self, turn: int, event: ToolCallDoneEvent, out: list[UIChunk]) -> None:
        tc = event.tool_call
        if tc.id in self._announced:
            return  # the same call reported twice
        started = any(c.started and c.id == tc.id for (t, _), c in self._calls.items() if t == turn)
        self._ensure_step(out)
        if not started:
            self._close_parts(out)
            out.append(UIToolInputStart(tool_call_id=tc.id, tool_name=tc.name))
        parsed = parse_tool_call_arguments(tc)
        if isinstance(parsed, ParsedArguments):
            out.append(UIToolInputAvailable(tool_call_id=tc.id, tool_name=tc.name,
                                            input=parsed.arguments))
        else:
            detail = getattr(parsed, "detail", None) or f"unsupported call type {parsed}"
            out.append(UIToolInputError(tool_call_id=tc.id, tool_name=tc.name, input=tc.arguments,
                                        error_text=str(detail)))
        self._release(tc.id, out)

    def _release(self, call_id: str, out: list[UIChunk]) -> None:
        self._announced.add(call_id)
        for held in self._held.pop(call_id, ()):
            self._tool_output(held, out)

    def _release_all(self) -> list[UIChunk]:
        """Outputs of calls never announced, sent at the end rather than lost."""
        out: list[UIChunk] = []
        for call_id in list(self._held):
            self._release(call_id, out)
        return out

    def _tool_output(self, event: ToolOutputEvent | ToolDeniedEvent, out: list[UIChunk]) -> None:
        if isinstance(event, ToolDeniedEvent):
            out.append(UIToolOutputDenied(tool_call_id=event.tool_call_id))
            return
        outcome = event.outcome
        if isinstance(outcome, ToolResult):
            out.append(UIToolOutputAvailable(tool_call_id=event.tool_call_id,
                                             output=tool_output_text(outcome.content)))
        elif isinstance(outcome, ToolError):
            out.append(UIToolOutputError(tool_call_id=event.tool_call_id, error_text=outcome.error))
        elif isinstance(outcome, ToolSuspend) and event.approval_id is not None:
            out.append(UIToolApprovalRequest(approval_id=event.approval_id,
                                             tool_call_id=event.tool_call_id))
        elif isinstance(outcome, ToolSuspend) and outcome.mode == "waiting_for_reply":
            # The call stays at input-available: the AI SDK's "the client answers this call"
            # state (addToolResult); the question rides beside it. (resuming_later -- a tool the
            # client runs itself -- needs nothing more: its onToolCall already has the call.)
            out.append(UIData(type="data-bindloop-suspend", id=event.tool_call_id,
                              data={"toolCallId": event.tool_call_id, "mode": outcome.mode,
                                    "detail": outcome.detail}))

    def _reset(self, event: TurnResetEvent, out: list[UIChunk]) -> None:
        if self._text is not None:
            out.append(UITextEnd(id=self._text))
            self._text = None
        self._resets += 1
        # UI messages keep no part ids, so the retracted text is named by position: the text
        # parts of this step that precede this part.
        out.append(UIData(type="data-bindloop-reset", id=f"{self._message_id}-reset{self._resets}",
                          data={"turnId": event.turn_id, "epoch": event.epoch,
                                "reason": event.reason, "retracted": len(self._attempt_parts)}))
        self._attempt_parts = []
