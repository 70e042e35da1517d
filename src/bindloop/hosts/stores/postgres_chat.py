"""The ASGI chat host's shared state in PostgreSQL (optional extra ``bindloop[postgres]``):
:class:`PostgresRunLogs`, a :class:`~bindloop.hosts.asgi.run_logs.ContinuableRunLogs` any number of
host processes and machines share, and :class:`PostgresPendingApprovals`, the
:class:`~bindloop.stores.PendingApprovals` whose decisions are taken once across them. The
semantics are :class:`~bindloop.hosts.asgi.run_logs.SqliteRunLogs`' and
:class:`~bindloop.hosts.asgi.approvals.SqlitePendingApprovals`' (the same tests run against all
three stores):

- a run holds a lease; :meth:`~PostgresRunLogs.begin` refuses a second run of a chat while its
  latest run's lease is live (:class:`~bindloop.stores.RunBusyError`), in any process -- the check
  and the insert are one transaction under a per-chat advisory lock;
- :meth:`~PostgresRunLogs.take_over` is one transaction under the same lock: of the processes that
  find a lost run, exactly one continues it;
- ended runs are pruned at each ``begin`` by age, count and bytes; a running run never is;
  :meth:`~PostgresRunLogs.delete_chat` takes a chat's runs with all they stored;
- :meth:`PostgresPendingApprovals.take` is one ``DELETE ... RETURNING``: of two processes taking
  the same decision, one gets the call.

The ports are synchronous (a run's frames are written from its runner's ``emit`` callback, and a
save lands before the run goes on), so these classes talk through psycopg's synchronous
connection (the same package as :class:`~bindloop.hosts.stores.postgres.PostgresStore`'s async
one): each call blocks the event loop for its round trips, as the SQLite store's writes do. Keep
the server near the host (the same machine or LAN).

Each object holds one connection, opened at the first call; one the server closed while it was
idle (a restart between two calls) is noticed before anything is sent on it and opened again, so
the first write after a restart lands. The session bounds each statement with ``statement_timeout`` and
``idle_in_transaction_session_timeout`` at ``io_timeout_s``, with the same keepalives as
:class:`~bindloop.hosts.stores.postgres.PostgresStore`. A driver failure is a
:class:`~bindloop.stores.StoreError` naming the operation. The tables (``protocol_runs``,
``protocol_run_saves``, ``protocol_run_events``, ``protocol_pending_approvals``) live in the
Postgres schema ``schema`` (default ``bindloop``; they can share a ``PostgresStore``'s), created on
first use under an advisory lock, and versioned in the schema's ``meta`` table
(``chat_schema_version``, :data:`CHAT_SCHEMA_VERSION`): tables written by another layout are
refused with a :class:`~bindloop.stores.StoreError` at the first call, never misread.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeVar

from bindloop.contracts import ToolCall
from bindloop.errors import UsageError
from bindloop.hosts.asgi.run_logs import Continuation
from bindloop.hosts.stores._common import check_seconds, first_line
from bindloop.hosts.stores.postgres import (
    DEFAULT_IO_TIMEOUT_S,
    _psycopg,
    _session_params,
    _went_away,
)
from bindloop.stores import RunBusyError, RunRecord, RunStatus, StoreError

if TYPE_CHECKING:
    from psycopg import Connection

__all__ = ("CHAT_SCHEMA_VERSION", "PostgresPendingApprovals", "PostgresRunLogs")

CHAT_SCHEMA_VERSION = 1
"""The layout of the run-log and pending-approval tables this bindloop reads."""

_T = TypeVar("_T")
_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_RUNS_DDL = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.meta (name text PRIMARY KEY, value integer NOT NULL);
INSERT INTO {s}.meta VALUES ('chat_schema_version', {version}) ON CONFLICT DO NOTHING;
CREATE TABLE IF NOT EXISTS {s}.protocol_runs (
    run_id         TEXT PRIMARY KEY,
    chat_id        TEXT NOT NULL,
    protocol       TEXT NOT NULL,
    status         TEXT NOT NULL,
    seq            BIGINT GENERATED ALWAYS AS IDENTITY,
    lease_until_ms DOUBLE PRECISION NOT NULL,
    stop_requested BOOLEAN NOT NULL DEFAULT false,
    started_ms     DOUBLE PRECISION NOT NULL,
    continued_by   TEXT,
    continued_at   INTEGER NOT NULL DEFAULT 0,
    bytes          BIGINT
);
CREATE INDEX IF NOT EXISTS protocol_runs_chat ON {s}.protocol_runs (chat_id, protocol, seq);
CREATE INDEX IF NOT EXISTS protocol_runs_ended ON {s}.protocol_runs (seq)
    WHERE status <> 'running';
CREATE TABLE IF NOT EXISTS {s}.protocol_run_saves (
    run_id       TEXT PRIMARY KEY,
    claim        BYTEA NOT NULL,
    checkpoint   BYTEA,
    fed          TEXT NOT NULL DEFAULT '',
    saved_offset INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS {s}.protocol_run_events (
    run_id       TEXT NOT NULL,
    frame_offset INTEGER NOT NULL,
    payload      BYTEA NOT NULL,
    PRIMARY KEY (run_id, frame_offset)
);
-- begin in one round trip (one statement, so one transaction): under the chat's advisory lock,
-- refuse while its latest run's lease is live (returns that run's id), close a lost one as
-- interrupted, prune the ended runs (age, then count, then bytes, oldest first), insert the run.
CREATE OR REPLACE FUNCTION {s}.protocol_begin(
    p_run TEXT, p_chat TEXT, p_protocol TEXT, p_now DOUBLE PRECISION, p_lease DOUBLE PRECISION,
    p_cutoff DOUBLE PRECISION, p_keep BIGINT, p_max_bytes BIGINT) RETURNS TEXT AS $$
DECLARE
    last RECORD;
    doomed TEXT[];
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('bindloop-chat:' || p_protocol || ':'
                                                   || p_chat, 0));
    SELECT run_id, status, lease_until_ms INTO last FROM {s}.protocol_runs
        WHERE chat_id = p_chat AND protocol = p_protocol ORDER BY seq DESC LIMIT 1;
    IF FOUND AND last.status = 'running' THEN
        IF last.lease_until_ms > p_now THEN
            RETURN last.run_id;
        END IF;
        UPDATE {s}.protocol_runs SET status = 'interrupted' WHERE run_id = last.run_id;
    END IF;
    DELETE FROM {s}.protocol_run_saves s USING {s}.protocol_runs r
        WHERE s.run_id = r.run_id AND r.status <> 'running';
    UPDATE {s}.protocol_runs r SET bytes = (SELECT COALESCE(SUM(octet_length(payload)), 0)
        FROM {s}.protocol_run_events e WHERE e.run_id = r.run_id)
        WHERE status <> 'running' AND bytes IS NULL;
    WITH ended AS (
        SELECT run_id, seq, started_ms, bytes, row_number() OVER (ORDER BY seq DESC) AS n
        FROM {s}.protocol_runs WHERE status <> 'running'),
    kept AS (
        SELECT run_id, SUM(bytes) OVER (ORDER BY seq DESC ROWS UNBOUNDED PRECEDING) AS newer
        FROM ended WHERE started_ms >= p_cutoff AND n <= p_keep)
    SELECT array_agg(run_id) INTO doomed FROM (
        SELECT run_id FROM ended WHERE started_ms < p_cutoff OR n > p_keep
        UNION ALL SELECT run_id FROM kept WHERE newer > p_max_bytes) d;
    IF doomed IS NOT NULL THEN
        DELETE FROM {s}.protocol_run_events WHERE run_id = ANY(doomed);
        DELETE FROM {s}.protocol_run_saves WHERE run_id = ANY(doomed);
        DELETE FROM {s}.protocol_runs WHERE run_id = ANY(doomed);
    END IF;
    INSERT INTO {s}.protocol_runs (run_id, chat_id, protocol, status, lease_until_ms, started_ms)
        VALUES (p_run, p_chat, p_protocol, 'running', p_lease, p_now);
    RETURN NULL;
END
$$ LANGUAGE plpgsql;
"""

