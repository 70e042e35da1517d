"""bench/soak.py's bindloop side and its bare reader at a small scale, so the soak cannot rot
between runs: sessions through the faulty scripted provider (own process) all complete, with valid
transcripts and each tool call executed and answered exactly once; the bare reader streams the same
tokens, so bindloop's CPU per token has a ratio to it."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import soak  # noqa: E402


def test_small_soak_completes_every_session_through_the_faults() -> None:
    rows = soak.soak(sessions=40, seed=3, peer=False)
    row, bare = rows
    assert row["framework"] == "bindloop" and bare["framework"] == "bare reader"
    assert row["completed"] == 40, row
    assert row["invalid_transcripts"] == 0
    assert row["unanswered_calls"] == 0
    assert row["duplicate_tool_runs"] == 0
    assert row["tokens"] == 40 * (12 + soak.ANSWER_CHUNKS)
    assert row["server"]["requests"] >= 80
    faults = row["server"]
    assert faults["503"] + faults["429"] + faults["stall"] + faults["drop"] > 0  # seed 3 hits some
    assert bare["completed"] == 40, bare
    assert bare["tokens"] == row["tokens"]
    assert bare["duplicate_tool_runs"] == 0
    assert soak.cpu_ratio(rows) is not None
    lines = soak.table(rows)
    assert any("sessions completed" in line for line in lines)
    assert any(line.startswith("harness CPU per streamed token: bindloop") for line in lines)
    assert len(row["gc"]["collections"]) == 3 and len(bare["gc"]["collections"]) == 3
    assert any(line.startswith("cyclic GC while the sessions ran") for line in lines)


def test_the_collector_off_diagnostic_runs_every_side_without_collections() -> None:
    rows = soak.soak(sessions=20, seed=3, peer=False, no_store=True, collector=False)
    row, bare = rows
    assert row["completed"] == 20 and bare["completed"] == 20
    for side in (row, bare, row["no_store"]):
        assert side["gc"]["collections"] == [0, 0, 0], side["gc"]
    assert row["collector"] is False and bare["collector"] is False
    line = next(x for x in soak.table(rows) if x.startswith("harness CPU per streamed token"))
    assert "a diagnostic" in line and "within 1.25x" not in line
    # With the collector on, the same line states the target.
    on = soak.table([{**row, "collector": True}, bare])
    assert any("(issue 31's target: within 1.25x)" in x for x in on)
