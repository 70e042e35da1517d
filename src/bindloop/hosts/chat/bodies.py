"""The bounds on a request body, the same for every binding: a declared ``Content-Length`` over
the bound is refused before anything is read, a body is refused the moment it passes the bound
while it arrives (never read whole first), and one not whole in time is refused. Each binding
reads its own chunks (an ASGI ``receive``, a Worker's ``ReadableStream``) and hands them to a
:class:`BodyBound`; a host reading many bodies on one event loop gives each its deadline by
:func:`staggered_timeout`."""

from __future__ import annotations

__all__ = ("STAGGER", "BodyBound", "BodyRefused", "staggered_timeout")

STAGGER = 0.25
"""The most a body's deadline is shortened by :func:`staggered_timeout`, as a share of it."""

_GOLDEN_64 = 0x9E3779B97F4A7C15  # the golden ratio's fractional part, in 64-bit fixed point

_CODES = {413: "body_too_large", 408: "body_timeout", 400: "disconnected"}


def staggered_timeout(timeout_s: float, n: int) -> float:
    """The body deadline of a host's ``n``-th body read (counted from 0): ``timeout_s`` shortened
    by up to :data:`STAGGER` of it, by a share spread evenly over reads in the order they start
    (the golden-ratio sequence: the deadlines of any ``N`` consecutive reads cut the range from
    ``(1 - STAGGER) * timeout_s`` to ``timeout_s`` into gaps no wider than ``2 / N`` of it; read
    0 gets ``timeout_s`` whole). Bodies that stall together -- a crowd of connections opened at
    once, each sending a few bytes and then nothing -- so time out spread over a quarter of the
    timeout instead of in one instant, whose hundreds of 408s would all queue on the event loop
    ahead of every other client's frames."""
    if not timeout_s > 0 or n < 0:
        raise ValueError("staggered_timeout(timeout_s, n): timeout_s must be > 0 and n >= 0")
    share = (n * _GOLDEN_64 % (1 << 64)) / (1 << 64)  # n times the golden ratio, mod 1, exactly
    return timeout_s * (1 - STAGGER * share)


class BodyRefused(Exception):
    """Why a body was refused: ``status`` 413 (over the bound, declared or streamed), 408 (not
    whole in time) or 400 (the client went away); :attr:`code` is the refusal's JSON ``error``
    and the message what a client may read."""

    def __init__(self, status: int, message: str) -> None:
        if status not in _CODES:
            raise ValueError(f"BodyRefused(status=) must be one of {sorted(_CODES)}, got {status}")
        super().__init__(message)
        self.status = status

    @property
    def code(self) -> str:
        """``body_too_large``, ``body_timeout`` or ``disconnected``."""
        return _CODES[self.status]


class BodyBound:
    """One body read under ``max_bytes`` and ``timeout_s``: :meth:`declared` before the first
    read, :meth:`add` for each chunk, :meth:`timed_out` / :meth:`gone` for the refusal a binding
    raises when its read runs out of time or its client leaves."""

    def __init__(self, *, max_bytes: int, timeout_s: float) -> None:
        if max_bytes < 0 or not timeout_s > 0:
            raise ValueError("BodyBound(max_bytes=, timeout_s=) must be >= 0 and > 0")
        self.max_bytes = max_bytes
        self.timeout_s = timeout_s
        self.size = 0
        self._chunks: list[bytes] = []

    def _too_large(self) -> BodyRefused:
        return BodyRefused(413, f"the request body is over {self.max_bytes} bytes")

    def declared(self, content_length: str | bytes | None) -> None:
        """Refuse (413) a declared length over the bound (a non-numeric one is left to the
        streamed count)."""
        text = content_length.decode("latin-1") if isinstance(content_length, bytes) else (
            content_length)
        if text is not None and text.isdigit() and int(text) > self.max_bytes:
            raise self._too_large()

    def add(self, chunk: bytes) -> None:
        """Keep one more chunk, or refuse (413) the moment the body passes the bound."""
        self.size += len(chunk)
        if self.size > self.max_bytes:
            raise self._too_large()
        self._chunks.append(chunk)

    def body(self) -> bytes:
        """The chunks kept so far, joined."""
        return b"".join(self._chunks)

    def timed_out(self) -> BodyRefused:
        """The refusal (408) of a body not whole within ``timeout_s``."""
        return BodyRefused(408, f"the request body took longer than {self.timeout_s:g} s")

    @staticmethod
    def gone() -> BodyRefused:
        """The refusal (400) of a body whose client went away before it was whole."""
        return BodyRefused(400, "the client went away mid-request")
