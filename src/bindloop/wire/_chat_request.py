"""The OpenAI Chat Completions request form of the canonical transcript.

What the request carries differs from the stored OpenAI-chat form (``message_to_openai`` in
:mod:`bindloop.contracts`) only where the API does: system, assistant and tool content is text (the
request has no field for reasoning, so reasoning parts are left out); an assistant turn that only
called tools sends ``content: null``; a tool message has no name or ``is_error``; a file goes by
``file_id`` or by inline data, not both. Text, image and tool-call encoding is the stored form's.
``request_text`` and ``request_file_data`` are also every other wire's rule for text-only content
and inline files.
"""

from __future__ import annotations

from typing import Any

from ..contracts import (
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
    ToolMessage,
    UserMessage,
    openai_file_data,
    openai_image_url,
    tool_call_to_openai,
)
from ..errors import TranscriptFormatError

__all__ = ("message_to_openai_request", "request_file_data", "request_text")


def request_text(content: Content | None, where: str) -> str:
    """The text of content a request may carry only as text (every wire's system and tool content,
    OpenAI chat's assistant content); reasoning parts and provider items are skipped, any other part raises
    :class:`TranscriptFormatError` naming ``where``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    out = []
    for p in content:
        if isinstance(p, TextPart):
            out.append(p.text)
        elif not isinstance(p, (ReasoningPart, ProviderItemPart)):
            raise TranscriptFormatError(
                f"{where} carries only text on this wire, got a {type(p).__name__}")
    return "".join(out)


def request_file_data(part: FilePart) -> str:
    """:func:`openai_file_data` for a request, where a ``file_id`` is the alternative to inline
    bytes (the error says so)."""
    try:
        return openai_file_data(part)
    except TranscriptFormatError as exc:
        raise TranscriptFormatError(f"{exc} (or pass a file_id)") from None


def _request_part(part: ContentPart) -> dict[str, Any] | None:
    if isinstance(part, TextPart):
        return {"type": "text", "text": part.text}
    if isinstance(part, ImagePart):
        image: dict[str, Any] = {"url": openai_image_url(part)}
        if part.detail:
            image["detail"] = part.detail
        return {"type": "image_url", "image_url": image}
    if isinstance(part, FilePart):
        file: dict[str, Any] = {}
        if part.file_id is not None:
            file["file_id"] = part.file_id
        else:
            file["file_data"] = request_file_data(part)
            if part.filename:
                file["filename"] = part.filename
        return {"type": "file", "file": file}
    return None  # reasoning: no place for it in a request


def message_to_openai_request(message: Message) -> dict[str, Any]:
    """The message as a Chat Completions request sends it (see the module docstring for how that
    differs from ``message_to_openai``). Raises :class:`TranscriptFormatError` for content the
    request cannot carry: a non-text part where only text goes, an image or file with nothing to
    send, inline bytes without their ``media_type``."""
    if isinstance(message, UserMessage):
        content: str | list[dict[str, Any]]
        if isinstance(message.content, str):
            content = message.content
        else:
            content = [d for d in map(_request_part, message.content) if d is not None]
        out: dict[str, Any] = {"role": "user", "content": content}
        if message.name:
            out["name"] = message.name
        return out
    if isinstance(message, AssistantMessage):
        text = request_text(message.content, "an assistant message")
        out = {"role": "assistant", "content": text if text or not message.tool_calls else None}
        if message.tool_calls:
            out["tool_calls"] = [tool_call_to_openai(c) for c in message.tool_calls]
        if message.name:
            out["name"] = message.name
        return out
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id,
                "content": request_text(message.content, "a tool result")}
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": request_text(message.content, "a system message")}
    raise TranscriptFormatError(f"not a message: {type(message).__name__}")
