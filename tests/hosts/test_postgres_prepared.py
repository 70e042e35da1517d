"""The Postgres store's hot statements (claim, complete, fail, renew, the checkpoint's
compare-and-swap) run as statements prepared on each connection, straight on libpq: a statement
deallocated behind the store's back is prepared again, parameters are refused as psycopg refuses
them (never truncated), a body larger than the socket's buffers goes out whole, and an error
result is the typed error it always was."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bindloop.contracts import UserMessage
from bindloop.hosts.stores.postgres import PostgresStore
from bindloop.run import ReceiptCompleted, ReceiptFailed, ReceiptRunning, ToolCallReceiptKey
from bindloop.stores import StoreError
from bindloop.testing.store_kit import checkpoint_at

pytestmark = pytest.mark.anyio
KEY = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="charge", args_hash="h")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def store(postgres_dsn: str, namespace: str) -> AsyncIterator[PostgresStore]:
    opened = PostgresStore(postgres_dsn, schema=namespace, pool_size=1)
    try:
        yield opened
    finally:
        await opened.aclose()


async def test_statements_deallocated_behind_the_store_are_prepared_again(
        store: PostgresStore) -> None:
    await store.save(checkpoint_at("x", 0))
    assert await store.claim(KEY, 1, 60_000)
    async with store._connection() as conn:  # what a pooler's DISCARD ALL leaves
        await conn.execute("DEALLOCATE ALL")
    start = store.round_trips
    assert await store.claim(ToolCallReceiptKey(tenant_id="t", run_id="r2", tool_name="charge",
                                                args_hash="h"), 1, 60_000)
    assert store.round_trips - start == 3  # refused, prepared again, run
    assert await store.complete(KEY, 1, "charged")
    await store.save(checkpoint_at("x", 1))
    assert await store.read(KEY) == ReceiptCompleted(attempt=1, result="charged")
    assert await store.load("x") == checkpoint_at("x", 1)
    start = store.round_trips
    await store.save(checkpoint_at("x", 2))
    assert store.round_trips - start == 1  # prepared on this connection from now on


async def test_a_deallocated_statement_inside_a_transaction_is_not_resent(
        store: PostgresStore) -> None:
    """Inside ``complete_with``'s transaction the refusal aborted the transaction: the
    completion fails as a whole, its effect never ran, and the receipt stays running."""
    assert await store.claim(KEY, 1, 60_000)
    assert await store.complete(ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="warm",
                                                   args_hash="h"), 1, "x") is False
    async with store._connection() as conn:
        await conn.execute("DEALLOCATE ALL")
    ran: list[bool] = []

    async def effect(conn: object) -> None:
        ran.append(True)

    with pytest.raises(StoreError) as info:
        await store.complete_with(KEY, 1, "charged", effect)
    assert info.value.operation == "complete"
    assert ran == []
    assert isinstance(await store.read(KEY), ReceiptRunning)
    assert await store.complete_with(KEY, 1, "charged", effect)  # a fresh connection: prepared
    assert ran == [True]
    assert await store.read(KEY) == ReceiptCompleted(attempt=1, result="charged")


async def test_a_nul_character_is_refused_never_cut_short(store: PostgresStore) -> None:
    """libpq's text parameters end at a NUL: a key holding one is refused before anything is
    written, never stored as the shorter key."""
    key = ToolCallReceiptKey(tenant_id="t", run_id="a\x00b", tool_name="charge", args_hash="h")
    with pytest.raises(StoreError) as info:
        await store.claim(key, 1, 60_000)
    assert (info.value.store, info.value.operation) == ("postgres", "claim")
    assert await store.read(ToolCallReceiptKey(tenant_id="t", run_id="a", tool_name="charge",
                                               args_hash="h")) is None
    for n in range(3):  # each refusal discards its connection; none is remembered after
        assert await store.claim(ToolCallReceiptKey(tenant_id="t", run_id=f"ok{n}",
                                                    tool_name="charge", args_hash="h"), 1, 60_000)
        with pytest.raises(StoreError):
            await store.claim(key, 1, 60_000)
    assert len(store._prepared) <= store.pool_size
    assert await store.claim(KEY, 1, 60_000)  # the store goes on
    assert await store.fail(KEY, 1, "bad\x00error") is True  # inside JSON: escaped, kept
    assert await store.read(KEY) == ReceiptFailed(attempt=1, error="bad\x00error")


async def test_a_body_larger_than_the_socket_buffers_is_saved_whole(
        store: PostgresStore) -> None:
    big = [UserMessage(content="x" * 1_000_000 + str(n)) for n in range(8)]
    await store.save(checkpoint_at("big", 0, messages=big))
    await store.save(checkpoint_at("big", 1, messages=big[:4]))
    assert await store.load("big") == checkpoint_at("big", 1, messages=big[:4])
    assert await store.renew(KEY, 1, 60_000) is False  # nothing to renew: no receipt yet
    assert await store.claim(KEY, 1, 60_000)
    assert await store.renew(KEY, 1, 60_000) is True


async def test_a_parameter_absent_at_the_first_use_is_sent_right_later(
        store: PostgresStore) -> None:
    """A statement's parameter formats are fixed at its first use: a failure without an error
    (NULL) first, then one with an error, both read back as written."""
    first = ToolCallReceiptKey(tenant_id="t", run_id="r1", tool_name="charge", args_hash="h")
    assert await store.claim(first, 1, 60_000)
    assert await store.fail(first, 1, None)
    assert await store.claim(KEY, 1, 60_000)
    assert await store.fail(KEY, 1, "boom")
    assert await store.read(first) == ReceiptFailed(attempt=1, error=None)
    assert await store.read(KEY) == ReceiptFailed(attempt=1, error="boom")
