"""bench/concurrent_calls.py at a small scale, so it cannot rot between runs: every session
completes, what the in-flight sessions keep alive is counted, and the collector's work is read."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import concurrent_calls  # noqa: E402


def test_counts_what_in_flight_sessions_keep_alive() -> None:
    counted = concurrent_calls.run(sessions=20, count=True, top=5)
    assert counted["live_per_session"] > 10  # a loop, a route, a call and a watchdog at least
    assert len(counted["top"]) == 5 and all(per > 0 for _, per in counted["top"])


def test_times_the_sessions_and_the_collector() -> None:
    timed = concurrent_calls.run(sessions=20, count=False, top=5)
    assert timed["cpu_us_per_token"] > 0
    assert timed["cpu_us_per_token_without_gc"] <= timed["cpu_us_per_token"]
    assert len(timed["gc_collections"]) == 3 and timed["gc_cpu_s"] >= 0
