"""The SQLite run logs and pending approvals shared by threads (their connection is opened for
any thread): each operation runs whole before another thread's starts -- no ``cannot start a
transaction within a transaction``, no half-done write seen by a reader."""

from __future__ import annotations

import threading
from pathlib import Path

from bindloop.contracts import ToolCall
from bindloop.hosts.asgi.approvals import SqlitePendingApprovals
from bindloop.hosts.asgi.run_logs import SqliteRunLogs

THREADS = 4
RUNS = 60


def _together(work: list[threading.Thread]) -> None:
    for thread in work:
        thread.start()
    for thread in work:
        thread.join(120)
        assert not thread.is_alive()


def test_threads_sharing_one_sqlite_run_logs_each_get_whole_operations(tmp_path: Path) -> None:
    logs = SqliteRunLogs(tmp_path / "logs.db")
    failures: list[BaseException] = []
    seen_half: list[str] = []
    done = threading.Event()

    def writer(n: int) -> None:
        try:
            for r in range(RUNS):
                run = f"w{n}-r{r}"
                logs.begin(run, f"c{n}-{r}", "ui", now_ms=r, lease_until_ms=10**12)
                logs.claim(run, b"{}")
                logs.append(run, b"frame")
                moved = logs.take_over(run, run + "-next", now_ms=10**13,
                                       lease_until_ms=10**14)
                assert moved is not None
                logs.end(run + "-next", "finished")
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)

    def reader() -> None:
        # A taken-over run names its continuation, which exists in the same instant.
        while not done.is_set():
            for n in range(THREADS):
                latest = logs.latest(f"c{n}-0", "ui")
                if latest is not None and latest.continued_by is not None \
                        and logs.record(latest.continued_by) is None:
                    seen_half.append(latest.run_id)

    watcher = threading.Thread(target=reader)
    watcher.start()
    try:
        _together([threading.Thread(target=writer, args=(n,)) for n in range(THREADS)])
    finally:
        done.set()
        watcher.join(60)
    assert failures == [] and seen_half == []
    for n in range(THREADS):
        for r in range(RUNS):
            record = logs.record(f"w{n}-r{r}-next")
            assert record is not None and record.status == "finished"
    logs.close()


def test_threads_sharing_one_sqlite_pending_approvals_take_each_call_once(
        tmp_path: Path) -> None:
    approvals = SqlitePendingApprovals(tmp_path / "approvals.db")
    calls = [ToolCall(id=f"k{i}", name="book", arguments="{}") for i in range(RUNS)]
    approvals.record("chat", calls)
    taken: list[str] = []
    failures: list[BaseException] = []

    def taker() -> None:
        try:
            for call in calls:
                got = approvals.take("chat", call.id)
                if got is not None:
                    taken.append(got.id)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)

    _together([threading.Thread(target=taker) for _ in range(THREADS)])
    assert failures == [] and sorted(taken) == sorted(c.id for c in calls)
    approvals.close()
