"""create_simple_limit_middleware / create_limit_middleware over a LimitStore, create_retry_middleware, equip_budget."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.agent import (
    augment_model,
    create_agent,
    equip_budget,
    equip_instruction,
    prompt_chat,
)
from bindloop.agent.limits import (
    ConcurrencyRule,
    RateRule,
    create_limit_middleware,
    create_simple_limit_middleware,
)
from bindloop.agent.middleware import create_retry_middleware
from bindloop.stores import MemoryLimitStore
from bindloop.completion import StreamEvent, TextEvent
from bindloop.contracts import Message, TurnUsage
from bindloop.errors import UsageError
from bindloop.model import ModelRequest, StreamModel
from bindloop.agent.errors import BudgetExceededError
from bindloop.agent.limits import RateLimitExceededError
from bindloop.testing import final_answer, scripted_stream_model
from bindloop.wire import ProviderHttpError, TransportError

pytestmark = pytest.mark.anyio


class FakeTime:
    """An injected clock (ms) and sleep (s) that advances it: waits cost no real time."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds * 1000.0
        await anyio.lowlevel.checkpoint()


async def _drain(model: Any) -> list[StreamEvent]:
    return [e async for e in model.stream([], ModelRequest())]


async def test_rpm_waits_for_the_window_through_the_injected_sleep() -> None:
    t = FakeTime()
    model = augment_model(scripted_stream_model([final_answer("x")] * 3),
                          [create_simple_limit_middleware(rpm=2, clock=t.clock, sleep=t.sleep)])
    for _ in range(3):
        await _drain(model)
    assert t.sleeps == [60.0]  # the third call waited for the first to leave the minute


async def test_a_raising_rule_and_max_wait_raise_rate_limit_exceeded() -> None:
    t = FakeTime()
    model = augment_model(scripted_stream_model([final_answer("x")] * 3), [create_limit_middleware(
        [RateRule(name="burst", limit=1, window_ms=1000, on_limit="raise")],
        clock=t.clock, sleep=t.sleep)])
    await _drain(model)
    with pytest.raises(RateLimitExceededError, match="'burst'") as info:
        await _drain(model)
    assert info.value.rule == "burst" and info.value.retry_after_ms == 1000
    t.now = 1000.0
    await _drain(model)  # the window moved on

    capped = augment_model(scripted_stream_model([final_answer("x")] * 2), [create_limit_middleware(
        [RateRule(name="slow", limit=1, window_ms=10_000, max_wait_ms=500)],
        clock=t.clock, sleep=t.sleep)])
    await _drain(capped)
    with pytest.raises(RateLimitExceededError, match="'slow'"):
        await _drain(capped)


async def test_tpm_charges_tokens_after_the_call() -> None:
    t = FakeTime()
    usage = TurnUsage(input_tokens=60, output_tokens=40)
    model = augment_model(scripted_stream_model([final_answer("x", usage=usage)] * 2),
                          [create_simple_limit_middleware(tpm=100, clock=t.clock, sleep=t.sleep)])
    await _drain(model)
    await _drain(model)  # 100 used: the window is full, this one waited a minute
    assert t.sleeps == [60.0]


async def test_concurrency_caps_calls_in_flight_and_a_shared_store_shares_the_quota() -> None:
    in_flight = 0
    peak = 0

    class Slow(StreamModel):
        id = "slow"

        async def stream(self, messages: Sequence[Message],
                         request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
            nonlocal in_flight, peak
            in_flight += 1
            peak = max(peak, in_flight)
            await anyio.sleep(0.01)
            in_flight -= 1
            yield TextEvent(content="x")

    store = MemoryLimitStore()
    rule = [ConcurrencyRule(name="c", limit=2, poll_ms=1)]
    a = augment_model(Slow(), [create_limit_middleware(rule, store=store, key="tenant")])
    b = augment_model(Slow(), [create_limit_middleware(rule, store=store, key="tenant")])
    async with anyio.create_task_group() as tg:
        for m in (a, b, a, b, a):
            tg.start_soon(_drain, m)
    assert peak == 2


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(min_value=0, max_value=5_000), min_size=1, max_size=30),
       st.integers(1, 5), st.sampled_from([1_000.0, 10_000.0]))
def test_in_memory_store_never_admits_more_than_the_limit_per_window(
        gaps: list[float], limit: int, window: float) -> None:
    store = MemoryLimitStore()
    admitted: list[float] = []

    async def main() -> None:
        now = 0.0
        for gap in gaps:
            now += gap
            if await store.admit("k", window, limit, 1, now) == 0:
                admitted.append(now)

    anyio.run(main)
    for i, at in enumerate(admitted):
        in_window = [x for x in admitted[: i + 1] if x > at - window]
        assert len(in_window) <= limit


def test_limit_rules_are_checked() -> None:
    with pytest.raises(UsageError, match="at least one"):
        create_simple_limit_middleware()
    with pytest.raises(UsageError, match="positive int"):
        create_limit_middleware([RateRule(name="r", limit=0)])
    with pytest.raises(UsageError, match="not a RateRule"):
        create_limit_middleware(["rpm=5"])  # type: ignore[list-item]


def _http(status: int, category: str, retry_after_ms: float | None = None) -> ProviderHttpError:
    return ProviderHttpError("busy", wire="openai_chat", category=category, status_code=status,
                             retry_after_ms=retry_after_ms)


