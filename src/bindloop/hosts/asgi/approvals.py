"""The calls each chat waits to have approved, in a SQLite file every process of a chat host
shares: :class:`SqlitePendingApprovals`, the :class:`~bindloop.stores.PendingApprovals` of a host
whose chats outlive a process (a decision posted to another process, or to the same one
restarted, still finds the call the model made -- once)."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Sequence

from bindloop.contracts import ToolCall
from bindloop.errors import UsageError
from bindloop.hosts.asgi.run_logs import one_at_a_time

__all__ = ("SqlitePendingApprovals",)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS protocol_pending_approvals (
    chat_id   TEXT NOT NULL,
    call_id   TEXT NOT NULL,
    name      TEXT NOT NULL,
    arguments TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    PRIMARY KEY (chat_id, call_id)
);
CREATE INDEX IF NOT EXISTS protocol_pending_approvals_seq ON protocol_pending_approvals (seq);
"""


class SqlitePendingApprovals:
    """:class:`~bindloop.stores.PendingApprovals` in the SQLite file at ``path`` (its own table:
    it can share the file of :class:`~bindloop.hosts.asgi.run_logs.SqliteRunLogs`), for the
    newest ``max_chats`` chats (the oldest chat's pending calls are forgotten first). ``take`` is
    one write: of two processes taking the same decision, one gets the call."""

    def __init__(self, path: str | os.PathLike[str], *, max_chats: int = 100_000) -> None:
        if max_chats < 1:
            raise UsageError(f"max_chats must be at least 1, got {max_chats}")
        self._max = max_chats
        self._lock = threading.RLock()  # the connection is shared by threads (one_at_a_time)
        self._db = sqlite3.connect(os.fspath(path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(_SCHEMA)

    @one_at_a_time
    def close(self) -> None:
        self._db.close()

    @one_at_a_time
    def record(self, chat_id: str, calls: Sequence[ToolCall]) -> None:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            seq = self._db.execute(
                "SELECT COALESCE(MAX(seq), 0) + 1 FROM protocol_pending_approvals").fetchone()[0]
            self._db.execute("UPDATE protocol_pending_approvals SET seq = ? WHERE chat_id = ?",
                             (seq, chat_id))  # newest last
            self._db.executemany(
                "INSERT OR REPLACE INTO protocol_pending_approvals VALUES (?, ?, ?, ?, ?)",
                [(chat_id, c.id, c.name, c.arguments, seq) for c in calls])
            self._db.execute(
                "DELETE FROM protocol_pending_approvals WHERE chat_id IN (SELECT chat_id FROM "
                "protocol_pending_approvals GROUP BY chat_id ORDER BY MAX(seq) DESC "
                "LIMIT -1 OFFSET ?)", (self._max,))
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    @one_at_a_time
    def take(self, chat_id: str, call_id: str) -> ToolCall | None:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            row = self._db.execute(
                "SELECT name, arguments FROM protocol_pending_approvals WHERE chat_id = ? AND "
                "call_id = ?", (chat_id, call_id)).fetchone()
            if row is not None:
                self._db.execute("DELETE FROM protocol_pending_approvals WHERE chat_id = ? AND "
                                 "call_id = ?", (chat_id, call_id))
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")
        return None if row is None else ToolCall(id=call_id, name=str(row[0]),
                                                 arguments=str(row[1]))

    @one_at_a_time
    def forget(self, chat_id: str) -> int:
        return int(self._db.execute("DELETE FROM protocol_pending_approvals WHERE chat_id = ?",
                                    (chat_id,)).rowcount)
