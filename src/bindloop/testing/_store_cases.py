"""The store conformance kit's cases as plain async functions, with no pytest in sight.

Each case takes a :class:`StoreHandles` (the author's factory, and the process runner if any),
raises ``AssertionError`` when the store breaks the contract and ``CaseSkipped`` (_case_runner.py)
when the case cannot apply. ``bindloop.testing.store_kit`` wraps them as pytest suites; anything
else that can ``await`` — a route inside workerd, where pytest cannot run — calls
:func:`run_store_cases`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from types import MappingProxyType
from typing import Any

import anyio
import msgspec

from .._awaitable import resolve
from ..stores import MemoryLimitStore
from ..contracts import AssistantMessage, UserMessage
from ..errors import UsageError
from ..run import ReceiptCompleted, ReceiptFailed, ReceiptRunning, ToolCallReceiptKey
from ..checkpoints import (
    CheckpointFormatError,
    LoopBindings,
    LoopCheckpoint,
    create_loop_checkpoint,
)
from ..stores import CheckpointConflictError
from ._case_runner import (
    Case as Case,
    CaseResult as CaseResult,
    CaseSkipped as CaseSkipped,
    ManualClock as ManualClock,
    StoreHandles as StoreHandles,
    raises as raises,
    run_case as run_case,
    run_store_cases as run_store_cases,
)
from ..stores import MemoryToolCallReceiptStore

__all__ = (
    "CHECKPOINT_CASES",
    "LIMIT_CASES",
    "RECEIPT_CASES",
    "Case",
    "CaseResult",
    "ManualClock",
    "StoreHandles",
    "checkpoint_at",
    "race_admit",
    "race_claim",
    "race_complete_once",
    "race_enter",
    "race_first_checkpoint",
    "race_next_checkpoint",
    "raises",
    "run_store_cases",
)

RACE_ID = "kit-race"
RACE_KEY = ToolCallReceiptKey(tenant_id="kit", run_id="race", tool_name="send", args_hash="h")
RACE_LIMIT = 7
RACE_PER_WRITER = 5

def checkpoint_at(execution_id: str, revision: int, note: str = "kit",
                  messages: list[Any] | None = None) -> LoopCheckpoint:
    """A valid checkpoint of ``execution_id`` at ``revision`` whose bindings name ``note`` (so a
    test can tell which writer's checkpoint was stored)."""
    start = create_loop_checkpoint(
        execution_id=execution_id, max_iterations=4,
        messages=messages or [UserMessage(content=f"hello from {note}")],
        bindings=LoopBindings(config={"writer": note}))
    return msgspec.structs.replace(start, revision=revision)


def _by_name(*cases: Case) -> Mapping[str, Case]:
    return MappingProxyType({case.__name__: case for case in cases})


def _close(got: float, want: float) -> bool:
    return got == want or abs(got - want) <= 1e-6


# ---- the jobs the multi-process races run (module level: a child process imports them) ---------

async def race_first_checkpoint(store: Any, index: int) -> bool:
    """Write revision 0 of a new execution; True when this writer's landed."""
    try:
        await store.save(checkpoint_at(RACE_ID, 0, f"w{index}"))
    except CheckpointConflictError:
        return False
    return True


async def race_next_checkpoint(store: Any, index: int) -> bool:
    """Write revision 1 over the stored revision 0; True when this writer's landed."""
    try:
        await store.save(checkpoint_at(RACE_ID, 1, f"w{index}"))
    except CheckpointConflictError:
        return False
    return True


async def race_claim(store: Any, index: int) -> bool:
    """Claim attempt 1 of the race receipt and complete it with this writer's index."""
    won = bool(await store.claim(RACE_KEY, 1, 60_000.0))
    if won:
        assert await store.complete(RACE_KEY, 1, index)
    return won


async def race_complete_once(store: Any, index: int) -> int | None:
    """Record the race receipt completed by attempt 1 with this writer's index in one
    ``complete_once``: ``None`` when this writer's landed, else the index of the writer whose did
    (the receipt it was answered, which must be that completion)."""
    found = await store.complete_once(RACE_KEY, index)
    if found is None:
        return None
    assert isinstance(found, ReceiptCompleted) and found.attempt == 1, found
    assert isinstance(found.result, int) and found.result != index, found
    return found.result


async def race_admit(store: Any, index: int) -> int:
    """Ask for ``RACE_PER_WRITER`` admissions of one request; the number admitted."""
    admitted = 0
    for _ in range(RACE_PER_WRITER):
        admitted += await store.admit("kit:race", 3_600_000.0, RACE_LIMIT, 1, 1_000.0) == 0
    return admitted


async def race_enter(store: Any, index: int) -> int:
    """Try ``RACE_PER_WRITER`` concurrency slots (never left); the number taken."""
    taken = 0
    for _ in range(RACE_PER_WRITER):
        taken += bool(await store.enter("kit:slots", RACE_LIMIT))
    return taken


# ---- checkpoints --------------------------------------------------------------------------------

async def checkpoint_missing_loads_as_none(stores: StoreHandles) -> None:
    store = await stores.open()
    assert await store.load("nobody") is None
    assert await store.delete("nobody") is False


async def checkpoint_round_trips_through_another_handle(stores: StoreHandles) -> None:
    a, b = await stores.open(), await stores.open()
    # Text a careless store mangles: NUL, non-BMP, quotes and backslashes, a long run.
    cp = checkpoint_at("x", 0, messages=[
        UserMessage(content="nul \x00 emoji \U0001f600 \"q\" \\ é" + "z" * 5000),
        AssistantMessage(content="ok")])
    await a.save(cp)
    assert await b.load("x") == cp
    assert await a.load("x") == cp


async def checkpoint_next_revision_lands_and_others_conflict(stores: StoreHandles) -> None:
    store = await stores.open()
    await store.save(checkpoint_at("x", 0))
    await store.save(checkpoint_at("x", 1, "second"))
    for revision in (1, 0, 3):
        with raises(CheckpointConflictError) as info:
            await store.save(checkpoint_at("x", revision, "stale"))
        error = info.value
        assert (error.execution_id, error.revision, error.stored) == ("x", revision, 1)
        assert f"revision {revision}" in str(error) and "revision 1" in str(error)
    assert await store.load("x") == checkpoint_at("x", 1, "second")


async def checkpoint_first_write_lands_once(stores: StoreHandles) -> None:
    store = await stores.open()
    await store.save(checkpoint_at("new", 4, "first"))  # any revision starts an execution
    with raises(CheckpointConflictError) as info:
        await store.save(checkpoint_at("new", 4, "again"))
    assert info.value.stored == 4
    assert await store.load("new") == checkpoint_at("new", 4, "first")


async def checkpoint_executions_are_independent(stores: StoreHandles) -> None:
    store = await stores.open()
    for ident in ("a", "b", "a:b", "a%", "A"):
        await store.save(checkpoint_at(ident, 0, ident))
    await store.save(checkpoint_at("a", 1, "a1"))
    assert await store.load("b") == checkpoint_at("b", 0, "b")
    assert await store.load("a:b") == checkpoint_at("a:b", 0, "a:b")
    assert await store.load("A") == checkpoint_at("A", 0, "A")
    assert await store.load("a") == checkpoint_at("a", 1, "a1")


async def checkpoint_delete_then_any_revision_lands(stores: StoreHandles) -> None:
    store = await stores.open()
    await store.save(checkpoint_at("x", 0))
    await store.save(checkpoint_at("y", 0))
    assert await store.delete("x") is True
    assert await store.load("x") is None
    assert await store.delete("x") is False
    assert await store.load("y") == checkpoint_at("y", 0)
    await store.save(checkpoint_at("x", 7, "after"))
    assert await store.load("x") == checkpoint_at("x", 7, "after")


async def checkpoint_size_bound_refuses_before_writing(stores: StoreHandles) -> None:
    big = checkpoint_at("big", 0, messages=[UserMessage(content="x" * 4000)])
    small = await stores.open(max_checkpoint_bytes=1000)
    with raises(UsageError, match="max_checkpoint_bytes"):
        await small.save(big)
    assert await small.load("big") is None
    roomy = await stores.open()
    await roomy.save(big)
    with raises(CheckpointFormatError, match="max_bytes"):
        await small.load("big")                # refused before decoding
    await small.save(checkpoint_at("tiny", 0))  # under the bound: lands
    assert await small.load("tiny") == checkpoint_at("tiny", 0)


async def checkpoint_commit_is_a_commit_fn(stores: StoreHandles) -> None:
    store = await stores.open()
    commit = getattr(store, "commit", None)
    if commit is None:
        raise CaseSkipped("the store has no commit() CommitFn")
    await store.save(checkpoint_at("c", 0))
    assert await resolve(commit(checkpoint_at("c", 1, "committed"))) == "continue"
    assert await store.load("c") == checkpoint_at("c", 1, "committed")
    with raises(CheckpointConflictError):
        await resolve(commit(checkpoint_at("c", 1, "twice")))


async def checkpoint_concurrent_writers_one_wins(stores: StoreHandles) -> None:
    handles = [await stores.open() for _ in range(6)]
    await handles[0].save(checkpoint_at(RACE_ID, 0, "start"))
    results: dict[int, bool] = {}

    async def write(i: int) -> None:
        results[i] = await race_next_checkpoint(handles[i], i)

    async with anyio.create_task_group() as tg:
        for i in range(len(handles)):
            tg.start_soon(write, i)
    winners = [i for i, won in results.items() if won]
    assert len(winners) == 1, results
    assert await handles[0].load(RACE_ID) == checkpoint_at(RACE_ID, 1, f"w{winners[0]}")


async def checkpoint_writers_in_processes_one_wins(stores: StoreHandles) -> None:
    if stores.process_runner is None:
        raise CaseSkipped("no process_runner fixture: the multi-process race needs one")
    store = await stores.open()
    first = await stores.race(race_first_checkpoint)
    assert sum(first) == 1, first
    assert await store.load(RACE_ID) == checkpoint_at(RACE_ID, 0, f"w{first.index(True)}")
    nxt = await stores.race(race_next_checkpoint)
    assert sum(nxt) == 1, nxt
    assert await store.load(RACE_ID) == checkpoint_at(RACE_ID, 1, f"w{nxt.index(True)}")


CHECKPOINT_CASES: Mapping[str, Case] = _by_name(
    checkpoint_missing_loads_as_none, checkpoint_round_trips_through_another_handle,
    checkpoint_next_revision_lands_and_others_conflict, checkpoint_first_write_lands_once,
    checkpoint_executions_are_independent, checkpoint_delete_then_any_revision_lands,
    checkpoint_size_bound_refuses_before_writing, checkpoint_commit_is_a_commit_fn,
    checkpoint_concurrent_writers_one_wins, checkpoint_writers_in_processes_one_wins)
"""The checkpoint store cases by name (the suite's test names without ``test_``)."""


# ---- receipts -----------------------------------------------------------------------------------

KEY = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="send_email", args_hash="h")


