"""Deterministic clocks and a recording sink."""

from __future__ import annotations

from typing import Any

__all__ = ("RecordingSink", "SteppingClock", "recording_sink", "stepping_clock")


class SteppingClock:
    """A clock that advances ``step`` milliseconds on every reading (after returning the current
    value), plus whatever :meth:`advance` adds. Deterministic timing figures for tests."""

    __slots__ = ("step", "value")

    def __init__(self, start: float = 0.0, step: float = 1.0) -> None:
        self.value = float(start)
        self.step = float(step)

    def __call__(self) -> float:
        current = self.value
        self.value += self.step
        return current

    def advance(self, ms: float) -> None:
        """Move the clock forward without a reading (e.g. inside a tool, to choose its duration)."""
        self.value += float(ms)


def stepping_clock(start: float = 0.0, step: float = 1.0) -> SteppingClock:
    """A :class:`SteppingClock`."""
    return SteppingClock(start, step)


class RecordingSink:
    """A sink that records every event it is given, in order. ``retractable`` says whether the
    surface can be told to discard what it rendered (see the turn text stream)."""

    def __init__(self, retractable: bool = True) -> None:
        self.retractable = retractable
        self.events: list[Any] = []

    def emit(self, event: Any) -> None:
        self.events.append(event)


def recording_sink(retractable: bool = True) -> RecordingSink:
    """A :class:`RecordingSink`."""
    return RecordingSink(retractable)
