"""A coalesced heartbeat: bump a run's progress row at most once per window, never out of order.

Every step of a run wants to say "still alive"; writing each time stampedes the database. A beat inside
the window since the last flush *started* is coalesced (dropped: a heartbeat carries no payload, so the
next flush says the same thing). ``force`` always flushes and returns after the write. Flushes are
serialized by a lock, so two writes can never land out of order. A flush error goes to ``on_error`` and
is swallowed: a transient storage hiccup must not abort the run. Cancellation is never swallowed.
"""

from __future__ import annotations

from .._awaitable import isawaitable
import math
from collections.abc import Awaitable, Callable

import anyio
import msgspec

from ..clock import Clock, monotonic_ms
from ..errors import UsageError

__all__ = ("CoalescedHeartbeat", "HeartbeatStatistics", "create_coalesced_heartbeat")


class HeartbeatStatistics(msgspec.Struct, frozen=True, kw_only=True):
    """Counters: ``beats`` asked for, ``flushes`` started, ``coalesced`` beats dropped,
    ``failures`` flushes that raised."""

    beats: int
    flushes: int
    coalesced: int
    failures: int


class CoalescedHeartbeat:
    """See the module docstring. Made by :func:`create_coalesced_heartbeat`."""

    __slots__ = ("_beats", "_coalesced", "_failures", "_flush", "_flushes", "_last_start",
                 "_lock", "_now", "_on_error", "coalesce_ms")

    def __init__(
        self,
        *,
        coalesce_ms: float,
        flush: Callable[[], Awaitable[None] | None],
        on_error: Callable[[Exception], None] | None,
        now: Clock,
    ) -> None:
        self.coalesce_ms = coalesce_ms
        self._flush = flush
        self._on_error = on_error
        self._now = now
        self._last_start: float | None = None
        self._lock: anyio.Lock | None = None  # made on first use, inside the host's event loop
        self._beats = self._flushes = self._coalesced = self._failures = 0

    async def beat(self, *, force: bool = False) -> bool:
        """Record progress. Returns ``True`` if this call flushed (it returns after the write),
        ``False`` if it was coalesced (it returns at once)."""
        self._beats += 1
        now = self._now()
        if not force and self._last_start is not None and now - self._last_start < self.coalesce_ms:
            self._coalesced += 1
            return False
        # Claim the window before waiting for the lock, so beats arriving meanwhile coalesce.
        self._last_start = now
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            self._flushes += 1
            try:
                result = self._flush()
                if isawaitable(result):
                    await result
            except Exception as exc:  # noqa: BLE001 - swallowed by contract, reported to on_error
                self._failures += 1
                if self._on_error is not None:
                    self._on_error(exc)
        return True

    def statistics(self) -> HeartbeatStatistics:
        return HeartbeatStatistics(beats=self._beats, flushes=self._flushes,
                                   coalesced=self._coalesced, failures=self._failures)


def create_coalesced_heartbeat(
    *,
    coalesce_ms: float,
    flush: Callable[[], Awaitable[None] | None],
    on_error: Callable[[Exception], None] | None = None,
    now: Clock = monotonic_ms,
) -> CoalescedHeartbeat:
    """A :class:`CoalescedHeartbeat` flushing at most once per ``coalesce_ms`` (finite, >= 0;
    ``0`` flushes every beat, still serialized). ``flush`` may be sync or async. ``on_error`` must
    not raise; if it does, that exception propagates from :meth:`~CoalescedHeartbeat.beat`."""
    if isinstance(coalesce_ms, bool) or not isinstance(coalesce_ms, (int, float)) \
            or not math.isfinite(coalesce_ms) or coalesce_ms < 0:
        raise UsageError(f"coalesce_ms must be a finite number >= 0, got {coalesce_ms!r}")
    if not callable(flush):
        raise UsageError("flush must be callable")
    return CoalescedHeartbeat(coalesce_ms=float(coalesce_ms), flush=flush, on_error=on_error, now=now)