def _result_values() -> list[Any]:
    """Tool results every store must give back as they were stored (JSON values)."""
    return [None, "", "text é \U0001f600 \x00", 0, -3, 2.5, True, [],
            {"nested": {"list": [1, "two", None]}, "": False}]


_PROTOCOL_OPS = ("read", "claim", "complete", "fail", "renew", "tick")
_ONCE_OPS = (*_PROTOCOL_OPS, "complete_once", "delete_run")


def _ops(start: int, count: int,
         names: tuple[str, ...] = _PROTOCOL_OPS) -> list[tuple[str, int, int, float]]:
    """A deterministic op sequence (a small LCG: the kit takes no randomness from the host).
    The protocol's six ops are drawn on the low bits; optional ops (``names[6:]``) replace a
    quarter of the draws, chosen on higher bits, so the protocol-only sequence stays the same."""
    out: list[tuple[str, int, int, float]] = []
    state = start
    for _ in range(count):
        state = (state * 1103515245 + 12345) % 2**31
        op = names[state % 6]
        if len(names) > 6 and (state >> 20) % 4 == 0:
            op = names[6 + (state >> 24) % (len(names) - 6)]
        out.append((op, (state >> 4) % 2, 1 + (state >> 8) % 4,
                    (10.0, 50.0, 200.0)[(state >> 12) % 3]))
    return out


