"""The short crash test: a few SIGKILLs of a child running agent sessions against the scripted
provider over loopback, resumed from SQLite (the full run is ``make crash-test``)."""

from __future__ import annotations

from pathlib import Path

from crash_harness import run_crash_test


def test_sessions_survive_sigkill_with_effects_at_most_once(tmp_path: Path) -> None:
    report = run_crash_test(kills=6, sessions=4, seed=7, workdir=tmp_path)
    assert report.kills >= 6, report.lines()
    assert report.sessions > 0 and report.sessions_finished == report.sessions, report.lines()
    assert report.duplicates == 0, report.lines()
    assert report.lost == 0, report.lines()
    assert report.mismatched_transcripts == 0, report.lines()
