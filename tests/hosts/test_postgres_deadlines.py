"""The Postgres store bounds every operation by ``io_timeout_s`` with one timer on the event loop
for all the operations in flight: each silent operation still ends at its own deadline — one that
went silent later is not ended at an earlier one's — and a store used again under another event
loop keeps its bound there.

Only lower bounds on time are asserted (under load an end comes later, never sooner); ``HANG_S``
only turns a hang into a failure."""

from __future__ import annotations

import time
from collections.abc import Iterator

import anyio
import pytest

from bindloop.hosts.stores.postgres import PostgresStore
from bindloop.run import ToolCallReceiptKey
from bindloop.stores import StoreError

from .proxy import CuttingProxy

HANG_S = 60.0
IO_TIMEOUT_S = 1.0


def _key(run_id: str) -> ToolCallReceiptKey:
    return ToolCallReceiptKey(tenant_id="t", run_id=run_id, tool_name="send", args_hash="h")


@pytest.fixture
def proxy(postgres_dsn: str) -> Iterator[CuttingProxy]:
    port = int(next(p.split("=")[1] for p in postgres_dsn.split() if p.startswith("port=")))
    p = CuttingProxy(port)
    try:
        yield p
    finally:
        p.close()


def _store(postgres_dsn: str, proxy: CuttingProxy, namespace: str) -> PostgresStore:
    dsn = " ".join([*(p for p in postgres_dsn.split() if not p.startswith("port=")),
                    f"port={proxy.port}"])
    return PostgresStore(dsn, schema=namespace, io_timeout_s=IO_TIMEOUT_S, pool_size=4)


async def _silent_claim(store: PostgresStore, run_id: str) -> tuple[float, StoreError]:
    started = time.monotonic()
    with anyio.fail_after(HANG_S), pytest.raises(StoreError) as info:
        await store.claim(_key(run_id), 1, 60_000)
    return time.monotonic() - started, info.value


def test_staggered_silent_operations_each_end_at_their_own_deadline(
        postgres_dsn: str, proxy: CuttingProxy, namespace: str) -> None:
    store = _store(postgres_dsn, proxy, namespace)
    waited: dict[str, float] = {}
    errors: list[StoreError] = []

    async def main() -> None:
        assert await store.claim(_key("warm"), 1, 60_000)  # schema made, statement prepared
        proxy.cut_on(b"bindloop_claim", "after", times=2, fault="blackhole")

        async def one(run_id: str) -> None:
            waited[run_id], error = await _silent_claim(store, run_id)
            errors.append(error)

        async with anyio.create_task_group() as tg:
            tg.start_soon(one, "first")
            await anyio.sleep(IO_TIMEOUT_S / 2)  # the second goes silent half a bound later
            tg.start_soon(one, "second")
        assert proxy.cuts == 2
        assert await store.claim(_key("after"), 1, 60_000)  # fresh connections, no fault left
        await store.aclose()

    anyio.run(main)
    assert [e.operation for e in errors] == ["claim", "claim"]
    assert all("no answer from the server within 1.0 s" in str(e) for e in errors)
    assert waited["first"] >= IO_TIMEOUT_S
    assert waited["second"] >= IO_TIMEOUT_S  # not ended at the first one's deadline


def test_a_store_used_again_under_another_event_loop_keeps_its_bound(
        postgres_dsn: str, proxy: CuttingProxy, namespace: str) -> None:
    store = _store(postgres_dsn, proxy, namespace)

    async def first() -> None:
        assert await store.claim(_key("warm"), 1, 60_000)
        await store.aclose()

    async def second() -> tuple[float, StoreError]:
        proxy.cut_on(b"bindloop_claim", "after", fault="blackhole")
        try:
            return await _silent_claim(store, "later")
        finally:
            await store.aclose()

    anyio.run(first)
    waited, error = anyio.run(second)
    assert error.operation == "claim" and "no answer" in str(error)
    assert waited >= IO_TIMEOUT_S