def _require_complete_once(store: Any) -> None:
    if not hasattr(store, "complete_once"):
        raise CaseSkipped("the store has no complete_once (an optional capability; the protocol "
                          "cases cover the rest)")


async def receipt_fence_and_leases(stores: StoreHandles) -> None:
    clock = ManualClock()
    store = await stores.open(now=clock)
    t0 = clock.value
    assert await store.read(KEY) is None
    assert not await store.claim(KEY, 2, 100)           # attempt 1 comes first
    assert await store.claim(KEY, 1, 100)
    assert await store.read(KEY) == ReceiptRunning(attempt=1, lease_expires_at_ms=t0 + 100)
    assert not await store.claim(KEY, 2, 100)           # the lease is live
    assert not await store.claim(KEY, 1, 100)           # an attempt never claims twice
    clock.value = t0 + 100
    assert await store.claim(KEY, 2, 100)               # expired: reclaimed
    assert not await store.complete(KEY, 1, "late")     # the old attempt is fenced out
    assert not await store.fail(KEY, 1, "late")
    assert await store.fail(KEY, 2, "boom")
    assert await store.read(KEY) == ReceiptFailed(attempt=2, error="boom")
    assert not await store.complete(KEY, 2, "after fail")
    assert await store.claim(KEY, 3, 100)               # failed: the next attempt may run
    assert await store.complete(KEY, 3, {"id": 7})
    clock.value += 10_000
    assert not await store.claim(KEY, 4, 100)           # completed receipts stay completed
    assert not await store.fail(KEY, 3, "late")
    assert await store.read(KEY) == ReceiptCompleted(attempt=3, result={"id": 7})
    other = await stores.open(now=clock)                # durable for another handle
    assert await other.read(KEY) == ReceiptCompleted(attempt=3, result={"id": 7})


