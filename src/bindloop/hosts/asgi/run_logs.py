"""Run logs in a SQLite file: :class:`SqliteRunLogs`, the :class:`~bindloop.stores.RunLogs` that
several processes may share (WAL). A run holds a **lease** (``lease_until_ms``), renewed by its
process while it runs: a second run of the same chat is refused while the lease is live
(:class:`~bindloop.stores.RunBusyError`), in any process; another process serves the run's log to
a reconnecting client and asks it to stop through the store (``stop_requested``); a run whose
process died stops renewing, and once its lease is out :meth:`SqliteRunLogs.recover` (or the next
run of the chat) closes it as ``interrupted``. Calls are short and synchronous; the ASGI app wakes
its own live readers itself and polls the store for another process's run.
"""

from __future__ import annotations

import os
import sqlite3

from bindloop.stores import RunBusyError, RunRecord, RunStatus

__all__ = ("SqliteRunLogs",)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS protocol_runs (
    run_id   TEXT PRIMARY KEY,
    chat_id  TEXT NOT NULL,
    protocol TEXT NOT NULL,
    status   TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    lease_until_ms REAL NOT NULL DEFAULT 0,
    stop_requested INTEGER NOT NULL DEFAULT 0,
    started_ms REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS protocol_runs_chat ON protocol_runs (chat_id, protocol, seq);
CREATE TABLE IF NOT EXISTS protocol_run_events (
    run_id  TEXT NOT NULL,
    offset  INTEGER NOT NULL,
    payload BLOB NOT NULL,
    PRIMARY KEY (run_id, offset)
);
"""


class SqliteRunLogs:
    """Run logs in a SQLite file (its own tables: it can share the file of a
    :class:`~bindloop.hosts.stores.sqlite.SqliteStore`). Every append is committed before it is
    served, so what a client saw is on disk.

    Ended runs are pruned at each :meth:`begin`: those started more than ``max_age_ms`` ago, and
    all but the newest ``keep`` ended ones. A running run is never pruned. A file written
    before ``started_ms`` existed gets the column (its old runs count as started at 0, so the first
    prune takes them once they have ended)."""

    def __init__(self, path: str | os.PathLike[str], *, keep: int = 10_000,
                 max_age_ms: float = 7 * 24 * 3_600_000) -> None:
        if keep < 1 or not max_age_ms > 0:
            raise ValueError("SqliteRunLogs(keep=, max_age_ms=) must be positive")
        self._keep = keep
        self._max_age_ms = max_age_ms
        self._db = sqlite3.connect(os.fspath(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(protocol_runs)")}
        if "started_ms" not in columns:  # a file from before the column
            self._db.execute("ALTER TABLE protocol_runs ADD COLUMN started_ms REAL NOT NULL "
                             "DEFAULT 0")
        self._next: dict[str, int] = {}

    def _prune(self, now_ms: float) -> None:
        """Inside begin's write: drop ended runs past the age bound or beyond the newest keep."""
        doomed = [r[0] for r in self._db.execute(
            "SELECT run_id FROM protocol_runs WHERE status != 'running' AND (started_ms < ? OR "
            "run_id NOT IN (SELECT run_id FROM protocol_runs WHERE status != 'running' "
            "ORDER BY seq DESC LIMIT ?))", (now_ms - self._max_age_ms, self._keep))]
        for run_id in doomed:
            self._db.execute("DELETE FROM protocol_run_events WHERE run_id = ?", (run_id,))
            self._db.execute("DELETE FROM protocol_runs WHERE run_id = ?", (run_id,))

    def close(self) -> None:
        self._db.close()

    def recover(self, now_ms: float) -> list[str]:
        """Close every run left ``running`` whose lease ran out (its process died) as
        ``interrupted``: its log ends where that process stopped. Runs other processes still
        renew are left alone. Returns the ids closed."""
        with self._db:
            rows = self._db.execute(
                "SELECT run_id FROM protocol_runs WHERE status = 'running' AND lease_until_ms <= ?",
                (now_ms,)).fetchall()
            self._db.execute("UPDATE protocol_runs SET status = 'interrupted' "
                             "WHERE status = 'running' AND lease_until_ms <= ?", (now_ms,))
        return [str(r[0]) for r in rows]

    def begin(self, run_id: str, chat_id: str, protocol: str, *, now_ms: float,
              lease_until_ms: float) -> None:
        # BEGIN IMMEDIATE: the check and the insert are one write, so two processes starting the
        # same chat cannot both pass the check.
        self._db.execute("BEGIN IMMEDIATE")
        try:
            row = self._db.execute(
                "SELECT run_id, status, lease_until_ms FROM protocol_runs WHERE chat_id = ? AND "
                "protocol = ? ORDER BY seq DESC LIMIT 1", (chat_id, protocol)).fetchone()
            if row is not None and row[1] == "running" and row[2] > now_ms:
                raise RunBusyError(str(row[0]))
            if row is not None and row[1] == "running":
                self._db.execute("UPDATE protocol_runs SET status = 'interrupted' WHERE run_id = ?",
                                 (row[0],))
            self._prune(now_ms)
            seq = self._db.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM protocol_runs").fetchone()[0]
            self._db.execute(
                "INSERT INTO protocol_runs (run_id, chat_id, protocol, status, seq, lease_until_ms,"
                " stop_requested, started_ms) VALUES (?, ?, ?, 'running', ?, ?, 0, ?)",
                (run_id, chat_id, protocol, seq, lease_until_ms, now_ms))
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        self._next[run_id] = 0

    def renew(self, run_id: str, lease_until_ms: float) -> bool:
        self._db.execute("UPDATE protocol_runs SET lease_until_ms = ? WHERE run_id = ?",
                         (lease_until_ms, run_id))
        row = self._db.execute("SELECT stop_requested FROM protocol_runs WHERE run_id = ?",
                               (run_id,)).fetchone()
        return bool(row and row[0])

    def request_stop(self, run_id: str) -> None:
        self._db.execute("UPDATE protocol_runs SET stop_requested = 1 WHERE run_id = ?", (run_id,))

    def append(self, run_id: str, payload: bytes) -> int:
        offset = self._next.get(run_id)
        if offset is None:
            row = self._db.execute("SELECT COUNT(*) FROM protocol_run_events WHERE run_id = ?",
                                   (run_id,)).fetchone()
            offset = int(row[0])
        self._db.execute("INSERT INTO protocol_run_events VALUES (?, ?, ?)",
                         (run_id, offset, payload))
        self._next[run_id] = offset + 1
        return offset

    def end(self, run_id: str, status: RunStatus) -> None:
        self._db.execute("UPDATE protocol_runs SET status = ? WHERE run_id = ?", (status, run_id))
        self._next.pop(run_id, None)

    def read(self, run_id: str, after: int | None) -> list[tuple[int, bytes]]:
        rows = self._db.execute(
            "SELECT offset, payload FROM protocol_run_events WHERE run_id = ? AND offset > ? "
            "ORDER BY offset", (run_id, -1 if after is None else after)).fetchall()
        return [(int(o), bytes(p)) for o, p in rows]

    def record(self, run_id: str) -> RunRecord | None:
        row = self._db.execute(
            "SELECT chat_id, protocol, status, (SELECT COUNT(*) FROM protocol_run_events e "
            "WHERE e.run_id = r.run_id), lease_until_ms, stop_requested FROM protocol_runs r "
            "WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        return RunRecord(run_id=run_id, chat_id=row[0], protocol=row[1], status=row[2],
                         events=int(row[3]), lease_until_ms=float(row[4]),
                         stop_requested=bool(row[5]))

    def latest(self, chat_id: str, protocol: str) -> RunRecord | None:
        row = self._db.execute(
            "SELECT run_id FROM protocol_runs WHERE chat_id = ? AND protocol = ? "
            "ORDER BY seq DESC LIMIT 1", (chat_id, protocol)).fetchone()
        return None if row is None else self.record(str(row[0]))
