"""``PostgresStore.complete_once``: a call no attempt has touched, recorded completed together with
the host's own writes, in one pipeline — one round trip, one transaction — and, when a receipt
already exists, nothing written and that receipt given back for the decision table."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal

import anyio
import psycopg
import pytest

from bindloop.errors import UsageError
from bindloop.hosts.stores.postgres import PostgresStore
from bindloop.run import (
    ReceiptCompleted,
    ReceiptExecute,
    ReceiptFailed,
    ReceiptReplay,
    ReceiptRunning,
    ToolCallReceiptKey,
    decide_tool_call_receipt,
)
from bindloop.stores import StoreError

from .proxy import CuttingProxy

pytestmark = pytest.mark.anyio
KEY = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="charge", args_hash="h")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def proxied(postgres_dsn: str, namespace: str) -> AsyncIterator[tuple[PostgresStore,
                                                                             CuttingProxy, str]]:
    """A store whose connections go through a proxy, its schema and a ledger table created."""
    proxy = CuttingProxy.to(postgres_dsn)
    store = PostgresStore(proxy.via(postgres_dsn), schema=namespace)
    ledger = f"{namespace}.ledger"
    try:
        await store.read(KEY)  # the schema
        async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as conn:
            await conn.execute(f"CREATE TABLE {ledger} (session text, step int, note text, "
                               "PRIMARY KEY (session, step))")
        yield store, proxy, ledger
    finally:
        await store.aclose()
        proxy.close()


async def _rows(dsn: str, query: str) -> list[tuple[Any, ...]]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        cur = await conn.execute(query)
        return list(await cur.fetchall())


async def _gone(dsn: str, pid: int) -> None:
    """Wait until the server session ``pid`` has ended: a session whose client vanished reads
    what was sent before the cut (a pipeline: committed at its ``Sync``) before it sees the end."""
    deadline = anyio.current_time() + 30
    while await _rows(dsn, f"SELECT 1 FROM pg_stat_activity WHERE pid = {int(pid)}"):
        assert anyio.current_time() < deadline, f"session {pid} did not end"
        await anyio.sleep(0.05)


def _charge(ledger: str, step: int, note: str = "charged") -> list[tuple[str, tuple[Any, ...]]]:
    return [(f"INSERT INTO {ledger} VALUES (%s, %s, %s)", ("s", step, note))]


async def test_a_fresh_call_and_its_writes_land_in_one_round_trip(
        proxied: tuple[PostgresStore, CuttingProxy, str], postgres_dsn: str) -> None:
    store, proxy, ledger = proxied
    trips, chunks = store.round_trips, proxy.client_chunks
    assert await store.complete_once(KEY, {"charged": 5}, _charge(ledger, 1)) is None
    assert store.round_trips - trips == 1
    assert proxy.client_chunks - chunks == 1  # every statement and the Sync in one send
    assert await store.read(KEY) == ReceiptCompleted(attempt=1, result={"charged": 5})
    assert await _rows(postgres_dsn, f"SELECT * FROM {ledger}") == [("s", 1, "charged")]


async def test_an_existing_receipt_is_given_back_and_nothing_is_written(
        proxied: tuple[PostgresStore, CuttingProxy, str], postgres_dsn: str) -> None:
    store, _, ledger = proxied
    assert await store.complete_once(KEY, "first", _charge(ledger, 1)) is None
    again = await store.complete_once(KEY, "second", _charge(ledger, 2))
    assert again == ReceiptCompleted(attempt=1, result="first")
    assert isinstance(decide_tool_call_receipt(state=again, effect="opaque"), ReceiptReplay)
    assert await _rows(postgres_dsn, f"SELECT step FROM {ledger}") == [(1,)]


@pytest.mark.parametrize("then", ["running", "failed"])
async def test_a_claimed_or_failed_receipt_is_never_overwritten(
        proxied: tuple[PostgresStore, CuttingProxy, str], postgres_dsn: str,
        then: Literal["running", "failed"]) -> None:
    store, _, ledger = proxied
    assert await store.claim(KEY, 1, 60_000)
    if then == "failed":
        assert await store.fail(KEY, 1, "down")
    found = await store.complete_once(KEY, "mine", _charge(ledger, 1))
    if then == "running":
        assert isinstance(found, ReceiptRunning) and found.attempt == 1
        assert await store.complete(KEY, 1, "theirs")  # the owner's fence still holds
    else:
        assert found == ReceiptFailed(attempt=1, error="down")
        decision = decide_tool_call_receipt(state=found, effect="opaque")
        assert isinstance(decision, ReceiptExecute) and decision.attempt == 2
        assert await store.claim(KEY, 2, 60_000)
    assert await _rows(postgres_dsn, f"SELECT * FROM {ledger}") == []


async def test_the_receipt_is_the_one_a_claim_and_a_completion_leave(
        proxied: tuple[PostgresStore, CuttingProxy, str], postgres_dsn: str,
        namespace: str) -> None:
    store, _, _ = proxied
    other = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="charge", args_hash="h2")
    assert await store.complete_once(KEY, [1, "two", None]) is None
    assert await store.claim(other, 1, 60_000)
    assert await store.complete(other, 1, [1, "two", None])
    rows = await _rows(postgres_dsn, f"SELECT args_hash, status, attempt, lease_expires_at_ms, "
                                     f"result, error FROM {namespace}.receipts ORDER BY args_hash")
    assert [row[1:] for row in rows if row[0] == "h"] == [row[1:] for row in rows
                                                          if row[0] == "h2"]
    for key in (KEY, other):  # the fence treats both alike
        assert not await store.claim(key, 2, 60_000)
        assert not await store.complete(key, 1, "again")
    assert await store.delete_run("t", "r") == 2


async def test_without_writes_it_is_one_statement(
        proxied: tuple[PostgresStore, CuttingProxy, str]) -> None:
    store, _, _ = proxied
    await store.complete_once(ToolCallReceiptKey(tenant_id="t", run_id="w", tool_name="warm",
                                                 args_hash="h"), "warm")  # prepared
    trips = store.round_trips
    assert await store.complete_once(KEY, "done") is None
    assert store.round_trips - trips == 1
    assert await store.complete_once(KEY, "again") == ReceiptCompleted(attempt=1, result="done")
    assert store.round_trips - trips == 3  # the refused insert, then the read


async def test_a_failing_write_rolls_the_receipt_back(
        proxied: tuple[PostgresStore, CuttingProxy, str], postgres_dsn: str) -> None:
    store, _, ledger = proxied
    other = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="charge", args_hash="h2")
    assert await store.complete_once(other, "ok", _charge(ledger, 1)) is None
    with pytest.raises(StoreError, match="ledger_pkey"):  # the host's row already exists
        await store.complete_once(KEY, "dup", _charge(ledger, 1))
    assert await store.read(KEY) is None
    assert await store.complete_once(KEY, "ok", _charge(ledger, 2)) is None  # the pool is fine
    assert await _rows(postgres_dsn, f"SELECT step FROM {ledger} ORDER BY step") == [(1,), (2,)]


async def test_percent_signs_and_parameter_types(
        proxied: tuple[PostgresStore, CuttingProxy, str], postgres_dsn: str) -> None:
    store, _, ledger = proxied
    writes = [(f"INSERT INTO {ledger} VALUES (%s, %s, '100%%' || %s)", ("s", 7, " off")),
              (f"UPDATE {ledger} SET note = note || %s WHERE step = %s", (b"!".decode(), 7))]
    assert await store.complete_once(KEY, None, writes) is None
    assert await _rows(postgres_dsn, f"SELECT note FROM {ledger}") == [("100% off!",)]


@pytest.mark.parametrize(("writes", "match"), [
    ([("BEGIN", ())], "BEGIN is not allowed"),
    ([("commit;", ())], "COMMIT is not allowed"),
    ([("-- the ledger's row is in\nCOMMIT", ())], "COMMIT is not allowed"),
    ([("/* nested /* */ SELECT */ rollback", ())], "ROLLBACK is not allowed"),
    ([("RESET search_path", ())], "RESET is not allowed"),
    ([("DEALLOCATE ALL", ())], "DEALLOCATE is not allowed"),
    # the server runs a block's COMMIT inside the pipeline's implicit transaction (tried: the
    # receipt landed without the statements after it), so a block or a procedure is refused too
    ([("INSERT INTO x VALUES (1)", ()), ("DO $$BEGIN COMMIT; END$$", ())], "DO is not allowed"),
    ([("/* c */ CALL settle()", ())], "CALL is not allowed"),
    ([("INSERT INTO x VALUES (%s)", ())], "1 placeholders and 0 parameters"),
    ([("INSERT INTO x VALUES (%d)", (1,))], "placeholders are %s"),
    ([("INSERT INTO x VALUES (%s)", "a")], "tuple or list"),
    ([("", ())], "SQL statement"),
])
async def test_bad_writes_are_refused_before_anything_is_sent(
        proxied: tuple[PostgresStore, CuttingProxy, str], writes: Any, match: str) -> None:
    store, proxy, _ = proxied
    trips, chunks = store.round_trips, proxy.client_chunks
    with pytest.raises(UsageError, match=match):
        await store.complete_once(KEY, "x", writes)
    assert (store.round_trips, proxy.client_chunks) == (trips, chunks)
    assert await store.read(KEY) is None


@pytest.mark.parametrize("when", ["before", "after"])
async def test_a_connection_cut_lands_both_or_neither(
        proxied: tuple[PostgresStore, CuttingProxy, str], postgres_dsn: str,
        when: Literal["before", "after"]) -> None:
    store, proxy, ledger = proxied
    (pooled,) = store._idle  # the fixture's one connection, which the call will take
    pid = pooled.info.backend_pid
    proxy.cut_on(b"ledger", when)
    with pytest.raises(StoreError, match="complete_once"):
        await store.complete_once(KEY, "cut", _charge(ledger, 1))
    await _gone(postgres_dsn, pid)  # after "after" the server may still be committing
    receipt = await store.read(KEY)
    landed = await _rows(postgres_dsn, f"SELECT step FROM {ledger}")
    if when == "before":
        assert (receipt, landed) == (None, [])
    else:
        assert (receipt is None) == (landed == [])
    found = await store.complete_once(KEY, "again", _charge(ledger, 1))
    assert (found is None) == (receipt is None)
    assert await _rows(postgres_dsn, f"SELECT step FROM {ledger}") == [(1,)]


async def test_concurrent_callers_one_lands(
        proxied: tuple[PostgresStore, CuttingProxy, str], postgres_dsn: str) -> None:
    store, _, ledger = proxied
    answers: list[Any] = []

    async def one(n: int) -> None:
        answers.append(await store.complete_once(KEY, n, _charge(ledger, 1, f"by {n}")))

    async with anyio.create_task_group() as tg:
        for n in range(12):
            tg.start_soon(one, n)
    winners = [a for a in answers if a is None]
    assert len(winners) == 1
    stored = await store.read(KEY)
    assert isinstance(stored, ReceiptCompleted)
    assert all(a == stored for a in answers if a is not None)
    assert await _rows(postgres_dsn, f"SELECT note FROM {ledger}") == [(f"by {stored.result}",)]


async def test_a_host_table_named_receipts_is_not_taken_for_the_store_s(
        proxied: tuple[PostgresStore, CuttingProxy, str], postgres_dsn: str,
        namespace: str) -> None:
    """A conflict in the host's own table is the host's error, even when that table is called
    ``receipts`` too (in another schema): it is not read as an existing receipt."""
    store, _, _ = proxied
    async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as conn:
        await conn.execute(f"CREATE SCHEMA {namespace}_host")
        await conn.execute(f"CREATE TABLE {namespace}_host.receipts (id int PRIMARY KEY)")
        await conn.execute(f"INSERT INTO {namespace}_host.receipts VALUES (1)")
    with pytest.raises(StoreError, match="receipts_pkey"):
        await store.complete_once(KEY, "x", [(f"INSERT INTO {namespace}_host.receipts "
                                              "VALUES (%s)", (1,))])
    assert await store.read(KEY) is None


async def test_a_parameter_postgres_cannot_take_is_a_store_error_and_nothing_lands(
        proxied: tuple[PostgresStore, CuttingProxy, str], postgres_dsn: str) -> None:
    store, _, ledger = proxied
    with pytest.raises(StoreError, match="complete_once"):
        await store.complete_once(KEY, "x", [(f"INSERT INTO {ledger} VALUES (%s, %s, %s)",
                                              ("s", 1, object()))])
    assert await store.read(KEY) is None
    assert await store.complete_once(KEY, "ok", _charge(ledger, 1)) is None