_APPROVALS_DDL = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.meta (name text PRIMARY KEY, value integer NOT NULL);
INSERT INTO {s}.meta VALUES ('chat_schema_version', {version}) ON CONFLICT DO NOTHING;
CREATE SEQUENCE IF NOT EXISTS {s}.protocol_pending_approvals_order;
CREATE TABLE IF NOT EXISTS {s}.protocol_pending_approvals (
    chat_id   TEXT NOT NULL,
    call_id   TEXT NOT NULL,
    name      TEXT NOT NULL,
    arguments TEXT NOT NULL,
    seq       BIGINT NOT NULL,
    PRIMARY KEY (chat_id, call_id)
);
CREATE INDEX IF NOT EXISTS protocol_pending_approvals_seq
    ON {s}.protocol_pending_approvals (seq);
"""


class _OtherLayout(Exception):
    """The schema's tables were written by another layout version (the message says which)."""


class _Session:
    """One synchronous connection to ``conninfo``, opened on first use and again after the server
    closed it; the schema made by ``ddl`` on the first connection. Calls are serialized (the
    ASGI app calls from its event loop; a test may call from threads)."""

    def __init__(self, conninfo: str, schema: str, ddl: str, *, connect_timeout_s: float,
                 io_timeout_s: float | None) -> None:
        if not isinstance(schema, str) or not _IDENT.fullmatch(schema):
            raise UsageError(f"schema must be a lower-case SQL identifier, got {schema!r}")
        self._psycopg = _psycopg()
        self._conninfo = conninfo
        self._connect_timeout_s = check_seconds("connect_timeout_s", connect_timeout_s)
        self._params = _session_params(
            self._psycopg, conninfo,
            None if io_timeout_s is None else check_seconds("io_timeout_s", io_timeout_s))
        self._ddl = ddl.format(s=schema, version=CHAT_SCHEMA_VERSION)
        self._schema = schema
        self._conn: Connection[Any] | None = None
        self._lock = threading.RLock()

    def _connection(self) -> Connection[Any]:
        current = self._conn
        if current is not None and not _went_away(current):
            return current
        if current is not None:  # the server ended the session while it was idle
            self._conn = None
            try:
                current.close()
            except Exception:  # a dead socket may refuse even the goodbye
                pass
        conn: Connection[Any] = self._psycopg.Connection.connect(
            self._conninfo, autocommit=True,
            connect_timeout=max(1, int(self._connect_timeout_s)), **self._params)
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                         (f"bindloop-chat-schema:{self._schema}",))
            conn.execute(self._ddl)
            row = conn.execute(f"SELECT value FROM {self._schema}.meta "
                               "WHERE name = 'chat_schema_version'").fetchone()
        if row is None or row[0] != CHAT_SCHEMA_VERSION:
            conn.close()
            raise _OtherLayout(f"schema {self._schema!r} has chat store layout version "
                               f"{None if row is None else row[0]!r}; this bindloop reads version "
                               f"{CHAT_SCHEMA_VERSION}")
        self._conn = conn
        return conn

    @contextmanager
    def use(self, store: str, operation: str) -> Iterator[Connection[Any]]:
        """The connection, for one operation; a driver failure becomes a
        :class:`~bindloop.stores.StoreError` (the connection is dropped when it broke)."""
        errors = self._psycopg
        with self._lock:
            try:
                yield self._connection()
            except _OtherLayout as exc:
                raise StoreError(store, operation, str(exc)) from None
            except errors.errors.UniqueViolation as exc:
                raise UsageError(f"{operation}: {first_line(exc)}") from exc
            except errors.Error as exc:
                conn = self._conn
                if conn is not None and (conn.broken or isinstance(exc, errors.OperationalError)):
                    self._conn = None
                    try:
                        conn.close()
                    except Exception:  # a dead socket may refuse even the goodbye
                        pass
                raise StoreError(store, operation, first_line(exc)) from exc

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None