async def receipt_refuses_bad_attempts_and_leases(stores: StoreHandles) -> None:
    store = await stores.open(now=ManualClock())
    for attempt, lease in ((0, 100.0), (1, 0.0), (1, -5.0), (1, float("nan"))):
        with raises(UsageError):
            await store.claim(KEY, attempt, lease)
    assert await store.read(KEY) is None


async def receipt_same_answers_as_the_reference(stores: StoreHandles) -> None:
    clock = ManualClock()
    store = await stores.open(now=clock)
    ref = MemoryToolCallReceiptStore(now=clock)
    renews = hasattr(store, "renew")
    once = hasattr(store, "complete_once")
    for op, which, attempt, ms in _ops(start=22, count=300,
                                       names=_ONCE_OPS if once else _PROTOCOL_OPS):
        key = msgspec.structs.replace(KEY, tool_name=f"tool{which}")
        step = (op, which, attempt, ms)
        if op == "tick":
            clock.value += ms
        elif op == "read":
            assert await store.read(key) == await ref.read(key), step
        elif op == "claim":
            assert await store.claim(key, attempt, ms) == await ref.claim(key, attempt, ms), step
        elif op == "complete":
            result = [which, attempt, {"ms": ms}]
            assert (await store.complete(key, attempt, result)
                    == await ref.complete(key, attempt, result)), step
        elif op == "fail":
            assert (await store.fail(key, attempt, f"e{attempt}")
                    == await ref.fail(key, attempt, f"e{attempt}")), step
        elif op == "complete_once":
            result = ["once", which, {"ms": ms}]
            assert (await store.complete_once(key, result)
                    == await ref.complete_once(key, result)), step
        elif op == "delete_run":
            assert (await store.delete_run(key.tenant_id, key.run_id)
                    == await ref.delete_run(key.tenant_id, key.run_id)), step
        elif renews:
            assert await store.renew(key, attempt, ms) == await ref.renew(key, attempt, ms), step


