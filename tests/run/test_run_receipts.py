from __future__ import annotations

from collections import Counter
from collections.abc import Coroutine
from typing import Any, TypeVar

import anyio
import pytest
from hypothesis import given, settings, strategies as st

from bindloop.errors import PortContractError, UsageError
from bindloop.run import (
    CanonicalJsonError,
    ReceiptAmbiguous,
    ReceiptCompleted,
    ReceiptExecute,
    ReceiptFailed,
    ReceiptReplay,
    ReceiptRunning,
    ReceiptWait,
    ToolCallReceiptKey,
    decide_tool_call_receipt,
    sha256_hex,
    tool_call_args_hash,
)
from bindloop.stores import ToolCallReceiptStore
from bindloop.stores import MemoryToolCallReceiptStore

T = TypeVar("T")


def sync(coro: Coroutine[Any, Any, T]) -> T:
    """Drive a coroutine that never suspends (the in-memory store's methods) to completion."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    raise AssertionError("the in-memory store suspended")


def at(t: float) -> Any:
    return lambda: t


# --- hashing -----------------------------------------------------------------------------------


def test_args_hash_is_content_identity() -> None:
    a = tool_call_args_hash({"to": "a@b.c", "n": 1.0, "tags": ["x"]})
    b = tool_call_args_hash({"tags": ["x"], "n": 1, "to": "a@b.c"})
    assert a == b == sha256_hex('{"n":1,"tags":["x"],"to":"a@b.c"}')
    assert len(a) == 64 and a != tool_call_args_hash({"to": "a@b.c", "n": 2, "tags": ["x"]})


def test_args_hash_uses_the_injected_digest_and_refuses_bad_values() -> None:
    assert tool_call_args_hash({"b": 1, "a": 2}, digest=lambda s: f"<{s}>") == '<{"a":2,"b":1}>'
    with pytest.raises(CanonicalJsonError):
        tool_call_args_hash({"s": {1, 2}})
    with pytest.raises(CanonicalJsonError):
        tool_call_args_hash({"x": float("nan")})
    with pytest.raises(PortContractError):
        tool_call_args_hash({}, digest=lambda s: b"raw")  # type: ignore[arg-type,return-value]


# --- the decision table ------------------------------------------------------------------------


@pytest.mark.parametrize(("state", "effect", "now", "expected"), [
    (None, "opaque", 0, ReceiptExecute(attempt=1)),
    (ReceiptCompleted(attempt=2, result="sent"), "opaque", 0, ReceiptReplay(attempt=2, result="sent")),
    (ReceiptFailed(attempt=3), "opaque", 0, ReceiptExecute(attempt=4)),
    (ReceiptRunning(attempt=1, lease_expires_at_ms=100), "opaque", 99, "wait"),
    (ReceiptRunning(attempt=1, lease_expires_at_ms=100), "resumable", 99, "wait"),
    (ReceiptRunning(attempt=2, lease_expires_at_ms=100), "resumable", 100,
     ReceiptExecute(attempt=3, reclaim=True)),
    (ReceiptRunning(attempt=2, lease_expires_at_ms=100), "opaque", 100, "ambiguous"),
])
def test_receipt_table(state: Any, effect: Any, now: float, expected: Any) -> None:
    got = decide_tool_call_receipt(state=state, effect=effect, now=at(now))
    if expected == "wait":
        assert isinstance(got, ReceiptWait) and got.lease_expires_at_ms == 100
    elif expected == "ambiguous":
        assert isinstance(got, ReceiptAmbiguous) and got.attempt == 2
    else:
        assert got == expected


def test_decide_refuses_bad_input() -> None:
    with pytest.raises(UsageError):
        decide_tool_call_receipt(state=None, effect="maybe")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        decide_tool_call_receipt(state="running", effect="opaque")  # type: ignore[arg-type]


# --- the reference store -----------------------------------------------------------------------

KEY = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="send_email", args_hash="h")


def test_store_is_a_receipt_store_and_honours_the_fence() -> None:
    clock = [0.0]
    store = MemoryToolCallReceiptStore(now=lambda: clock[0])
    _: ToolCallReceiptStore = store

    async def main() -> None:
        assert await store.read(KEY) is None
        assert not await store.claim(KEY, 2, 100)        # attempt must follow the stored one
        assert await store.claim(KEY, 1, 100)
        assert not await store.claim(KEY, 2, 100)        # live lease
        clock[0] = 100
        assert await store.claim(KEY, 2, 100)            # expired: reclaimed
        assert not await store.complete(KEY, 1, "late")  # the old attempt is fenced out
        assert not store.record_step(KEY, 1, "a")
        assert store.record_step(KEY, 2, "a", 1) and store.steps(KEY) == {"a": 1}
        assert await store.renew(KEY, 2, 500) and not await store.renew(KEY, 1, 500)
        assert await store.fail(KEY, 2, "boom")
        assert await store.read(KEY) == ReceiptFailed(attempt=2, error="boom")
        assert await store.claim(KEY, 3, 100)
        assert await store.complete(KEY, 3, {"id": 7})
        assert not await store.claim(KEY, 4, 100)        # completed receipts are never reclaimed
        assert await store.read(KEY) == ReceiptCompleted(attempt=3, result={"id": 7})
        assert store.fenced_writes == 6
        with pytest.raises(UsageError):
            await store.claim(KEY, 0, 100)

    anyio.run(main)


# --- crash / redelivery simulation -------------------------------------------------------------

LEASE = 100.0
STEPS = ("reserve", "charge", "notify")


class World:
    def __init__(self, effect: str) -> None:
        self.t = 0.0
        self.store = MemoryToolCallReceiptStore(now=lambda: self.t)
        self.effect = effect
        self.effects: Counter[str] = Counter()
        self.ambiguous = 0


class Worker:
    """One delivery of the tool call. `crash()` is a redelivery: all in-memory progress is lost."""

    def __init__(self, world: World) -> None:
        self.w = world
        self.crash()

    def crash(self) -> None:
        self.phase = "read"
        self.attempt = 0
        self.next_step = ""
        self.done = False

    def step(self, flaky: bool = False) -> bool:
        """Advance one atomic step; False when the worker is only waiting."""
        w, s = self.w, self.w.store
        if self.done:
            return False
        if self.phase == "read":
            decision = decide_tool_call_receipt(state=sync(s.read(KEY)), effect=w.effect,  # type: ignore[arg-type]
                                                now=s.now)
            if isinstance(decision, ReceiptWait):
                return False
            if isinstance(decision, (ReceiptReplay, ReceiptAmbiguous)):
                w.ambiguous += isinstance(decision, ReceiptAmbiguous)
                self.done = True
            else:
                self.attempt, self.phase = decision.attempt, "claim"
        elif self.phase == "claim":
            self.phase = "work" if sync(s.claim(KEY, self.attempt, LEASE)) else "read"
        elif self.phase == "work" and w.effect == "opaque":
            if flaky:  # the tool reports a clean failure: nothing happened
                sync(s.fail(KEY, self.attempt, "refused"))
                self.phase = "read"
            else:
                w.effects["send"] += 1
                self.phase = "complete"
        elif self.phase == "work":
            # Read the trail in one step and act in the next, so a stalled worker can act on a
            # stale plan: only the fence stops it from repeating a step a reclaimer already did.
            done = s.steps(KEY)
            todo = [name for name in STEPS if name not in done]
            self.next_step = todo[0] if todo else ""
            self.phase = "do" if todo else "complete"
        elif self.phase == "do":
            if s.record_step(KEY, self.attempt, self.next_step):  # effect + record: one transaction
                w.effects[self.next_step] += 1
                self.phase = "work"
            else:
                self.phase = "read"
        elif self.phase == "complete":
            sync(s.complete(KEY, self.attempt, "ok"))
            self.done = True
        return True


EVENTS = st.lists(st.tuples(st.sampled_from(["step", "step", "step", "crash", "tick"]),
                            st.integers(0, 1), st.floats(0, 150), st.booleans()),
                  max_size=60)


def simulate(effect: str, events: list[tuple[str, int, float, bool]]) -> World:
    world = World(effect)
    workers = [Worker(world), Worker(world)]
    for kind, who, ms, flaky in events:
        if kind == "step":
            workers[who].step(flaky)
        elif kind == "crash":
            workers[who].crash()
        else:
            world.t += ms
        assert all(n <= 1 for n in world.effects.values()), world.effects
    # Settle: no more crashes; time moves on whenever nobody can make progress.
    for _ in range(500):
        if all(w.done for w in workers):
            break
        if not any([w.step() for w in workers]):
            world.t += LEASE
    assert all(w.done for w in workers)
    return world


@settings(max_examples=200, deadline=None)
@given(EVENTS)
def test_opaque_effect_happens_at_most_once(events: list[tuple[str, int, float, bool]]) -> None:
    world = simulate("opaque", events)
    assert world.effects["send"] <= 1
    final = sync(world.store.read(KEY))
    if isinstance(final, ReceiptCompleted):
        assert world.effects["send"] == 1
    else:
        assert world.ambiguous > 0  # never silently lost: someone surfaced it


@settings(max_examples=200, deadline=None)
@given(EVENTS)
def test_resumable_effect_completes_exactly_once(events: list[tuple[str, int, float, bool]]) -> None:
    world = simulate("resumable", events)
    assert isinstance(sync(world.store.read(KEY)), ReceiptCompleted)
    assert world.effects == Counter({name: 1 for name in STEPS})
    assert world.ambiguous == 0
