"""The chunks of the Vercel AI SDK UI message stream, v1, as frozen Structs whose JSON is the wire's
(camelCase fields, ``type`` as the tag, absent optionals left out)."""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

import msgspec

__all__ = (
    "UI_STREAM_HEADERS",
    "UIChunk",
    "UIFinishReason",
    "encode_ui_chunk",
    "ui_chunk_types",
)

UI_STREAM_HEADERS: Final[tuple[tuple[str, str], ...]] = (
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("connection", "keep-alive"),
    ("x-vercel-ai-ui-message-stream", "v1"),
    ("x-accel-buffering", "no"),
)
"""The response headers the AI SDK's own server helpers send with a UI message stream."""

UIFinishReason: TypeAlias = Literal["stop", "length", "content-filter", "tool-calls", "error",
                                    "other"]


class _Chunk(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", rename="camel",
             omit_defaults=True):
    pass


class UIStart(_Chunk, frozen=True, tag="start"):
    message_id: str | None = None
    message_metadata: Any = None


class UIStartStep(_Chunk, frozen=True, tag="start-step"):
    pass


class UIFinishStep(_Chunk, frozen=True, tag="finish-step"):
    pass


class UIFinish(_Chunk, frozen=True, tag="finish"):
    finish_reason: UIFinishReason | None = None
    message_metadata: Any = None


class UIResetStep(_Chunk, frozen=True, tag="reset-step"):
    """AI SDK 7 only: the client removes every part of the current step (6 refuses the chunk)."""


class UIAbort(_Chunk, frozen=True, tag="abort"):
    reason: str | None = None


class UIError(_Chunk, frozen=True, tag="error"):
    error_text: str


class UITextStart(_Chunk, frozen=True, tag="text-start"):
    id: str


class UITextDelta(_Chunk, frozen=True, tag="text-delta"):
    id: str
    delta: str


class UITextEnd(_Chunk, frozen=True, tag="text-end"):
    id: str


class UIReasoningStart(_Chunk, frozen=True, tag="reasoning-start"):
    id: str


class UIReasoningDelta(_Chunk, frozen=True, tag="reasoning-delta"):
    id: str
    delta: str


class UIReasoningEnd(_Chunk, frozen=True, tag="reasoning-end"):
    id: str


class UIToolInputStart(_Chunk, frozen=True, tag="tool-input-start"):
    tool_call_id: str
    tool_name: str


class UIToolInputDelta(_Chunk, frozen=True, tag="tool-input-delta"):
    tool_call_id: str
    input_text_delta: str


class UIToolInputAvailable(_Chunk, frozen=True, tag="tool-input-available"):
    tool_call_id: str
    tool_name: str
    input: Any


class UIToolInputError(_Chunk, frozen=True, tag="tool-input-error"):
    tool_call_id: str
    tool_name: str
    input: Any
    error_text: str


class UIToolOutputAvailable(_Chunk, frozen=True, tag="tool-output-available"):
    tool_call_id: str
    output: Any


class UIToolOutputError(_Chunk, frozen=True, tag="tool-output-error"):
    tool_call_id: str
    error_text: str


class UIToolOutputDenied(_Chunk, frozen=True, tag="tool-output-denied"):
    tool_call_id: str


class UIToolApprovalRequest(_Chunk, frozen=True, tag="tool-approval-request"):
    """``reason`` is why the call waits for the user: AI SDK 7 shows it as the part's
    ``approval.requestReason``; AI SDK 6 reads the chunk loosely and ignores it."""

    approval_id: str
    tool_call_id: str
    reason: str | None = None


class UIMessageMetadata(_Chunk, frozen=True, tag="message-metadata"):
    message_metadata: Any


class UIData(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A ``data-<name>`` part: the one chunk whose ``type`` is open, so it is a plain field."""

    type: str
    data: Any
    id: str | None = None
    transient: bool = False


UIChunk: TypeAlias = (
    UIStart | UIStartStep | UIFinishStep | UIResetStep | UIFinish | UIAbort | UIError | UITextStart
    | UITextDelta | UITextEnd | UIReasoningStart | UIReasoningDelta | UIReasoningEnd | UIToolInputStart
    | UIToolInputDelta | UIToolInputAvailable | UIToolInputError | UIToolOutputAvailable
    | UIToolOutputError | UIToolOutputDenied | UIToolApprovalRequest | UIMessageMetadata | UIData
)

_ENCODER: Final = msgspec.json.Encoder()


def encode_ui_chunk(chunk: UIChunk) -> bytes:
    """The chunk's wire JSON (compact; the same bytes on every runtime)."""
    return _ENCODER.encode(chunk)


def ui_chunk_types(ai_sdk: int = 6) -> tuple[str, ...]:
    """Every fixed ``type`` the encoder can emit (``data-*`` aside) for a client of that AI SDK
    major (see ``UIStreamEncoder(ai_sdk=)``), for tests and docs."""
    tagged: tuple[type[Any], ...] = (
        UIStart, UIStartStep, UIFinishStep, UIFinish, UIAbort, UIError, UITextStart,
        UITextDelta, UITextEnd, UIReasoningStart, UIReasoningDelta, UIReasoningEnd,
        UIToolInputStart, UIToolInputDelta, UIToolInputAvailable, UIToolInputError,
        UIToolOutputAvailable, UIToolOutputError, UIToolOutputDenied, UIToolApprovalRequest,
        UIMessageMetadata)
    if ai_sdk >= 7:
        tagged += (UIResetStep,)
    return tuple(str(t.__struct_config__.tag) for t in tagged)
