"""A real store for CPython hosts: checkpoints, idempotency receipts and rate limits in one SQLite
file (WAL), shared by every process on the machine that opens it.

Outside the fences (it does file I/O). It serves the existing ports:

- **checkpoints**: :meth:`SqliteStore.commit` is a :data:`bindloop.checkpoints.CommitFn` for
  :func:`bindloop.checkpoints.run_from_checkpoint`; :meth:`SqliteStore.save_checkpoint` /
  :meth:`SqliteStore.load_checkpoint` store and read the bytes of
  :func:`~bindloop.checkpoints.serialize_loop_checkpoint`. Writes are **single-writer fenced on the
  revision**: a checkpoint lands only when it is exactly one revision after the stored one (or the
  execution has none yet), so two processes resuming the same execution cannot both commit; the
  loser gets :class:`CheckpointConflictError` and must stop.
- **receipts**: the class is a :class:`bindloop.stores.ToolCallReceiptStore` (``read`` / ``claim`` /
  ``complete`` / ``fail``, plus ``renew``) with the attempt fence and leases measured on the store's
  clock (``now``, wall-clock milliseconds by default, so a lease outlives the process that took
  it). :meth:`SqliteStore.complete_with` applies a side effect that lives in this same database in
  the very transaction that completes the receipt — the fence the protocol recommends: a crash
  either lands both or neither, so an expired ``running`` receipt proves the effect did not happen.
  :meth:`SqliteStore.complete_once` records a call no attempt has touched yet as completed by
  attempt 1, with such an effect, in one transaction (no claim first).

- **limits**: a :class:`bindloop.stores.LimitStore` (sliding windows and concurrency slots), so
  several processes on one machine share a provider quota. Each slot is leased to the store
  object that took it for ``slot_lease_ms`` (on ``now``) and renewed by ``renew_slots()``: the
  slots of a killed process come back when their lease ends.

It is also a :class:`bindloop.stores.CheckpointStore` (async ``load`` / ``save`` / ``delete``)
and passes ``bindloop.testing.store_kit``. The schema is versioned (``PRAGMA user_version``): a
file written by a newer schema is refused rather than misread.

Every write is one ``BEGIN IMMEDIATE`` transaction (SQLite's write lock is taken up front, so a
read-check-write cannot interleave with another writer, in this process or another), or one
statement when that is all it needs (a checkpoint's save: an upsert fenced on the revision). WAL keeps
readers unblocked; ``synchronous=NORMAL`` (the default here) is durable across a killed process,
``"FULL"`` also across power loss. One connection per store, used from one thread (asyncio and
trio hosts call it from their loop thread; calls are short and synchronous inside).
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Callable
from types import TracebackType
from typing import Any, Literal

import msgspec

from bindloop.clock import Clock, epoch_ms
from bindloop.errors import UsageError
from bindloop.loop import BoundaryDecision
from bindloop.run import (
    window_wait,
    ReceiptCompleted,
    ReceiptFailed,
    ReceiptRunning,
    ReceiptState,
    ToolCallReceiptKey,
)
from bindloop.checkpoints import LoopCheckpoint, parse_loop_checkpoint
from bindloop.stores import CheckpointConflictError

from bindloop.hosts.stores._common import (
    DEFAULT_SLOT_LEASE_MS,
    HeldSlots,
    check_attempt as _attempt,
    check_lease as _lease,
    check_max_bytes,
    encode_checkpoint,
    key_parts as _key,
)

# CheckpointConflictError lives in bindloop.checkpoints (every store raises it); re-exported here.
__all__ = ("SqliteStore",)

SCHEMA_VERSION = 2

_SAVE = ("INSERT INTO checkpoints VALUES (?, ?, ?) ON CONFLICT (execution_id) DO UPDATE SET "
         "revision = excluded.revision, body = excluded.body "
         "WHERE checkpoints.revision + 1 = excluded.revision")

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
CREATE TABLE IF NOT EXISTS limit_events (
    seq    INTEGER PRIMARY KEY AUTOINCREMENT,
    key    TEXT NOT NULL,
    at     REAL NOT NULL,
    amount INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS limit_events_key ON limit_events (key, at);
CREATE TABLE IF NOT EXISTS limit_slots (
    key TEXT PRIMARY KEY,
    n   INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS limit_leases (
    key        TEXT NOT NULL,
    slot       TEXT NOT NULL,
    holder     TEXT NOT NULL,
    expires_at REAL NOT NULL,
    PRIMARY KEY (key, slot)
);
CREATE INDEX IF NOT EXISTS limit_leases_holder ON limit_leases (holder);
"""
# Version 2: concurrency slots are leased rows (limit_leases); limit_slots (version 1's counters)
# is no longer read. A version-1 file is upgraded in place on open.
_KEY_WHERE = "tenant_id = ? AND run_id = ? AND tool_name = ? AND args_hash = ?"


