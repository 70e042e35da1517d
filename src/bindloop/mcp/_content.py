"""Mapping a ``tools/call`` result onto bindloop's tool outcomes and content parts."""

from __future__ import annotations

from typing import Any

import msgspec

from ..contracts import ContentPart, FilePart, ImagePart, TextPart, ToolError, ToolResult
from ._protocol import CallToolResult

__all__ = ("map_call_result", "map_content_block")

_JSON = msgspec.json.Encoder(order="sorted")


def map_content_block(block: Any) -> ContentPart:
    """One MCP content block as a content part.

    ``text`` is a :class:`TextPart`; ``image`` an inline :class:`ImagePart`; ``audio`` an inline
    :class:`FilePart` (the transcript has no audio part; the media type says what it is); an
    embedded ``resource`` is a :class:`TextPart` headed by its URI (text) or a :class:`FilePart`
    (blob); a ``resource_link`` a :class:`TextPart` naming the link. A block of another or a broken
    shape becomes a :class:`TextPart` saying so, so nothing the server sent vanishes silently.
    """
    if not isinstance(block, dict):
        return TextPart(text=f"[unreadable MCP content block: {_excerpt(block)}]")
    kind = block.get("type")
    mime = block.get("mimeType") if isinstance(block.get("mimeType"), str) else None
    if kind == "text" and isinstance(block.get("text"), str):
        return TextPart(text=block["text"])
    if kind == "image" and isinstance(block.get("data"), str):
        return ImagePart(data=block["data"], media_type=mime)
    if kind == "audio" and isinstance(block.get("data"), str):
        return FilePart(data=block["data"], media_type=mime, filename="audio")
    if kind == "resource" and isinstance(block.get("resource"), dict):
        res = block["resource"]
        uri = res.get("uri") if isinstance(res.get("uri"), str) else "resource"
        res_mime = res.get("mimeType") if isinstance(res.get("mimeType"), str) else None
        if isinstance(res.get("text"), str):
            return TextPart(text=f"[resource {uri}]\n{res['text']}")
        if isinstance(res.get("blob"), str):
            return FilePart(data=res["blob"], media_type=res_mime,
                            filename=uri.rstrip("/").rsplit("/", 1)[-1] or "resource")
    if kind == "resource_link" and isinstance(block.get("uri"), str):
        name = block.get("name") if isinstance(block.get("name"), str) else block["uri"]
        parts = [f"[resource link {name}: {block['uri']}"]
        if mime:
            parts.append(f" ({mime})")
        if isinstance(block.get("description"), str):
            parts.append(f" - {block['description']}")
        return TextPart(text="".join(parts) + "]")
    return TextPart(text=f"[unsupported MCP content block: {_excerpt(block)}]")


def map_call_result(result: CallToolResult, *, server: str, tool: str) -> ToolResult | ToolError:
    """A ``tools/call`` result as a tool outcome.

    ``isError`` becomes a :class:`ToolError` (kind ``error``) with the blocks' text, so the model
    reads what went wrong and can act on it. Otherwise a :class:`ToolResult`: plain text when the
    result is one text block, else a tuple of parts. ``structuredContent`` is appended as compact
    JSON text when no text block carries the result (servers are asked to serialize it into one;
    the raw value stays on :class:`CallToolResult`); a result with no content at all says so rather
    than giving the model an empty string.
    """
    parts = [map_content_block(block) for block in result.content]
    if result.structured_content is not None and not any(isinstance(p, TextPart) for p in parts):
        parts.append(TextPart(text=_JSON.encode(result.structured_content).decode()))
    if result.is_error:
        text = "\n".join(p.text for p in parts if isinstance(p, TextPart)).strip()
        return ToolError(error=text or f"MCP tool {tool!r} on server {server!r} failed",
                         kind="error")
    if not parts:
        return ToolResult(content=f"(MCP tool {tool!r} returned no content)")
    if len(parts) == 1 and isinstance(parts[0], TextPart):
        return ToolResult(content=parts[0].text)
    return ToolResult(content=tuple(parts))


def _excerpt(value: Any, limit: int = 120) -> str:
    try:
        text = _JSON.encode(value).decode()
    except (TypeError, msgspec.EncodeError):
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
