"""Run logs in a SQLite file: :class:`SqliteRunLogs`, the :class:`~bindloop.stores.RunLogs` that
several processes may share (WAL). A run holds a **lease** (``lease_until_ms``), renewed by its
process while it runs: a second run of the same chat is refused while the lease is live
(:class:`~bindloop.stores.RunBusyError`), in any process; another process serves the run's log to
a reconnecting client and asks it to stop through the store (``stop_requested``); a run whose
process died stops renewing, and once its lease is out :meth:`SqliteRunLogs.recover` (or the next
run of the chat) closes it as ``interrupted``. Calls are short and synchronous; the ASGI app wakes
its own live readers itself and polls the store for another process's run.

Logs that also keep what a run needs to be continued (:class:`ContinuableRunLogs`, the ASGI
host's refinement of the port: :class:`SqliteRunLogs`, and for processes on several machines
``bindloop.hosts.stores.postgres_chat.PostgresRunLogs`` and
``bindloop.hosts.stores.redis_chat.RedisRunLogs``) let a run whose process died go on
elsewhere: its request is stored when it begins (:meth:`~ContinuableRunLogs.claim`), each settled
boundary with the encoder inputs fed by then and the log's length (:meth:`~ContinuableRunLogs.save`),
and once its lease is out one process takes it over (:meth:`~ContinuableRunLogs.take_over`,
atomic): the dead run is closed as ``continued``, naming the new run and the offset up to which
both logs are the same.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

import msgspec

from bindloop.stores import RunBusyError, RunLogs, RunRecord, RunStatus

__all__ = ("ContinuableRunLogs", "Continuation", "SqliteRunLogs")

_Method = TypeVar("_Method", bound=Callable[..., Any])


def one_at_a_time(method: _Method) -> _Method:
    """``method`` under its instance's ``_lock`` (an ``RLock``): a SQLite connection shared by
    threads runs one operation at a time, so no thread starts a transaction inside another's
    or reads its writes half done."""

    @functools.wraps(method)
    def locked(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            return method(self, *args, **kwargs)

    return cast(_Method, locked)


class Continuation(msgspec.Struct, frozen=True, kw_only=True):
    """What a run that took over a dead one starts from: the dead run's ``claim`` (what its host
    stored when it began), its last save -- ``checkpoint`` (``None``: it saved none, so the
    request runs again from its start), the encoder inputs ``fed`` by then and ``offset``, the
    frames its log had then -- and ``previous``, the dead run's id."""

    previous: str
    claim: bytes
    checkpoint: bytes | None = None
    fed: str = ""
    offset: int = 0


