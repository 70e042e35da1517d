"""Thinking-budget schedules for long runs."""

from __future__ import annotations

import pytest

from bindloop.errors import UsageError
from bindloop.loop import GeometricThinkingDecay, StepThinkingDecay, thinking_budget


def test_thinking_decay() -> None:
    g = GeometricThinkingDecay(budget=8000, after_turn=2, factor=0.5, floor=1000)
    assert [thinking_budget(g, t) for t in range(1, 7)] == [8000, 8000, 4000, 2000, 1000, 1000]
    s = StepThinkingDecay(budget=8000, after_turn=2, floor=1024)
    budgets = [thinking_budget(s, t) for t in range(1, 50)]
    assert budgets[:2] == [8000, 8000] and set(budgets[2:]) == {1024}
    assert len({b for b in budgets}) == 2  # exactly one change per run
    with pytest.raises(UsageError):
        thinking_budget(s, 0)
    with pytest.raises(UsageError):
        thinking_budget(GeometricThinkingDecay(budget=10, after_turn=0, factor=1.5), 3)
    assert thinking_budget(GeometricThinkingDecay(budget=10, after_turn=0, factor=1.0), 10**7) == 10
