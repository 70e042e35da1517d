"""``RedisStore.complete_once`` on a real server: a fresh call recorded completed by attempt 1 with
its outbox value in one round trip; an existing receipt (any status) answered from the same round
trip and left alone; the receipt it writes the one ``claim(1)`` + ``complete(1)`` leaves, field for
field; one winner among racing callers (tasks and processes); results of any JSON shape; a lost
connection a ``StoreError``."""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindloop.hosts.stores.processes import run_in_processes
from bindloop.hosts.stores.redis import RedisStore
from bindloop.run import ReceiptCompleted, ReceiptFailed, ReceiptRunning, ToolCallReceiptKey
from bindloop.stores import StoreError

from .proxy import CuttingProxy

pytestmark = pytest.mark.anyio
KEY = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="charge", args_hash="h")
TWIN = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="charge", args_hash="twin")
WARM = ToolCallReceiptKey(tenant_id="t", run_id="warm", tool_name="warm", args_hash="h")
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=16,
)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000.0

    def __call__(self) -> float:
        return self.ms


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def store(redis_url: str, namespace: str, clock: Clock) -> AsyncIterator[RedisStore]:
    """A store that has met the server: its schema checked, the scripts used here loaded."""
    opened = RedisStore(redis_url, prefix=f"{namespace}:", now=clock)
    try:
        assert await opened.complete_once(WARM, "warm") is None
        assert await opened.claim(WARM, 2, 60_000) is False
        assert await opened.complete(WARM, 1, "warm") is False
        yield opened
    finally:
        await opened.aclose()


async def _hash(store: RedisStore, key: ToolCallReceiptKey) -> dict[bytes, bytes]:
    raw = await store.client.hgetall(store._rc(key))
    return dict(raw)


async def test_a_fresh_call_is_written_completed_with_its_outbox_in_one_round_trip(
    store: RedisStore,
) -> None:
    start = store.round_trips
    assert await store.complete_once(KEY, {"charged": 42}, outbox=("ledger", b"row-1")) is None
    assert store.round_trips - start == 1
    assert await store.read(KEY) == ReceiptCompleted(attempt=1, result={"charged": 42})
    assert await store.outbox("ledger") == [b"row-1"]


async def test_a_second_call_replays_the_completed_receipt_and_appends_nothing(
    store: RedisStore,
) -> None:
    assert await store.complete_once(KEY, "first", outbox=("ledger", b"first")) is None
    before = await _hash(store, KEY)
    start = store.round_trips
    found = await store.complete_once(KEY, "second", outbox=("ledger", b"second"))
    assert store.round_trips - start == 1
    assert found == ReceiptCompleted(attempt=1, result="first")
    assert await _hash(store, KEY) == before
    assert await store.outbox("ledger") == [b"first"]


async def test_a_running_receipt_is_returned_untouched_and_its_attempt_still_completes(
    store: RedisStore, clock: Clock
) -> None:
    assert await store.claim(KEY, 1, 500)
    before = await _hash(store, KEY)
    start = store.round_trips
    found = await store.complete_once(KEY, "not mine", outbox=("ledger", b"not mine"))
    assert store.round_trips - start == 1
    assert found == ReceiptRunning(attempt=1, lease_expires_at_ms=clock.ms + 500)
    assert await _hash(store, KEY) == before
    assert await store.outbox("ledger") == []
    assert await store.complete(KEY, 1, "mine")
    assert await store.read(KEY) == ReceiptCompleted(attempt=1, result="mine")


async def test_a_running_receipt_whose_lease_ended_is_still_not_overwritten(
    store: RedisStore, clock: Clock
) -> None:
    assert await store.claim(KEY, 1, 500)
    clock.ms += 10_000  # the lease has ended: claiming the next attempt is the claim protocol's
    found = await store.complete_once(KEY, "late", outbox=("ledger", b"late"))
    assert found == ReceiptRunning(attempt=1, lease_expires_at_ms=1_500.0)
    assert await store.outbox("ledger") == []
    assert await store.claim(KEY, 2, 500)


@pytest.mark.parametrize("error", ["boom", None])
async def test_a_failed_receipt_is_returned_untouched_and_the_next_attempt_still_claims(
    store: RedisStore, error: str | None
) -> None:
    assert await store.claim(KEY, 1, 500)
    assert await store.fail(KEY, 1, error)
    before = await _hash(store, KEY)
    found = await store.complete_once(KEY, "not mine", outbox=("ledger", b"not mine"))
    assert found == ReceiptFailed(attempt=1, error=error)
    assert await _hash(store, KEY) == before
    assert await store.outbox("ledger") == []
    assert await store.claim(KEY, 2, 500)
    assert await store.complete(KEY, 2, "retried")
    assert await store.read(KEY) == ReceiptCompleted(attempt=2, result="retried")


async def test_the_receipt_written_is_the_one_claim_then_complete_leaves(store: RedisStore) -> None:
    assert await store.complete_once(KEY, ["same", 1]) is None
    assert await store.claim(TWIN, 1, 500)
    assert await store.complete(TWIN, 1, ["same", 1])
    raw = await _hash(store, KEY)
    assert raw == await _hash(store, TWIN)
    assert set(raw) == {b"status", b"attempt", b"result"}
    for key in (KEY, TWIN):
        assert await store.read(key) == ReceiptCompleted(attempt=1, result=["same", 1])
        assert not await store.claim(key, 2, 500)  # completed: no next attempt
        assert not await store.claim(key, 1, 500)
        assert not await store.complete(key, 1, "again")  # settled: fenced
        assert not await store.fail(key, 1, "again")
        assert not await store.complete(key, 2, "never owned")
        assert await store.read(key) == ReceiptCompleted(attempt=1, result=["same", 1])
    assert await store.delete_run("t", "r") == 2
    assert await store.read(KEY) is None
    assert await store.read(TWIN) is None
    assert await store.complete_once(KEY, "after delete_run") is None  # forgotten: fresh again
    assert await store.read(KEY) == ReceiptCompleted(attempt=1, result="after delete_run")


