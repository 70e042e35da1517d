"""Every budget of the stall watchdog fires through a real call on both backends — on asyncio the
watchdog is supervised by timer callbacks of the running loop (``StreamWatchdog.supervise_on``, no
task), on trio by its supervisor task — and ``supervise_on`` on its own: the same decisions as
``supervise()`` (the re-check on the injected clock, the loop's lag given back, a failing clock),
its end on ``dispose()``, and its sliced timers (the Pyodide mode).

Real time, budgets of a few hundred ms and every wait bounded by seconds: a budget that stopped
firing hangs until ``fail_after`` says so; a loaded machine only makes a budget fire later, and
only the lower bounds (never early) are asserted tightly."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from bindloop.completion import TurnCollector
from bindloop.contracts import ModelTurnResult, TurnUsage, UserMessage
from bindloop.errors import ProtocolError, RunCancelledError
from bindloop.signal import AbortController, AbortSignal
from bindloop.wire import (
    HttpRequest,
    ModelAdapter,
    StallKind,
    StreamBudgets,
    StreamStall,
    StreamStalledError,
    StreamWatchdog,
    WireOptions,
    create_stream_watchdog,
    create_wire_adapter,
)
from bindloop.wire import _watchdog
from harness.fixtures.provider_replies import render_sse

pytestmark = pytest.mark.anyio

ANSWER = ModelTurnResult(text="one two three", usage=TurnUsage(input_tokens=3, output_tokens=3),
                         finish_reason="stop")
SSE = render_sse("openai_chat", ANSWER)
TEXT = SSE[1]  # one answer chunk (the first is the role-only one)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def loop_ms() -> float:
    """The event loop's clock in ms: what the watchdog's sleeps and its checks both read."""
    return anyio.current_time() * 1000.0


class _Body:
    status = 200
    headers: tuple[tuple[str, str], ...] = ()

    def __init__(self, chunks: Callable[[], AsyncIterator[bytes]]) -> None:
        self._chunks = chunks

    def aiter_bytes(self) -> AsyncIterator[bytes]:
        return self._chunks()


class _Transport:
    """``headers=False``: the response never starts; else the body is ``chunks()``."""

    def __init__(self, chunks: Callable[[], AsyncIterator[bytes]], *, headers: bool = True) -> None:
        self._chunks = chunks
        self._headers = headers

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Body]:
        if not self._headers:
            await anyio.sleep_forever()
        yield _Body(self._chunks)


def _then_silence(chunks: Sequence[bytes]) -> Callable[[], AsyncIterator[bytes]]:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk
        await anyio.sleep_forever()
    return body


def _trickle(chunk: bytes, every_s: float) -> Callable[[], AsyncIterator[bytes]]:
    async def body() -> AsyncIterator[bytes]:
        yield SSE[0]
        while True:
            await anyio.sleep(every_s)
            yield chunk
    return body


def _model(transport: _Transport, budgets: StreamBudgets) -> ModelAdapter:
    return ModelAdapter(create_wire_adapter("openai_chat"), transport,
                        WireOptions(model="m", stream=True), budgets=budgets, clock=loop_ms,
                        retry=None)


async def _stream(model: ModelAdapter, signal: AbortSignal | None = None) -> None:
    collector = TurnCollector()
    async with model.open_stream([UserMessage(content="x")], signal=signal) as events:
        async for event in events:
            collector.observe(event)


CASES: dict[StallKind, tuple[_Transport, StreamBudgets]] = {
    # the response never starts: only the first-token budget runs
    "first_token": (_Transport(_then_silence(()), headers=False),
                    StreamBudgets(first_token_ms=300, inter_chunk_ms=None, total_ms=None)),
    # one answer chunk, then silence: the inter-chunk budget
    "inter_chunk": (_Transport(_then_silence(SSE[:2])),
                    StreamBudgets(first_token_ms=60_000, inter_chunk_ms=300, total_ms=None)),
    # answer chunks every 20 ms for ever: only the total cap ends it
    "total": (_Transport(_trickle(TEXT, 0.02)),
              StreamBudgets(first_token_ms=60_000, inter_chunk_ms=60_000, total_ms=400)),
}


@pytest.mark.parametrize("kind", list(CASES))
async def test_each_budget_ends_a_call(kind: StallKind) -> None:
    transport, budgets = CASES[kind]
    start = loop_ms()
    with anyio.fail_after(30):  # a budget that stopped firing hangs here
        with pytest.raises(StreamStalledError) as info:
            await _stream(_model(transport, budgets))
    stall = info.value.stall
    assert stall.kind == kind
    assert stall.elapsed_ms >= stall.budget_ms
    assert loop_ms() - start >= stall.budget_ms  # never early
    if kind == "inter_chunk":
        assert stall.answer_chunks == 1
    if kind == "total":
        assert stall.answer_chunks >= 1


async def test_the_callers_abort_ends_a_silent_wait_as_a_cancellation() -> None:
    controller = AbortController()
    model = _model(_Transport(_then_silence(SSE[:2])), StreamBudgets())  # minutes of budget

    async def abort_soon() -> None:
        await anyio.sleep(0.1)
        controller.abort("user pressed stop")

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg:
            tg.start_soon(abort_soon)
            with pytest.raises(RunCancelledError, match="user pressed stop"):
                await _stream(model, controller.signal)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_on_asyncio_a_watched_call_runs_no_task_beside_its_reader() -> None:
    before = len(asyncio.all_tasks())
    seen: list[int] = []

    async def body() -> AsyncIterator[bytes]:
        for chunk in SSE:
            await anyio.sleep(0.01)
            seen.append(len(asyncio.all_tasks()))
            yield chunk

    with anyio.fail_after(30):
        await _stream(_model(_Transport(body), StreamBudgets()))
    assert seen and set(seen) == {before}


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_on_asyncio_a_loop_blocked_past_the_budget_is_not_a_stall() -> None:
    # The provider streams every 50 ms; while the reader waits for its fourth chunk another task
    # blocks the loop for 3 s. The watchdog's timer for the 2 s budget then fires about 1 s late,
    # before the starved reader has run: that lateness is the loop's, given back to the idle clock
    # (twice over), so the reader catches up instead of the call stalling.
    blocking = anyio.Event()

    async def body() -> AsyncIterator[bytes]:
        yield SSE[0]
        for n in range(30):
            await anyio.sleep(0.05)
            if n == 2:
                blocking.set()
            yield TEXT
        for chunk in SSE[2:]:
            yield chunk

    async def hog() -> None:
        await blocking.wait()
        await anyio.sleep(0.01)  # the reader waits for its next chunk now
        time.sleep(3.0)  # the loop is blocked: nothing else runs meanwhile

    model = _model(_Transport(body), StreamBudgets(first_token_ms=2000, inter_chunk_ms=2000,
                                                  total_ms=None))
    with anyio.fail_after(60):
        async with anyio.create_task_group() as tg:
            tg.start_soon(hog)
            await _stream(model)


# -- supervise_on() on its own, on the asyncio loop -----------------------------------------------

def _watched(**budgets: float | None) -> StreamWatchdog:
    return create_stream_watchdog(clock=loop_ms, **budgets)  # type: ignore[arg-type]


async def _fired(wd: StreamWatchdog) -> StreamStall | None:
    fired = anyio.Event()
    wd.signal.add_listener(lambda _reason: fired.set())
    with anyio.fail_after(30):
        await fired.wait()
    return wd.stall()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_supervise_on_fires_and_is_woken_by_an_earlier_deadline() -> None:
    wd = _watched(first_token_ms=60_000, inter_chunk_ms=200, total_ms=None)
    wd.supervise_on(asyncio.get_running_loop())
    wd.open()
    await anyio.sleep(0.05)
    start = loop_ms()
    wd.observed_chunk("answer")  # the deadline moves from 60 s to 0.2 s from now
    stall = await _fired(wd)
    assert stall is not None and stall.kind == "inter_chunk"
    assert loop_ms() - start >= 200
    wd.dispose()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_supervise_on_rechecks_on_the_injected_clock() -> None:
    # The injected clock runs at half the loop's speed: the timer armed for 200 ms of it wakes
    # after 100 ms of the loop's, finds the budget not yet spent and sleeps again.
    start = loop_ms()
    wd = create_stream_watchdog(first_token_ms=200, inter_chunk_ms=None, total_ms=None,
                                clock=lambda: (loop_ms() - start) / 2.0)
    wd.supervise_on(asyncio.get_running_loop())
    wd.open()
    stall = await _fired(wd)
    assert stall is not None and stall.kind == "first_token"
    assert loop_ms() - start >= 400


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_supervise_on_ends_on_dispose_and_leaves_nothing_pending() -> None:
    wd = _watched(first_token_ms=100, inter_chunk_ms=100, total_ms=None)
    wd.supervise_on(asyncio.get_running_loop())
    wd.open()
    await anyio.sleep(0.01)
    with pytest.raises(ProtocolError):
        wd.supervise_on(asyncio.get_running_loop())  # one supervisor per watchdog
    wd.dispose()
    await anyio.sleep(0.3)  # past the budget: a timer left armed would fire it
    assert not wd.signal.aborted and wd.stall() is None


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_call_shorter_than_its_inter_chunk_budget_arms_one_timer() -> None:
    # The first answer chunk after the first-token wait arms the inter-chunk budget; the
    # supervisor sleeps towards where that budget would end had the answer begun with the wait,
    # so the chunk moves nothing: one timer for the whole call, no wake-up (each one a turn of
    # the loop and a timer more on every call).
    loop = asyncio.get_running_loop()
    armed: list[object] = []
    soon: list[object] = []
    real_at, real_soon = loop.call_at, loop.call_soon

    def call_at(when: float, callback: Any, *args: Any, context: Any = None) -> Any:
        armed.append(callback)
        return real_at(when, callback, *args, context=context)

    def call_soon(callback: Any, *args: Any, context: Any = None) -> Any:
        soon.append(callback)
        return real_soon(callback, *args, context=context)

    wd = _watched(first_token_ms=60_000, inter_chunk_ms=5_000, total_ms=None)
    loop.call_at, loop.call_soon = call_at, call_soon  # type: ignore[method-assign]
    try:
        wd.open()
        wd.supervise_on(loop)
        for kind in ("none", "reasoning", "answer", "answer", "answer"):
            wd.resume()
            await anyio.sleep(0.01)  # the read
            wd.pause()
            wd.observed_chunk(kind)
        wd.dispose()
    finally:
        del loop.call_at, loop.call_soon
    def its(callbacks: list[object]) -> list[object]:  # the reads' sleeps use the loop too
        return [cb for cb in callbacks if getattr(cb, "__self__", None) is wd]

    assert len(its(armed)) == 1 and its(soon) == []
    assert not wd.signal.aborted


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_early_wait_that_runs_out_stalls_at_the_first_token_budget() -> None:
    # No answer chunk: the early wait (at the inter-chunk budget) runs out, finds nothing due and
    # sleeps on; the stall is the first-token budget's, at its deadline.
    start = loop_ms()
    wd = _watched(first_token_ms=300, inter_chunk_ms=50, total_ms=None)
    wd.open()
    wd.supervise_on(asyncio.get_running_loop())
    stall = await _fired(wd)
    assert stall is not None and stall.kind == "first_token" and stall.budget_ms == 300
    assert loop_ms() - start >= 300
    wd.dispose()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_supervise_on_ends_on_the_external_signal_without_a_stall() -> None:
    external = AbortController()
    wd = create_stream_watchdog(first_token_ms=100, clock=loop_ms, external=external.signal)
    wd.supervise_on(asyncio.get_running_loop())
    wd.open()
    external.abort("stop")
    await anyio.sleep(0.3)
    assert wd.signal.reason == "stop" and wd.stall() is None


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_supervise_on_turns_a_failing_clock_into_the_signals_reason() -> None:
    error = OSError("the clock source went away")
    broken = [False]

    def clock() -> float:
        if broken[0]:
            raise error
        return loop_ms()

    wd = create_stream_watchdog(first_token_ms=100, clock=clock)
    wd.supervise_on(asyncio.get_running_loop())
    wd.open()
    broken[0] = True
    with anyio.fail_after(30):
        while not wd.signal.aborted:
            await anyio.sleep(0.01)
    assert wd.signal.reason is error


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_supervise_on_in_slices_fires_at_the_budget_not_at_a_slice(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Pyodide's mode: no timer more than a slice ahead; the budget still runs out as a whole.
    monkeypatch.setattr(_watchdog, "TIMER_SLICE_S", 0.03)
    wd = _watched(first_token_ms=250, inter_chunk_ms=None, total_ms=None)
    start = loop_ms()
    wd.supervise_on(asyncio.get_running_loop())
    wd.open()
    stall = await _fired(wd)
    assert stall is not None and stall.kind == "first_token"
    assert loop_ms() - start >= 250


def test_supervise_on_runs_its_callbacks_where_anyio_sees_asyncio() -> None:
    # Under plain asyncio.run (no anyio runner) a loop callback is outside every task, where
    # anyio.current_time() finds no event loop; the timer's callbacks still read such a clock.
    async def main() -> object:
        wd = _watched(first_token_ms=100, inter_chunk_ms=None, total_ms=None)
        wd.supervise_on(asyncio.get_running_loop())
        wd.open()
        with anyio.fail_after(30):
            while not wd.signal.aborted:
                await anyio.sleep(0.01)
        return wd.signal.reason

    reason = asyncio.run(main())
    assert isinstance(reason, StreamStalledError), reason
    assert reason.stall.kind == "first_token"