async def receipt_complete_once_records_a_fresh_call(stores: StoreHandles) -> None:
    """``complete_once`` writes only where no receipt exists, and answers the one that does."""
    clock = ManualClock()
    store = await stores.open(now=clock)
    _require_complete_once(store)
    fresh, claimed, failed = (msgspec.structs.replace(KEY, args_hash=h)
                              for h in ("fresh", "claimed", "failed"))
    assert await store.complete_once(fresh, {"id": 1}) is None
    done = ReceiptCompleted(attempt=1, result={"id": 1})
    assert await store.read(fresh) == done
    assert await store.complete_once(fresh, {"id": 2}) == done     # the first one stays
    assert not await store.claim(fresh, 2, 100)                    # completed stays completed
    assert await store.claim(claimed, 1, 100)
    running = ReceiptRunning(attempt=1, lease_expires_at_ms=clock.value + 100)
    assert await store.complete_once(claimed, "x") == running
    clock.value += 1_000                                           # an expired lease is answered
    assert await store.complete_once(claimed, "x") == running      # too, never taken over
    assert await store.complete(claimed, 1, "mine")                # the owner still completes
    assert await store.claim(failed, 1, 100) and await store.fail(failed, 1, "boom")
    assert await store.complete_once(failed, "x") == ReceiptFailed(attempt=1, error="boom")
    assert await store.claim(failed, 2, 100)                       # the next attempt claims
    values = _result_values()
    for i, value in enumerate(values):
        key = msgspec.structs.replace(KEY, args_hash=f"v{i}")
        assert await store.complete_once(key, value) is None
        assert await store.read(key) == ReceiptCompleted(attempt=1, result=value)
    other = await stores.open(now=clock)                           # durable for another handle
    assert await other.complete_once(fresh, None) == done
    assert await store.delete_run(KEY.tenant_id, KEY.run_id) == 3 + len(values)
    assert await store.complete_once(fresh, "again") is None       # deleted: fresh again


async def receipt_results_round_trip(stores: StoreHandles) -> None:
    store = await stores.open(now=ManualClock())
    values = _result_values()
    for i, value in enumerate(values):
        key = msgspec.structs.replace(KEY, args_hash=f"h{i}")
        assert await store.claim(key, 1, 100)
        assert await store.complete(key, 1, value)
        assert await store.read(key) == ReceiptCompleted(attempt=1, result=value)
    key = msgspec.structs.replace(KEY, args_hash="failed-none")
    assert await store.claim(key, 1, 100) and await store.fail(key, 1, None)
    assert await store.read(key) == ReceiptFailed(attempt=1, error=None)


async def receipt_keys_do_not_collide(stores: StoreHandles) -> None:
    store = await stores.open(now=ManualClock())
    a = ToolCallReceiptKey(tenant_id="a:b", run_id="c", tool_name="t", args_hash="h")
    b = ToolCallReceiptKey(tenant_id="a", run_id="b:c", tool_name="t", args_hash="h")
    c = ToolCallReceiptKey(tenant_id="a", run_id="b", tool_name="c:t", args_hash="h")
    for key in (a, b, c):
        assert await store.claim(key, 1, 100)
    assert await store.complete(a, 1, "a")
    assert await store.read(b) != await store.read(a)
    assert isinstance(await store.read(c), ReceiptRunning)