@runtime_checkable
class ContinuableRunLogs(RunLogs, Protocol):
    """Run logs that keep what a run needs to be continued by another process once its own died
    (see the module docstring)."""

    def claim(self, run_id: str, claim: bytes) -> None:
        """Store what the host needs to run ``run_id``'s request again (its body, the ids it
        minted, its identity)."""
        ...

    def save(self, run_id: str, checkpoint: bytes, fed: str, offset: int) -> None:
        """Store a settled boundary of ``run_id``: the checkpoint, the encoder inputs fed since
        the previous save (appended to those), and the log's length at it."""
        ...

    def lost(self, now_ms: float) -> list[RunRecord]:
        """The runs still ``running`` with a claim whose lease ran out by ``now_ms``."""
        ...

    def take_over(self, run_id: str, new_run_id: str, *, now_ms: float,
                  lease_until_ms: float) -> Continuation | None:
        """In one write: if ``run_id`` is still the lost latest run of its chat, close it as
        ``continued`` by ``new_run_id``, begin ``new_run_id`` (same chat, claim and save, leased
        until ``lease_until_ms``) and return what it starts from; else ``None`` (another process
        took it, or a newer request superseded it)."""
        ...

    def unlink(self, run_id: str) -> None:
        """``run_id`` was continued, but its continuation's log does not repeat its frames (the
        replay wrote another number of them): no offset of it leads into the continuation."""
        ...


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
CREATE TABLE IF NOT EXISTS protocol_run_saves (
    run_id     TEXT PRIMARY KEY,
    claim      BLOB NOT NULL,
    checkpoint BLOB,
    fed        TEXT NOT NULL DEFAULT '',
    offset     INTEGER NOT NULL DEFAULT 0
);
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
    served, so what a client saw is on disk. A :class:`ContinuableRunLogs`: the claim and the
    saves of a run are kept beside its log (and pruned with it).

    Ended runs are pruned at each :meth:`begin`: those started more than ``max_age_ms`` ago, all
    but the newest ``keep`` ended ones, and the oldest ones while the ended runs' frames pass
    ``max_bytes``; what a run kept to be continued goes when it ends. A running run is never
    pruned. A file written before ``started_ms`` existed gets the column (its old runs count as
    started at 0, so the first prune takes them once they have ended)."""

    def __init__(self, path: str | os.PathLike[str], *, keep: int = 10_000,
                 max_age_ms: float = 7 * 24 * 3_600_000,
                 max_bytes: int = 1024 * 1024 * 1024) -> None:
        if keep < 1 or not max_age_ms > 0 or max_bytes < 1:
            raise ValueError("SqliteRunLogs(keep=, max_age_ms=, max_bytes=) must be positive")
        self._keep = keep
        self._max_age_ms = max_age_ms
        self._max_bytes = max_bytes
        self._lock = threading.RLock()  # the connection is shared by threads (one_at_a_time)
        self._db = sqlite3.connect(os.fspath(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)
        columns = {r[1] for r in self._db.execute("PRAGMA table_info(protocol_runs)")}
        if "started_ms" not in columns:  # a file from before the column
            self._db.execute("ALTER TABLE protocol_runs ADD COLUMN started_ms REAL NOT NULL "
                             "DEFAULT 0")
        if "continued_by" not in columns:  # a file from before continuations
            self._db.execute("ALTER TABLE protocol_runs ADD COLUMN continued_by TEXT")
            self._db.execute("ALTER TABLE protocol_runs ADD COLUMN continued_at INTEGER NOT NULL "
                             "DEFAULT 0")
        if "bytes" not in columns:  # an ended run's frames, measured by the first prune after
            self._db.execute("ALTER TABLE protocol_runs ADD COLUMN bytes INTEGER")
        self._next: dict[str, int] = {}

    def _prune(self, now_ms: float) -> None:
        """Inside begin's write: drop ended runs past the age bound, beyond the newest keep, and
        the oldest while the ended runs' frames pass the byte bound."""
        self._db.execute("DELETE FROM protocol_run_saves WHERE run_id IN (SELECT run_id FROM "
                         "protocol_runs WHERE status != 'running')")
        self._db.execute(
            "UPDATE protocol_runs SET bytes = (SELECT COALESCE(SUM(LENGTH(payload)), 0) FROM "
            "protocol_run_events e WHERE e.run_id = protocol_runs.run_id) "
            "WHERE status != 'running' AND bytes IS NULL")
        doomed = [r[0] for r in self._db.execute(
            "SELECT run_id FROM protocol_runs WHERE status != 'running' AND (started_ms < ? OR "
            "run_id NOT IN (SELECT run_id FROM protocol_runs WHERE status != 'running' "
            "ORDER BY seq DESC LIMIT ?))", (now_ms - self._max_age_ms, self._keep))]
        for run_id in doomed:
            self._forget(run_id)
        ended = self._db.execute("SELECT run_id, bytes FROM protocol_runs WHERE status != "
                                 "'running' ORDER BY seq").fetchall()
        total = sum(int(size) for _, size in ended)
        for run_id, size in ended:
            if total <= self._max_bytes:
                break
            self._forget(str(run_id))
            total -= int(size)

    def _forget(self, run_id: str) -> None:
        self._db.execute("DELETE FROM protocol_run_events WHERE run_id = ?", (run_id,))
        self._db.execute("DELETE FROM protocol_run_saves WHERE run_id = ?", (run_id,))
        self._db.execute("DELETE FROM protocol_runs WHERE run_id = ?", (run_id,))

    @one_at_a_time
    def close(self) -> None:
        self._db.close()

    @one_at_a_time
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

    @one_at_a_time
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
            self._insert(run_id, chat_id, protocol, now_ms=now_ms, lease_until_ms=lease_until_ms)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        self._next[run_id] = 0

    def _insert(self, run_id: str, chat_id: str, protocol: str, *, now_ms: float,
                lease_until_ms: float) -> None:
        seq = self._db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM protocol_runs").fetchone()[0]
        self._db.execute(
            "INSERT INTO protocol_runs (run_id, chat_id, protocol, status, seq, lease_until_ms,"
            " stop_requested, started_ms) VALUES (?, ?, ?, 'running', ?, ?, 0, ?)",
            (run_id, chat_id, protocol, seq, lease_until_ms, now_ms))

    @one_at_a_time
    def claim(self, run_id: str, claim: bytes) -> None:
        self._db.execute("INSERT OR REPLACE INTO protocol_run_saves (run_id, claim) VALUES (?, ?)",
                         (run_id, claim))

    @one_at_a_time
    def save(self, run_id: str, checkpoint: bytes, fed: str, offset: int) -> None:
        self._db.execute("UPDATE protocol_run_saves SET checkpoint = ?, fed = fed || ?, offset = ? "
                         "WHERE run_id = ?", (checkpoint, fed, offset, run_id))

    @one_at_a_time
    def unlink(self, run_id: str) -> None:
        self._db.execute("UPDATE protocol_runs SET continued_at = 0 WHERE run_id = ?", (run_id,))

    @one_at_a_time
    def lost(self, now_ms: float) -> list[RunRecord]:
        rows = self._db.execute(
            "SELECT r.run_id FROM protocol_runs r JOIN protocol_run_saves s USING (run_id) "
            "WHERE r.status = 'running' AND r.lease_until_ms <= ? ORDER BY r.seq",
            (now_ms,)).fetchall()
        found = (self.record(str(r[0])) for r in rows)
        return [r for r in found if r is not None]

    @one_at_a_time
    def take_over(self, run_id: str, new_run_id: str, *, now_ms: float,
                  lease_until_ms: float) -> Continuation | None:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            taken = self._take_over(run_id, new_run_id, now_ms=now_ms,
                                    lease_until_ms=lease_until_ms)
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        if taken is not None:
            self._next[new_run_id] = 0
        return taken

    def _take_over(self, run_id: str, new_run_id: str, *, now_ms: float,
                   lease_until_ms: float) -> Continuation | None:
        row = self._db.execute(
            "SELECT r.chat_id, r.protocol, r.status, r.lease_until_ms, s.claim, s.checkpoint, "
            "s.fed, s.offset FROM protocol_runs r JOIN protocol_run_saves s USING (run_id) "
            "WHERE r.run_id = ?", (run_id,)).fetchone()
        if row is None or row[2] != "running" or row[3] > now_ms:
            return None
        chat_id, protocol = str(row[0]), str(row[1])
        latest = self._db.execute(
            "SELECT run_id FROM protocol_runs WHERE chat_id = ? AND protocol = ? "
            "ORDER BY seq DESC LIMIT 1", (chat_id, protocol)).fetchone()
        if latest is None or latest[0] != run_id:
            return None
        offset = int(row[7]) if row[5] is not None else 0
        self._db.execute("UPDATE protocol_runs SET status = 'continued', continued_by = ?, "
                         "continued_at = ? WHERE run_id = ?", (new_run_id, offset, run_id))
        self._insert(new_run_id, chat_id, protocol, now_ms=now_ms, lease_until_ms=lease_until_ms)
        self._db.execute("UPDATE protocol_run_saves SET run_id = ? WHERE run_id = ?",
                         (new_run_id, run_id))
        return Continuation(previous=run_id, claim=bytes(row[4]),
                            checkpoint=None if row[5] is None else bytes(row[5]),
                            fed=str(row[6]), offset=offset)

    @one_at_a_time
    def renew(self, run_id: str, lease_until_ms: float) -> bool:
        self._db.execute("UPDATE protocol_runs SET lease_until_ms = ? WHERE run_id = ?",
                         (lease_until_ms, run_id))
        row = self._db.execute("SELECT stop_requested FROM protocol_runs WHERE run_id = ?",
                               (run_id,)).fetchone()
        return bool(row and row[0])

    @one_at_a_time
    def request_stop(self, run_id: str) -> None:
        self._db.execute("UPDATE protocol_runs SET stop_requested = 1 WHERE run_id = ?", (run_id,))

    @one_at_a_time
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

    @one_at_a_time
    def end(self, run_id: str, status: RunStatus) -> None:
        self._db.execute("UPDATE protocol_runs SET status = ? WHERE run_id = ?", (status, run_id))
        self._db.execute("DELETE FROM protocol_run_saves WHERE run_id = ?", (run_id,))
        self._next.pop(run_id, None)

    @one_at_a_time
    def delete_chat(self, chat_id: str, protocol: str, *, now_ms: float) -> bool:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            runs = self._db.execute(
                "SELECT run_id, status, lease_until_ms FROM protocol_runs WHERE chat_id = ? AND "
                "protocol = ? ORDER BY seq DESC", (chat_id, protocol)).fetchall()
            if runs and runs[0][1] == "running" and runs[0][2] > now_ms:
                raise RunBusyError(str(runs[0][0]))
            for run_id, _, _ in runs:
                self._forget(str(run_id))
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        return bool(runs)

    @one_at_a_time
    def read(self, run_id: str, after: int | None) -> list[tuple[int, bytes]]:
        rows = self._db.execute(
            "SELECT offset, payload FROM protocol_run_events WHERE run_id = ? AND offset > ? "
            "ORDER BY offset", (run_id, -1 if after is None else after)).fetchall()
        return [(int(o), bytes(p)) for o, p in rows]

    @one_at_a_time
    def record(self, run_id: str) -> RunRecord | None:
        row = self._db.execute(
            "SELECT chat_id, protocol, status, (SELECT COUNT(*) FROM protocol_run_events e "
            "WHERE e.run_id = r.run_id), lease_until_ms, stop_requested, continued_by, "
            "continued_at, (SELECT CASE WHEN s.checkpoint IS NULL THEN 0 ELSE s.offset END "
            "FROM protocol_run_saves s WHERE s.run_id = r.run_id) FROM protocol_runs r "
            "WHERE run_id = ?",
            (run_id,)).fetchone()
        if row is None:
            return None
        return RunRecord(run_id=run_id, chat_id=row[0], protocol=row[1], status=row[2],
                         events=int(row[3]), lease_until_ms=float(row[4]),
                         stop_requested=bool(row[5]), continued_by=row[6],
                         continued_at=int(row[7]), claimed=row[8] is not None,
                         saved=int(row[8] or 0))

    @one_at_a_time
    def latest(self, chat_id: str, protocol: str) -> RunRecord | None:
        row = self._db.execute(
            "SELECT run_id FROM protocol_runs WHERE chat_id = ? AND protocol = ? "
            "ORDER BY seq DESC LIMIT 1", (chat_id, protocol)).fetchone()
        return None if row is None else self.record(str(row[0]))
