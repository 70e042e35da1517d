"""Anthropic Messages requests: the canonical transcript as ``messages`` blocks (tool results
first in their user turn, thinking echoed with its signature, the wire's own opaque items sent
back), ``tool_choice``, and the prompt-cache breakpoints of a :class:`CachePolicy`."""

from __future__ import annotations

import base64
import binascii
from typing import Any

import msgspec

from ..contracts import (
    AssistantMessage,
    ContentPart,
    FilePart,
    ImagePart,
    Message,
    ProviderItemPart,
    ReasoningPart,
    TextPart,
    ToolMessage,
    UserMessage,
)
from ._common import decode_arguments, inline_media_type, parts_of
from ._errors import WireRequestError
from ._names import plain_id
from ._types import CachePolicy, ForcedTool, WireOptions

__all__ = ("cache_breakpoints", "cache_mark", "marked", "message_blocks", "results_first",
           "tool_choice")

_ENCODE = msgspec.json.Encoder().encode


def cache_breakpoints(policy: CachePolicy, system: list[dict[str, Any]],
                       tools: list[dict[str, Any]], turns: list[dict[str, Any]]) -> None:
    """Mark the policy's ``cache_control`` breakpoints in place: the last system block, the last
    tool, and the last block of each of the ``policy.turns`` most recent user turns (user blocks
    all accept a mark; thinking blocks, which do not, sit only in assistant turns). At most
    :data:`ANTHROPIC_CACHE_BREAKPOINTS` in all, which the policy checked when it was built; the
    same input always gets the same marks, so equal requests have equal bytes."""
    mark: dict[str, Any] = {"type": "ephemeral"}
    if policy.ttl is not None:
        mark["ttl"] = policy.ttl
    if policy.system and system:
        system[-1] = {**system[-1], "cache_control": mark}
    if policy.tools and tools:
        tools[-1] = {**tools[-1], "cache_control": mark}
    left = policy.turns
    for turn in reversed(turns):
        if left == 0:
            break
        blocks = turn["content"]
        if turn["role"] != "user" or not blocks or not isinstance(blocks[-1], dict):
            continue
        blocks[-1] = {**blocks[-1], "cache_control": mark}
        left -= 1


def cache_mark(policy: CachePolicy) -> bytes:
    """The encoded ``cache_control`` value of ``policy``'s breakpoints."""
    mark: dict[str, Any] = {"type": "ephemeral"}
    if policy.ttl is not None:
        mark["ttl"] = policy.ttl
    return _ENCODE(mark)


def marked(block: bytes, mark: bytes) -> bytes:
    """An encoded block of this module's making (which never holds the key) with
    ``cache_control`` last: the bytes ``{**block, "cache_control": mark}`` encodes to."""
    return block[:-1] + b',"cache_control":' + mark + b"}"


def tool_choice(options: WireOptions) -> dict[str, Any] | None:
    choice = options.tool_choice
    out: dict[str, Any]
    if choice is None:
        if options.parallel_tool_calls is False:
            return {"type": "auto", "disable_parallel_tool_use": True}
        return None
    if isinstance(choice, ForcedTool):
        out = {"type": "tool", "name": choice.name}
    elif choice == "required":
        out = {"type": "any"}
    else:
        out = {"type": choice}
    if options.parallel_tool_calls is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True
    return out