async def receipt_delete_run_forgets_that_run_only(stores: StoreHandles) -> None:
    store = await stores.open(now=ManualClock())
    mine = [msgspec.structs.replace(KEY, run_id="chat*[1]", args_hash=f"h{i}") for i in range(3)]
    others = [msgspec.structs.replace(KEY, run_id="chat*[1]x"),      # a longer run id
              msgspec.structs.replace(KEY, run_id="chat"),           # a shorter one
              msgspec.structs.replace(KEY, run_id="chat?[1]"),       # a glob would match it
              msgspec.structs.replace(KEY, tenant_id="u", run_id="chat*[1]")]  # another tenant
    for key in (*mine, *others):
        assert await store.claim(key, 1, 100)
    assert await store.complete(mine[0], 1, "done") and await store.fail(mine[1], 1, "boom")
    assert await store.delete_run(KEY.tenant_id, "chat*[1]") == 3   # any state: all of the run
    for key in mine:
        assert await store.read(key) is None
    for key in others:
        assert isinstance(await store.read(key), ReceiptRunning), key
    assert await store.delete_run(KEY.tenant_id, "chat*[1]") == 0
    assert await store.claim(mine[0], 1, 100)   # a deleted receipt starts over at attempt 1


async def receipt_concurrent_claims_one_wins(stores: StoreHandles) -> None:
    handles = [await stores.open() for _ in range(6)]
    results: dict[int, bool] = {}

    async def claim(i: int) -> None:
        results[i] = await race_claim(handles[i], i)

    async with anyio.create_task_group() as tg:
        for i in range(len(handles)):
            tg.start_soon(claim, i)
    winners = [i for i, won in results.items() if won]
    assert len(winners) == 1, results
    assert await handles[0].read(RACE_KEY) == ReceiptCompleted(attempt=1, result=winners[0])


async def receipt_concurrent_complete_once_one_wins(stores: StoreHandles) -> None:
    handles = [await stores.open() for _ in range(6)]
    _require_complete_once(handles[0])
    results: dict[int, Any] = {}

    async def complete_once(i: int) -> None:
        results[i] = await handles[i].complete_once(RACE_KEY, i)

    async with anyio.create_task_group() as tg:
        for i in range(len(handles)):
            tg.start_soon(complete_once, i)
    winners = [i for i, found in results.items() if found is None]
    assert len(winners) == 1, results
    done = ReceiptCompleted(attempt=1, result=winners[0])
    assert all(found == done for i, found in results.items() if i != winners[0]), results
    assert await handles[0].read(RACE_KEY) == done


async def receipt_claims_in_processes_one_wins(stores: StoreHandles) -> None:
    if stores.process_runner is None:
        raise CaseSkipped("no process_runner fixture: the multi-process race needs one")
    store = await stores.open()
    results = await stores.race(race_claim)
    assert sum(results) == 1, results
    assert await store.read(RACE_KEY) == ReceiptCompleted(attempt=1, result=results.index(True))


async def receipt_complete_once_in_processes_one_wins(stores: StoreHandles) -> None:
    if stores.process_runner is None:
        raise CaseSkipped("no process_runner fixture: the multi-process race needs one")
    store = await stores.open()
    _require_complete_once(store)
    results = await stores.race(race_complete_once)
    assert results.count(None) == 1, results
    winner = results.index(None)
    assert all(r == winner for i, r in enumerate(results) if i != winner), results
    assert await store.read(RACE_KEY) == ReceiptCompleted(attempt=1, result=winner)


RECEIPT_CASES: Mapping[str, Case] = _by_name(
    receipt_fence_and_leases, receipt_refuses_bad_attempts_and_leases,
    receipt_same_answers_as_the_reference, receipt_results_round_trip,
    receipt_keys_do_not_collide, receipt_delete_run_forgets_that_run_only,
    receipt_concurrent_claims_one_wins,
    receipt_claims_in_processes_one_wins, receipt_complete_once_records_a_fresh_call,
    receipt_concurrent_complete_once_one_wins, receipt_complete_once_in_processes_one_wins)
