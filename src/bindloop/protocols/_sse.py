"""Server-Sent Events framing for the protocol streams: one ``data:`` frame per event, with an
``id:`` naming the event (``<run>:<offset>`` on the chat hosts) so a client can resume with
``Last-Event-ID``."""

from __future__ import annotations

import re
from typing import Final

__all__ = ("RUN_ID_PATTERN", "SSE_DONE", "parse_last_event_id", "parse_run_event_id", "sse_frame")

RUN_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9._~-]{1,128}")
"""What a run id in an event id may be: it travels in an SSE ``id:`` line and a header."""

SSE_DONE: Final = b"data: [DONE]\n\n"
"""The AI SDK UI message stream's end marker."""


def sse_frame(data: bytes, *, event_id: int | str | None = None) -> bytes:
    """One SSE event carrying ``data`` (UTF-8 JSON: compact JSON has no raw line breaks, and any
    there are split into several ``data:`` lines, which a reader joins back with ``\\n``).
    A ``str`` ``event_id`` must be printable ASCII (``ValueError`` otherwise: it is a line)."""
    if event_id is None:
        head = b""
    elif isinstance(event_id, int):
        head = b"id: %d\n" % event_id
    else:
        if not (event_id.isascii() and event_id.isprintable()):
            raise ValueError(f"an SSE event id must be printable ASCII, got {event_id!r}")
        head = b"id: " + event_id.encode("ascii") + b"\n"
    if b"\n" in data or b"\r" in data:
        lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        return head + b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"
    return b"".join((head, b"data: ", data, b"\n\n"))  # one copy of a long payload


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


def parse_run_event_id(value: str | bytes | None) -> tuple[str, int] | None:
    """``(run, offset)`` from a ``Last-Event-ID`` of the form ``<run>:<offset>`` (the run id as
    :data:`RUN_ID_PATTERN` allows), or ``None`` for anything else -- absent, empty, a bare offset or
    foreign -- which a host treats as naming no event."""
    if value is None:
        return None
    text = (value.decode("latin-1") if isinstance(value, bytes) else value).strip()
    run, sep, offset = text.rpartition(":")
    if not sep or not RUN_ID_PATTERN.fullmatch(run) or not offset.isascii() \
            or not offset.isdigit() or len(offset) > 18:
        return None
    return run, int(offset)
