"""When to compact: the auto-compaction predicate, its thresholds and hysteresis."""

from __future__ import annotations

import math
from typing import Final, Literal, TypeAlias

import msgspec

__all__ = (
    "DEFAULT_AUTO_COMPACT_THRESHOLD",
    "DEFAULT_MIN_GROWTH_FRACTION",
    "OUTPUT_RESERVE_TOKENS",
    "AutoCompactDecision",
    "AutoCompactInput",
    "AutoCompactReason",
    "effective_context_window",
    "should_auto_compact",
)

OUTPUT_RESERVE_TOKENS: Final = 20_000
"""Tokens held back from the raw window for the reply (a summary plus a response fits in this)."""

DEFAULT_MIN_GROWTH_FRACTION: Final = 0.1
"""Hysteresis floor hosts pass as ``min_growth_fraction``: after a compaction, the next one waits
until input usage has grown by this fraction of the effective window beyond the post-compaction
baseline, so the immediate bounce (summary + re-sent prefix) cannot re-trigger it by itself."""

DEFAULT_AUTO_COMPACT_THRESHOLD: Final = 0.8
"""Fraction of the effective window at which auto-compaction fires when no threshold is given."""

AutoCompactReason: TypeAlias = Literal[
    "disabled",
    "unknown-window",
    "no-usage",
    "invalid-input",
    "below-threshold",
    "insufficient-growth",
    "already-compacting",
    "threshold-exceeded",
]


def effective_context_window(raw: int | None) -> int | None:
    """What the next prompt can fill: ``raw - OUTPUT_RESERVE_TOKENS``, at least 1. ``None`` (an unknown
    window) passes through so a lookup can be piped in directly."""
    if raw is None:
        return None
    return max(1, raw - OUTPUT_RESERVE_TOKENS)


class AutoCompactInput(msgspec.Struct, frozen=True, kw_only=True):
    """Everything :func:`should_auto_compact` looks at.

    ``context_window`` is the *raw* window; ``last_input_tokens`` the latest turn's prompt tokens
    (``None`` when unknown); ``threshold`` a fraction of the effective window in ``(0, 1]``;
    ``baseline_input_tokens`` the first prompt size measured after the previous compaction (``None``
    before any); ``min_growth_fraction`` the hysteresis floor (``None`` or 0: no floor);
    ``compacting`` whether a compaction is already running.
    """

    enabled: bool = True
    context_window: int | None = None
    last_input_tokens: int | None = None
    threshold: float = DEFAULT_AUTO_COMPACT_THRESHOLD
    baseline_input_tokens: int | None = None
    min_growth_fraction: float | None = None
    compacting: bool = False


class AutoCompactDecision(msgspec.Struct, frozen=True, kw_only=True):
    """``compact`` and why; ``limit_tokens`` is the threshold in tokens when it was computed."""

    compact: bool
    reason: AutoCompactReason
    limit_tokens: int | None = None


def should_auto_compact(inp: AutoCompactInput) -> AutoCompactDecision:
    """Decide whether to compact before the next turn.

    Checks run cheapest and most common first: ``disabled`` (one flag), ``unknown-window`` (the
    predictable miss for custom models), ``no-usage`` (no fresh token count), then ``invalid-input``
    (a threshold outside ``(0, 1]``, negative counts, a growth fraction that is negative, NaN or
    infinite), then the arithmetic:
    ``below-threshold``, then ``insufficient-growth`` (hysteresis), and ``already-compacting`` last so
    the diagnostic is right when asked from inside a compaction. Otherwise ``threshold-exceeded``.
    Pure.
    """
    if not inp.enabled:
        return AutoCompactDecision(compact=False, reason="disabled")
    window = effective_context_window(inp.context_window)
    if window is None:
        return AutoCompactDecision(compact=False, reason="unknown-window")
    tokens = inp.last_input_tokens
    if tokens is None:
        return AutoCompactDecision(compact=False, reason="no-usage")
    growth = 0.0 if inp.min_growth_fraction is None else inp.min_growth_fraction
    # ``not 0 <= growth`` (not ``growth < 0``) so NaN is invalid too, as it is for the threshold.
    if (not 0.0 < inp.threshold <= 1.0 or tokens < 0 or inp.context_window is not None
            and inp.context_window <= 0 or not 0.0 <= growth < math.inf
            or (inp.baseline_input_tokens is not None and inp.baseline_input_tokens < 0)):
        return AutoCompactDecision(compact=False, reason="invalid-input")
    limit = int(inp.threshold * window)
    if tokens < limit:
        return AutoCompactDecision(compact=False, reason="below-threshold", limit_tokens=limit)
    base = inp.baseline_input_tokens
    if base is not None and growth > 0 and tokens - base < growth * window:
        return AutoCompactDecision(compact=False, reason="insufficient-growth", limit_tokens=limit)
    if inp.compacting:
        return AutoCompactDecision(compact=False, reason="already-compacting", limit_tokens=limit)
    return AutoCompactDecision(compact=True, reason="threshold-exceeded", limit_tokens=limit)