"""The receipt store cases by name."""


# ---- limits -------------------------------------------------------------------------------------

LIMIT_SCRIPT: tuple[tuple[str, float, int, int, float], ...] = (
    # (op, window_ms, limit, amount, now)
    ("admit", 1000.0, 3, 1, 0.0), ("admit", 1000.0, 3, 1, 10.0), ("admit", 1000.0, 3, 0, 20.0),
    ("admit", 1000.0, 3, 1, 20.0), ("admit", 1000.0, 3, 1, 30.0), ("admit", 1000.0, 3, 0, 40.0),
    ("admit", 1000.0, 3, 2, 999.0), ("admit", 1000.0, 3, 1, 1000.0), ("admit", 1000.0, 3, 1, 1005.0),
    ("admit", 1000.0, 3, 1, 1010.0), ("admit", 1000.0, 3, 5, 1010.0), ("charge", 1000.0, 0, 40, 1500.0),
    ("admit", 1000.0, 50, 0, 1600.0), ("admit", 1000.0, 50, 12, 1600.0), ("admit", 1000.0, 50, 0, 2499.5),
    ("admit", 1000.0, 50, 0, 2500.0), ("charge", 1000.0, 0, 0, 2600.0), ("admit", 250.5, 2, 1, 2600.25),
    ("admit", 250.5, 2, 1, 2700.0), ("admit", 250.5, 2, 1, 2800.0), ("admit", 250.5, 2, 1, 2850.75),
)


async def limit_windows_match_the_reference(stores: StoreHandles) -> None:
    store = await stores.open()
    ref = MemoryLimitStore()
    for key in ("k1", "k2"):
        for op, window, limit, amount, now in LIMIT_SCRIPT:
            if op == "charge":
                await store.charge(key, window, amount, now)
                await ref.charge(key, window, amount, now)
                continue
            got = await store.admit(key, window, limit, amount, now)
            want = await ref.admit(key, window, limit, amount, now)
            assert isinstance(got, (int, float)) and not isinstance(got, bool)
            assert _close(got, want), (key, op, window, limit, amount, now, got, want)


async def limit_slots(stores: StoreHandles) -> None:
    store = await stores.open()
    assert await store.enter("s", 2) is True
    assert await store.enter("s", 2) is True
    assert await store.enter("s", 2) is False
    assert await store.enter("other", 1) is True   # keys are independent
    await store.leave("s")
    assert await store.enter("s", 2) is True
    for _ in range(5):
        await store.leave("s")                      # never below zero
    assert [await store.enter("s", 2) for _ in range(3)] == [True, True, False]
    assert await store.enter("s", 3) is True        # the limit is the caller's, per call


async def limit_admits_are_atomic_under_concurrent_callers(stores: StoreHandles) -> None:
    handles = [await stores.open() for _ in range(4)]
    counts: dict[int, int] = {}
    taken: dict[int, int] = {}

    async def caller(i: int) -> None:
        counts[i] = await race_admit(handles[i], i)
        taken[i] = await race_enter(handles[i], i)

    async with anyio.create_task_group() as tg:
        for i in range(len(handles)):
            tg.start_soon(caller, i)
    assert sum(counts.values()) == RACE_LIMIT, counts
    assert sum(taken.values()) == RACE_LIMIT, taken


async def limit_admits_are_atomic_across_processes(stores: StoreHandles) -> None:
    if stores.process_runner is None:
        raise CaseSkipped("no process_runner fixture: the multi-process race needs one")
    await stores.open()
    admitted = await stores.race(race_admit)
    assert sum(admitted) == RACE_LIMIT, admitted
    taken = await stores.race(race_enter)
    assert sum(taken) == RACE_LIMIT, taken


