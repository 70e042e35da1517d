"""A real store for CPython hosts: checkpoints and idempotency receipts in one SQLite file (WAL).

Outside the fences (it does file I/O). It serves the existing ports:

- **checkpoints**: :meth:`SqliteStore.commit` is a :data:`bindloop.session.CommitFn` for
  :func:`bindloop.session.run_from_checkpoint`; :meth:`SqliteStore.save_checkpoint` /
  :meth:`SqliteStore.load_checkpoint` store and read the bytes of
  :func:`~bindloop.session.serialize_loop_checkpoint`. Writes are **single-writer fenced on the
  revision**: a checkpoint lands only when it is exactly one revision after the stored one (or the
  execution has none yet), so two processes resuming the same execution cannot both commit; the
  loser gets :class:`CheckpointConflictError` and must stop.
- **receipts**: the class is a :class:`bindloop.run.ToolCallReceiptStore` (``read`` / ``claim`` /
  ``complete`` / ``fail``, plus ``renew``) with the attempt fence and leases measured on the store's
  clock (``now``, wall-clock milliseconds by default, so a lease outlives the process that took
  it). :meth:`SqliteStore.complete_with` applies a side effect that lives in this same database in
  the very transaction that completes the receipt — the fence the protocol recommends: a crash
  either lands both or neither, so an expired ``running`` receipt proves the effect did not happen.

Every write is one ``BEGIN IMMEDIATE`` transaction (SQLite's write lock is taken up front, so a
read-check-write cannot interleave with another writer, in this process or another). WAL keeps
readers unblocked; ``synchronous=NORMAL`` (the default here) is durable across a killed process,
``"FULL"`` also across power loss. One connection per store, used from one thread (asyncio and
trio hosts call it from their loop thread; calls are short and synchronous inside).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from types import TracebackType
from typing import Any, Literal

import msgspec

from bindloop.clock import Clock, epoch_ms
from bindloop.errors import UsageError
from bindloop.loop import BoundaryDecision
from bindloop.run import (
    ReceiptCompleted,
    ReceiptFailed,
    ReceiptRunning,
    ReceiptState,
    ToolCallReceiptKey,
)
from bindloop.session import LoopCheckpoint, parse_loop_checkpoint, serialize_loop_checkpoint

__all__ = ("CheckpointConflictError", "SqliteStore")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    execution_id TEXT PRIMARY KEY,
    revision     INTEGER NOT NULL,
    body         BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS receipts (
    tenant_id  TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    tool_name  TEXT NOT NULL,
    args_hash  TEXT NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    attempt    INTEGER NOT NULL,
    lease_expires_at_ms REAL,
    result     BLOB,
    error      TEXT,
    PRIMARY KEY (tenant_id, run_id, tool_name, args_hash)
);
"""
_KEY_WHERE = "tenant_id = ? AND run_id = ? AND tool_name = ? AND args_hash = ?"


class CheckpointConflictError(UsageError):
    """A checkpoint at ``revision`` of ``execution_id`` cannot land over the stored revision
    ``stored`` (it needs ``revision - 1`` stored). ``case`` says which mistake it is:

    - ``"another_conversation"``: ``revision`` is 0, the first checkpoint of a new execution, yet
      the id is already stored — two conversations were given the same ``execution_id`` (give
      each its own: ``create_agent(execution_ids=...)``);
    - ``"another_writer"``: two processes resumed the same execution and the other committed
      first. Stop this invocation; the execution goes on from the stored checkpoint, in whichever
      process owns it."""

    def __init__(self, execution_id: str, revision: int, stored: int) -> None:
        if revision == 0:
            self.case = "another_conversation"
            why = ("revision 0 starts a new execution, so another conversation already uses this "
                   "execution_id (give each conversation its own id)")
        else:
            self.case = "another_writer"
            why = "another writer committed first (single-writer fence)"
        super().__init__(
            f"checkpoint {execution_id!r} revision {revision} does not follow the stored revision "
            f"{stored}: {why}")
        self.execution_id = execution_id
        self.revision = revision
        self.stored = stored


def _key(key: ToolCallReceiptKey) -> tuple[str, str, str, str]:
    if not isinstance(key, ToolCallReceiptKey):
        raise UsageError(f"key must be a ToolCallReceiptKey, got {type(key).__name__}")
    return (key.tenant_id, key.run_id, key.tool_name, key.args_hash)


