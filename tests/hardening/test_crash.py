"""The short crash test: a few SIGKILLs of children running agent sessions against the scripted
provider over loopback, resumed from a shared backend — SQLite (one process, then several), and
real Postgres and Redis servers, reached through a fault proxy that cuts connections at random
statements, and restarted once (the full run is ``make crash-test BACKEND=...``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from crash_harness import run_crash_test

from harness.fixtures.store_servers import PostgresServer, RedisServer, postgres_bin, redis_bin


def _check(report: Any, kills: int) -> None:
    assert report.kills >= kills, report.lines()
    assert report.sessions > 0 and report.sessions_finished == report.sessions, report.lines()
    assert report.duplicates == 0, report.lines()
    assert report.lost == 0, report.lines()
    assert report.mismatched_transcripts == 0, report.lines()


def test_sessions_survive_sigkill_with_effects_at_most_once(tmp_path: Path) -> None:
    _check(run_crash_test(kills=6, sessions=4, seed=7, workdir=tmp_path), 6)


def test_several_processes_share_sqlite_through_kills(tmp_path: Path) -> None:
    _check(run_crash_test(kills=3, sessions=3, seed=8, workdir=tmp_path, processes=2), 3)


def test_the_claim_pattern_survives_sigkill_too(tmp_path: Path) -> None:
    """The charge claims its receipt before the effect and completes it after (the pattern for
    an effect outside the store), instead of ``complete_once``."""
    _check(run_crash_test(kills=4, sessions=3, seed=10, workdir=tmp_path, processes=2,
                          pattern="claim"), 4)


@pytest.fixture(params=["postgres", "redis"])
def shared(request: pytest.FixtureRequest) -> Iterator[tuple[str, str, Any]]:
    kind = str(request.param)
    env = os.environ.get("BINDLOOP_TEST_POSTGRES_DSN" if kind == "postgres"
                         else "BINDLOOP_TEST_REDIS_URL")
    if env:
        yield kind, env, None  # the machine's own server: not restarted
        return
    if (postgres_bin() if kind == "postgres" else redis_bin()) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{kind} is not installed: run `make store-servers`")
        pytest.skip(f"{kind} is not installed: run `make store-servers`")
    server: Any = PostgresServer() if kind == "postgres" else RedisServer()
    try:
        server.start()
        yield kind, server.dsn if kind == "postgres" else server.url, server
    finally:
        server.close()


@pytest.mark.parametrize("pattern", ["once", "claim"])
def test_several_processes_share_a_server_through_kills_cuts_and_a_restart(
        tmp_path: Path, shared: tuple[str, str, Any], pattern: str) -> None:
    kind, address, server = shared
    report = run_crash_test(kills=3, sessions=3, seed=9, workdir=tmp_path, backend=kind,
                            address=address, processes=2, server=server, faults=True,
                            restarts=1, pattern=pattern)
    _check(report, 3)
    assert report.server_restarts == (server is not None), report.lines()