class PostgresRunLogs:
    """Run logs in PostgreSQL at ``conninfo`` (a libpq connection string or URL), shared by every
    process of a chat host: a :class:`~bindloop.hosts.asgi.run_logs.ContinuableRunLogs`, so a
    run whose process died is continued by another (see the module docstring). Every append is
    committed before it is served.

    Ended runs are pruned at each :meth:`begin`: those started more than ``max_age_ms`` ago, all
    but the newest ``keep`` ended ones, and the oldest ones while the ended runs' frames pass
    ``max_bytes``; what a run kept to be continued goes when it ends. A running run is never
    pruned. Nothing connects until the first call; :meth:`close` closes the connection."""

    name = "postgres"

    def __init__(self, conninfo: str, *, schema: str = "bindloop", keep: int = 10_000,
                 max_age_ms: float = 7 * 24 * 3_600_000, max_bytes: int = 1024 * 1024 * 1024,
                 connect_timeout_s: float = 10.0,
                 io_timeout_s: float | None = DEFAULT_IO_TIMEOUT_S) -> None:
        if keep < 1 or not max_age_ms > 0 or max_bytes < 1:
            raise UsageError("PostgresRunLogs(keep=, max_age_ms=, max_bytes=) must be positive")
        self._keep = keep
        self._max_age_ms = max_age_ms
        self._max_bytes = max_bytes
        self._session = _Session(conninfo, schema, _RUNS_DDL,
                                 connect_timeout_s=connect_timeout_s, io_timeout_s=io_timeout_s)
        self._schema = schema
        self._t = {n: f"{schema}.{n}" for n in
                   ("protocol_runs", "protocol_run_saves", "protocol_run_events")}
        self._next: dict[str, int] = {}

    def close(self) -> None:
        self._session.close()

    def _run(self, operation: str, body: Callable[[Connection[Any]], _T], *,
             transaction: bool = False) -> _T:
        with self._session.use(self.name, operation) as conn:
            if not transaction:
                return body(conn)
            with conn.transaction():
                return body(conn)

    @staticmethod
    def _lock_chat(conn: Connection[Any], chat_id: str, protocol: str) -> None:
        """Inside a transaction: the chat's writers (begin, take-over, delete) one at a time
        (the key ``protocol_begin`` takes too)."""
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                     (f"bindloop-chat:{protocol}:{chat_id}",))

    def _latest_row(self, conn: Connection[Any], chat_id: str,
                    protocol: str) -> tuple[Any, ...] | None:
        return conn.execute(
            f"SELECT run_id, status, lease_until_ms FROM {self._t['protocol_runs']} WHERE "
            "chat_id = %s AND protocol = %s ORDER BY seq DESC LIMIT 1",
            (chat_id, protocol)).fetchone()

    def _forget(self, conn: Connection[Any], run_ids: list[str]) -> None:
        for table in ("protocol_run_events", "protocol_run_saves", "protocol_runs"):
            conn.execute(f"DELETE FROM {self._t[table]} WHERE run_id = ANY(%s)", (run_ids,))

    def _insert(self, conn: Connection[Any], run_id: str, chat_id: str, protocol: str, *,
                now_ms: float, lease_until_ms: float) -> None:
        conn.execute(
            f"INSERT INTO {self._t['protocol_runs']} (run_id, chat_id, protocol, status, "
            "lease_until_ms, started_ms) VALUES (%s, %s, %s, 'running', %s, %s)",
            (run_id, chat_id, protocol, lease_until_ms, now_ms))

    def recover(self, now_ms: float) -> list[str]:
        """Close every run left ``running`` whose lease ran out (its process died) as
        ``interrupted``; runs other processes still renew are left alone. Returns the ids
        closed."""
        rows = self._run("recover", lambda conn: conn.execute(
            f"UPDATE {self._t['protocol_runs']} SET status = 'interrupted' WHERE status = "
            "'running' AND lease_until_ms <= %s RETURNING run_id", (now_ms,)).fetchall())
        return [str(r[0]) for r in rows]

    def begin(self, run_id: str, chat_id: str, protocol: str, *, now_ms: float,
              lease_until_ms: float) -> None:
        # One statement (the schema's function): the check, the prune and the insert are one
        # transaction under the chat's lock, so two processes starting the chat cannot both
        # pass the check.
        row = self._run("begin", lambda conn: conn.execute(
            f"SELECT {self._schema}.protocol_begin(%s, %s, %s, %s, %s, %s, %s, %s)",
            (run_id, chat_id, protocol, now_ms, lease_until_ms, now_ms - self._max_age_ms,
             self._keep, self._max_bytes)).fetchone())
        if row is not None and row[0] is not None:
            raise RunBusyError(str(row[0]))
        self._next[run_id] = 0

    def claim(self, run_id: str, claim: bytes) -> None:
        self._run("claim", lambda conn: conn.execute(
            f"INSERT INTO {self._t['protocol_run_saves']} (run_id, claim) VALUES (%s, %s) ON "
            "CONFLICT (run_id) DO UPDATE SET claim = EXCLUDED.claim, checkpoint = NULL, "
            "fed = '', saved_offset = 0", (run_id, claim)))

    def save(self, run_id: str, checkpoint: bytes, fed: str, offset: int) -> None:
        self._run("save", lambda conn: conn.execute(
            f"UPDATE {self._t['protocol_run_saves']} SET checkpoint = %s, fed = fed || %s, "
            "saved_offset = %s WHERE run_id = %s", (checkpoint, fed, offset, run_id)))

    def unlink(self, run_id: str) -> None:
        self._run("unlink", lambda conn: conn.execute(
            f"UPDATE {self._t['protocol_runs']} SET continued_at = 0 WHERE run_id = %s",
            (run_id,)))

    def lost(self, now_ms: float) -> list[RunRecord]:
        rows = self._run("lost", lambda conn: conn.execute(
            f"SELECT r.run_id FROM {self._t['protocol_runs']} r JOIN "
            f"{self._t['protocol_run_saves']} s USING (run_id) WHERE r.status = 'running' AND "
            "r.lease_until_ms <= %s ORDER BY r.seq", (now_ms,)).fetchall())
        found = (self.record(str(r[0])) for r in rows)
        return [r for r in found if r is not None]

    def take_over(self, run_id: str, new_run_id: str, *, now_ms: float,
                  lease_until_ms: float) -> Continuation | None:
        runs, saves = self._t["protocol_runs"], self._t["protocol_run_saves"]

        def body(conn: Connection[Any]) -> Continuation | None:
            found = conn.execute(f"SELECT chat_id, protocol FROM {runs} WHERE run_id = %s",
                                 (run_id,)).fetchone()
            if found is None:
                return None
            chat_id, protocol = str(found[0]), str(found[1])
            self._lock_chat(conn, chat_id, protocol)
            row = conn.execute(
                f"SELECT r.status, r.lease_until_ms, s.claim, s.checkpoint, s.fed, "
                f"s.saved_offset FROM {runs} r JOIN {saves} s USING (run_id) "
                "WHERE r.run_id = %s", (run_id,)).fetchone()
            if row is None or row[0] != "running" or row[1] > now_ms:
                return None
            latest = self._latest_row(conn, chat_id, protocol)
            if latest is None or latest[0] != run_id:
                return None
            offset = int(row[5]) if row[3] is not None else 0
            conn.execute(f"UPDATE {runs} SET status = 'continued', continued_by = %s, "
                         "continued_at = %s WHERE run_id = %s", (new_run_id, offset, run_id))
            self._insert(conn, new_run_id, chat_id, protocol, now_ms=now_ms,
                         lease_until_ms=lease_until_ms)
            conn.execute(f"UPDATE {saves} SET run_id = %s WHERE run_id = %s",
                         (new_run_id, run_id))
            return Continuation(previous=run_id, claim=bytes(row[2]),
                                checkpoint=None if row[3] is None else bytes(row[3]),
                                fed=str(row[4]), offset=offset)

        taken = self._run("take_over", body, transaction=True)
        if taken is not None:
            self._next[new_run_id] = 0
        return taken

    def renew(self, run_id: str, lease_until_ms: float) -> bool:
        row = self._run("renew", lambda conn: conn.execute(
            f"UPDATE {self._t['protocol_runs']} SET lease_until_ms = %s WHERE run_id = %s "
            "RETURNING stop_requested", (lease_until_ms, run_id)).fetchone())
        return bool(row and row[0])

    def request_stop(self, run_id: str) -> None:
        self._run("request_stop", lambda conn: conn.execute(
            f"UPDATE {self._t['protocol_runs']} SET stop_requested = true WHERE run_id = %s",
            (run_id,)))

    def append(self, run_id: str, payload: bytes) -> int:
        events = self._t["protocol_run_events"]

        def body(conn: Connection[Any]) -> int:
            offset = self._next.get(run_id)
            if offset is None:
                row = conn.execute(f"SELECT COUNT(*) FROM {events} WHERE run_id = %s",
                                   (run_id,)).fetchone()
                offset = int(row[0]) if row else 0
            conn.execute(f"INSERT INTO {events} VALUES (%s, %s, %s)", (run_id, offset, payload))
            return offset

        try:
            offset = self._run("append", body)
        except Exception:
            self._next.pop(run_id, None)  # whether it landed is unknown: count again next time
            raise
        self._next[run_id] = offset + 1
        return offset

    def end(self, run_id: str, status: RunStatus) -> None:
        # One statement (atomic, one round trip): the status set and what the run kept to be
        # continued dropped.
        self._run("end", lambda conn: conn.execute(
            f"WITH dropped AS (DELETE FROM {self._t['protocol_run_saves']} WHERE run_id = %s) "
            f"UPDATE {self._t['protocol_runs']} SET status = %s WHERE run_id = %s",
            (run_id, status, run_id)))
        self._next.pop(run_id, None)

    def delete_chat(self, chat_id: str, protocol: str, *, now_ms: float) -> bool:
        def body(conn: Connection[Any]) -> bool:
            self._lock_chat(conn, chat_id, protocol)
            runs = conn.execute(
                f"SELECT run_id, status, lease_until_ms FROM {self._t['protocol_runs']} WHERE "
                "chat_id = %s AND protocol = %s ORDER BY seq DESC",
                (chat_id, protocol)).fetchall()
            if runs and runs[0][1] == "running" and runs[0][2] > now_ms:
                raise RunBusyError(str(runs[0][0]))
            if runs:
                self._forget(conn, [str(r[0]) for r in runs])
            return bool(runs)

        return self._run("delete_chat", body, transaction=True)

    def read(self, run_id: str, after: int | None) -> list[tuple[int, bytes]]:
        rows = self._run("read", lambda conn: conn.execute(
            f"SELECT frame_offset, payload FROM {self._t['protocol_run_events']} WHERE "
            "run_id = %s AND frame_offset > %s ORDER BY frame_offset",
            (run_id, -1 if after is None else after)).fetchall())
        return [(int(o), bytes(p)) for o, p in rows]

    def _record_sql(self, where: str) -> str:
        runs, saves, events = (self._t[n] for n in
                               ("protocol_runs", "protocol_run_saves", "protocol_run_events"))
        return (
            f"SELECT r.run_id, r.chat_id, r.protocol, r.status, (SELECT COUNT(*) FROM {events} e "
            "WHERE e.run_id = r.run_id), r.lease_until_ms, r.stop_requested, r.continued_by, "
            "r.continued_at, (SELECT CASE WHEN s.checkpoint IS NULL THEN 0 ELSE s.saved_offset "
            f"END FROM {saves} s WHERE s.run_id = r.run_id) FROM {runs} r WHERE {where}")

    @staticmethod
    def _record(row: tuple[Any, ...] | None) -> RunRecord | None:
        if row is None:
            return None
        return RunRecord(run_id=str(row[0]), chat_id=str(row[1]), protocol=str(row[2]),
                         status=row[3], events=int(row[4]), lease_until_ms=float(row[5]),
                         stop_requested=bool(row[6]), continued_by=row[7],
                         continued_at=int(row[8]), claimed=row[9] is not None,
                         saved=int(row[9] or 0))

    def record(self, run_id: str) -> RunRecord | None:
        return self._record(self._run("record", lambda conn: conn.execute(
            self._record_sql("r.run_id = %s"), (run_id,)).fetchone()))

    def latest(self, chat_id: str, protocol: str) -> RunRecord | None:
        return self._record(self._run("latest", lambda conn: conn.execute(
            self._record_sql("r.chat_id = %s AND r.protocol = %s ORDER BY r.seq DESC LIMIT 1"),
            (chat_id, protocol)).fetchone()))