def _attempt(attempt: object) -> int:
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise UsageError(f"attempt must be an int >= 1, got {attempt!r}")
    return attempt


def _lease(lease_ms: object) -> float:
    if isinstance(lease_ms, bool) or not isinstance(lease_ms, (int, float)) or not (
            0 < lease_ms < float("inf")):
        raise UsageError(f"lease_ms must be a finite number > 0, got {lease_ms!r}")
    return float(lease_ms)


class SqliteStore:
    """Checkpoints and receipts in the SQLite file at ``path`` (created if missing).

    ``now`` is the store's clock for leases (milliseconds). ``max_checkpoint_bytes`` bounds what
    :meth:`load_checkpoint` will decode and :meth:`save_checkpoint` will write (loading costs
    roughly 15x the stored size in memory). Tool results given to :meth:`complete` must be plain
    JSON values (``read`` returns them decoded as such).
    """

    def __init__(self, path: str | os.PathLike[str], *, now: Clock = epoch_ms,
                 max_checkpoint_bytes: int | None = None,
                 synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
                 busy_timeout_s: float = 30.0) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise UsageError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        if max_checkpoint_bytes is not None and (
                isinstance(max_checkpoint_bytes, bool) or not isinstance(max_checkpoint_bytes, int)
                or max_checkpoint_bytes < 1):
            raise UsageError(f"max_checkpoint_bytes must be a positive int or None, "
                             f"got {max_checkpoint_bytes!r}")
        self.now = now
        self.max_checkpoint_bytes = max_checkpoint_bytes
        self.fenced_writes = 0
        """Receipt writes refused by the attempt fence (a diagnostic, per store object)."""
        self._db = sqlite3.connect(os.fspath(path), timeout=busy_timeout_s, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        self._db.executescript(_SCHEMA)

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def connection(self) -> sqlite3.Connection:
        """The store's connection, for the host's own tables (see :meth:`complete_with`)."""
        return self._db

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _write(self, body: Callable[[sqlite3.Connection], Any]) -> Any:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            out = body(db)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return out

    # -- checkpoints -----------------------------------------------------------------------------

    def save_checkpoint(self, checkpoint: LoopCheckpoint) -> None:
        """Store ``checkpoint`` if it is exactly one revision after the stored one (any revision
        when the execution has none stored). Raises :class:`CheckpointConflictError` otherwise,
        :class:`~bindloop.session.CheckpointFormatError` for a checkpoint that cannot be stored,
        and :class:`~bindloop.errors.UsageError` past ``max_checkpoint_bytes``."""
        body = serialize_loop_checkpoint(checkpoint)
        if self.max_checkpoint_bytes is not None and len(body) > self.max_checkpoint_bytes:
            raise UsageError(f"checkpoint {checkpoint.execution_id!r} is {len(body)} bytes, over "
                             f"max_checkpoint_bytes={self.max_checkpoint_bytes}")
        ident, revision = checkpoint.execution_id, checkpoint.revision

        def write(db: sqlite3.Connection) -> None:
            row = db.execute("SELECT revision FROM checkpoints WHERE execution_id = ?",
                             (ident,)).fetchone()
            if row is None:
                db.execute("INSERT INTO checkpoints VALUES (?, ?, ?)", (ident, revision, body))
            elif row[0] + 1 == revision:
                db.execute("UPDATE checkpoints SET revision = ?, body = ? WHERE execution_id = ?",
                           (revision, body, ident))
            else:
                raise CheckpointConflictError(ident, revision, row[0])

        self._write(write)

    def load_checkpoint(self, execution_id: str) -> LoopCheckpoint | None:
        """The stored checkpoint of ``execution_id``, parsed and validated, or ``None``."""
        row = self._db.execute("SELECT body FROM checkpoints WHERE execution_id = ?",
                               (execution_id,)).fetchone()
        if row is None:
            return None
        return parse_loop_checkpoint(bytes(row[0]), max_bytes=self.max_checkpoint_bytes)

    def checkpoint_ids(self) -> list[str]:
        return [r[0] for r in self._db.execute(
            "SELECT execution_id FROM checkpoints ORDER BY execution_id")]

    def commit(self, checkpoint: LoopCheckpoint) -> BoundaryDecision:
        """A :data:`~bindloop.session.CommitFn`: store, then ``"continue"``."""
        self.save_checkpoint(checkpoint)
        return "continue"

    # -- receipts (bindloop.run.ToolCallReceiptStore) --------------------------------------------

    def read_sync(self, key: ToolCallReceiptKey) -> ReceiptState | None:
        row = self._db.execute(
            f"SELECT status, attempt, lease_expires_at_ms, result, error FROM receipts "
            f"WHERE {_KEY_WHERE}", _key(key)).fetchone()
        if row is None:
            return None
        status, attempt, lease, result, error = row
        if status == "running":
            return ReceiptRunning(attempt=attempt, lease_expires_at_ms=lease)
        if status == "completed":
            return ReceiptCompleted(attempt=attempt,
                                    result=None if result is None else msgspec.json.decode(result))
        return ReceiptFailed(attempt=attempt, error=error)

    async def read(self, key: ToolCallReceiptKey) -> ReceiptState | None:
        return self.read_sync(key)

    def claim_sync(self, key: ToolCallReceiptKey, attempt: int, lease_ms: float) -> bool:
        attempt, lease_ms = _attempt(attempt), _lease(lease_ms)
        k = _key(key)

        def write(db: sqlite3.Connection) -> bool:
            row = db.execute(f"SELECT status, attempt, lease_expires_at_ms FROM receipts "
                             f"WHERE {_KEY_WHERE}", k).fetchone()
            now = self.now()
            if row is None:
                claimable, current = True, 0
            else:
                status, current, lease = row
                claimable = status == "failed" or (status == "running" and now >= lease)
            if not claimable or current != attempt - 1:
                return False
            db.execute("INSERT OR REPLACE INTO receipts VALUES (?, ?, ?, ?, 'running', ?, ?, "
                       "NULL, NULL)", (*k, attempt, now + lease_ms))
            return True

        return self._fenced(self._write(write))

    async def claim(self, key: ToolCallReceiptKey, attempt: int, lease_ms: float) -> bool:
        return self.claim_sync(key, attempt, lease_ms)

    async def renew(self, key: ToolCallReceiptKey, attempt: int, lease_ms: float) -> bool:
        """Extend a lease the caller still owns (not part of the protocol)."""
        k, lease_ms = _key(key), _lease(lease_ms)

        def write(db: sqlite3.Connection) -> bool:
            cur = db.execute(f"UPDATE receipts SET lease_expires_at_ms = ? WHERE {_KEY_WHERE} "
                             "AND status = 'running' AND attempt = ?",
                             (self.now() + lease_ms, *k, _attempt(attempt)))
            return cur.rowcount == 1

        return self._fenced(self._write(write))

    def complete_with(self, key: ToolCallReceiptKey, attempt: int, result: Any,
                      effect: Callable[[sqlite3.Connection], None] | None = None) -> bool:
        """Complete the receipt — and run ``effect`` (writes to the host's own tables through the
        connection it is given) in the same transaction, only if the fence holds. ``False``: the
        attempt no longer owns the receipt; nothing was written and ``effect`` did not run. An
        exception from ``effect`` rolls both back and propagates."""
        k = _key(key)
        encoded = msgspec.json.encode(result)

        def write(db: sqlite3.Connection) -> bool:
            cur = db.execute(f"UPDATE receipts SET status = 'completed', result = ?, "
                             f"lease_expires_at_ms = NULL WHERE {_KEY_WHERE} "
                             "AND status = 'running' AND attempt = ?",
                             (encoded, *k, _attempt(attempt)))
            if cur.rowcount != 1:
                return False
            if effect is not None:
                effect(db)
            return True

        return self._fenced(self._write(write))

    async def complete(self, key: ToolCallReceiptKey, attempt: int, result: Any) -> bool:
        return self.complete_with(key, attempt, result)

    async def fail(self, key: ToolCallReceiptKey, attempt: int, error: str | None) -> bool:
        k = _key(key)

        def write(db: sqlite3.Connection) -> bool:
            cur = db.execute(f"UPDATE receipts SET status = 'failed', error = ?, "
                             f"lease_expires_at_ms = NULL WHERE {_KEY_WHERE} "
                             "AND status = 'running' AND attempt = ?",
                             (error, *k, _attempt(attempt)))
            return cur.rowcount == 1

        return self._fenced(self._write(write))

    def _fenced(self, landed: bool) -> bool:
        if not landed:
            self.fenced_writes += 1
        return landed
