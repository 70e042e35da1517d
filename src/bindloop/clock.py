"""Injected time.

A clock is any zero-argument callable returning milliseconds as a float. Durations only need a
monotonic reading; :func:`monotonic_ms` is the default for those and :func:`epoch_ms` for wall-clock
(HTTP dates, checkpoint stamps). These two functions are the only places in the package that read the
system clock; everything else takes ``now`` as a parameter.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeAlias

__all__ = ("Clock", "epoch_ms", "iso_timestamp", "monotonic_ms")

Clock: TypeAlias = Callable[[], float]


def monotonic_ms() -> float:
    """The default clock for durations: a monotonic reading in milliseconds."""
    return time.monotonic() * 1000.0


def epoch_ms() -> float:
    """The default wall clock: milliseconds since the Unix epoch."""
    return time.time() * 1000.0


def iso_timestamp(ms: float) -> str:
    """``ms`` (Unix milliseconds, as :func:`epoch_ms` gives) as an RFC 3339 UTC timestamp with
    milliseconds, ``YYYY-MM-DDTHH:MM:SS.sssZ`` (what MCP and A2A write). Exact in integer
    milliseconds: a fraction of a millisecond is dropped, never rounded up."""
    seconds, millis = divmod(int(ms), 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"
