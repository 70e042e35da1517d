"""Incremental Server-Sent Events decoding (WHATWG HTML, "Parsing an event stream").

Bytes in, :class:`SseEvent` values out, in any chunking: a CR, LF or CRLF line end may be split
across two feeds (a CR that ends one feed and the LF that starts the next are one line end), and so
may a multi-byte UTF-8 character (lines are split on bytes first; CR and LF never occur inside a
multi-byte sequence, so decoding whole lines is exact). A leading BOM is dropped once.

Memory is bounded: an unterminated line longer than ``max_line_bytes``, or an event whose ``data``
grows past ``max_event_bytes``, raises :class:`SseLimitError` instead of buffering more.
"""

from __future__ import annotations

import re

import msgspec

from ..errors import UsageError
from ._errors import SseLimitError

__all__ = ("SseDecoder", "SseEvent")

_BOM = b"\xef\xbb\xbf"
_EOL = re.compile(rb"\r\n|\r|\n")


class SseEvent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One dispatched event.

    ``event`` is the type (``"message"`` when the block named none); ``data`` the ``data`` lines
    joined with LF; ``id`` the stream's last event id at dispatch (it persists across events, as the
    spec says); ``retry`` the reconnection time in ms if this event's block set one.
    """

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None


class SseDecoder:
    """Feed bytes with :meth:`feed`, get the events completed so far; call :meth:`end` at EOF.

    Not thread-safe; one decoder per stream. After :class:`SseLimitError` the decoder is unusable
    (the stream cannot be resynchronised safely).
    """

    __slots__ = (
        "_after_cr", "_bom_pending", "_buf", "_data", "_data_size", "_event", "_failed",
        "_last_id", "_max_event", "_max_line", "_retry", "grew", "retry_ms",
    )

    def __init__(self, *, max_line_bytes: int = 4 * 1024 * 1024,
                 max_event_bytes: int = 16 * 1024 * 1024) -> None:
        for name, value in (("max_line_bytes", max_line_bytes), ("max_event_bytes", max_event_bytes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{name} must be a positive int, got {value!r}")
        self._max_line = max_line_bytes
        self._max_event = max_event_bytes
        self._buf = bytearray()
        self._after_cr = False
        self._bom_pending = True
        self._data: list[bytes] | None = None
        self._data_size = 0
        self._event: bytes | None = None
        self._last_id: str | None = None
        self._retry: int | None = None
        self._failed = False
        self.retry_ms: int | None = None
        """The stream's reconnection time: the last valid ``retry`` field seen, else ``None``."""
        self.grew = False
        """Whether the last :meth:`feed` added field bytes to an event it left undispatched: bytes
        of a large event still arriving, which a stall watchdog counts as progress. Comment lines
        (keep-alives) and events dispatched within the same feed never count."""

    @property
    def last_event_id(self) -> str | None:
        return self._last_id

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """Consume ``chunk`` and return the events it completed, in order (and set :attr:`grew`)."""
        if self._failed:
            raise UsageError("this SseDecoder raised SseLimitError and cannot continue")
        self.grew = False
        if not chunk:
            return []
        if self._bom_pending:
            head = bytes(self._buf) + chunk
            if len(head) < 3 and _BOM.startswith(head):
                self._buf = bytearray(head)
                return []
            self._bom_pending = False
            self._buf = bytearray()
            chunk = head[3:] if head.startswith(_BOM) else head
            if not chunk:
                return []
        if (self._data is None and not self._buf and chunk[-2:] == b"\n\n"
                and chunk[:6] == b"data: " and self._event is None and self._retry is None
                and not self._after_cr and chunk.count(10) == 2 and 13 not in chunk):
            # The usual read of a provider streaming token by token: exactly one event of one
            # ``data`` line, nothing pending around it. What the general path below gives for it,
            # without splitting and re-joining the line.
            if len(chunk) - 2 > self._max_line:
                raise self._over("line", self._max_line)
            if len(chunk) - 8 > self._max_event:
                raise self._over("event", self._max_event)
            return [SseEvent(data=chunk[6:-2].decode("utf-8", "replace"), id=self._last_id)]
        if self._after_cr:
            self._after_cr = False
            if chunk[0] == 10:  # the LF of a CRLF split across feeds
                chunk = chunk[1:]
                if not chunk:
                    return []
        # Only the new bytes are searched: the pending line holds no line end (it would have been
        # split off already), so a long line arriving in small chunks costs O(chunk) per feed, and
        # the line is copied out once, when its end arrives.
        has_cr = 13 in chunk
        if not has_cr and 10 not in chunk:
            self._buf += chunk
            if len(self._buf) > self._max_line:
                raise self._over("line", self._max_line)
            self.grew = self._buf[0] != 58  # ':' starts a comment line
            return []
        held = len(self._buf)  # the first line completed here got new bytes if it is longer
        buf = bytes(self._buf) + chunk if self._buf else chunk
        if has_cr:
            lines = _EOL.split(buf)
            self._after_cr = buf[-1] == 13
        else:
            lines = buf.split(b"\n")
        pending = lines.pop()
        if len(pending) > self._max_line:
            raise self._over("line", self._max_line)
        self._buf = bytearray(pending)
        # The lines' fields, inline (this runs once per read of every stream):
        out: list[SseEvent] = []
        data = self._data
        size = self._data_size
        max_event = self._max_event
        max_line = self._max_line
        for line in lines:
            if not line:
                if data is not None:
                    event = self._event
                    out.append(SseEvent(
                        event=event.decode("utf-8", "replace") if event else "message",
                        data=b"\n".join(data).decode("utf-8", "replace"),
                        id=self._last_id, retry=self._retry,
                    ))
                data = None
                size = 0
                self._event = None
                self._retry = None
                continue
            if len(line) > max_line:
                raise self._over("line", max_line)
            if line[0] == 58:  # ':' starts a comment
                continue
            name, sep, value = line.partition(b":")
            if sep and value[:1] == b" ":
                value = value[1:]
            if name == b"data":
                if data is None:
                    data = [value]
                    size = len(value)
                else:
                    data.append(value)
                    size += len(value) + 1
                if size > max_event:
                    raise self._over("event", max_event)
            elif name == b"event":
                self._event = value
            elif name == b"id":
                if b"\x00" not in value:
                    self._last_id = value.decode("utf-8", "replace")
            elif name == b"retry":
                if value and value.isdigit():  # bytes.isdigit is ASCII-only, as the spec wants
                    self._retry = self.retry_ms = int(value)
            # any other field name is ignored, as the spec says
        self._data = data
        self._data_size = size
        # Progress: field bytes from this chunk after the last blank line (an event still open).
        # Scanned from the end, so it usually looks at a line or two.
        if pending and pending[0] != 58:  # ':' starts a comment line
            self.grew = True
        else:
            i = len(lines) - 1
            while i >= 0 and (line := lines[i]):
                if line[0] != 58 and (i or len(line) > held):
                    self.grew = True
                    break
                i -= 1
        return out

    def _over(self, what: str, limit: int) -> SseLimitError:
        """The error for a line or event past its bound; the decoder is unusable after it."""
        self._failed = True
        return SseLimitError(what, limit)

    def end(self) -> bool:
        """Signal EOF. Per the spec an event not terminated by a blank line is discarded; returns
        ``True`` when that happened (a truncated stream), ``False`` on a clean end."""
        discarded = bool(self._buf) or self._data is not None
        self._buf = bytearray()
        self._data = None
        self._data_size = 0
        self._event = None
        return discarded
