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

from ..completion import FinishReason
from ..textstream import TurnResetEvent
from ..tools import ParsedArguments, parse_tool_call_arguments
from ..contracts import Content, ToolCall, ToolError, ToolResult, TurnUsage, content_text
from ..errors import ProtocolError
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
    UIResetStep,
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

__all__ = ("UIStreamEncoder", "approval_id", "usage_metadata")

_FINISH: Mapping[FinishReason, UIFinishReason] = MappingProxyType({
    "stop": "stop", "length": "length", "tool_calls": "tool-calls",
    "content_filter": "content-filter", "error": "error", "unknown": "other",
})


def usage_metadata(usage: TurnUsage) -> dict[str, Any]:
    """A run's token counts as the AI SDK's ``LanguageModelUsage`` names them: ``inputTokens``,
    ``outputTokens``, ``totalTokens``, and — each only when the provider reported it — the parts
    of those totals: ``cachedInputTokens`` and ``reasoningTokens`` (the flat names), and
    ``inputTokenDetails`` (``cacheReadTokens``, ``cacheWriteTokens``) / ``outputTokenDetails``
    (``reasoningTokens``), the AI SDK 6 form, which is the only one with cache writes."""
    out: dict[str, Any] = {"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
                           "totalTokens": usage.input_tokens + usage.output_tokens}
    cached, written, reasoning = (usage.cached_input_tokens, usage.cache_write_tokens,
                                  usage.reasoning_tokens)
    if cached:
        out["cachedInputTokens"] = cached
    if reasoning:
        out["reasoningTokens"] = reasoning
    if cached or written:
        out["inputTokenDetails"] = {"cacheReadTokens": cached, "cacheWriteTokens": written}
    if reasoning:
        out["outputTokenDetails"] = {"reasoningTokens": reasoning}
    return out


def approval_id(call_id: str) -> str:
    """The protocols' id of the approval asked for call ``call_id``: ``approval-<call id>`` (the
    client answers it with the call id, which the approval's decision names)."""
    return f"approval-{call_id}"


def tool_output_text(content: Content) -> str:
    """A tool result's content as the UI's ``output``: the text itself, unchanged (a client that
    sends the message back then gives the model the very bytes it read), or the text parts joined."""
    return content if isinstance(content, str) else content_text(content)


