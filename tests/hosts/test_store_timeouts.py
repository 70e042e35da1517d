"""Bounded round trips and servers still starting up, on real Postgres and Redis servers behind a
fault proxy.

A connection that goes silent mid-statement (the proxy blackholes it: nothing crosses in either
direction any more, not even the client's goodbye) becomes a ``StoreError`` within the store's
bound, and the server ends the silent session itself, so a second worker taking over the expired
lease is not blocked by a lock its vanished holder kept. A server still starting up (Redis
``LOADING``, Postgres ``57P03``) is waited for, up to ``startup_wait_s``, instead of failing.

Hangs are bounded by ``HANG_S``, which only turns a hang into a failure: every wait here is
released by the event it waits for (a timeout of the store's own, the server ending a session,
the proxy having refused so many requests), never by a wall-clock guess."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from bindloop.hosts.stores.postgres import PostgresStore
from bindloop.hosts.stores.redis import RedisStore
from bindloop.run import ReceiptCompleted, ToolCallReceiptKey
from bindloop.stores import StoreError
from bindloop.testing.store_kit import checkpoint_at

from .proxy import CuttingProxy

pytestmark = pytest.mark.anyio
KEY = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="send", args_hash="h")
HANG_S = 60.0
IO_TIMEOUT_S = 1.0
LEASE_MS = 300.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def pg_proxy(postgres_dsn: str) -> Iterator[CuttingProxy]:
    p = CuttingProxy.to(postgres_dsn)
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def redis_proxy(redis_url: str) -> Iterator[CuttingProxy]:
    p = CuttingProxy.to(redis_url)
    try:
        yield p
    finally:
        p.close()


async def _ledger(store: PostgresStore, namespace: str) -> list[str]:
    async def rows(conn: Any) -> list[str]:
        cur = await conn.execute(f"SELECT who FROM {namespace}.ledger ORDER BY who")
        return [r[0] for r in await cur.fetchall()]

    return await store._op("ledger", rows)


async def test_a_postgres_connection_silent_mid_commit_is_bounded_and_frees_its_lock(
        postgres_dsn: str, namespace: str, pg_proxy: CuttingProxy) -> None:
    """Worker A's connection goes silent after its receipt update and effect reached the server
    (row lock taken, transaction open). A gets a StoreError after ``io_timeout_s``; the server
    ends A's transaction (its idle-in-transaction timeout) and with it the lock; worker B takes
    over the expired lease and completes, and only B's effect is in the ledger."""
    a = PostgresStore(pg_proxy.via(postgres_dsn), schema=namespace, io_timeout_s=IO_TIMEOUT_S)
    b = PostgresStore(postgres_dsn, schema=namespace)  # direct, default settings

    async def create(conn: Any) -> None:
        await conn.execute(f"CREATE TABLE {namespace}.ledger (who text)")

    def effect(who: str) -> Any:
        async def write(conn: Any) -> None:
            await conn.execute(f"INSERT INTO {namespace}.ledger VALUES (%s)", (who,))
        return write

    try:
        await b._op("prepare", create)
        assert await a.claim(KEY, 1, LEASE_MS)
        pg_proxy.cut_on(f"INSERT INTO {namespace}.ledger".encode(), "after", fault="blackhole")
        started = time.monotonic()
        with anyio.fail_after(HANG_S), pytest.raises(StoreError) as info:
            await a.complete_with(KEY, 1, "a", effect("a"))
        a_waited = time.monotonic() - started
        assert (info.value.store, info.value.operation) == ("postgres", "complete")
        assert "no answer from the server within 1.0 s" in str(info.value)
        assert a_waited >= IO_TIMEOUT_S
        assert pg_proxy.cuts == 1
        started = time.monotonic()
        with anyio.fail_after(HANG_S):  # blocks on A's row lock until the server ends A
            assert await b.claim(KEY, 2, 60_000)
            assert await b.complete_with(KEY, 2, "b", effect("b"))
        b_waited = time.monotonic() - started
        # the server, not a goodbye, ended A (the proxy's thread sees the close a moment after
        # the lock is free: wait for it, bounded by what is tested)
        assert await anyio.to_thread.run_sync(pg_proxy.server_ended_blackholed.wait, HANG_S)
        assert await _ledger(b, namespace) == ["b"]    # A's effect rolled back with its lock
        assert await b.read(KEY) == ReceiptCompleted(attempt=2, result="b")
        print(f"A: StoreError after {a_waited:.2f} s; B took over in {b_waited:.2f} s")
    finally:
        await a.aclose()
        await b.aclose()


async def test_a_postgres_statement_silent_before_the_server_is_bounded(
        postgres_dsn: str, namespace: str, pg_proxy: CuttingProxy) -> None:
    """A claim lost in the silence on its way: a StoreError within the bound, not a hang; the
    store goes on with a fresh connection once the network is back."""
    store = PostgresStore(pg_proxy.via(postgres_dsn), schema=namespace, io_timeout_s=IO_TIMEOUT_S)
    try:
        await store.save(checkpoint_at("x", 0))
        pg_proxy.cut_on(b"INSERT INTO", "before", fault="blackhole")
        with anyio.fail_after(HANG_S), pytest.raises(StoreError) as info:
            await store.claim(KEY, 1, 60_000)
        assert info.value.operation == "claim" and "io_timeout_s" in str(info.value)
        assert await store.claim(KEY, 1, 60_000)  # it never reached the server
        assert await store.load("x") == checkpoint_at("x", 0)
    finally:
        await store.aclose()