async def test_retry_retries_transient_failures_with_backoff_and_retry_after() -> None:
    t = FakeTime()
    script = scripted_stream_model([
        _http(429, "rate_limited", retry_after_ms=2_000.0),
        _http(503, "server_error"),
        TransportError("reset"),
        final_answer("ok"),
    ])
    model = augment_model(script, [create_retry_middleware(max_attempts=4, backoff_ms=100, max_delay_ms=5_000,
                                              random=lambda: 0.5, sleep=t.sleep)])
    events = await _drain(model)
    assert any(isinstance(e, TextEvent) for e in events)
    # 1: the Retry-After itself; 2: 200 ms base -> 150 with jitter 0.5; 3: 400 -> 300.
    assert t.sleeps == [2.0, 0.15, 0.3]
    assert script.position == 4


async def test_retry_never_calls_before_a_retry_after_longer_than_it_waits() -> None:
    # The provider asked for two minutes; waiting five seconds and knocking again would only
    # earn another 429, so the error is the caller's at once (a route would fall back).
    t = FakeTime()
    script = scripted_stream_model([_http(429, "rate_limited", retry_after_ms=120_000.0),
                                    final_answer("too early")])
    with pytest.raises(ProviderHttpError, match="rate_limited"):
        await _drain(augment_model(script, [create_retry_middleware(max_delay_ms=5_000, sleep=t.sleep)]))
    assert t.sleeps == [] and script.position == 1


async def test_retry_gives_up_on_permanent_errors_and_after_max_attempts() -> None:
    t = FakeTime()
    auth = scripted_stream_model([_http(401, "auth"), final_answer("never")])
    with pytest.raises(ProviderHttpError, match="auth"):
        await _drain(augment_model(auth, [create_retry_middleware(sleep=t.sleep)]))
    assert auth.position == 1

    busy = scripted_stream_model([_http(503, "server_error")] * 3)
    with pytest.raises(ProviderHttpError, match="server_error"):
        await _drain(augment_model(busy, [create_retry_middleware(max_attempts=3, sleep=t.sleep)]))
    assert busy.position == 3


async def test_retry_never_retries_after_output_was_streamed() -> None:
    class HalfThenFail(StreamModel):
        id = "half"
        calls = 0

        async def stream(self, messages: Sequence[Message],
                         request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
            self.calls += 1
            yield TextEvent(content="partial ")
            raise TransportError("dropped")

    inner = HalfThenFail()
    with pytest.raises(TransportError):
        await _drain(augment_model(inner, [create_retry_middleware(sleep=FakeTime().sleep)]))
    assert inner.calls == 1


async def test_budget_stops_before_the_next_model_call_once_spent() -> None:
    model = scripted_stream_model(
        [final_answer("short"), final_answer("still short"), final_answer("unreachable")],
        price=lambda usage: 3000)

    async def handler(_: None) -> str:
        equip_instruction("q")
        equip_budget(5000)
        # Reject every answer so the prompt keeps calling the model.
        from bindloop.agent import expect_validator
        expect_validator(lambda text: "again")
        return (await prompt_chat()).data

    with pytest.raises(BudgetExceededError, match="spent 6000 of its budget 5000") as info:
        await create_agent(id="b", handler=handler, model=model)(None)
    assert model.position == 2  # 3000 + 3000 >= 5000: the third call was never sent
    assert info.value.spent == 6000
    assert info.value.limit == 5000


async def test_a_parent_budget_counts_its_sub_agents_spend() -> None:
    model = scripted_stream_model([final_answer("child")] * 3,
                                  price=lambda usage: 1)

    async def child(_: None) -> str:
        equip_instruction("c")
        return (await prompt_chat()).data

    sub = create_agent(id="child", handler=child)

    async def parent(_: None) -> str:
        equip_budget(2)
        equip_instruction("p")
        await sub(None)
        await sub(None)
        return (await prompt_chat()).data

    with pytest.raises(BudgetExceededError, match="'parent'"):
        await create_agent(id="parent", handler=parent, model=model)(None)
    assert model.position == 2


def test_budget_arguments_are_checked() -> None:
    async def handler(_: None) -> None:
        with pytest.raises(UsageError, match="equip_budget"):
            equip_budget(-1)
        with pytest.raises(UsageError, match="equip_budget"):
            equip_budget({"credit": 2})  # type: ignore[arg-type]

    anyio.run(create_agent(id="b", handler=handler), None)


async def test_a_streaming_call_renews_its_slot_lease_and_a_silent_holder_loses_it() -> None:
    """The slot lease is 100 ms on the store's clock. A call whose stream keeps delivering events
    holds its slot for 1 s (renewed every 30 ms of the limiter's clock): nobody else gets in.
    Once it goes silent for longer than the lease, its slot lapses to another handle."""
    t = FakeTime()
    store = MemoryLimitStore(now=t.clock, slot_lease_ms=100.0)
    other = store.handle()
    refused: list[bool] = []

    class Long(StreamModel):
        id = "long"

        async def stream(self, messages: Any, request: Any, /) -> AsyncIterator[StreamEvent]:
            for _ in range(50):
                t.now += 20.0  # 1 s of events
                refused.append(not await other.enter("tenant:c", 1))
                yield TextEvent(content="x")
            t.now += 150.0  # then a silence longer than the lease
            refused.append(not await other.enter("tenant:c", 1))
            yield TextEvent(content="y")

        def calculate_cost(self, usage: Any) -> dict[str, int]:
            return {}

    rule = [ConcurrencyRule(name="c", limit=1, renew_ms=30.0)]
    model = augment_model(Long(), [create_limit_middleware(rule, store=store, key="tenant", clock=t.clock,
                                              sleep=t.sleep)])
    await _drain(model)
    assert refused[:50] == [True] * 50  # renewed while it streamed
    assert refused[50] is False  # lapsed after the silence: the other handle took it


def test_concurrency_rule_renew_ms_must_be_positive() -> None:
    with pytest.raises(UsageError, match="renew_ms"):
        create_limit_middleware([ConcurrencyRule(name="c", limit=1, renew_ms=0.0)])
