from __future__ import annotations

import pytest

from bindloop.compaction import (
    DEFAULT_MIN_GROWTH_FRACTION,
    OUTPUT_RESERVE_TOKENS,
    AutoCompactInput,
    effective_context_window,
    should_auto_compact,
)


def test_effective_window() -> None:
    assert OUTPUT_RESERVE_TOKENS == 20_000
    assert effective_context_window(200_000) == 180_000
    assert effective_context_window(10_000) == 1
    assert effective_context_window(None) is None
    assert DEFAULT_MIN_GROWTH_FRACTION == 0.1


BASE = dict(context_window=120_000, last_input_tokens=90_000, threshold=0.75)


@pytest.mark.parametrize(("over", "reason", "fires"), [
    ({}, "threshold-exceeded", True),
    ({"enabled": False, "context_window": None, "threshold": 7.0}, "disabled", False),
    ({"context_window": None, "threshold": 7.0}, "unknown-window", False),
    ({"last_input_tokens": None, "threshold": 7.0}, "no-usage", False),
    ({"threshold": 0.0}, "invalid-input", False),
    ({"threshold": 1.5}, "invalid-input", False),
    ({"last_input_tokens": -1}, "invalid-input", False),
    ({"min_growth_fraction": -0.1}, "invalid-input", False),
    ({"threshold": float("nan")}, "invalid-input", False),
    ({"min_growth_fraction": float("nan")}, "invalid-input", False),
    ({"min_growth_fraction": float("nan"), "baseline_input_tokens": 89_000}, "invalid-input", False),
    ({"min_growth_fraction": float("inf")}, "invalid-input", False),
    ({"last_input_tokens": 74_999}, "below-threshold", False),
    ({"baseline_input_tokens": 80_001, "min_growth_fraction": 0.1}, "insufficient-growth", False),
    ({"baseline_input_tokens": 80_000, "min_growth_fraction": None}, "threshold-exceeded", True),
    ({"baseline_input_tokens": 80_000, "min_growth_fraction": 0.1}, "threshold-exceeded", True),
    ({"compacting": True}, "already-compacting", False),
    ({"compacting": True, "last_input_tokens": 10}, "below-threshold", False),
])
def test_check_order_and_reasons(over: dict, reason: str, fires: bool) -> None:
    d = should_auto_compact(AutoCompactInput(**{**BASE, **over}))
    assert (d.compact, d.reason) == (fires, reason)


def test_limit_is_reported() -> None:
    d = should_auto_compact(AutoCompactInput(**BASE))
    assert d.limit_tokens == 75_000
