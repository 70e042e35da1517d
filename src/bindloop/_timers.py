"""How the core waits on the event loop's clock: :func:`wait_woken` (a wake-up with a timeout), and
the longest single timer it schedules, :data:`TIMER_SLICE_S`.

Leaving ``anyio.move_on_after`` early cancels its timer, and on CPython (asyncio, trio) a cancelled
timer is gone. Pyodide's ``WebLoop`` keeps the JavaScript ``setTimeout`` behind a cancelled handle
scheduled until it fires, so in Node one 120 s budget a finished stream no longer needs kept the
process alive for 120 s. On Pyodide, therefore, a long wait is taken in slices of at most
:data:`PYODIDE_SLICE_S`: a run that finished leaves no timer more than a slice ahead. The platform
is read once, at import (``sys.platform`` is a constant of the interpreter).
"""

from __future__ import annotations

import math
import sys

import anyio

__all__ = ("PYODIDE_SLICE_S", "TIMER_SLICE_S", "wait_woken")

PYODIDE_SLICE_S = 1.0
"""The longest single timer the core schedules under Pyodide (seconds)."""

TIMER_SLICE_S: float | None = PYODIDE_SLICE_S if sys.platform == "emscripten" else None
"""The longest single timer the core schedules on this interpreter: :data:`PYODIDE_SLICE_S` under
Pyodide, ``None`` (no limit) elsewhere. A timer callback armed directly on the loop (the stall
watchdog's on asyncio) is sliced the same way."""


async def wait_woken(event: anyio.Event, timeout_s: float | None, *,
                     slice_s: float | None = TIMER_SLICE_S) -> bool:
    """Wait until ``event`` is set or ``timeout_s`` seconds of the event loop's clock have passed
    (``None``: no timeout); True when the event was set. ``slice_s`` bounds each timer scheduled
    on the way (see the module docstring); the total wait is the same either way."""
    if timeout_s is None:
        await event.wait()
        return True
    if slice_s is None or timeout_s <= slice_s:
        with anyio.move_on_after(timeout_s):
            await event.wait()
        return event.is_set()
    deadline = anyio.current_time() + timeout_s
    while not event.is_set():
        left = deadline - anyio.current_time()
        if left <= 0 or math.isnan(left):
            break
        with anyio.move_on_after(min(left, slice_s)):
            await event.wait()
    return event.is_set()
