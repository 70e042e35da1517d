"""JSON and OpenAI-chat-dict conversions for the canonical transcript.

``encode_*`` give stable bytes for equal inputs (field order is the Struct's, defaults are omitted).
``decode_*`` and ``*_from_openai`` validate strictly and raise :class:`TranscriptFormatError` naming
what is wrong; they never return a half-read transcript.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import msgspec

from ..errors import TranscriptFormatError
from ._messages import (
    AssistantMessage,
    Content,
    ContentPart,
    FilePart,
    ImagePart,
    Message,
    ProviderItemPart,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)

__all__ = (
    "decode_message",
    "decode_messages",
    "encode_message",
    "encode_messages",
    "message_from_openai",
    "message_to_openai",
    "messages_from_openai",
    "messages_to_openai",
    "openai_file_data",
    "openai_image_url",
    "openai_tool_call_fields",
    "tool_call_to_openai",
)

_ENCODER = msgspec.json.Encoder()
_MESSAGE_DECODER = msgspec.json.Decoder(Message)
_MESSAGES_DECODER = msgspec.json.Decoder(list[Message])


def encode_message(message: Message) -> bytes:
    """Canonical JSON bytes of one message."""
    return _ENCODER.encode(message)


def encode_messages(messages: Sequence[Message]) -> bytes:
    """Canonical JSON bytes of a transcript (a JSON array)."""
    return _ENCODER.encode(messages)


def decode_message(data: bytes | str) -> Message:
    """Read one message from its canonical JSON. Raises :class:`TranscriptFormatError`."""
    try:
        return _MESSAGE_DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise TranscriptFormatError(f"not a bindloop message: {exc}") from exc


def decode_messages(data: bytes | str) -> list[Message]:
    """Read a transcript from its canonical JSON. Raises :class:`TranscriptFormatError`."""
    try:
        return _MESSAGES_DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise TranscriptFormatError(f"not a bindloop transcript: {exc}") from exc


# ---- OpenAI chat dicts -------------------------------------------------------------------------


def openai_image_url(part: ImagePart) -> str:
    """The one OpenAI-chat rule for an image: its ``url``, else a ``data:`` URL of its inline
    bytes, which must then name their ``media_type`` (the bytes are not sniffed: a guessed type is
    refused by providers that check it, and would not read back as the same part). Raises
    :class:`TranscriptFormatError` for a part with neither, or inline data without a type."""
    if part.url is not None:
        return part.url
    if part.data is None:
        raise TranscriptFormatError("an image part needs a url or inline data")
    if not part.media_type:
        raise TranscriptFormatError(
            "an inline image part (data) needs its media_type, such as 'image/png' or "
            "'image/jpeg'")
    return f"data:{part.media_type};base64,{part.data}"


def openai_file_data(part: FilePart) -> str:
    """A file part's inline bytes as the ``data:`` URL OpenAI's ``file_data`` carries; like an
    image, inline data must name its ``media_type``. Raises :class:`TranscriptFormatError`."""
    if part.data is None:
        raise TranscriptFormatError("this file part has no inline data to send as file_data")
    if not part.media_type:
        raise TranscriptFormatError(
            "an inline file part (data) needs its media_type, such as 'application/pdf'")
    return f"data:{part.media_type};base64,{part.data}"


def tool_call_to_openai(call: ToolCall) -> dict[str, Any]:
    """One tool call in OpenAI chat form (``arguments`` stays the raw JSON text)."""
    return {"id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": call.arguments}}


def openai_tool_call_fields(raw: Mapping[str, Any]) -> tuple[object, object, object, object]:
    """The ``(index, id, name, arguments)`` of an OpenAI-chat tool call or streamed tool-call
    delta, as sent (unvalidated: the caller checks what it needs): ``name`` and ``arguments`` from
    its ``function`` object, or from the call itself when a server sends them flat.

    The one reader of that dict: stored transcripts, streamed deltas and
    ``parse_tool_call_arguments`` all accept exactly this (absent or ``null`` arguments mean none)."""
    function = raw.get("function")
    source: Mapping[str, Any] = function if isinstance(function, Mapping) else raw
    return raw.get("index"), raw.get("id"), source.get("name"), source.get("arguments")


def _part_to_openai(part: ContentPart) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        # Stored dicts must read back as the same part, so a part must say which it is (url or
        # data), and a url part has nowhere to keep a media type.
        if (part.url is None) == (part.data is None):
            raise TranscriptFormatError("an image part needs exactly one of url / data")
        if part.url is not None and part.media_type is not None:
            raise TranscriptFormatError(
                "an image part by url cannot carry media_type in OpenAI chat form")
        image: dict[str, Any] = {"url": openai_image_url(part)}
        if part.detail is not None:
            image["detail"] = part.detail
        return {"type": "image_url", "image_url": image}
    if isinstance(part, FilePart):
        if part.data is None and part.media_type is not None:
            raise TranscriptFormatError(
                "a file part's media_type travels only with inline data in OpenAI chat form")
        file: dict[str, Any] = {}
        if part.file_id is not None:
            file["file_id"] = part.file_id
        if part.data is not None:
            file["file_data"] = openai_file_data(part)
        if part.url is not None:
            file["file_url"] = part.url
        if part.filename is not None:
            file["filename"] = part.filename
        if not file:
            raise TranscriptFormatError("a file part needs a url, inline data or a file_id")
        return {"type": "file", "file": file}
    # Reasoning and provider items have no place in chat-completions dicts; keep them losslessly
    # under our own types ("reasoning", "provider_item") so a host that stores these dicts does not
    # lose a signature or an item (adapters decide what the wire sees).
    if isinstance(part, ProviderItemPart):
        return dict(msgspec.to_builtins(part))
    return {"type": "reasoning", **msgspec.to_builtins(part)}


def _content_to_openai(content: Content) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return [_part_to_openai(p) for p in content]


def message_to_openai(message: Message) -> dict[str, Any]:
    """The OpenAI-chat-shaped dict for a message (what most hosts already store).

    Lossless: :func:`message_from_openai` reads the result back as an equal message. A part that
    could not survive the trip (an image with both or neither of url / data, inline data without
    its media type) raises :class:`TranscriptFormatError` rather than being silently altered.
    """
    # The exact classes first: a missed isinstance() on a Struct class is a call of its
    # metaclass's __instancecheck__, and most messages sent are assistant turns and tool results.
    if type(message) is AssistantMessage or (type(message) is not ToolMessage
                                             and isinstance(message, AssistantMessage)):
        out: dict[str, Any] = {
            "role": "assistant",
            "content": None if message.content is None else _content_to_openai(message.content),
        }
        if message.tool_calls:
            out["tool_calls"] = [tool_call_to_openai(c) for c in message.tool_calls]
        if message.name is not None:
            out["name"] = message.name
        return out
    if type(message) is ToolMessage or isinstance(message, ToolMessage):
        out = {"role": "tool", "tool_call_id": message.tool_call_id,
               "content": _content_to_openai(message.content)}
        if message.name is not None:
            out["name"] = message.name
        if message.is_error:
            out["is_error"] = True
        return out
    if isinstance(message, UserMessage):
        out = {"role": "user", "content": _content_to_openai(message.content)}
        if message.name is not None:
            out["name"] = message.name
        return out
    return {"role": "system", "content": _content_to_openai(message.content)}


def messages_to_openai(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """:func:`message_to_openai` over a transcript."""
    return [message_to_openai(m) for m in messages]


def _fail(where: str, what: str) -> TranscriptFormatError:
    return TranscriptFormatError(f"{where}: {what}")


def _str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise _fail(where, f"expected a string, got {type(value).__name__}")
    return value


def _opt_str(value: object, where: str) -> str | None:
    return None if value is None else _str(value, where)


def _data_url(url: str) -> tuple[str | None, str | None]:
    """Split ``data:<type>;base64,<data>`` into (media_type, data); (None, None) if not a data URL."""
    if not url.startswith("data:") or ";base64," not in url:
        return None, None
    head, data = url[5:].split(";base64,", 1)
    return head or None, data


def _part_from_openai(raw: object, where: str) -> ContentPart:
    if not isinstance(raw, Mapping):
        raise _fail(where, f"a content part must be an object, got {type(raw).__name__}")
    kind = raw.get("type")
    if kind == "text":
        return TextPart(text=_str(raw.get("text"), f"{where}.text"))
    if kind == "image_url":
        image = raw.get("image_url")
        if isinstance(image, str):
            image = {"url": image}
        if not isinstance(image, Mapping):
            raise _fail(f"{where}.image_url", "expected an object with a url")
        url = _str(image.get("url"), f"{where}.image_url.url")
        detail = image.get("detail")
        if detail not in (None, "auto", "low", "high"):
            raise _fail(f"{where}.image_url.detail", f"unknown detail {detail!r}")
        media_type, data = _data_url(url)
        if data is not None:
            return ImagePart(data=data, media_type=media_type, detail=detail)
        return ImagePart(url=url, detail=detail)
    if kind == "file":
        file = raw.get("file")
        if not isinstance(file, Mapping):
            raise _fail(f"{where}.file", "expected an object")
        media_type, data = (None, None)
        file_data = _opt_str(file.get("file_data"), f"{where}.file.file_data")
        if file_data is not None:
            media_type, data = _data_url(file_data)
            if data is None:
                data = file_data
        return FilePart(
            file_id=_opt_str(file.get("file_id"), f"{where}.file.file_id"),
            url=_opt_str(file.get("file_url"), f"{where}.file.file_url"),
            data=data, media_type=media_type,
            filename=_opt_str(file.get("filename"), f"{where}.file.filename"),
        )
    if kind == "reasoning":
        try:
            return msgspec.convert(dict(raw), ReasoningPart)
        except msgspec.ValidationError as exc:
            raise _fail(where, f"bad reasoning part: {exc}") from exc
    if kind == "provider_item":
        try:
            return msgspec.convert(dict(raw), ProviderItemPart)
        except msgspec.ValidationError as exc:
            raise _fail(where, f"bad provider item part: {exc}") from exc
    raise _fail(where, f"unknown content part type {kind!r}")


def _content_from_openai(raw: object, where: str) -> Content:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):
        return tuple(_part_from_openai(p, f"{where}[{i}]") for i, p in enumerate(raw))
    raise _fail(where, f"content must be a string or a list of parts, got {type(raw).__name__}")


def _tool_call_from_openai(raw: object, where: str) -> ToolCall:
    if not isinstance(raw, Mapping):
        raise _fail(where, "a tool call must be an object")
    _, call_id, name, args = openai_tool_call_fields(raw)
    call_id = _str(call_id, f"{where}.id")
    if not call_id:
        raise _fail(f"{where}.id", "empty tool call id")
    if args is None:
        args = "{}"  # absent or null: a call without parameters
    if not isinstance(args, str):
        raise _fail(f"{where}.function.arguments",
                    f"arguments must be the raw JSON string, got {type(args).__name__}")
    return ToolCall(id=call_id, name=_str(name, f"{where}.function.name"), arguments=args)


def message_from_openai(raw: Mapping[str, Any], *, where: str = "message") -> Message:
    """Read one OpenAI-chat-shaped dict. ``developer`` is read as ``system``. Raises
    :class:`TranscriptFormatError` naming the offending field."""
    if not isinstance(raw, Mapping):
        raise _fail(where, f"a message must be an object, got {type(raw).__name__}")
    role = raw.get("role")
    if role in ("system", "developer"):
        return SystemMessage(content=_content_from_openai(raw.get("content"), f"{where}.content"))
    if role == "user":
        return UserMessage(content=_content_from_openai(raw.get("content"), f"{where}.content"),
                           name=_opt_str(raw.get("name"), f"{where}.name"))
    if role == "assistant":
        content_raw = raw.get("content")
        content = (None if content_raw is None
                   else _content_from_openai(content_raw, f"{where}.content"))
        calls_raw = raw.get("tool_calls") or []
        if not isinstance(calls_raw, list):
            raise _fail(f"{where}.tool_calls", "must be a list")
        calls = tuple(_tool_call_from_openai(c, f"{where}.tool_calls[{i}]")
                      for i, c in enumerate(calls_raw))
        return AssistantMessage(content=content, tool_calls=calls,
                                name=_opt_str(raw.get("name"), f"{where}.name"))
    if role == "tool":
        is_error = raw.get("is_error", False)
        if not isinstance(is_error, bool):
            raise _fail(f"{where}.is_error", "must be a boolean")
        return ToolMessage(
            tool_call_id=_str(raw.get("tool_call_id"), f"{where}.tool_call_id"),
            content=_content_from_openai(raw.get("content"), f"{where}.content"),
            name=_opt_str(raw.get("name"), f"{where}.name"),
            is_error=is_error,
        )
    raise _fail(f"{where}.role", f"unknown role {role!r}")


def messages_from_openai(raw: Iterable[Mapping[str, Any]]) -> list[Message]:
    """:func:`message_from_openai` over a transcript; errors name the message index."""
    return [message_from_openai(m, where=f"messages[{i}]") for i, m in enumerate(raw)]