def _encode_result(result: Any) -> bytes:
    """A completed receipt's stored result (JSON; ``read_sync`` decodes it)."""
    return msgspec.json.encode(result)


class SqliteStore:
    """Checkpoints and receipts in the SQLite file at ``path`` (created if missing).

    ``now`` is the store's clock for leases (milliseconds). ``max_checkpoint_bytes`` bounds what
    :meth:`load_checkpoint` will decode and :meth:`save_checkpoint` will write (loading costs
    roughly 15x the stored size in memory). Tool results given to :meth:`complete` must be plain
    JSON values (``read`` returns them decoded as such).
    """

    @staticmethod
    def new_execution_id() -> str:
        """A fresh execution id, unique across processes: pass it as ``create_agent(execution_ids=
        store.new_execution_id)`` when several processes share this file (the agent's default
        counts per agent object, so two processes would both start at ``"<id>-0"``)."""
        return uuid.uuid4().hex

    def __init__(self, path: str | os.PathLike[str], *, now: Clock = epoch_ms,
                 max_checkpoint_bytes: int | None = None,
                 synchronous: Literal["NORMAL", "FULL"] = "NORMAL",
                 busy_timeout_s: float = 30.0,
                 slot_lease_ms: float | None = DEFAULT_SLOT_LEASE_MS) -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise UsageError(f"synchronous must be 'NORMAL' or 'FULL', got {synchronous!r}")
        self.now = now
        self.max_checkpoint_bytes = check_max_bytes(max_checkpoint_bytes)
        self._slots = HeldSlots(slot_lease_ms)
        self.fenced_writes = 0
        """Receipt writes refused by the attempt fence (a diagnostic, per store object)."""
        self._db = sqlite3.connect(os.fspath(path), timeout=busy_timeout_s, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            self._db.close()
            raise UsageError(f"{os.fspath(path)!r} has store schema version {version}; this "
                             f"bindloop reads version {SCHEMA_VERSION} (upgrade bindloop)")
        self._db.executescript(_SCHEMA)
        if version < SCHEMA_VERSION:
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

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
        :class:`~bindloop.checkpoints.CheckpointFormatError` for a checkpoint that cannot be stored,
        and :class:`~bindloop.errors.UsageError` past ``max_checkpoint_bytes``."""
        body = encode_checkpoint(checkpoint, self.max_checkpoint_bytes)
        ident, revision = checkpoint.execution_id, checkpoint.revision
        # One statement, atomic on its own (the connection is in autocommit): the upsert's
        # fence lands it exactly when no row exists or the stored revision is the one before.
        while self._db.execute(_SAVE, (ident, revision, body)).rowcount != 1:
            row = self._db.execute("SELECT revision FROM checkpoints WHERE execution_id = ?",
                                   (ident,)).fetchone()
            if row is not None:
                raise CheckpointConflictError(ident, revision, row[0])
            # (deleted between the two statements: nothing is stored now, so the save may land)

    def load_checkpoint(self, execution_id: str) -> LoopCheckpoint | None:
        """The stored checkpoint of ``execution_id``, parsed and validated, or ``None``."""
        row = self._db.execute("SELECT body FROM checkpoints WHERE execution_id = ?",
                               (execution_id,)).fetchone()
        if row is None:
            return None
        return parse_loop_checkpoint(bytes(row[0]), max_bytes=self.max_checkpoint_bytes,
                                     execution_id=execution_id)

    def delete_checkpoint(self, execution_id: str) -> bool:
        """Remove the stored checkpoint of ``execution_id``; whether there was one."""
        return bool(self._write(lambda db: db.execute(
            "DELETE FROM checkpoints WHERE execution_id = ?", (execution_id,)).rowcount == 1))

    # The async CheckpointStore port (bindloop.stores.CheckpointStore) over the calls above.

    async def load(self, execution_id: str) -> LoopCheckpoint | None:
        return self.load_checkpoint(execution_id)

    async def save(self, checkpoint: LoopCheckpoint) -> None:
        self.save_checkpoint(checkpoint)

    async def delete(self, execution_id: str) -> bool:
        return self.delete_checkpoint(execution_id)

    def checkpoint_ids(self) -> list[str]:
        return [r[0] for r in self._db.execute(
            "SELECT execution_id FROM checkpoints ORDER BY execution_id")]

    def commit(self, checkpoint: LoopCheckpoint) -> BoundaryDecision:
        """A :data:`~bindloop.checkpoints.CommitFn`: store, then ``"continue"``."""
        self.save_checkpoint(checkpoint)
        return "continue"

    # -- receipts (bindloop.stores.ToolCallReceiptStore) --------------------------------------------

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
        encoded = _encode_result(result)

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

    def complete_once_sync(self, key: ToolCallReceiptKey, result: Any,
                           effect: Callable[[sqlite3.Connection], None] | None = None
                           ) -> ReceiptState | None:
        """Record a call no attempt has touched yet as completed by attempt 1 with ``result``,
        and run ``effect`` (writes to the host's own tables, as for :meth:`complete_with`), in
        one transaction.

        ``None``: the receipt was absent; it now reads ``ReceiptCompleted(attempt=1,
        result=result)`` and the effect's writes landed with it. Otherwise the receipt that
        exists (any status, an expired lease included), exactly as :meth:`read` returns it:
        nothing was written and ``effect`` did not run — decide with
        :func:`bindloop.run.decide_tool_call_receipt` (replay, wait, or :meth:`claim` the next
        attempt and finish with :meth:`complete_with`). An exception from ``effect`` rolls both
        back and propagates."""
        k = _key(key)
        encoded = _encode_result(result)

        def write(db: sqlite3.Connection) -> ReceiptState | None:
            found = self.read_sync(key)  # inside the write lock: no writer can come between
            if found is not None:
                return found
            db.execute("INSERT INTO receipts VALUES (?, ?, ?, ?, 'completed', 1, NULL, ?, NULL)",
                       (*k, encoded))
            if effect is not None:
                effect(db)
            return None

        out: ReceiptState | None = self._write(write)
        return out

    async def complete_once(self, key: ToolCallReceiptKey, result: Any,
                            effect: Callable[[sqlite3.Connection], None] | None = None
                            ) -> ReceiptState | None:
        """:meth:`complete_once_sync` (not part of the protocol: an optional capability)."""
        return self.complete_once_sync(key, result, effect)

    async def fail(self, key: ToolCallReceiptKey, attempt: int, error: str | None) -> bool:
        k = _key(key)

        def write(db: sqlite3.Connection) -> bool:
            cur = db.execute(f"UPDATE receipts SET status = 'failed', error = ?, "
                             f"lease_expires_at_ms = NULL WHERE {_KEY_WHERE} "
                             "AND status = 'running' AND attempt = ?",
                             (error, *k, _attempt(attempt)))
            return cur.rowcount == 1

        return self._fenced(self._write(write))

    async def delete_run(self, tenant_id: str, run_id: str) -> int:
        return int(self._write(lambda db: db.execute(
            "DELETE FROM receipts WHERE tenant_id = ? AND run_id = ?",
            (str(tenant_id), str(run_id))).rowcount))

    def _fenced(self, landed: bool) -> bool:
        if not landed:
            self.fenced_writes += 1
        return landed

    # -- limits (bindloop.stores.LimitStore), shared by every process on this file ----------------

    async def admit(self, key: str, window_ms: float, limit: int, amount: int,
                    now: float) -> float:
        def write(db: sqlite3.Connection) -> float:
            db.execute("DELETE FROM limit_events WHERE key = ? AND at <= ?", (key, now - window_ms))
            used = db.execute("SELECT coalesce(sum(amount), 0) FROM limit_events WHERE key = ?",
                              (key,)).fetchone()[0]
            if (used + amount <= limit) if amount else (used < limit):
                wait = 0.0
            else:  # only a refusal needs the entries, oldest first, to say how long
                entries = db.execute("SELECT at, amount FROM limit_events WHERE key = ? "
                                     "ORDER BY at, seq", (key,)).fetchall()
                wait = window_wait(entries, window_ms, limit, amount, now)
            if wait == 0.0 and amount:
                db.execute("INSERT INTO limit_events (key, at, amount) VALUES (?, ?, ?)",
                           (key, now, amount))
            return wait

        return float(self._write(write))

    async def charge(self, key: str, window_ms: float, amount: int, now: float) -> None:
        if amount > 0:
            self._write(lambda db: db.execute(
                "INSERT INTO limit_events (key, at, amount) VALUES (?, ?, ?)", (key, now, amount)))

    async def enter(self, key: str, limit: int) -> bool:
        slots, now = self._slots, self.now()
        slot = slots.new_slot()

        def write(db: sqlite3.Connection) -> bool:
            db.execute("DELETE FROM limit_leases WHERE key = ? AND expires_at <= ?", (key, now))
            if db.execute("SELECT count(*) FROM limit_leases WHERE key = ?",
                          (key,)).fetchone()[0] >= limit:
                return False
            db.execute("INSERT INTO limit_leases VALUES (?, ?, ?, ?)",
                       (key, slot, slots.holder, slots.expiry(now)))
            return True

        taken = bool(self._write(write))
        if taken:
            slots.took(key, slot)
        return taken

    async def leave(self, key: str) -> None:
        slot = self._slots.give_back(key)
        if slot is not None:
            self._write(lambda db: db.execute(
                "DELETE FROM limit_leases WHERE key = ? AND slot = ?", (key, slot)))

    async def renew_slots(self) -> None:
        """Renew the leases of every slot this handle holds (a lapsed one stays lapsed)."""
        slots, now = self._slots, self.now()
        self._write(lambda db: db.execute(
            "UPDATE limit_leases SET expires_at = ? WHERE holder = ? AND expires_at > ?",
            (slots.expiry(now), slots.holder, now)))