class UIStreamEncoder(RunEncoder[UIChunk]):
    """Run events in, UI message stream chunks out (see the module docstring for the call order).

    ``message_id`` is the assistant message the chunks build (continuing a message the client sent
    back -- after a client-side tool result or an approval -- means passing that message's id, and
    its tool call ids as ``known_calls``). A tool output for a call the stream has not announced yet
    (it is reported from a tool while the model's events are still being relayed) is held until
    the call's ``tool-input-available``, since a client refuses an output for an unknown call.
    Steps follow model turns: a ``start-step`` when a turn starts, its ``finish-step`` when the next
    one starts or the run ends, so a turn's tool outputs land in its step. A retracted attempt
    (``TurnResetEvent``) ends its text part and is announced as a ``data-bindloop-reset`` part:
    AI SDK 6 has no retraction of its own, so a client that hides the text parts of the step
    before that part (``data.retracted`` of them) shows only the retry. ``ai_sdk=7`` (the client
    runs AI SDK 7, which a request does not say) sends 7's ``reset-step`` instead: the client
    itself removes the step's parts so far -- everything the failed attempt streamed, since a
    reset comes before the turn's tool outputs -- and a stock ``useChat`` shows only the retry.
    AI SDK 6 refuses that chunk.
    """

    _name = "UIStreamEncoder"

    def __init__(self, message_id: str, *, known_calls: Iterable[str] = (),
                 ai_sdk: int = 6) -> None:
        if not isinstance(message_id, str) or not message_id:
            raise ProtocolError("UIStreamEncoder needs a non-empty message_id")
        if ai_sdk not in (6, 7):
            raise ProtocolError(f"UIStreamEncoder speaks to AI SDK 6 or 7, not {ai_sdk!r}")
        self._ai_sdk = ai_sdk
        super().__init__(message_id, known_calls)
        self._message_id = message_id
        self._attempt_parts = 0
        self._resets = 0

    @property
    def message_id(self) -> str:
        return self._message_id

    # -- the run's edges -----------------------------------------------------------------------

    def start(self, metadata: Any = None) -> list[UIChunk]:
        self._begin()
        return [UIStart(message_id=self._message_id, message_metadata=metadata)]

    def finish(self, *, finish_reason: UIFinishReason | None = None,
               metadata: dict[str, Any] | None = None) -> list[UIChunk]:
        """End the message: open parts closed, the last step finished, then ``finish`` with the
        finish reason (by default the last turn's) and ``{"usage": ...}`` merged into
        ``metadata`` as the message metadata."""
        last = self._turn_finish
        out = self._end()
        reason = finish_reason or (None if last is None else _FINISH[last])
        meta = {"usage": usage_metadata(self.usage()), **(metadata or {})}
        out.append(UIFinish(finish_reason=reason, message_metadata=meta))
        return out

    def abort(self, reason: str | None = None) -> list[UIChunk]:
        """The run was stopped on purpose (the stop endpoint): open parts closed, then ``abort``."""
        out = self._end()
        out.append(UIAbort(reason=reason))
        return out

    def fail(self, error_text: str) -> list[UIChunk]:
        """The run failed: open parts closed, then ``error`` (``error_text`` is shown to the user:
        the exception's type and message, never a traceback)."""
        out = self._end()
        out.append(UIError(error_text=error_text))
        return out

    # -- the wire -------------------------------------------------------------------------------

    def _on_step_start(self, turn: int, out: list[UIChunk]) -> None:
        self._attempt_parts = 0
        out.append(UIStartStep())

    def _on_step_end(self, turn: int, out: list[UIChunk]) -> None:
        out.append(UIFinishStep())

    def _on_text_start(self, out: list[UIChunk]) -> str:
        part_id = self._next_id("text")
        self._attempt_parts += 1
        out.append(UITextStart(id=part_id))
        return part_id

    def _on_text(self, part_id: str, text: str, out: list[UIChunk]) -> None:
        out.append(UITextDelta(id=part_id, delta=text))

    def _on_text_end(self, part_id: str, out: list[UIChunk]) -> None:
        out.append(UITextEnd(id=part_id))

    def _on_reasoning_start(self, part_id: str, out: list[UIChunk]) -> None:
        out.append(UIReasoningStart(id=part_id))

    def _on_reasoning(self, part_id: str, text: str, out: list[UIChunk]) -> None:
        out.append(UIReasoningDelta(id=part_id, delta=text))

    def _on_reasoning_end(self, part_id: str, out: list[UIChunk]) -> None:
        out.append(UIReasoningEnd(id=part_id))

    def _on_call_start(self, call_id: str, name: str, out: list[UIChunk]) -> None:
        out.append(UIToolInputStart(tool_call_id=call_id, tool_name=name))

    def _on_call_args(self, call_id: str, args: str, out: list[UIChunk]) -> None:
        out.append(UIToolInputDelta(tool_call_id=call_id, input_text_delta=args))

    def _on_call_done(self, call: ToolCall, streamed: bool, out: list[UIChunk]) -> None:
        if not streamed:
            out.append(UIToolInputStart(tool_call_id=call.id, tool_name=call.name))
        parsed = parse_tool_call_arguments(call)
        if isinstance(parsed, ParsedArguments):
            out.append(UIToolInputAvailable(tool_call_id=call.id, tool_name=call.name,
                                            input=parsed.arguments))
        else:
            detail = getattr(parsed, "detail", None) or f"unsupported call type {parsed}"
            out.append(UIToolInputError(tool_call_id=call.id, tool_name=call.name,
                                        input=call.arguments, error_text=str(detail)))

    def _on_output(self, event: CallOutput, out: list[UIChunk]) -> None:
        if isinstance(event, ApprovalDecidedEvent):  # a denial (an approved call runs)
            out.append(UIToolOutputDenied(tool_call_id=event.call_id))
            return
        if isinstance(event, ApprovalRequestedEvent):
            out.append(UIToolApprovalRequest(approval_id=approval_id(event.call_id),
                                             tool_call_id=event.call_id,
                                             reason=f"approve {event.tool}?"))
            return
        call_id, outcome = event.call.id, event.outcome
        if isinstance(outcome, ToolResult):
            out.append(UIToolOutputAvailable(tool_call_id=call_id,
                                             output=tool_output_text(outcome.content)))
        elif isinstance(outcome, ToolError):
            out.append(UIToolOutputError(tool_call_id=call_id, error_text=outcome.error))
        elif outcome is not None and outcome.mode == "waiting_for_reply":
            # The call stays at input-available: the AI SDK's "the client answers this call"
            # state (addToolResult); the question rides beside it. (resuming_later -- a tool the
            # client runs itself -- needs nothing more: its onToolCall already has the call.)
            out.append(UIData(type="data-bindloop-suspend", id=call_id,
                              data={"toolCallId": call_id, "mode": outcome.mode,
                                    "detail": outcome.detail}))

    def _on_call_abandoned(self, call_id: str, name: str, out: list[UIChunk]) -> None:
        out.append(UIToolInputError(tool_call_id=call_id, tool_name=name, input=None,
                                    error_text="the attempt streaming this call failed; another "
                                               "took the turn over"))

    def _on_reset(self, event: TurnResetEvent, out: list[UIChunk]) -> None:
        self._close_text(out)
        if self._ai_sdk >= 7:
            # Inside a step of this response: 7 removes the parts after the last step-start,
            # which without one would be an earlier step of a continued message.
            self._ensure_step(out)
            out.append(UIResetStep())
            self._attempt_parts = 0
            return
        self._resets += 1
        # UI messages keep no part ids, so the retracted text is named by position: the text
        # parts of this step that precede this part.
        out.append(UIData(type="data-bindloop-reset", id=f"{self._message_id}-reset{self._resets}",
                          data={"turnId": event.turn_id, "epoch": event.epoch,
                                "reason": event.reason, "retracted": self._attempt_parts}))
        self._attempt_parts = 0

    def _on_other(self, turn: int, event: EncoderInput, out: list[UIChunk]) -> None:
        if isinstance(event, StructuredDataEvent):
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
