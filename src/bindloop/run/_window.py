"""The sliding-window rule of rate limits, in one place for every limit store."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ("window_wait",)


def window_wait(entries: Iterable[tuple[float, int]], window_ms: float, limit: int, amount: int,
                now: float) -> float:
    """The sliding-window rule every ``bindloop.stores.LimitStore`` applies in ``admit``: ``0.0`` when
    ``amount`` fits the window holding ``entries`` (``(time, amount)`` pairs, oldest first, already
    cut to the window; an ``amount`` of 0 asks only that the window is not full), else the
    milliseconds until enough of the oldest entries leave it. A store that keeps its windows
    elsewhere (a database, another process) computes the wait with this, so every store admits
    alike."""
    window = list(entries)
    used = sum(a for _, a in window)
    if (used + amount <= limit) if amount else (used < limit):
        return 0.0
    need = used + max(amount, 1) - limit
    freed = 0
    for at, a in window:
        freed += a
        if freed >= need:
            return max(at + window_ms - now, 0.001)
    return window_ms
