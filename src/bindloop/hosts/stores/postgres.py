"""Checkpoints, idempotency receipts and rate limits in PostgreSQL, shared by any number of worker
processes and machines (optional extra ``bindloop[postgres]``: psycopg 3, async; asyncio only).

It serves the same ports as :class:`~bindloop.hosts.stores.sqlite.SqliteStore` and passes the same
conformance kit (``bindloop.testing.store_kit``):

- :class:`bindloop.stores.CheckpointStore` (``load`` / ``save`` / ``delete``) and ``commit`` (a
  :data:`~bindloop.checkpoints.CommitFn`). The revision fence is one compare-and-swap statement
  (``INSERT ... ON CONFLICT DO UPDATE ... WHERE stored.revision + 1 = new.revision``): the row
  lock Postgres takes for the upsert orders concurrent writers, and exactly one lands.
- :class:`bindloop.stores.ToolCallReceiptStore` (``read`` / ``claim`` / ``complete`` / ``fail``,
  plus ``renew``): each write is one statement fenced on the attempt, one round trip;
  :meth:`complete_with` runs the host's own side effect on the same connection, in the
  transaction that completes the receipt, so both land or neither.
- :class:`bindloop.stores.LimitStore`: sliding windows under a per-key advisory transaction lock,
  concurrency slots as leased rows taken in one call (a function of the schema, under the same
  kind of lock): each slot is leased to this store object for ``slot_lease_ms`` and renewed by
  ``renew_slots()``, so the slots of a killed process come back when their lease ends.

Leases are measured on ``now`` (wall-clock milliseconds by default): keep the workers' clocks in
sync (NTP) or pass the same clock everywhere.

The schema (tables in the Postgres schema ``schema``, default ``bindloop``) is created on first
use under an advisory lock, and versioned in its ``meta`` table: a schema written by a newer
bindloop is refused, never misread. Connections come from a small pool (``pool_size``). An idle
connection the server closed (a restart between two operations) is noticed before anything is
sent on it — its socket has become readable — and replaced by a fresh one, so the first write
after a restart lands. A connection that fails once a statement was sent is discarded and the
operation raises :class:`~bindloop.stores.StoreError` naming the operation (whether it landed
is unknown) — except reads, and a ``save``, which retry once on a fresh connection (the retried
``save`` recognises its own checkpoint if the first attempt had landed). Every write is one
transaction: a checkpoint is stored whole or not at all.

Every operation is bounded in time by ``io_timeout_s`` (default 10 s), on both ends of the
connection, so a network that goes silent mid-statement costs a worker that long and no more, and
leaves no lock behind on the server:

- the client abandons an operation that has not been answered ``io_timeout_s`` after its
  connection was taken (its statements, and ``complete_with``'s effect), closes the connection
  and raises :class:`~bindloop.stores.StoreError` ("no answer within ...");
- each session runs with ``statement_timeout`` and ``idle_in_transaction_session_timeout`` at
  ``io_timeout_s``: a statement (a lock wait included) never runs longer, and a transaction whose
  client went silent is ended by the server at most ``io_timeout_s`` after the last message it
  received, releasing its row and advisory locks — so a worker taking over an expired receipt
  lease waits at most that long for the lock a vanished holder kept. Keep ``io_timeout_s`` below
  the receipt leases you claim;
- TCP keepalives (``keepalives_idle`` half of it, three probes) and ``tcp_user_timeout`` bound how
  long the kernel keeps a dead connection open, so an idle pooled connection to a vanished peer
  is found dead before it is used.

Values set in ``conninfo`` (its ``options``' ``-c`` settings, ``keepalives*``, ``tcp_user_timeout``)
win over these. ``io_timeout_s=None`` turns all of it off. The two server settings travel in the
``options`` startup parameter, which PgBouncer refuses unless ``ignore_startup_parameters`` lists
it (and then drops them): behind it, set ``statement_timeout`` and
``idle_in_transaction_session_timeout`` for the database or role on the server instead
(``ALTER ROLE ... SET``); the client deadline and the keepalives hold either way.

A server still starting up (``the database system is starting up``, a recovery in progress) is
waited for, up to ``startup_wait_s`` per connection, instead of failing: nothing was sent, so any
operation may wait for it.

The statements of a turn (``claim``, ``complete``, ``fail``, ``renew`` and the checkpoint's
compare-and-swap) are prepared on each connection by their first use there, as
``bindloop_<operation>``, and then run by name, one round trip each. A statement deallocated
behind the store's back (``DEALLOCATE ALL``; a pooler's ``DISCARD ALL``) is prepared again and
resent once — the server refused it before running it — unless a transaction was open
(``complete_with``), which the refusal aborted: then the operation fails as a whole. Behind
PgBouncer in transaction mode this needs its prepared-statement support
(``max_prepared_statements``, PgBouncer 1.21+), as psycopg's own automatic preparation does.
"""

from __future__ import annotations

import asyncio
import math
import re
import select
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
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
from bindloop.checkpoints import (
    LoopCheckpoint,
    parse_loop_checkpoint,
)
from bindloop.stores import (
    CheckpointConflictError,
    StoreError,
)

