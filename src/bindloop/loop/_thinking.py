"""Thinking-budget decay schedules: spend less reasoning on later turns of a long run.

On Anthropic each distinct ``budget_tokens`` value is part of the prompt-cache key, so every change of
budget re-bills the cached prefix. :class:`StepThinkingDecay` changes it exactly once per run (the
cache-friendly choice); :class:`GeometricThinkingDecay` tapers smoothly and changes it on many turns.
"""

from __future__ import annotations

import msgspec

from ..errors import UsageError

__all__ = ("GeometricThinkingDecay", "StepThinkingDecay", "ThinkingDecay", "thinking_budget")


class GeometricThinkingDecay(msgspec.Struct, frozen=True, kw_only=True, tag="geometric"):
    """Full ``budget`` through turn ``after_turn``, then multiplied by ``factor`` per later turn,
    never below ``floor``."""

    budget: int
    after_turn: int
    factor: float
    floor: int = 0


class StepThinkingDecay(msgspec.Struct, frozen=True, kw_only=True, tag="step"):
    """Full ``budget`` through turn ``after_turn``, then ``floor`` for the rest of the run."""

    budget: int
    after_turn: int
    floor: int = 0


ThinkingDecay = GeometricThinkingDecay | StepThinkingDecay


def thinking_budget(schedule: ThinkingDecay, turn: int) -> int:
    """The budget for model turn ``turn`` (1-based) under ``schedule``. Raises
    :class:`~bindloop.errors.UsageError` for a turn below 1, a negative budget or floor, a floor above
    the budget, or a factor outside ``(0, 1]``."""
    if turn < 1:
        raise UsageError(f"turn numbers start at 1, got {turn}")
    if schedule.budget < 0 or schedule.floor < 0 or schedule.floor > schedule.budget:
        raise UsageError("thinking decay needs 0 <= floor <= budget")
    if turn <= schedule.after_turn:
        return schedule.budget
    if isinstance(schedule, StepThinkingDecay):
        return schedule.floor
    if not 0.0 < schedule.factor <= 1.0:
        raise UsageError(f"geometric decay factor must be in (0, 1], got {schedule.factor}")
    if schedule.factor == 1.0:
        return schedule.budget
    # Repeated multiplication, not pow(): IEEE products round identically on every runtime.
    value = float(schedule.budget)
    for _ in range(turn - schedule.after_turn):
        value *= schedule.factor
        if value <= schedule.floor:
            return schedule.floor
    return max(schedule.floor, int(value))
