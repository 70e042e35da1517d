"""Mapping a ``tools/call`` result onto bindloop's tool outcomes and content parts."""

from __future__ import annotations

from typing import Any

import msgspec

from ..contracts import (
    Content,
    ContentPart,
    FilePart,
    ImagePart,
    TextPart,
    ToolError,
    ToolOutcome,
    ToolResult,
)
from ._protocol import CallToolResult

__all__ = ("call_result_of", "content_blocks", "map_call_result", "map_content_block")

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


def content_blocks(content: Content) -> list[dict[str, Any]]:
    """A tool result's content as MCP content blocks (the server side; the inverse of
    :func:`map_content_block` where one exists).

    Text is a ``text`` block; an inline image an ``image`` block; an inline file an embedded
    ``resource`` with its ``blob`` (an inline ``audio/*`` file an ``audio`` block); an image or file
    by URL a ``resource_link``; a file known only by a provider's ``file_id`` a ``text`` block
    naming it. Reasoning and provider items never leave through MCP (they are the model's own, with
    provider signatures); an empty result is one empty ``text`` block."""
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    blocks: list[dict[str, Any]] = []
    for part in content:
        if isinstance(part, TextPart):
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            if part.data is not None:
                blocks.append({"type": "image", "data": part.data,
                               "mimeType": part.media_type or "application/octet-stream"})
            elif part.url is not None:
                blocks.append({"type": "resource_link", "uri": part.url, "name": "image",
                               **({"mimeType": part.media_type} if part.media_type else {})})
        elif isinstance(part, FilePart):
            mime = part.media_type or "application/octet-stream"
            name = part.filename or "file"
            if part.data is not None:
                if mime.startswith("audio/"):
                    blocks.append({"type": "audio", "data": part.data, "mimeType": mime})
                else:
                    blocks.append({"type": "resource", "resource": {
                        "uri": f"bindloop://file/{name}", "mimeType": mime, "blob": part.data}})
            elif part.url is not None:
                blocks.append({"type": "resource_link", "uri": part.url, "name": name,
                               "mimeType": mime})
            elif part.file_id is not None:
                blocks.append({"type": "text", "text": f"[file {name}: {part.file_id}]"})
    return blocks or [{"type": "text", "text": ""}]


def call_result_of(outcome: ToolOutcome, tool: str) -> CallToolResult:
    """What an MCP client reads for a tool's outcome (the server side): a result's content; a
    :class:`ToolError`'s message — the one the model would read — as one text block with
    ``isError``; a :class:`~bindloop.contracts.ToolSuspend` as an error saying the call paused,
    since a 2025-11-25 client has no way to resume it."""
    if isinstance(outcome, ToolResult):
        return CallToolResult(content=content_blocks(outcome.content))
    if isinstance(outcome, ToolError):
        return CallToolResult(content=[{"type": "text", "text": outcome.error}], is_error=True)
    return CallToolResult(content=[{"type": "text", "text": (
        f"the tool {tool!r} paused ({outcome.mode}) and cannot be resumed over MCP")}],
        is_error=True)