async def test_racing_tasks_on_one_key_leave_one_winner_and_one_outbox_value(
    store: RedisStore,
) -> None:
    answers: dict[int, Any] = {}

    async def call(i: int) -> None:
        answers[i] = await store.complete_once(KEY, i, outbox=("ledger", str(i).encode()))

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(call, i)
    winners = [i for i, answer in answers.items() if answer is None]
    assert len(winners) == 1, answers
    (winner,) = winners
    assert all(
        answer == ReceiptCompleted(attempt=1, result=winner)
        for i, answer in answers.items()
        if i != winner
    ), answers
    assert await store.outbox("ledger") == [str(winner).encode()]
    assert await store.read(KEY) == ReceiptCompleted(attempt=1, result=winner)


async def _race_job(store: RedisStore, index: int) -> list[tuple[int, Any]]:
    """Ten concurrent ``complete_once`` of ``KEY`` from this process: (result sent, answer)."""
    answers: list[tuple[int, Any]] = []

    async def call(i: int) -> None:
        value = index * 100 + i
        found = await store.complete_once(KEY, value, outbox=("ledger", str(value).encode()))
        answers.append((value, None if found is None else msgspec.to_builtins(found)))

    async with anyio.create_task_group() as tg:
        for i in range(10):
            tg.start_soon(call, i)
    return answers


async def test_racing_processes_on_one_key_leave_one_winner_and_one_outbox_value(
    redis_url: str, namespace: str
) -> None:
    factory = functools.partial(RedisStore, redis_url, prefix=f"{namespace}:")
    per_process = await anyio.to_thread.run_sync(lambda: run_in_processes(factory, _race_job, 2))
    answers = [answer for process in per_process for answer in process]
    assert len(answers) == 20
    winners = [value for value, found in answers if found is None]
    assert len(winners) == 1, answers
    (winner,) = winners
    won = msgspec.to_builtins(ReceiptCompleted(attempt=1, result=winner))
    assert all(found == won for value, found in answers if value != winner), answers
    store = factory()
    try:
        assert await store.outbox("ledger") == [str(winner).encode()]
        assert await store.read(KEY) == ReceiptCompleted(attempt=1, result=winner)
    finally:
        await store.aclose()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(result=JSON_VALUES)
def test_results_of_any_json_shape_round_trip_as_complete_stores_them(
    redis_url: str, namespace: str, result: Any
) -> None:
    async def check() -> None:
        store = RedisStore(redis_url, prefix=f"{namespace}:")
        once = ToolCallReceiptKey(
            tenant_id="t", run_id="r", tool_name="once", args_hash=uuid.uuid4().hex
        )
        twin = ToolCallReceiptKey(
            tenant_id="t", run_id="r", tool_name="twin", args_hash=once.args_hash
        )
        try:
            assert await store.complete_once(once, result) is None
            assert await store.read(once) == ReceiptCompleted(attempt=1, result=result)
            assert await store.complete_once(once, "other") == ReceiptCompleted(
                attempt=1, result=result
            )
            assert await store.claim(twin, 1, 60_000)
            assert await store.complete(twin, 1, result)
            assert await _hash(store, once) == await _hash(store, twin)
        finally:
            await store.aclose()

    anyio.run(check)


@pytest.fixture
async def proxied(redis_url: str, namespace: str) -> AsyncIterator[tuple[RedisStore, CuttingProxy]]:
    """A store whose connections go through a cutting proxy, the ``once`` script loaded."""
    proxy = CuttingProxy.to(redis_url)
    store = RedisStore(proxy.via(redis_url), prefix=f"{namespace}:")
    try:
        assert await store.complete_once(WARM, "warm") is None
        yield store, proxy
    finally:
        await store.aclose()
        proxy.close()


async def test_a_connection_lost_before_the_script_reached_the_server_is_a_store_error(
    proxied: tuple[RedisStore, CuttingProxy],
) -> None:
    store, proxy = proxied
    proxy.cut_on(b"EVALSHA", "before", times=10)
    with pytest.raises(StoreError) as info:
        await store.complete_once(KEY, "charged", outbox=("ledger", b"row"))
    assert (info.value.store, info.value.operation) == ("redis", "complete_once")
    assert proxy.cuts == 1  # not retried: a write whose outcome may be unknown is never repeated
    proxy.cut_on(b"", "before", times=0)
    assert await store.read(KEY) is None  # it never reached the server
    assert await store.outbox("ledger") == []
    assert await store.complete_once(KEY, "charged", outbox=("ledger", b"row")) is None
    assert await store.outbox("ledger") == [b"row"]


async def test_a_connection_lost_after_the_script_was_sent_leaves_one_receipt_and_one_value(
    proxied: tuple[RedisStore, CuttingProxy],
) -> None:
    store, proxy = proxied
    proxy.cut_on(b"EVALSHA", "after", times=10)
    with pytest.raises(StoreError) as info:
        await store.complete_once(KEY, "first", outbox=("ledger", b"first"))
    assert info.value.operation == "complete_once"
    proxy.cut_on(b"", "before", times=0)
    # Whether the cut call landed is unknown (the server may run it even after the next command
    # arrives on another connection); either way exactly one of the two lands, with its value.
    found = await store.complete_once(KEY, "second", outbox=("ledger", b"second"))
    if found is None:
        assert await store.outbox("ledger") == [b"second"]
    else:
        assert found == ReceiptCompleted(attempt=1, result="first")
        assert await store.outbox("ledger") == [b"first"]