def results_first(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A merged user turn with its ``tool_result`` blocks moved to the front, each group in its
    own order: the API refuses a turn where text or an image precedes a tool result (user text
    sent between a ``tool_use`` and its result lands in the same turn)."""
    results = [b for b in blocks if b["type"] == "tool_result"]
    if not results or len(results) == len(blocks):
        return blocks
    return results + [b for b in blocks if b["type"] != "tool_result"]


def _tool_input(arguments: str) -> object:
    value = decode_arguments(arguments)
    # The wire needs an object; keep what the model actually sent visible rather than dropping it.
    return value if value is not None else {"_raw_arguments": arguments}


def _blank(p: ContentPart) -> bool:
    """A text part the API refuses as a block ("text content blocks must contain non-whitespace
    text"): empty or whitespace only. Such parts are left out of every turn."""
    return isinstance(p, TextPart) and not p.text.strip()


def message_blocks(m: Message, *, compaction: bool = True) -> tuple[str, list[dict[str, Any]]]:
    """The message's role and blocks. Empty and whitespace-only text is left out everywhere (the
    API refuses it, and so a ``cache_control`` mark can never land on it); a message left with
    no blocks is left out by the caller. ``compaction`` says whether the request may carry a
    ``compaction`` block (only with a compaction beta); without it such a block is left out,
    as another wire's item is, and the history before it is sent whole."""
    # The exact classes are tried before isinstance(): on a Struct class a miss is a call of the
    # metaclass's __instancecheck__ (about 70 ns, a hit 14), and a tool result or an assistant
    # turn, most of what a request converts, then meets none.
    exact = type(m)
    if exact is not ToolMessage and exact is not AssistantMessage and isinstance(m, UserMessage):
        if isinstance(m.content, str):  # parts_of's one TextPart, without building it
            return "user", [{"type": "text", "text": m.content}] if m.content.strip() else []
        return "user", [_content_block(p) for p in parts_of(m.content)
                        if not isinstance(p, ReasoningPart) and not _blank(p)]
    if type(m) is AssistantMessage or (exact is not ToolMessage
                                       and isinstance(m, AssistantMessage)):
        text = m.content if isinstance(m.content, str) else None  # one TextPart, not built
        blocks: list[dict[str, Any]] = [{"type": "text", "text": text}] \
            if text is not None and text.strip() else []
        for p in parts_of(m.content) if text is None else ():
            if isinstance(p, ReasoningPart):
                if p.redacted:
                    blocks.append({"type": "redacted_thinking", "data": p.data or ""})
                else:
                    blocks.append({"type": "thinking", "thinking": p.text,
                                   "signature": p.signature or ""})
            elif isinstance(p, TextPart):
                if not _blank(p):  # the API refuses empty and whitespace-only text blocks
                    blocks.append({"type": "text", "text": p.text})
            elif isinstance(p, ProviderItemPart):
                # Another wire's item means nothing here; a compaction block means nothing to an
                # endpoint without the compaction beta (the stable Messages API refuses it).
                if p.wire == "anthropic" and (compaction or p.kind != "compaction"):
                    blocks.append(_opaque_block(p))
            else:
                raise WireRequestError(
                    f"an assistant message carries only text here, got {type(p).__name__}")
        for call in m.tool_calls:
            # The API takes ids of ^[a-zA-Z0-9_-]+$ only; another provider's id is sent under
            # a deterministic plain one, the same for its result.
            blocks.append({"type": "tool_use", "id": plain_id(call.id), "name": call.name,
                           "input": _tool_input(call.arguments)})
        return "assistant", blocks
    if type(m) is ToolMessage or isinstance(m, ToolMessage):
        raw = m.content
        if type(raw) is str:  # the common result: its text, without the parts walk below
            result: dict[str, Any] = {"type": "tool_result",
                                      "tool_use_id": plain_id(m.tool_call_id)}
            if raw and not raw.isspace():  # raw.strip() without the copy
                result["content"] = raw
            if m.is_error:
                result["is_error"] = True
            return "user", [result]
        content: str | list[dict[str, Any]]
        parts = parts_of(m.content) if not isinstance(m.content, str) else ()
        if isinstance(m.content, str):
            content = m.content
        elif all(isinstance(p, TextPart) for p in parts):
            content = "".join(p.text for p in parts if isinstance(p, TextPart))
        else:
            content = [_content_block(p) for p in parts
                       if not isinstance(p, ReasoningPart) and not _blank(p)]
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": plain_id(m.tool_call_id)}
        if content if isinstance(content, list) else content.strip():
            # An empty or whitespace-only result is sent without content (the field is
            # optional; "" is an empty text block to the API).
            block["content"] = content
        if m.is_error:
            block["is_error"] = True
        return "user", [block]
    raise WireRequestError(f"not a message: {type(m).__name__}")


def _opaque_block(part: ProviderItemPart) -> dict[str, Any]:
    value = decode_arguments(part.data)  # the one JSON-object reader of the wires
    if not value:
        raise WireRequestError(f"a provider item part ({part.kind!r}) does not hold one JSON "
                               "object, so it cannot be sent back")
    return value


# The media types each inline source takes (the Messages API reference: Base64ImageSource,
# Base64PDFSource, PlainTextSource).
IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
PDF = "application/pdf"
PLAIN_TEXT = "text/plain"


def _source(p: ImagePart | FilePart, missing: str) -> dict[str, Any]:
    """An image's or a document's ``source``: inline bytes first, else the URL."""
    if p.data is not None:
        return {"type": "base64", "media_type": inline_media_type(p), "data": p.data}
    if p.url is not None:
        return {"type": "url", "url": p.url}
    raise WireRequestError(missing)


def _image(p: ImagePart | FilePart, missing: str) -> dict[str, Any]:
    source = _source(p, missing)
    if source["type"] == "base64" and source["media_type"] not in IMAGE_TYPES:
        raise WireRequestError(
            f"an inline {type(p).__name__} of media_type {source['media_type']!r} cannot be an "
            f"Anthropic image block (media_type must be one of {', '.join(IMAGE_TYPES)})")
    return {"type": "image", "source": source}


def _document(p: FilePart) -> dict[str, Any]:
    """A file as the block its media type allows: a PDF (or a file by id or URL) as a
    ``document``, plain text as a ``document`` with a ``text`` source, an image as an ``image``
    block. Any other inline type has no block: :class:`WireRequestError`."""
    media = inline_media_type(p) if p.file_id is None and p.data is not None else p.media_type
    if p.file_id is None and media in IMAGE_TYPES:
        return _image(p, "a file part needs a file_id, inline data or a url")
    doc: dict[str, Any]
    if p.file_id is not None:
        doc = {"type": "file", "file_id": p.file_id}
    elif p.data is not None and media == PLAIN_TEXT:
        doc = {"type": "text", "media_type": PLAIN_TEXT, "data": _plain_text(p.data)}
    elif media is not None and media != PDF:
        raise WireRequestError(
            f"a FilePart of media_type {media!r} has no Anthropic block: a base64 "
            f"document takes only {PDF}, a text document {PLAIN_TEXT}, an image block "
            f"{', '.join(IMAGE_TYPES)} (convert the file, or upload it and pass its file_id)")
    else:
        doc = _source(p, "a file part needs a file_id, inline data or a url")
    out: dict[str, Any] = {"type": "document", "source": doc}
    if p.filename:
        out["title"] = p.filename
    return out


def _plain_text(data: str) -> str:
    try:
        return base64.b64decode(data, validate=True).decode()
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        raise WireRequestError("an inline text/plain FilePart's data is not base64 of UTF-8 "
                               "text") from None


def _content_block(p: ContentPart) -> dict[str, Any]:
    if isinstance(p, TextPart):
        return {"type": "text", "text": p.text}
    if isinstance(p, ImagePart):
        return _image(p, "an image part needs a url or inline data")
    if isinstance(p, FilePart):
        return _document(p)
    raise WireRequestError(f"cannot send a {type(p).__name__} in a user turn")
