"""The event log each protocol run owns: every frame the run produced, addressed by offset, so a
client that dropped can read on from the last event it saw (SSE ``id:`` / ``Last-Event-ID``).

Two stores with one interface: :class:`MemoryRunLogs` (one process) and :class:`SqliteRunLogs` (a
SQLite file, WAL: a finished run's log outlives the process, and a run that a dead process left
``running`` is closed as ``interrupted`` by :meth:`SqliteRunLogs.recover`). Calls are short and
synchronous; the ASGI app wakes its live readers itself.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Literal, Protocol

import msgspec

__all__ = ("MemoryRunLogs", "RunLogs", "RunRecord", "RunStatus", "SqliteRunLogs")

RunStatus = Literal["running", "finished", "failed", "stopped", "interrupted"]


class RunRecord(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    chat_id: str
    protocol: str
    status: RunStatus
    events: int


class RunLogs(Protocol):
    def begin(self, run_id: str, chat_id: str, protocol: str) -> None: ...
    def append(self, run_id: str, payload: bytes) -> int: ...
    def end(self, run_id: str, status: RunStatus) -> None: ...
    def read(self, run_id: str, after: int | None) -> list[tuple[int, bytes]]: ...
    def record(self, run_id: str) -> RunRecord | None: ...
    def latest(self, chat_id: str, protocol: str) -> RunRecord | None: ...


class _Run:
    __slots__ = ("chat_id", "events", "protocol", "status")

    def __init__(self, chat_id: str, protocol: str) -> None:
        self.chat_id = chat_id
        self.protocol = protocol
        self.status: RunStatus = "running"
        self.events: list[bytes] = []


class MemoryRunLogs:
    """Run logs in this process's memory (``keep``: the newest runs kept; older ones are dropped)."""

    def __init__(self, keep: int = 1000) -> None:
        self._runs: dict[str, _Run] = {}
        self._latest: dict[tuple[str, str], str] = {}
        self._keep = keep

    def begin(self, run_id: str, chat_id: str, protocol: str) -> None:
        if run_id in self._runs:
            raise ValueError(f"run {run_id!r} already has a log")
        self._runs[run_id] = _Run(chat_id, protocol)
        self._latest[(chat_id, protocol)] = run_id
        while len(self._runs) > self._keep:
            oldest = next(iter(self._runs))
            run = self._runs.pop(oldest)
            if self._latest.get((run.chat_id, run.protocol)) == oldest:
                del self._latest[(run.chat_id, run.protocol)]

    def append(self, run_id: str, payload: bytes) -> int:
        run = self._runs[run_id]
        run.events.append(payload)
        return len(run.events) - 1

    def end(self, run_id: str, status: RunStatus) -> None:
        self._runs[run_id].status = status

    def read(self, run_id: str, after: int | None) -> list[tuple[int, bytes]]:
        run = self._runs.get(run_id)
        if run is None:
            return []
        start = 0 if after is None else after + 1
        return list(enumerate(run.events[start:], start))

    def record(self, run_id: str) -> RunRecord | None:
        run = self._runs.get(run_id)
        if run is None:
            return None
        return RunRecord(run_id=run_id, chat_id=run.chat_id, protocol=run.protocol,
                         status=run.status, events=len(run.events))

    def latest(self, chat_id: str, protocol: str) -> RunRecord | None:
        run_id = self._latest.get((chat_id, protocol))
        return None if run_id is None else self.record(run_id)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS protocol_runs (
    run_id   TEXT PRIMARY KEY,
    chat_id  TEXT NOT NULL,
    protocol TEXT NOT NULL,
    status   TEXT NOT NULL,
    seq      INTEGER NOT NULL
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
    :class:`~bindloop.hosts.sqlite_store.SqliteStore`). Every append is committed before it is
    served, so what a client saw is on disk."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._db = sqlite3.connect(os.fspath(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        self._next: dict[str, int] = {}

    def close(self) -> None:
        self._db.close()

    def recover(self) -> list[str]:
        """Close every run a previous process left ``running`` as ``interrupted`` (call it at
        start-up, before serving): its log ends where that process died. Returns their ids."""
        rows = self._db.execute(
            "SELECT run_id FROM protocol_runs WHERE status = 'running'").fetchall()
        self._db.execute("UPDATE protocol_runs SET status = 'interrupted' WHERE status = 'running'")
        return [str(r[0]) for r in rows]

    def begin(self, run_id: str, chat_id: str, protocol: str) -> None:
        seq = self._db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM protocol_runs").fetchone()[0]
        self._db.execute("INSERT INTO protocol_runs VALUES (?, ?, ?, 'running', ?)",
                         (run_id, chat_id, protocol, seq))
        self._next[run_id] = 0

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
            "WHERE e.run_id = r.run_id) FROM protocol_runs r WHERE run_id = ?",
            (run_id,)).fetchone()
        if row is None:
            return None
        return RunRecord(run_id=run_id, chat_id=row[0], protocol=row[1], status=row[2],
                         events=int(row[3]))

    def latest(self, chat_id: str, protocol: str) -> RunRecord | None:
        row = self._db.execute(
            "SELECT run_id FROM protocol_runs WHERE chat_id = ? AND protocol = ? "
            "ORDER BY seq DESC LIMIT 1", (chat_id, protocol)).fetchone()
        return None if row is None else self.record(str(row[0]))