class PostgresPendingApprovals:
    """:class:`~bindloop.stores.PendingApprovals` in PostgreSQL at ``conninfo`` (table
    ``protocol_pending_approvals`` of ``schema``; it can share
    :class:`PostgresRunLogs`' schema), for the newest ``max_chats`` chats (the oldest chat's
    pending calls are forgotten first). :meth:`take` is one ``DELETE ... RETURNING``: of two
    processes taking the same decision, one gets the call."""

    name = "postgres"

    def __init__(self, conninfo: str, *, schema: str = "bindloop", max_chats: int = 100_000,
                 connect_timeout_s: float = 10.0,
                 io_timeout_s: float | None = DEFAULT_IO_TIMEOUT_S) -> None:
        if max_chats < 1:
            raise UsageError(f"max_chats must be at least 1, got {max_chats}")
        self._max = max_chats
        self._session = _Session(conninfo, schema, _APPROVALS_DDL,
                                 connect_timeout_s=connect_timeout_s, io_timeout_s=io_timeout_s)
        self._table = f"{schema}.protocol_pending_approvals"
        self._order = f"{schema}.protocol_pending_approvals_order"

    def close(self) -> None:
        self._session.close()

    def record(self, chat_id: str, calls: Sequence[ToolCall]) -> None:
        with self._session.use(self.name, "record") as conn, conn.transaction():
            row = conn.execute(f"SELECT nextval('{self._order}')").fetchone()
            seq = int(row[0]) if row else 0
            conn.execute(f"UPDATE {self._table} SET seq = %s WHERE chat_id = %s",
                         (seq, chat_id))  # newest last
            with conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {self._table} VALUES (%s, %s, %s, %s, %s) ON CONFLICT "
                    "(chat_id, call_id) DO UPDATE SET name = EXCLUDED.name, "
                    "arguments = EXCLUDED.arguments, seq = EXCLUDED.seq",
                    [(chat_id, c.id, c.name, c.arguments, seq) for c in calls])
            conn.execute(
                f"DELETE FROM {self._table} WHERE chat_id IN (SELECT chat_id FROM {self._table} "
                "GROUP BY chat_id ORDER BY MAX(seq) DESC OFFSET %s)", (self._max,))

    def take(self, chat_id: str, call_id: str) -> ToolCall | None:
        with self._session.use(self.name, "take") as conn:
            row = conn.execute(f"DELETE FROM {self._table} WHERE chat_id = %s AND call_id = %s "
                               "RETURNING name, arguments", (chat_id, call_id)).fetchone()
        return None if row is None else ToolCall(id=call_id, name=str(row[0]),
                                                 arguments=str(row[1]))

    def forget(self, chat_id: str) -> int:
        with self._session.use(self.name, "forget") as conn:
            return int(conn.execute(f"DELETE FROM {self._table} WHERE chat_id = %s",
                                    (chat_id,)).rowcount)
