"""Server-Sent Events framing for the protocol streams: one ``data:`` frame per event, with the
event log's offset as its ``id:`` so a client can resume with ``Last-Event-ID``."""

from __future__ import annotations

from typing import Final

__all__ = ("SSE_DONE", "parse_last_event_id", "sse_frame")

SSE_DONE: Final = b"data: [DONE]\n\n"
"""The AI SDK UI message stream's end marker."""


def sse_frame(data: bytes, *, event_id: int | None = None) -> bytes:
    """One SSE event carrying ``data`` (UTF-8 JSON: compact JSON has no raw line breaks, and any
    there are split into several ``data:`` lines, which a reader joins back with ``\\n``)."""
    head = b"" if event_id is None else b"id: %d\n" % event_id
    if b"\n" in data or b"\r" in data:
        lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        return head + b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"
    return head + b"data: " + data + b"\n\n"


def parse_last_event_id(value: str | bytes | None) -> int | None:
    """The offset a ``Last-Event-ID`` header names (the last event the client saw), or ``None`` for
    an absent, empty or foreign value -- which a host treats as "replay from the start"."""
    if value is None:
        return None
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    text = text.strip()
    if not text.isascii() or not text.isdigit() or len(text) > 18:
        return None
    return int(text)
