"""What a persisted tool-calling turn costs in round trips on the networked stores: a fresh call
claimed at attempt 1, its completion, and the checkpoint saved after the step — one round trip
each (``round_trips`` counts every statement or command the store waits for), once the store has
met the server (its schema checked; on Redis each script loaded by its first use)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bindloop.hosts.stores.postgres import PostgresStore
from bindloop.hosts.stores.redis import RedisStore
from bindloop.run import ReceiptCompleted, ToolCallReceiptKey
from bindloop.testing.store_kit import checkpoint_at

pytestmark = pytest.mark.anyio
KEY = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="charge", args_hash="h")
WARM = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="warm", args_hash="h")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["postgres", "redis"])
async def store(request: pytest.FixtureRequest, namespace: str) -> AsyncIterator[Any]:
    opened: Any = (PostgresStore(request.getfixturevalue("postgres_dsn"), schema=namespace)
                   if request.param == "postgres"
                   else RedisStore(request.getfixturevalue("redis_url"), prefix=f"{namespace}:"))
    try:
        await opened.save(checkpoint_at("warm", 0))
        assert await opened.claim(WARM, 1, 60_000)
        assert await opened.complete(WARM, 1, "warm")
        yield opened
    finally:
        await opened.aclose()


async def test_a_fresh_call_and_the_save_after_it_are_one_round_trip_each(store: Any) -> None:
    await store.save(checkpoint_at("x", 0))
    start = store.round_trips
    assert await store.claim(KEY, 1, 60_000)
    assert store.round_trips - start == 1
    assert await store.complete(KEY, 1, "charged")
    assert store.round_trips - start == 2
    await store.save(checkpoint_at("x", 1))
    assert store.round_trips - start == 3
    assert await store.read(KEY) == ReceiptCompleted(attempt=1, result="charged")
    assert await store.load("x") == checkpoint_at("x", 1)


async def test_a_refused_claim_and_a_fenced_completion_are_one_round_trip_each(
        store: Any) -> None:
    assert await store.claim(KEY, 1, 60_000)
    start = store.round_trips
    assert not await store.claim(KEY, 1, 60_000)      # the lease is live
    assert not await store.complete(KEY, 2, "late")    # attempt 2 never owned it
    assert store.round_trips - start == 2
    assert await store.complete(KEY, 1, "charged")