async def with_limit_over_the_store_caps_calls_in_flight(stores: StoreHandles) -> None:
    from ..agent import augment_model
    from ..agent.limits import (
        ConcurrencyRule,
        RateRule,
        create_limit_middleware,
    )
    from ..completion import TextEvent
    from ..model import ModelRequest, StreamModel

    in_flight = peak = 0

    class Slow(StreamModel):
        id = "slow"

        async def stream(self, messages: Any, request: Any, /) -> AsyncIterator[Any]:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            # Hold the slot until a second call is in, or 2 s. Polls of 10 ms, not 1: in workerd
            # a task sleeping 1 ms at a time starved the isolate's other timers and its Durable
            # Object RPC replies (the other calls' admissions never came back).
            with anyio.move_on_after(2):
                while in_flight < 2:
                    await anyio.sleep(0.01)
            await anyio.sleep(0.005)
            in_flight -= 1
            yield TextEvent(content="x")

    async def no_wait(seconds: float) -> None:
        await anyio.sleep(0.01)

    clock = ManualClock(0.0)
    rules: list[RateRule | ConcurrencyRule] = [RateRule(name="rpm", limit=5, window_ms=60_000.0),
                                               ConcurrencyRule(name="c", limit=2, poll_ms=1.0)]
    handles = [await stores.open() for _ in range(2)]
    models = [augment_model(Slow(), [create_limit_middleware(rules, store=h, key="tenant",
                                                             clock=clock, sleep=no_wait)])
              for h in handles]

    async def call(model: Any) -> None:
        async for _ in model.stream([], ModelRequest()):
            pass

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for model in models * 2:
                tg.start_soon(call, model)
    assert peak == 2
    # The four calls are in the shared window (one more fits) and every slot was returned.
    assert await handles[0].admit("tenant:rpm", 60_000.0, 5, 1, 0.0) == 0
    assert await handles[1].admit("tenant:rpm", 60_000.0, 5, 0, 0.0) > 0
    assert [await handles[1].enter("tenant:c", 2) for _ in range(3)] == [True, True, False]


async def limit_slot_of_a_killed_holder_is_reclaimed_after_the_lease(stores: StoreHandles
                                                                     ) -> None:
    """The slot-lease case, a plain function (no pytest): handle ``a`` takes every slot, renews
    once, then dies (never renews or leaves again): its slots stand for the lease after the last
    renewal, then ``b`` gets them; a late ``leave`` of the dead holder frees nothing of ``b``'s.
    The factory gets ``now`` and ``slot_lease_ms``."""
    clock = ManualClock()
    a = await stores.open(now=clock, slot_lease_ms=1_000.0)
    b = await stores.open(now=clock, slot_lease_ms=1_000.0)
    assert await a.enter("lease", 2) is True
    assert await a.enter("lease", 2) is True
    assert await b.enter("lease", 2) is False
    clock.value += 600.0
    await a.renew_slots()                           # the holder's heartbeat
    clock.value += 600.0                            # past the first lease, not the renewed
    assert await b.enter("lease", 2) is False
    clock.value += 400.0                            # the renewed lease is over: a is dead
    assert [await b.enter("lease", 2) for _ in range(3)] == [True, True, False]
    await a.leave("lease")
    await a.renew_slots()                           # a lapsed slot stays lapsed
    assert await b.enter("lease", 2) is False
    await b.leave("lease")
    assert await b.enter("lease", 2) is True
    clock.value += 900.0
    await b.renew_slots()
    clock.value += 900.0                            # b's renewal holds both its slots
    assert await a.enter("lease", 2) is False
    assert await a.enter("other", 1) is True        # leases are per key


LIMIT_CASES: Mapping[str, Case] = _by_name(
    limit_windows_match_the_reference, limit_slots,
    limit_slot_of_a_killed_holder_is_reclaimed_after_the_lease,
    limit_admits_are_atomic_under_concurrent_callers, limit_admits_are_atomic_across_processes,
    with_limit_over_the_store_caps_calls_in_flight)
"""The limit store cases by name."""
