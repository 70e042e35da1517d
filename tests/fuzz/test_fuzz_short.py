"""The short, fixed fuzz run that ``make test`` includes (``make fuzz SECONDS=...`` is the long one).

Every outside-bytes parser gets its real-payload seeds and a fixed set of seeded mutations and must
raise only its documented errors, each input within the time bound; the giants (a 1 GB line, an
endless stream of tiny events, 100,000-deep nesting) must each end in a typed error within budget.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from fuzz_targets import WIRES, targets
from run_fuzz import _alarm, fixed_run, giant_deep, giant_line, giant_tiny_events

TARGETS = {t.name: t for t in targets()}


@pytest.fixture(autouse=True)
def alarm() -> Iterator[None]:
    previous = signal.signal(signal.SIGALRM, _alarm)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_fixed_fuzz_run_raises_only_documented_errors(name: str) -> None:
    stats = fixed_run(TARGETS[name], count=150, seed=14)
    assert stats.inputs >= 150
    assert stats.findings == []


@pytest.mark.parametrize("wire", [None, *WIRES])
def test_a_1gb_line_is_refused_early(wire: str | None) -> None:
    giant = giant_line(wire)
    assert giant.ok, giant
    assert giant.outcome.startswith("SseLimitError")


@pytest.mark.parametrize("wire", sorted(WIRES))
def test_endless_tiny_events_end_in_the_watchdogs_error(wire: str) -> None:
    giant = giant_tiny_events(wire)
    assert giant.ok, giant


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_100k_deep_nesting_ends_in_a_typed_error(name: str) -> None:
    giant = giant_deep(TARGETS[name])
    assert giant.ok, giant