from bindloop.hosts.stores._common import (
    DEFAULT_SLOT_LEASE_MS,
    HeldSlots,
    check_attempt,
    check_lease,
    check_max_bytes,
    check_seconds,
    encode_checkpoint,
    first_line,
    key_parts,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection, Connection
    from psycopg.pq.abc import PGresult

__all__ = ("DEFAULT_IO_TIMEOUT_S", "DEFAULT_STARTUP_WAIT_S", "SCHEMA_VERSION", "PostgresStore")

SCHEMA_VERSION = 2
DEFAULT_IO_TIMEOUT_S = 10.0
"""How long one operation may go unanswered (see the module docstring)."""
DEFAULT_STARTUP_WAIT_S = 30.0
"""How long a connection waits for a server that is still starting up."""
_T = TypeVar("_T")
_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_KEY = "tenant_id = %s AND run_id = %s AND tool_name = %s AND args_hash = %s"

_DDL = """
CREATE SCHEMA IF NOT EXISTS {s};
CREATE TABLE IF NOT EXISTS {s}.meta (name text PRIMARY KEY, value integer NOT NULL);
INSERT INTO {s}.meta VALUES ('schema_version', {version}) ON CONFLICT DO NOTHING;
UPDATE {s}.meta SET value = {version} WHERE name = 'schema_version' AND value < {version};
CREATE TABLE IF NOT EXISTS {s}.checkpoints (
    execution_id text PRIMARY KEY, revision bigint NOT NULL, body bytea NOT NULL);
CREATE TABLE IF NOT EXISTS {s}.receipts (
    tenant_id text NOT NULL, run_id text NOT NULL, tool_name text NOT NULL,
    args_hash text NOT NULL,
    status text NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    attempt integer NOT NULL, lease_expires_at_ms double precision, result bytea, error bytea,
    PRIMARY KEY (tenant_id, run_id, tool_name, args_hash));
CREATE TABLE IF NOT EXISTS {s}.limit_events (
    seq bigserial PRIMARY KEY, key text NOT NULL, at double precision NOT NULL,
    amount bigint NOT NULL);
CREATE INDEX IF NOT EXISTS limit_events_key ON {s}.limit_events (key, at);
CREATE TABLE IF NOT EXISTS {s}.limit_leases (
    key text NOT NULL, slot text NOT NULL, holder text NOT NULL,
    expires_at double precision NOT NULL, PRIMARY KEY (key, slot));
CREATE INDEX IF NOT EXISTS limit_leases_holder ON {s}.limit_leases (holder);
CREATE OR REPLACE FUNCTION {s}.enter_slot(k text, slot_id text, holder_id text,
                                         at_ms double precision, until_ms double precision,
                                         lim integer) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
  -- One round trip; the per-key lock orders concurrent callers, and each statement after it
  -- sees what they committed.
  PERFORM pg_advisory_xact_lock(hashtextextended('bindloop-slots:{s}:' || k, 0));
  DELETE FROM {s}.limit_leases WHERE key = k AND expires_at <= at_ms;
  IF (SELECT count(*) FROM {s}.limit_leases WHERE key = k) >= lim THEN
    RETURN false;
  END IF;
  INSERT INTO {s}.limit_leases VALUES (k, slot_id, holder_id, until_ms);
  RETURN true;
END $$;
"""
# Version 2: concurrency slots are leased rows (limit_leases, taken by enter_slot); version 1's
# limit_slots counters are no longer read. A version-1 schema is upgraded in place on open.


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError as exc:  # pragma: no cover - the extra is installed in the tests
        raise UsageError("PostgresStore needs psycopg 3: pip install 'psycopg[binary]' (bindloop's postgres extra)") from exc
    return psycopg


class PostgresStore:
    """A store on the Postgres server at ``conninfo`` (a libpq connection string or URL).

    Nothing connects until the first operation. ``close()`` / ``aclose()`` closes the pool.
    ``round_trips`` counts statements sent (a diagnostic for the cost per turn).
    """

    name = "postgres"

    def __init__(self, conninfo: str, *, schema: str = "bindloop", now: Clock = epoch_ms,
                 max_checkpoint_bytes: int | None = None, pool_size: int = 4,
                 connect_timeout_s: float = 10.0,
                 slot_lease_ms: float | None = DEFAULT_SLOT_LEASE_MS,
                 io_timeout_s: float | None = DEFAULT_IO_TIMEOUT_S,
                 startup_wait_s: float = DEFAULT_STARTUP_WAIT_S) -> None:
        if not isinstance(schema, str) or not _IDENT.fullmatch(schema):
            raise UsageError(f"schema must be a lower-case SQL identifier, got {schema!r}")
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise UsageError(f"pool_size must be a positive int, got {pool_size!r}")
        self.io_timeout_s = (None if io_timeout_s is None
                             else check_seconds("io_timeout_s", io_timeout_s))
        self.startup_wait_s = check_seconds("startup_wait_s", startup_wait_s, allow_zero=True)
        self._psycopg = _psycopg()
        self.conninfo = conninfo
        self.schema = schema
        self.now = now
        self.max_checkpoint_bytes = check_max_bytes(max_checkpoint_bytes)
        self._held = HeldSlots(slot_lease_ms)
        self.pool_size = pool_size
        self.connect_timeout_s = connect_timeout_s
        self.round_trips = 0
        self.fenced_writes = 0
        """Receipt writes refused by the attempt fence (a diagnostic, per store object)."""
        self._session = _session_params(self._psycopg, conninfo, self.io_timeout_s)
        self._idle: list[AsyncConnection[Any]] = []
        self._slots: anyio.Semaphore | None = None
        self._ready = False
        self._t = {name: f"{schema}.{name}" for name in
                   ("meta", "checkpoints", "receipts", "limit_events", "limit_leases",
                    "enter_slot")}
        self._sql: dict[str, str] = {}
        self._deadlines = _Deadlines()
        self._commands: dict[str, tuple[bytes, bytes, tuple[Any, ...]]] = {}
        """The prepared statements by name: the name on the wire, the SQL, the parameters'
        formats."""
        self._formats = self._psycopg.adapt.PyFormat
        self._own_sql: dict[str, bytes] = {}
        self._host_sql: dict[str, tuple[bytes, int]] = {}
        """The host's ``complete_once`` statements converted so far, with their parameter counts."""
        self._prepared: dict[AsyncConnection[Any], _Prepared] = {}
        """Per pooled connection (forgotten when it is closed): see :meth:`_command`."""

    # -- connections -----------------------------------------------------------------------------

    async def _connect(self) -> AsyncConnection[Any]:
        waited, pause = 0.0, 0.05
        while True:
            try:
                conn: AsyncConnection[Any] = await self._psycopg.AsyncConnection.connect(
                    self.conninfo, autocommit=True,
                    connect_timeout=max(1, int(self.connect_timeout_s)), **self._session)
                return conn
            except self._psycopg.OperationalError as exc:
                # Refused before anything of ours was sent: waiting is safe for any operation.
                if not _starting_up(exc) or waited >= self.startup_wait_s:
                    raise
            pause = min(pause, self.startup_wait_s - waited)
            await anyio.sleep(pause)
            waited += pause
            pause = min(pause * 2, 1.0)

    async def _checkout(self) -> AsyncConnection[Any]:
        # An idle connection whose socket is readable has heard from the server while idle:
        # that is the server ending the session (a restart, a fast shutdown, a killed backend,
        # an idle timeout) — nothing of ours was sent on it, so a fresh connection in its place
        # is safe for any operation, writes included.
        while self._idle:
            conn = self._idle.pop()
            if not _went_away(conn):
                return conn
            await self._discard(conn)
        return await self._connect()

    async def _discard(self, conn: AsyncConnection[Any]) -> None:
        """Close ``conn`` for good (shielded: a cancelled caller still closes it) and forget
        what was prepared on it."""
        self._prepared.pop(conn, None)
        with anyio.CancelScope(shield=True):
            try:
                await conn.close()
            except Exception:  # a dead socket may refuse even the goodbye
                pass

    async def _take(self) -> AsyncConnection[Any]:
        """A pooled connection and its pool slot, both the caller's until :meth:`_give`."""
        slots = self._slots
        if slots is None:
            slots = self._slots = anyio.Semaphore(self.pool_size)
        try:  # a free slot is taken without a pass through the event loop
            slots.acquire_nowait()
        except anyio.WouldBlock:
            await slots.acquire()
        try:
            return await self._checkout()
        except BaseException:
            slots.release()
            raise

    async def _give(self, conn: AsyncConnection[Any], failure: BaseException | None) -> None:
        """Give back what :meth:`_take` gave: ``conn`` to the pool, or closed when ``failure``
        (what its use raised) may have left it mid-protocol — a driver error, a cancellation, an
        unanswered operation; an error of ours (an effect that raised: its transaction was
        rolled back) does not."""
        try:
            if failure is None:
                if conn.closed or conn.broken:
                    await self._discard(conn)
                else:
                    self._idle.append(conn)
            elif isinstance(failure, (self._psycopg.Error, _NoAnswer)) \
                    or not isinstance(failure, Exception) or conn.broken:
                await self._discard(conn)
            else:
                self._idle.append(conn)
        finally:
            assert self._slots is not None
            self._slots.release()

    @asynccontextmanager
    async def _connection(self) -> AsyncIterator[AsyncConnection[Any]]:
        conn = await self._take()
        try:
            yield conn
        except BaseException as exc:
            await self._give(conn, exc)
            raise
        await self._give(conn, None)

    async def _op(self, operation: str, body: Callable[[AsyncConnection[Any]], Awaitable[_T]],
                  *, retries: int = 0) -> _T:
        """Run ``body`` on a pooled connection, within ``io_timeout_s`` of taking it; a driver
        error or no answer in time becomes :class:`StoreError`, after ``retries`` more tries on
        fresh connections for operations that are safe to repeat."""
        psycopg = self._psycopg
        for tries_left in range(retries, -1, -1):
            try:
                conn = await self._take()  # (what _connection does, without its generator)
                try:
                    # The bound starts once the connection is ours: waiting for a pool slot, or
                    # for a server still starting up, is not the server going silent.
                    with anyio.CancelScope() as scope:
                        self._deadlines.watch(scope, self.io_timeout_s)
                        try:
                            if not self._ready:
                                await self._ensure_schema(conn)
                            result = await body(conn)
                        finally:
                            self._deadlines.done(scope)
                    if scope.cancelled_caught:
                        raise _NoAnswer
                except BaseException as exc:
                    await self._give(conn, exc)
                    raise
                await self._give(conn, None)
                return result
            except _NoAnswer as exc:
                if tries_left == 0:
                    raise StoreError(self.name, operation, f"no answer from the server within "
                                     f"{self.io_timeout_s} s (io_timeout_s)") from exc
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if tries_left == 0:
                    raise StoreError(self.name, operation, first_line(exc)) from exc
            except psycopg.Error as exc:  # a wrong type, a missing table: not worth retrying
                raise StoreError(self.name, operation, first_line(exc)) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def _execute(self, conn: AsyncConnection[Any], query: str,
                       params: tuple[Any, ...] = ()) -> Any:
        self.round_trips += 1
        sql = self._sql.get(query)
        if sql is None:  # the statements are a fixed set: each is formatted once
            sql = self._sql[query] = query.format(**self._t)
        return await conn.execute(sql, params)

    async def _command(self, conn: AsyncConnection[Any], name: str, query: str,
                       params: tuple[Any, ...]) -> int:
        """Run ``query`` (a write, or a statement whose rows are only counted) as the statement
        ``bindloop_<name>`` prepared on ``conn``, straight on its libpq connection; the rows it
        touched or returned.

        The hot statements of a turn (claim, complete, the checkpoint's compare-and-swap) take
        this path: psycopg's cursor (its row machinery, its lock, its per-call adaptation context)
        costs more worker CPU than the round trip itself. Parameters are adapted by psycopg's
        own dumpers, so values are encoded and refused exactly as ``conn.execute`` would; an error
        result is raised as the psycopg exception ``conn.execute`` would raise. A statement is
        prepared on a connection by its first use there (one round trip more, counted)."""
        command = self._commands.get(name)
        if command is None:  # the statements are a fixed set: each is named and encoded once
            command = self._commands[name] = (
                f"bindloop_{name}".encode(), self._t_sql(query),
                tuple(self._formats.BINARY if isinstance(p, bytes) else self._formats.TEXT
                      for p in params))
        statement, sql, formats = command
        prepared = self._prepared_for(conn)
        pg = conn.pgconn
        values = prepared.adapt.dump_sequence(params, formats)
        for again in (True, False):  # at most one re-prepare: a pooler may never keep it
            if statement not in prepared.names:  # once per statement and connection
                self.round_trips += 1
                pg.send_prepare(statement, sql)
                await _result(conn)
                prepared.names.add(statement)
            self.round_trips += 1
            pg.send_query_prepared(statement, values, prepared.adapt.formats)
            try:
                result = await _result(conn)
                break
            except self._psycopg.errors.InvalidSqlStatementName:
                # Deallocated behind our back (``DEALLOCATE ALL``, a pooler's ``DISCARD ALL``):
                # refused before running, so preparing it again and resending is safe — outside
                # a transaction, which the refusal has aborted.
                if not again or pg.transaction_status != _IDLE:
                    raise
                prepared.names.clear()
        count = result.command_tuples
        return result.ntuples if count is None else count

    def _prepared_for(self, conn: AsyncConnection[Any]) -> _Prepared:
        prepared = self._prepared.get(conn)
        if prepared is None:
            prepared = self._prepared[conn] = _Prepared(conn)
        return prepared

    def _t_sql(self, query: str) -> bytes:
        """One of the store's own statements, its tables named and its placeholders numbered."""
        sql = self._own_sql.get(query)
        if sql is None:  # the statements are a fixed set: each is converted once
            sql = self._own_sql[query] = _numbered(query.format(**self._t))[0]
        return sql

    def _converted(self, sql: object, params: object) -> tuple[bytes, tuple[Any, ...]]:
        """:func:`_host_statement`, its conversion kept for the statements a host repeats (a
        bounded number of them: a host that builds its SQL anew each time is converted each
        time)."""
        if isinstance(sql, str) and isinstance(params, (tuple, list)):
            known = self._host_sql.get(sql)
            if known is not None and known[1] == len(params):
                return known[0], tuple(params)
        numbered, values = _host_statement(sql, params)
        if len(self._host_sql) < _HOST_STATEMENTS_KEPT:
            self._host_sql[str(sql)] = (numbered, len(values))
        return numbered, values

    async def _pipeline(self, conn: AsyncConnection[Any],
                        statements: Sequence[tuple[bytes, tuple[Any, ...]]]) -> None:
        """Send ``statements`` (SQL with ``$n`` placeholders, and their parameters) in one libpq
        pipeline ended by one ``Sync``: one round trip, and one implicit transaction, so they
        land together or not at all. The first error result is raised as psycopg's exception
        for it, once every result is read (the connection is left idle). Parameters are adapted
        by psycopg's own dumpers before anything is sent, as ``conn.execute`` adapts them."""
        from psycopg import errors

        adapt = self._prepared_for(conn).adapt
        dumped = []
        for sql, params in statements:
            values = adapt.dump_sequence(params, (self._formats.AUTO,) * len(params))
            dumped.append((sql, values, adapt.types, adapt.formats))
        pg = conn.pgconn
        pg.enter_pipeline_mode()
        for sql, values, types, formats in dumped:
            pg.send_query_params(sql, values, types, formats)
        pg.pipeline_sync()
        self.round_trips += 1
        results = await _results(conn, until_sync=True)
        pg.exit_pipeline_mode()
        for result in results:
            if result.status == _FATAL_ERROR:
                raise errors.error_from_result(result, encoding=conn.info.encoding)

    @asynccontextmanager
    async def _transaction(self, conn: AsyncConnection[Any]) -> AsyncIterator[None]:
        self.round_trips += 2  # BEGIN and COMMIT
        async with conn.transaction():
            yield

    async def _ensure_schema(self, conn: AsyncConnection[Any]) -> None:
        try:  # the common case: created by an earlier worker; one read, no DDL, no lock
            cur = await self._execute(conn, "SELECT value FROM {meta} "
                                            "WHERE name = 'schema_version'")
            row = await cur.fetchone()
        except self._psycopg.errors.UndefinedTable:
            row = None
        if row is None or (isinstance(row[0], int) and row[0] < SCHEMA_VERSION):
            row = await self._create_schema(conn)  # created, or upgraded
        version = row[0] if row else None
        if version != SCHEMA_VERSION:
            raise StoreError(self.name, "open", f"schema {self.schema!r} has store schema version "
                             f"{version!r}; this bindloop reads version {SCHEMA_VERSION}")
        self._ready = True

    async def _create_schema(self, conn: AsyncConnection[Any]) -> Any:
        # Under an advisory lock: concurrent CREATE ... IF NOT EXISTS can still collide.
        async with self._transaction(conn):
            await self._execute(conn, "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                                (f"bindloop-schema:{self.schema}",))
            self.round_trips += 1
            await conn.execute(_DDL.format(s=self.schema, version=SCHEMA_VERSION))
            cur = await self._execute(conn, "SELECT value FROM {meta} "
                                            "WHERE name = 'schema_version'")
            return await cur.fetchone()

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            self._prepared.pop(conn, None)
            await conn.close()

    close = aclose

    # -- checkpoints -----------------------------------------------------------------------------

    async def load(self, execution_id: str) -> LoopCheckpoint | None:
        """The stored checkpoint, parsed and validated (refused past ``max_checkpoint_bytes``
        before decoding), or ``None``."""
        async def body(conn: AsyncConnection[Any]) -> Any:
            cur = await self._execute(conn, "SELECT body FROM {checkpoints} WHERE execution_id = %s",
                                      (execution_id,))
            return await cur.fetchone()

        row = await self._op("load", body, retries=1)
        if row is None:
            return None
        data = row[0]
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise StoreError(self.name, "load", f"checkpoint {execution_id!r} is stored as "
                             f"{type(data).__name__}, not bytes")
        return parse_loop_checkpoint(bytes(data), max_bytes=self.max_checkpoint_bytes,
                                     execution_id=execution_id)

    async def save(self, checkpoint: LoopCheckpoint) -> None:
        """Store ``checkpoint`` under the revision fence (:class:`CheckpointConflictError` when
        another writer got there first)."""
        data = encode_checkpoint(checkpoint, self.max_checkpoint_bytes)
        ident, revision = checkpoint.execution_id, checkpoint.revision
        attempts = 0

        async def body(conn: AsyncConnection[Any]) -> int | None:
            nonlocal attempts
            attempts += 1
            while True:
                if await self._command(
                        conn, "save",
                        "INSERT INTO {checkpoints} AS c (execution_id, revision, body) "
                              "VALUES (%s, %s, %s) ON CONFLICT (execution_id) DO UPDATE "
                              "SET revision = EXCLUDED.revision, body = EXCLUDED.body "
                              "WHERE c.revision + 1 = EXCLUDED.revision", (ident, revision, data)):
                    return None
                cur = await self._execute(conn, "SELECT revision, body FROM {checkpoints} "
                                                "WHERE execution_id = %s", (ident,))
                row = await cur.fetchone()
                if row is None:
                    continue  # deleted in between: try again
                # After a lost connection the first attempt may have landed: our own bytes at
                # our revision mean it did.
                if attempts > 1 and row[0] == revision and bytes(row[1]) == data:
                    return None
                return int(row[0])

        stored = await self._op("save", body, retries=1)
        if stored is not None:
            raise CheckpointConflictError(ident, revision, stored)

    async def delete(self, execution_id: str) -> bool:
        async def body(conn: AsyncConnection[Any]) -> bool:
            cur = await self._execute(conn, "DELETE FROM {checkpoints} WHERE execution_id = %s",
                                      (execution_id,))
            return bool(cur.rowcount == 1)

        return await self._op("delete", body)

    async def commit(self, checkpoint: LoopCheckpoint) -> BoundaryDecision:
        """A :data:`~bindloop.checkpoints.CommitFn`: save, then ``"continue"``."""
        await self.save(checkpoint)
        return "continue"

    # -- receipts --------------------------------------------------------------------------------

    async def read(self, key: ToolCallReceiptKey) -> ReceiptState | None:
        k = key_parts(key)

        async def body(conn: AsyncConnection[Any]) -> Any:
            cur = await self._execute(conn, "SELECT status, attempt, lease_expires_at_ms, result, "
                                            f"error FROM {{receipts}} WHERE {_KEY}", k)
            return await cur.fetchone()

        row = await self._op("read", body, retries=1)
        return None if row is None else _decoded(row, k, "read")

    async def claim(self, key: ToolCallReceiptKey, attempt: int, lease_ms: float) -> bool:
        k, attempt, lease = key_parts(key), check_attempt(attempt), check_lease(lease_ms)
        expires = self.now() + lease

        async def body(conn: AsyncConnection[Any]) -> bool:
            if attempt == 1:
                return await self._command(
                    conn, "claim", "INSERT INTO {receipts} VALUES (%s, %s, %s, %s, 'running', 1, "
                                   "%s, NULL, NULL) ON CONFLICT DO NOTHING", (*k, expires)) == 1
            return await self._command(
                conn, "reclaim", "UPDATE {receipts} SET status = 'running', attempt = %s, "
                      "lease_expires_at_ms = %s, result = NULL, error = NULL "
                      f"WHERE {_KEY} AND attempt = %s AND (status = 'failed' OR "
                      "(status = 'running' AND lease_expires_at_ms <= %s))",
                (attempt, expires, *k, attempt - 1, expires - lease)) == 1

        return self._fenced(await self._op("claim", body))

    async def renew(self, key: ToolCallReceiptKey, attempt: int, lease_ms: float) -> bool:
        """Extend a lease the caller still owns (not part of the protocol)."""
        k, attempt, lease = key_parts(key), check_attempt(attempt), check_lease(lease_ms)

        async def body(conn: AsyncConnection[Any]) -> bool:
            return await self._command(
                conn, "renew", "UPDATE {receipts} SET lease_expires_at_ms = %s "
                      f"WHERE {_KEY} AND status = 'running' AND attempt = %s",
                (self.now() + lease, *k, attempt)) == 1

        return self._fenced(await self._op("renew", body))

    async def complete_with(self, key: ToolCallReceiptKey, attempt: int, result: Any,
                            effect: Callable[[AsyncConnection[Any]], Awaitable[None]] | None = None
                            ) -> bool:
        """Complete the receipt and run ``effect`` (the host's writes, on the connection it is
        given) in one transaction, only while the fence holds. ``False``: nothing was written
        and ``effect`` did not run. An exception from ``effect`` rolls both back."""
        k, attempt = key_parts(key), check_attempt(attempt)
        encoded = msgspec.json.encode(result)

        async def settle(conn: AsyncConnection[Any]) -> bool:
            return await self._command(
                conn, "complete", "UPDATE {receipts} SET status = 'completed', result = %s, "
                      f"lease_expires_at_ms = NULL WHERE {_KEY} AND status = 'running' "
                      "AND attempt = %s", (encoded, *k, attempt)) == 1

        async def body(conn: AsyncConnection[Any]) -> bool:
            if effect is None:  # one statement: its own transaction, one round trip
                return await settle(conn)
            async with self._transaction(conn):
                if not await settle(conn):
                    return False
                await effect(conn)
                return True

        return self._fenced(await self._op("complete", body))

    async def complete(self, key: ToolCallReceiptKey, attempt: int, result: Any) -> bool:
        return await self.complete_with(key, attempt, result)

    async def complete_once(self, key: ToolCallReceiptKey, result: Any,
                            writes: Sequence[tuple[str, Sequence[Any]]] = ()
                            ) -> ReceiptState | None:
        """Record a call no attempt has touched as completed by attempt 1 with ``result``, and run
        ``writes`` (the host's own statements, ``%s`` placeholders, each with its parameters) in
        the same transaction: one round trip, the claim skipped because the effect and its
        receipt land together or not at all.

        ``None``: both landed. Otherwise the receipt already existed: nothing was written, and
        the receipt found is returned as :meth:`read` gives it (a second round trip, on this rare
        path), for :func:`~bindloop.run.decide_tool_call_receipt`. ``writes`` are sent with the
        receipt's insert, in one pipeline and its implicit transaction, so they cannot depend on
        each other's results; statements that end or open a transaction (``COMMIT``, ``BEGIN``,
        after any comments; ``DO`` and ``CALL``, whose block or procedure could commit) or change
        the session (``SET``, ``RESET``, ``DISCARD``, ``DEALLOCATE``) are refused before anything
        is sent. A statement that fails rolls everything back and raises
        :class:`~bindloop.stores.StoreError`."""
        k = key_parts(key)
        encoded = msgspec.json.encode(result)
        statements = [self._converted(sql, params) for sql, params in writes]

        async def insert(conn: AsyncConnection[Any]) -> bool:
            if not statements:  # one statement: its own transaction, one round trip
                return await self._command(conn, "complete_once",
                                           f"{_INSERT_COMPLETED} ON CONFLICT DO NOTHING",
                                           (*k, encoded)) == 1
            try:  # a conflict here aborts the pipeline, the host's statements with it
                await self._pipeline(conn, [(self._t_sql(_INSERT_COMPLETED), (*k, encoded)),
                                            *statements])
            except self._psycopg.errors.UniqueViolation as exc:
                if (exc.diag.schema_name, exc.diag.table_name) != (self.schema, "receipts"):
                    raise  # the host's own table refused a row: its error, not ours
                return False
            return True

        async def body(conn: AsyncConnection[Any]) -> ReceiptState | None | _Absent:
            if await insert(conn):
                return None
            cur = await self._execute(conn, "SELECT status, attempt, lease_expires_at_ms, "
                                            f"result, error FROM {{receipts}} WHERE {_KEY}", k)
            row = await cur.fetchone()
            return _ABSENT if row is None else _decoded(row, k, "complete_once")

        for _ in range(3):  # deleted between the refused insert and the read: try again
            found = await self._op("complete_once", body)
            if not isinstance(found, _Absent):
                return found
        raise StoreError(self.name, "complete_once", f"receipt {k!r} kept appearing and "
                         "vanishing (deleted while being recorded): nothing was written")

    async def fail(self, key: ToolCallReceiptKey, attempt: int, error: str | None) -> bool:
        k, attempt = key_parts(key), check_attempt(attempt)
        encoded = None if error is None else msgspec.json.encode(error)

        async def body(conn: AsyncConnection[Any]) -> bool:
            return await self._command(
                conn, "fail", "UPDATE {receipts} SET status = 'failed', error = %s, "
                      f"lease_expires_at_ms = NULL WHERE {_KEY} AND status = 'running' "
                      "AND attempt = %s", (encoded, *k, attempt)) == 1

        return self._fenced(await self._op("fail", body))

    async def delete_run(self, tenant_id: str, run_id: str) -> int:
        async def body(conn: AsyncConnection[Any]) -> int:
            cur = await self._execute(conn, "DELETE FROM {receipts} WHERE tenant_id = %s AND "
                                            "run_id = %s", (str(tenant_id), str(run_id)))
            return int(cur.rowcount)

        return int(await self._op("delete_run", body, retries=1))

    def _fenced(self, landed: bool) -> bool:
        if not landed:
            self.fenced_writes += 1
        return landed

    # -- limits ----------------------------------------------------------------------------------

    async def admit(self, key: str, window_ms: float, limit: int, amount: int,
                    now: float) -> float:
        async def body(conn: AsyncConnection[Any]) -> float:
            async with self._transaction(conn):
                await self._execute(conn, "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                                    (f"bindloop-limit:{self.schema}:{key}",))
                await self._execute(conn, "DELETE FROM {limit_events} WHERE key = %s AND at <= %s",
                                    (key, now - window_ms))
                cur = await self._execute(conn, "SELECT coalesce(sum(amount), 0) FROM "
                                                "{limit_events} WHERE key = %s", (key,))
                used = int((await cur.fetchone())[0])
                if (used + amount <= limit) if amount else (used < limit):
                    wait = 0.0
                else:  # only a refusal needs the entries, oldest first, to say how long
                    cur = await self._execute(conn, "SELECT at, amount FROM {limit_events} "
                                                    "WHERE key = %s ORDER BY at, seq", (key,))
                    entries = [(float(at), int(n)) for at, n in await cur.fetchall()]
                    wait = window_wait(entries, window_ms, limit, amount, now)
                if wait == 0.0 and amount:
                    await self._execute(conn, "INSERT INTO {limit_events} (key, at, amount) "
                                              "VALUES (%s, %s, %s)", (key, now, amount))
                return wait

        return await self._op("admit", body)

    async def charge(self, key: str, window_ms: float, amount: int, now: float) -> None:
        if amount <= 0:
            return

        async def body(conn: AsyncConnection[Any]) -> None:
            await self._execute(conn, "INSERT INTO {limit_events} (key, at, amount) "
                                      "VALUES (%s, %s, %s)", (key, now, amount))

        await self._op("charge", body)

    async def enter(self, key: str, limit: int) -> bool:
        if limit < 1:
            return False
        held, now = self._held, self.now()
        slot = held.new_slot()

        async def body(conn: AsyncConnection[Any]) -> bool:
            cur = await self._execute(conn, "SELECT {enter_slot}(%s, %s, %s, %s, %s, %s)",
                                      (key, slot, held.holder, now, held.expiry(now), limit))
            row = await cur.fetchone()
            return bool(row and row[0])

        taken = await self._op("enter", body)
        if taken:
            held.took(key, slot)
        return taken

    async def leave(self, key: str) -> None:
        slot = self._held.give_back(key)
        if slot is None:
            return

        async def body(conn: AsyncConnection[Any]) -> None:
            await self._execute(conn, "DELETE FROM {limit_leases} WHERE key = %s AND slot = %s",
                                (key, slot))

        await self._op("leave", body)

    async def renew_slots(self) -> None:
        """Renew the leases of every slot this handle holds (a lapsed one stays lapsed)."""
        held, now = self._held, self.now()

        async def body(conn: AsyncConnection[Any]) -> None:
            await self._execute(conn, "UPDATE {limit_leases} SET expires_at = %s "
                                      "WHERE holder = %s AND expires_at > %s",
                                (held.expiry(now), held.holder, now))

        await self._op("renew_slots", body)


def _decoded(row: tuple[Any, ...], key: tuple[str, ...], operation: str) -> ReceiptState:
    """The receipt in a row of the receipts table; an unreadable one is a :class:`StoreError`."""
    try:
        return _receipt(row)
    except (msgspec.DecodeError, TypeError, ValueError) as exc:
        raise StoreError(PostgresStore.name, operation,
                         f"receipt {key!r} is unreadable: {exc}") from exc


class _Absent:
    """What :meth:`PostgresStore.complete_once` found when a refused insert's receipt was gone
    by the time it was read."""


_ABSENT = _Absent()
_INSERT_COMPLETED = ("INSERT INTO {receipts} VALUES (%s, %s, %s, %s, 'completed', 1, NULL, %s, "
                     "NULL)")
"""A receipt completed by attempt 1 (:meth:`PostgresStore.complete_once`)."""
_HOST_STATEMENTS_KEPT = 256
_PLACEHOLDER = re.compile(r"%(.|$)", re.S)
# Statements that would end or open a transaction inside the pipeline's implicit one (DO and
# CALL too: a block or a procedure may COMMIT, and the server lets it there), or change the
# session's state the store's own statements rely on (settings, prepared statements).
_TRANSACTION_CONTROL = frozenset(("begin", "start", "commit", "end", "rollback", "abort",
                                  "savepoint", "release", "prepare", "do", "call", "set",
                                  "reset", "discard", "deallocate"))
_WORD = re.compile(r"[A-Za-z_]+")
_LINE_END = re.compile(r"[\n\r]")


def _leading_command(sql: str) -> str:
    """The first keyword of ``sql`` as PostgreSQL's scanner reads it, lowercased (``""`` when it
    starts with anything else): past whitespace, ``--`` line comments and ``/* */`` block
    comments, which nest in PostgreSQL (``/* /* */ x */`` is one comment). A comment this
    function ends sooner than PostgreSQL would could hide the real first keyword; nesting is
    therefore followed, and an unterminated comment (a syntax error there) runs to the end."""
    i, n = 0, len(sql)
    while i < n:
        if sql[i] in " \t\n\r\f\v":
            i += 1
        elif sql.startswith("--", i):
            end = _LINE_END.search(sql, i)
            i = n if end is None else end.end()
        elif sql.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if sql.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif sql.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        else:
            break
    word = _WORD.match(sql, i)
    return "" if word is None else word.group(0).lower()


def _host_statement(sql: object, params: object) -> tuple[bytes, tuple[Any, ...]]:
    """One of the host's statements for :meth:`PostgresStore.complete_once`, its ``%s``
    placeholders numbered for the extended protocol (``%%`` is a literal ``%``)."""
    if not isinstance(sql, str) or not sql.strip():
        raise UsageError(f"a write must be an SQL statement (str), got {sql!r}")
    if isinstance(params, (str, bytes)) or not isinstance(params, (tuple, list)):
        raise UsageError(f"a write's parameters must be a tuple or list, got "
                         f"{type(params).__name__}")
    first = _leading_command(sql)
    if first in _TRANSACTION_CONTROL:
        raise UsageError(f"a write runs inside the receipt's transaction: {first.upper()} is "
                         "not allowed there")
    numbered, count = _numbered(sql)
    if count != len(params):
        raise UsageError(f"a write has {count} placeholders and {len(params)} parameters")
    return numbered, tuple(params)


def _numbered(sql: str) -> tuple[bytes, int]:
    """``sql`` with its ``%s`` placeholders numbered ``$1``, ``$2``, ... for the extended
    protocol (``%%`` is a literal ``%``, any other ``%`` sequence a :class:`UsageError`), and how
    many there are. Text UTF-8 cannot carry (a lone surrogate) is a :class:`UsageError` too."""
    count = 0

    def number(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(1) == "%":
            return "%"
        if match.group(1) != "s":
            raise UsageError(f"a write's placeholders are %s (and %% for a literal %), got "
                             f"{match.group(0)!r}")
        count += 1
        return f"${count}"

    numbered = _PLACEHOLDER.sub(number, sql)
    try:
        return numbered.encode(), count
    except UnicodeEncodeError as exc:  # a lone surrogate: no UTF-8 text holds it
        raise UsageError(f"a write must be text UTF-8 can carry; it holds "
                         f"{exc.object[exc.start:exc.end]!r}, a lone surrogate") from None


def _receipt(row: tuple[Any, ...]) -> ReceiptState:
    status, attempt, lease, result, error = row
    if not isinstance(attempt, int):
        raise TypeError(f"attempt is {type(attempt).__name__}")
    if status == "running":
        return ReceiptRunning(attempt=attempt, lease_expires_at_ms=float(lease))
    if status == "completed":
        return ReceiptCompleted(attempt=attempt,
                                result=None if result is None else msgspec.json.decode(result))
    if status == "failed":
        return ReceiptFailed(attempt=attempt,
                             error=None if error is None else msgspec.json.decode(error, type=str))
    raise ValueError(f"unknown status {status!r}")


class _Deadlines:
    """The ``io_timeout_s`` bound of every operation in flight, kept by one timer on the event
    loop (re-armed for the earliest deadline left) instead of one timer per operation: each
    operation's scope is cancelled once its deadline passes, as a deadline of its own would."""

    __slots__ = ("_armed", "_loop", "_scopes")

    def __init__(self) -> None:
        self._scopes: dict[anyio.CancelScope, float] = {}
        self._armed: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def watch(self, scope: anyio.CancelScope, seconds: float | None) -> None:
        """Cancel ``scope`` ``seconds`` from now unless :meth:`done` comes first."""
        if seconds is None:
            return
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a store used again under another (a later) event loop:
            if self._armed is not None:  # what the earlier one had in flight is not ours to end
                self._armed.cancel()
                self._armed = None
            self._scopes.clear()
            self._loop = loop
        deadline = loop.time() + seconds
        self._scopes[scope] = deadline
        armed = self._armed
        if armed is None or deadline < armed.when():  # else the armed timer comes first
            if armed is not None:
                armed.cancel()
            self._armed = loop.call_at(deadline, self._expire)

    def done(self, scope: anyio.CancelScope) -> None:
        self._scopes.pop(scope, None)

    def _expire(self) -> None:
        loop = self._loop
        assert loop is not None
        self._armed = None
        now = loop.time()
        due = [scope for scope, deadline in self._scopes.items() if deadline <= now]
        for scope in due:
            del self._scopes[scope]
        if self._scopes:
            self._armed = loop.call_at(min(self._scopes.values()), self._expire)
        for scope in due:
            scope.cancel()


class _Prepared:
    """What :meth:`PostgresStore._command` keeps per connection: the statements prepared on it
    and the psycopg adaptation context its parameters are dumped with."""

    __slots__ = ("adapt", "names")

    def __init__(self, conn: AsyncConnection[Any]) -> None:
        from psycopg.adapt import Transformer

        self.adapt = Transformer(conn)
        self.names: set[bytes] = set()


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def _result(conn: AsyncConnection[Any]) -> PGresult:
    """Send what is queued on ``conn``'s libpq connection and read the one statement's result
    (every result until libpq's end marker is read, so the connection is left idle). An error
    result is raised as psycopg's exception for it; a lost connection as
    ``psycopg.OperationalError``. Cancellable: the caller discards the connection then."""
    from psycopg import errors

    results = await _results(conn, until_sync=False)
    for result in results:
        if result.status == _FATAL_ERROR:
            raise errors.error_from_result(result, encoding=conn.info.encoding)
    if len(results) != 1 or results[0].status not in (_COMMAND_OK, _TUPLES_OK):
        raise errors.InternalError(f"unexpected results: "
                                   f"{[r.status for r in results]}")
    return results[0]


async def _results(conn: AsyncConnection[Any], *, until_sync: bool) -> list[PGresult]:
    """Send what is queued on ``conn``'s libpq connection and read its results: up to libpq's
    end marker, or (``until_sync``, in pipeline mode) up to the pipeline's sync point, past the
    end marker of each statement. A lost connection raises ``psycopg.OperationalError`` unless
    the server sent an error first (then that error is among the results)."""
    from psycopg import errors

    pg = conn.pgconn
    loop = asyncio.get_running_loop()
    fd = pg.socket
    while pg.flush():  # a large body: wait until the socket takes more (reading meanwhile)
        waiter = loop.create_future()
        loop.add_reader(fd, _wake, waiter)
        loop.add_writer(fd, _wake, waiter)
        try:
            await waiter
        finally:
            loop.remove_reader(fd)
            loop.remove_writer(fd)
        pg.consume_input()
    results: list[PGresult] = []
    try:
        while True:
            while pg.is_busy():
                waiter = loop.create_future()
                loop.add_reader(fd, _wake, waiter)
                try:
                    await waiter
                finally:
                    loop.remove_reader(fd)
                pg.consume_input()
            result = pg.get_result()
            if result is None:
                if until_sync:
                    continue  # the end of one statement's results
                break
            if until_sync and result.status == _PIPELINE_SYNC:
                break
            results.append(result)
    except errors.DatabaseError:
        # The server may end the session right after an error (an idle-in-transaction
        # timeout, a terminated backend): the error it sent is the one to report.
        if not any(r.status == _FATAL_ERROR for r in results):
            raise
    return results


_COMMAND_OK, _TUPLES_OK, _FATAL_ERROR, _PIPELINE_SYNC = 1, 2, 7, 10  # libpq's ExecStatusType
_IDLE = 0  # libpq's PGTransactionStatusType: no transaction open


class _NoAnswer(Exception):
    """An operation got no answer within ``io_timeout_s`` (its connection is mid-protocol)."""


# What a server says while it cannot take connections yet (SQLSTATE 57P03, which libpq does not
# hand over for a refused connection, only the message).
_STARTING_UP = ("the database system is starting up", "not yet accepting connections",
                "the database system is in recovery mode")


def _starting_up(exc: BaseException) -> bool:
    text = str(exc)
    return any(marker in text for marker in _STARTING_UP)


def _session_params(psycopg: Any, conninfo: str, io_timeout_s: float | None) -> dict[str, Any]:
    """The connection parameters that bound each round trip (see the module docstring); what
    ``conninfo`` sets itself is kept."""
    if io_timeout_s is None:
        return {}
    given = psycopg.conninfo.conninfo_to_dict(conninfo)
    ms = max(1, math.ceil(io_timeout_s * 1000))
    options = str(given.get("options") or "")
    settings = " ".join(f"-c {name}={ms}" for name in
                        ("statement_timeout", "idle_in_transaction_session_timeout")
                        if name not in options)
    params: dict[str, Any] = {}
    if settings:
        params["options"] = f"{options} {settings}".strip()
    idle = max(1, math.ceil(io_timeout_s / 2))
    for name, value in (("keepalives", 1), ("keepalives_idle", idle),
                        ("keepalives_interval", max(1, math.ceil(idle / 3))),
                        ("keepalives_count", 3), ("tcp_user_timeout", ms)):
        if name not in given:
            params[name] = value
    return params


def _went_away(conn: AsyncConnection[Any] | Connection[Any]) -> bool:
    """Whether an idle connection (of this store or of the chat stores' synchronous ones) was
    closed (or spoken to) by the server since its last use: nothing of ours was sent on it, so a
    fresh one in its place is safe for any operation."""
    if conn.closed or conn.broken:
        return True
    try:
        ready, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except Exception:  # no socket any more (closed, or the driver refuses to say)
        return True
    return bool(ready)

