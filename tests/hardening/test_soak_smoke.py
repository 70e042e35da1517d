"""bench/soak.py's bindloop side at a small scale, so the soak cannot rot between runs: sessions
through the faulty scripted provider (own process) all complete, with valid transcripts and each
tool call executed and answered exactly once."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import soak  # noqa: E402


def test_small_soak_completes_every_session_through_the_faults() -> None:
    rows = soak.soak(sessions=40, seed=3, peer=False)
    [row] = rows
    assert row["framework"] == "bindloop"
    assert row["completed"] == 40, row
    assert row["invalid_transcripts"] == 0
    assert row["unanswered_calls"] == 0
    assert row["duplicate_tool_runs"] == 0
    assert row["tokens"] == 40 * (12 + soak.ANSWER_CHUNKS)
    assert row["server"]["requests"] >= 80
    faults = row["server"]
    assert faults["503"] + faults["429"] + faults["stall"] + faults["drop"] > 0  # seed 3 hits some
    assert any("sessions completed" in line for line in soak.table(rows))
