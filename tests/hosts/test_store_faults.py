"""Faults of the networked stores on real servers: a connection dropped mid-commit (before the
statement reached the server, and after), a server restarted between two commits, a server gone,
values of the wrong type in the store's tables, a schema from a newer bindloop. Each either
recovers or raises StoreError naming the store and the operation — and the stored checkpoint is
always a whole one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

import anyio
import pytest

from bindloop.stores import StoreError
from bindloop.hosts.stores.postgres import PostgresStore
from bindloop.hosts.stores.redis import RedisStore
from bindloop.run import ReceiptRunning, ToolCallReceiptKey
from bindloop.checkpoints import CheckpointFormatError
from bindloop.testing.store_kit import checkpoint_at

from .proxy import CuttingProxy
from harness.fixtures.store_servers import PostgresServer, RedisServer

pytestmark = pytest.mark.anyio
KEY = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="send", args_hash="h")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["postgres", "redis"])
async def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def proxied(kind: str, namespace: str, request: pytest.FixtureRequest
                  ) -> AsyncIterator[tuple[Any, CuttingProxy]]:
    """A store whose connections go through a cutting proxy."""
    if kind == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        proxy = CuttingProxy.to(dsn)
        store: Any = PostgresStore(proxy.via(dsn), schema=namespace)
    else:
        url = request.getfixturevalue("redis_url")
        proxy = CuttingProxy.to(url)
        store = RedisStore(proxy.via(url), prefix=f"{namespace}:")
    try:
        yield store, proxy
    finally:
        await store.aclose()
        proxy.close()


def _marker(store: Any) -> bytes:
    # Postgres: the checkpoint's compare-and-swap and the claim are prepared statements, named in
    # every message that runs them.
    return b"bindloop_" if isinstance(store, PostgresStore) else b"EVALSHA"


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_connection_dropped_mid_commit_recovers_whole(
        proxied: tuple[Any, CuttingProxy], when: Literal["before", "after"]) -> None:
    store, proxy = proxied
    await store.save(checkpoint_at("x", 0))
    proxy.cut_on(_marker(store), when)
    await store.save(checkpoint_at("x", 1, "landed once"))  # the retry finds out or lands it
    assert proxy.cuts == 1
    assert await store.load("x") == checkpoint_at("x", 1, "landed once")


async def test_a_server_gone_is_a_store_error_naming_the_operation(
        proxied: tuple[Any, CuttingProxy]) -> None:
    store, proxy = proxied
    await store.save(checkpoint_at("x", 0))
    proxy.cut_on(_marker(store), "before", times=10)
    with pytest.raises(StoreError) as info:
        await store.save(checkpoint_at("x", 1, "never"))
    assert (info.value.store, info.value.operation) == (store.name, "save")
    assert str(info.value).startswith(f"{store.name} store: save failed")
    proxy.cut_on(b"", "before", times=0)
    assert await store.load("x") == checkpoint_at("x", 0)     # the old one, whole
    warm = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="warm", args_hash="h")
    assert await store.claim(warm, 1, 1000)  # Redis: the claim script is loaded from now on
    proxy.cut_on(_marker(store), "after", times=10)
    with pytest.raises(StoreError) as claim:
        await store.claim(KEY, 1, 1000)                        # not retried: outcome unknown
    assert claim.value.operation == "claim"
    proxy.cut_on(b"", "before", times=0)
    # Whether the cut claim landed is unknown (the server may or may not have run it, and may
    # run it only after the next statement arrives on another connection); either way the fence
    # stays whole: exactly one claim of attempt 1 holds the receipt, whichever it is.
    await store.claim(KEY, 1, 1000)
    state = await store.read(KEY)
    assert isinstance(state, ReceiptRunning) and state.attempt == 1, state
    assert not await store.claim(KEY, 1, 1000)  # an attempt never claims twice
    assert not await store.claim(KEY, 2, 1000)  # the (new or old) lease is live


async def test_a_server_restarted_between_two_commits(kind: str, namespace: str,
                                                      request: pytest.FixtureRequest) -> None:
    server: PostgresServer | RedisServer | None = request.getfixturevalue(f"{kind}_server")
    if server is None:
        pytest.skip("the machine's own server cannot be restarted by a test")
    store: Any = (PostgresStore(server.dsn, schema=namespace)  # type: ignore[union-attr]
                  if kind == "postgres" else RedisStore(server.url, prefix=f"{namespace}:"))  # type: ignore[union-attr]
    try:
        await store.save(checkpoint_at("x", 0))
        assert await store.claim(KEY, 1, 60_000)
        if isinstance(server, RedisServer):
            # Redis answers LOADING until its dataset is back: made long enough (2,000 keys at
            # 0.5 ms each) that the writes below always meet it, which the store waits out.
            await _fill_aof_base(store, namespace, 2_000)
            server.restart(key_load_delay_us=500)
        else:
            server.restart()
        await store.save(checkpoint_at("x", 1, "after restart"))  # a fresh connection
        assert await store.load("x") == checkpoint_at("x", 1, "after restart")
        assert await store.read(KEY) is not None                # the receipt survived
        assert await store.complete(KEY, 1, "done")
    finally:
        await store.aclose()


async def test_a_write_that_is_not_retried_lands_first_after_a_restart(
        kind: str, namespace: str, request: pytest.FixtureRequest) -> None:
    """A claim is never retried (its outcome could be unknown), so the idle connection the
    restart closed must be noticed before the claim is sent on it, not after."""
    server: PostgresServer | RedisServer | None = request.getfixturevalue(f"{kind}_server")
    if server is None:
        pytest.skip("the machine's own server cannot be restarted by a test")
    store: Any = (PostgresStore(server.dsn, schema=namespace)  # type: ignore[union-attr]
                  if kind == "postgres" else RedisStore(server.url, prefix=f"{namespace}:"))  # type: ignore[union-attr]
    other = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="other", args_hash="h")
    try:
        assert await store.claim(KEY, 1, 60_000)
        server.restart()
        await anyio.sleep(0.05)  # the event loop runs while a server restarts: it sees the close
        assert await store.claim(other, 1, 60_000)              # on a fresh connection
        assert await store.complete(KEY, 1, "done")
        assert await store.read(other) is not None
    finally:
        await store.aclose()


async def _fill_aof_base(store: RedisStore, namespace: str, keys: int) -> None:
    """Write ``keys`` keys and rewrite the append-only file, so they load from its RDB base."""
    import anyio

    await store.client.eval(f"for i = 1, {keys} do redis.call('SET', '{namespace}:fill:' .. i, i) "
                            "end return 1", 0)
    await store.client.bgrewriteaof()
    with anyio.fail_after(60):
        while True:
            info = await store.client.info("persistence")
            if not (info["aof_rewrite_in_progress"] or info["aof_rewrite_scheduled"]):
                return
            await anyio.sleep(0.02)


async def test_the_first_writes_after_a_postgres_restart_land(
        namespace: str, postgres_server: PostgresServer | None) -> None:
    """Every pooled connection died with the server; none of the writes that follow (none of
    them retried by the store: claim, complete, enter, admit, delete) may fail for it."""
    if postgres_server is None:
        pytest.skip("the machine's own server cannot be restarted by a test")
    store = PostgresStore(postgres_server.dsn, schema=namespace, pool_size=3)
    try:
        import anyio

        async def warm() -> None:  # three connections in the pool, all idle afterwards
            await store.admit("k", 60_000.0, 10, 0, 0.0)
            await anyio.sleep(0.05)

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(warm)
        assert len(store._idle) == 3
        await store.save(checkpoint_at("x", 0))
        postgres_server.restart()
        assert await store.claim(KEY, 1, 60_000)
        assert await store.complete(KEY, 1, "done")
        assert await store.enter("slots", 1)
        assert await store.admit("k", 60_000.0, 10, 1, 0.0) == 0
        assert await store.delete("x") is True
        assert await store.read(KEY) is not None
    finally:
        await store.aclose()


async def test_a_write_cut_after_it_was_sent_stays_a_store_error(
        proxied: tuple[Any, CuttingProxy], kind: str) -> None:
    """The reconnect is only for a connection that died while idle: a write whose connection
    drops after the statement went out (outcome unknown) is not repeated."""
    store, proxy = proxied
    if kind != "postgres":
        pytest.skip("the Postgres store's reconnect")
    assert await store.enter("slots", 5)
    proxy.cut_on(b"enter_slot", "after")
    with pytest.raises(StoreError) as info:
        await store.enter("slots", 5)
    assert (info.value.store, info.value.operation) == ("postgres", "enter")
    assert proxy.cuts == 1  # tried once: not retried on a fresh connection


async def test_wrong_types_in_postgres_are_typed_errors(postgres_dsn: str, namespace: str
                                                        ) -> None:
    import psycopg

    store = PostgresStore(postgres_dsn, schema=namespace)
    try:
        await store.save(checkpoint_at("x", 0))
        async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as conn:
            await conn.execute(f"UPDATE {namespace}.checkpoints SET body = 'not json'::bytea")
            await conn.execute(f"INSERT INTO {namespace}.receipts VALUES ('t', 'r', 'send', 'h', "
                               "'running', 1, NULL, NULL, NULL)")
        with pytest.raises(CheckpointFormatError):
            await store.load("x")
        with pytest.raises(StoreError) as info:
            await store.read(KEY)
        assert (info.value.store, info.value.operation) == ("postgres", "read")
        async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as conn:
            await conn.execute(f"ALTER TABLE {namespace}.checkpoints ALTER COLUMN revision "
                               "TYPE text")
            await conn.execute(f"UPDATE {namespace}.meta SET value = 3")
        with pytest.raises(StoreError, match="save failed"):
            await store.save(checkpoint_at("x", 1))
        fresh = PostgresStore(postgres_dsn, schema=namespace)
        with pytest.raises(StoreError, match="schema version 3"):
            await fresh.load("x")
        await fresh.aclose()
    finally:
        await store.aclose()


async def test_wrong_types_in_redis_are_typed_errors(redis_url: str, namespace: str) -> None:
    store = RedisStore(redis_url, prefix=f"{namespace}:")
    try:
        await store.client.set(f"{namespace}:cp:x", b"a plain string")
        with pytest.raises(StoreError) as info:
            await store.load("x")
        assert (info.value.store, info.value.operation) == ("redis", "load")
        with pytest.raises(StoreError, match="save failed"):
            await store.save(checkpoint_at("x", 0))
        assert await store.client.get(f"{namespace}:cp:x") == b"a plain string"  # untouched
        await store.client.hset(f"{namespace}:cp:y", mapping={"revision": 0, "body": b"{"})
        with pytest.raises(CheckpointFormatError):
            await store.load("y")
        await store.client.hset(store._rc(KEY), mapping={"status": "running", "attempt": "one"})
        with pytest.raises(StoreError, match="read failed"):
            await store.read(KEY)
        await store.client.set(f"{namespace}:schema", b"3")
        fresh = RedisStore(redis_url, prefix=f"{namespace}:")
        with pytest.raises(StoreError, match="layout version"):
            await fresh.load("x")
        await fresh.aclose()
    finally:
        await store.aclose()
