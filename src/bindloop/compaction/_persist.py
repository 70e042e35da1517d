"""Large tool outputs: decide to persist, and the byte-stable stub the model sees instead.

The stub is re-sent on every later turn, so every byte of it must follow from its inputs alone (no
timestamp, no random id): anything else busts the provider's prompt cache each turn. Writing the blob
is the host's business, through an injected port.
"""

from __future__ import annotations

from .._awaitable import isawaitable
from collections.abc import Awaitable, Callable
from typing import Final

import msgspec

from ..contracts import Content, TextPart, ToolMessage
from ._text import utf8_byte_length, utf8_prefix

__all__ = (
    "DEFAULT_PERSIST_THRESHOLD_BYTES",
    "PERSISTED_OUTPUT_PREFIX",
    "PREVIEW_SIZE_BYTES",
    "PersistPlan",
    "build_persisted_stub",
    "decide_persist_tool_output",
    "persist_tool_output",
)

PERSISTED_OUTPUT_PREFIX: Final = "<persisted-output "
"""Every stub starts with exactly this, so later passes can recognise a stub (and keep its path)."""

PREVIEW_SIZE_BYTES: Final = 2048
"""Head bytes shown inline: enough to tell error output from data from logs."""

DEFAULT_PERSIST_THRESHOLD_BYTES: Final = 32 * 1024


def _attr(value: str) -> str:
    return (value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
            .replace(">", "&gt;").replace("\n", "&#10;").replace("\r", "&#13;"))


def build_persisted_stub(text: str, path: str) -> str:
    """The text that replaces a persisted output: an XML-ish wrapper (models parse it as structure)
    with the byte count and the path as attributes (the model can decide to read the file without
    scanning the preview) and the head of the output, at most :data:`PREVIEW_SIZE_BYTES` bytes cut on
    a character boundary. The head, not the tail: most "what is this?" decisions are made from the
    head, and the full path is there for the rest. Byte-identical for equal inputs on every runtime.
    """
    size = utf8_byte_length(text)
    preview = utf8_prefix(text, PREVIEW_SIZE_BYTES)
    shown = utf8_byte_length(preview)
    note = (f"Output is {size} bytes, too large to include; it was saved to the path above. "
            f"Read that file for the full content. First {shown} bytes:")
    return (f'{PERSISTED_OUTPUT_PREFIX}bytes="{size}" path="{_attr(path)}">\n'
            f"{note}\n{preview}\n</persisted-output>")


class PersistPlan(msgspec.Struct, frozen=True, kw_only=True):
    """Write ``text`` to ``path``, then send ``message`` (the stub) in place of the original."""

    path: str
    text: str
    byte_count: int
    message: ToolMessage


def _flat_text(content: Content) -> str | None:
    if isinstance(content, str):
        return content
    if all(isinstance(p, TextPart) for p in content):
        return "".join(p.text for p in content if isinstance(p, TextPart))
    return None


def decide_persist_tool_output(message: ToolMessage, *, path: str,
                               threshold_bytes: int = DEFAULT_PERSIST_THRESHOLD_BYTES
                               ) -> PersistPlan | None:
    """Plan to persist a tool result larger than ``threshold_bytes``, or ``None`` to leave it alone.

    Text-only results (a string or text parts, flattened) qualify; a result with images or files is
    left alone (the media are the point of the call and do not fit a text blob); a result that is
    already a stub is left alone, so this is idempotent. Pure: the write is the host's.
    """
    text = _flat_text(message.content)
    if text is None or text.startswith(PERSISTED_OUTPUT_PREFIX):
        return None
    size = utf8_byte_length(text)
    if size <= threshold_bytes:
        return None
    stub = build_persisted_stub(text, path)
    return PersistPlan(path=path, text=text, byte_count=size,
                       message=msgspec.structs.replace(message, content=stub))


async def persist_tool_output(
    message: ToolMessage, *, path: str,
    write: Callable[[str, str], Awaitable[None] | None],
    threshold_bytes: int = DEFAULT_PERSIST_THRESHOLD_BYTES,
    on_write_error: Callable[[BaseException], None] | None = None,
) -> ToolMessage:
    """Decide, write through the host's ``write(path, text)`` port, and return the message to send.

    A failed write never loses the result: the original message is returned (and ``on_write_error``
    told), so the model sees the full output instead of a stub pointing at nothing.
    """
    plan = decide_persist_tool_output(message, path=path, threshold_bytes=threshold_bytes)
    if plan is None:
        return message
    try:
        pending = write(plan.path, plan.text)
        if isawaitable(pending):
            await pending
    except Exception as exc:
        if on_write_error is not None:
            on_write_error(exc)
        return message
    return plan.message