async def test_postgres_sessions_carry_the_bounds(postgres_dsn: str, namespace: str) -> None:
    async def show(conn: Any) -> tuple[str, str]:
        cur = await conn.execute("SELECT current_setting('statement_timeout'), "
                                 "current_setting('idle_in_transaction_session_timeout')")
        row = await cur.fetchone()
        return str(row[0]), str(row[1])

    bounded = PostgresStore(postgres_dsn, schema=namespace, io_timeout_s=2.5)
    own = PostgresStore(f"{postgres_dsn} options='-c statement_timeout=7s'", schema=namespace)
    off = PostgresStore(postgres_dsn, schema=namespace, io_timeout_s=None)
    try:
        assert await bounded._op("show", show) == ("2500ms", "2500ms")
        assert await own._op("show", show) == ("7s", "10s")  # the conninfo's own value wins
        assert await off._op("show", show) == ("0", "0")
        assert bounded._session["tcp_user_timeout"] == 2500
        assert bounded._session["keepalives"] == 1
    finally:
        for store in (bounded, own, off):
            await store.aclose()


@pytest.mark.parametrize("value", [0, -1.0, float("nan"), float("inf"), True, "10"])
def test_bad_time_bounds_are_refused(value: object) -> None:
    from bindloop.errors import UsageError

    with pytest.raises(UsageError, match="io_timeout_s"):
        PostgresStore("host=127.0.0.1", io_timeout_s=value)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="socket_timeout_s"):
        RedisStore("redis://127.0.0.1:1/0", socket_timeout_s=value)  # type: ignore[arg-type]
    if value != 0:
        with pytest.raises(UsageError, match="startup_wait_s"):
            RedisStore("redis://127.0.0.1:1/0", startup_wait_s=value)  # type: ignore[arg-type]


async def test_a_redis_connection_silent_mid_script_is_bounded(
        redis_url: str, namespace: str, redis_proxy: CuttingProxy) -> None:
    """The same fault on Redis: a StoreError after ``socket_timeout_s``; the script ran whole
    in the server or not at all, so B takes over the expired lease at once."""
    a = RedisStore(f"redis://127.0.0.1:{redis_proxy.port}/0", prefix=f"{namespace}:",
                   socket_timeout_s=IO_TIMEOUT_S)
    b = RedisStore(redis_url, prefix=f"{namespace}:")
    try:
        assert await a.claim(KEY, 1, LEASE_MS)
        redis_proxy.cut_on(b"EVALSHA", "after", fault="blackhole")
        with anyio.fail_after(HANG_S), pytest.raises(StoreError) as info:
            await a.complete(KEY, 1, "a")
        assert info.value.operation == "complete"
        state = await b.read(KEY)
        if state == ReceiptCompleted(attempt=1, result="a"):  # A's script ran: nothing to redo
            return
        with anyio.fail_after(HANG_S):
            while not await b.claim(KEY, 2, 60_000):  # until A's lease has ended
                await anyio.sleep(0.02)
        assert await b.complete(KEY, 2, "b")
    finally:
        await a.aclose()
        await b.aclose()


async def _until(condition: Any) -> None:
    with anyio.fail_after(HANG_S):
        while not condition():
            await anyio.sleep(0.01)


async def test_a_loading_redis_is_waited_for(namespace: str, redis_proxy: CuttingProxy) -> None:
    store = RedisStore(f"redis://127.0.0.1:{redis_proxy.port}/0", prefix=f"{namespace}:")
    try:
        await store.save(checkpoint_at("x", 0))
        redis_proxy.starting("redis")
        done = anyio.Event()

        async def write() -> None:  # a write, not retried on a lost connection, waits too
            assert await store.claim(KEY, 1, 60_000)
            await store.save(checkpoint_at("x", 1, "after loading"))
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            await _until(lambda: redis_proxy.refusals >= 3)  # refused three times, still waiting
            assert not done.is_set()
            redis_proxy.starting(None)
        assert await store.load("x") == checkpoint_at("x", 1, "after loading")
    finally:
        await store.aclose()


async def test_a_postgres_starting_up_is_waited_for(
        postgres_dsn: str, namespace: str, pg_proxy: CuttingProxy) -> None:
    store = PostgresStore(pg_proxy.via(postgres_dsn), schema=namespace)
    try:
        pg_proxy.starting("postgres")
        done = anyio.Event()

        async def write() -> None:
            assert await store.claim(KEY, 1, 60_000)
            done.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            await _until(lambda: pg_proxy.refusals >= 3)
            assert not done.is_set()
            pg_proxy.starting(None)
        assert done.is_set()
    finally:
        await store.aclose()


async def test_a_redis_loading_past_the_bound_is_a_store_error(
        namespace: str, redis_proxy: CuttingProxy) -> None:
    store = RedisStore(f"redis://127.0.0.1:{redis_proxy.port}/0", prefix=f"{namespace}:",
                       startup_wait_s=0.2)
    try:
        redis_proxy.starting("redis")
        with anyio.fail_after(HANG_S), pytest.raises(StoreError) as info:
            await store.save(checkpoint_at("x", 0))
        assert info.value.operation == "save" and "still loading" in str(info.value)
    finally:
        await store.aclose()


async def test_a_postgres_starting_up_past_the_bound_is_a_store_error(
        postgres_dsn: str, namespace: str, pg_proxy: CuttingProxy) -> None:
    store = PostgresStore(pg_proxy.via(postgres_dsn), schema=namespace, startup_wait_s=0.2)
    try:
        pg_proxy.starting("postgres")
        with anyio.fail_after(HANG_S), pytest.raises(StoreError) as info:
            await store.load("x")
        assert info.value.operation == "load" and "starting up" in str(info.value)
    finally:
        await store.aclose()
