"""The stream watchdog under an injected clock: no real sleeps anywhere."""

from __future__ import annotations

import gc
import math
from typing import Any

import anyio
import pytest
import trio
from hypothesis import assume, given, settings
from hypothesis import strategies as st
import trio.testing

from bindloop.wire import StreamStalledError
from bindloop.wire import StreamStall, StreamWatchdog, create_stream_watchdog
from bindloop.errors import ProtocolError, UsageError
from bindloop.signal import AbortController
from bindloop.testing import SteppingClock, stepping_clock


def manual_clock() -> SteppingClock:
    return stepping_clock(start=0.0, step=0.0)


def watchdog(clock: SteppingClock, **kw: Any) -> StreamWatchdog:
    options: dict[str, Any] = {"first_token_ms": 100.0, "inter_chunk_ms": 10.0, "total_ms": 1000.0}
    options.update(kw)
    return create_stream_watchdog(clock=clock, **options)


@pytest.mark.parametrize("name", ["first_token_ms", "inter_chunk_ms", "total_ms"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, -1, 0, True, "10"])
def test_budgets_are_validated_at_construction(name: str, bad: Any) -> None:
    with pytest.raises(UsageError, match=name):
        create_stream_watchdog(**{name: bad})


def test_none_disables_a_budget() -> None:
    clock = manual_clock()
    wd = watchdog(clock, first_token_ms=None, total_ms=None)
    wd.open()
    clock.advance(10**9)
    assert wd.check() is None and wd.next_deadline_ms is None
    wd.observed_chunk("answer")
    clock.advance(10)
    assert wd.check() is not None


def test_nothing_is_armed_before_open() -> None:
    clock = manual_clock()
    wd = watchdog(clock)
    clock.advance(10_000)
    assert wd.next_deadline_ms is None
    assert wd.check() is None
    assert not wd.signal.aborted
    with pytest.raises(ProtocolError):
        wd.observed_chunk("answer")


def test_open_twice_is_a_protocol_error() -> None:
    wd = watchdog(manual_clock())
    wd.open()
    with pytest.raises(ProtocolError):
        wd.open()


def test_first_token_budget_fires_and_aborts_the_signal() -> None:
    clock = manual_clock()
    wd = watchdog(clock)
    wd.open()
    clock.advance(99)
    assert wd.check() is None and not wd.signal.aborted
    clock.advance(1)
    stall = wd.check()
    assert stall == StreamStall(kind="first_token", budget_ms=100.0, elapsed_ms=100.0,
                                answer_chunks=0, reasoning_chunks=0)
    assert wd.signal.aborted
    assert isinstance(wd.signal.reason, StreamStalledError)
    assert wd.signal.reason.stall == stall
    assert wd.stall() == stall
    assert wd.next_deadline_ms is None


def test_answer_output_arms_the_tight_budget() -> None:
    clock = manual_clock()
    wd = watchdog(clock)
    wd.open()
    clock.advance(20)
    wd.observed_chunk("answer")
    assert wd.next_deadline_ms == 30
    clock.advance(9)
    assert wd.check() is None
    wd.observed_chunk("answer")  # re-armed from now
    clock.advance(9)
    assert wd.check() is None
    clock.advance(1)
    stall = wd.check()
    assert stall is not None and stall.kind == "inter_chunk" and stall.elapsed_ms == 10
    assert stall.answer_chunks == 2


def test_reasoning_stays_on_the_generous_budget() -> None:
    clock = manual_clock()
    wd = watchdog(clock)
    wd.open()
    for _ in range(5):  # a long visible think, gaps far above the tight budget
        clock.advance(60)
        assert wd.check() is None
        wd.observed_chunk("reasoning")
    clock.advance(99)
    assert wd.check() is None
    clock.advance(1)
    stall = wd.check()
    assert stall is not None and stall.kind == "first_token" and stall.reasoning_chunks == 5


def test_think_then_answer_gap_after_answer_output_stays_generous() -> None:
    clock = manual_clock()
    wd = watchdog(clock)
    wd.open()
    wd.observed_chunk("answer")
    clock.advance(5)
    wd.observed_chunk("reasoning")  # interleaved thinking: back on the generous budget
    clock.advance(50)
    assert wd.check() is None
    wd.observed_chunk("answer")
    clock.advance(10)
    assert wd.check() is not None


def test_empty_chunks_are_not_progress() -> None:
    clock = manual_clock()
    wd = watchdog(clock)
    wd.open()
    wd.observed_chunk("answer")
    clock.advance(9)
    wd.observed_chunk("none")
    clock.advance(1)
    stall = wd.check()
    assert stall is not None and stall.kind == "inter_chunk"


def test_total_cap_bounds_a_stream_that_keeps_trickling() -> None:
    clock = manual_clock()
    wd = watchdog(clock, total_ms=100.0)
    wd.open()
    for _ in range(19):
        clock.advance(5)
        wd.observed_chunk("answer")
        assert wd.check() is None
    clock.advance(5)
    stall = wd.check()
    assert stall is not None and stall.kind == "total" and stall.elapsed_ms == 100


def test_the_budget_that_ran_out_first_is_reported() -> None:
    clock = manual_clock()
    wd = watchdog(clock, first_token_ms=100.0, total_ms=50.0)
    wd.open()
    clock.advance(500)  # both exceeded by the time anyone checks
    stall = wd.check()
    assert stall is not None and stall.kind == "total"


def test_external_abort_is_never_a_stall() -> None:
    external = AbortController()
    clock = manual_clock()
    wd = watchdog(clock, external=external.signal)
    wd.open()
    external.abort("user cancelled")
    assert wd.signal.aborted and wd.signal.reason == "user cancelled"
    clock.advance(1000)
    assert wd.check() is None
    assert wd.stall() is None


def test_external_abort_after_a_stall_still_reads_as_cancellation() -> None:
    external = AbortController()
    clock = manual_clock()
    wd = watchdog(clock, external=external.signal)
    wd.open()
    clock.advance(100)
    assert wd.check() is not None
    external.abort()
    assert wd.stall() is None


def test_an_already_aborted_external_signal_aborts_at_once() -> None:
    external = AbortController()
    external.abort("early")
    wd = watchdog(manual_clock(), external=external.signal)
    assert wd.signal.aborted and wd.stall() is None


def test_dispose_detaches_from_the_external_signal() -> None:
    external = AbortController()
    clock = manual_clock()
    wd = watchdog(clock, external=external.signal)
    wd.open()
    wd.dispose()
    wd.dispose()  # idempotent
    external.abort()
    assert not wd.signal.aborted
    clock.advance(10_000)
    assert wd.check() is None
    wd.observed_chunk("answer")  # a straggling chunk after dispose is ignored


def test_a_disposed_watchdog_is_freed_without_the_cyclic_collector() -> None:
    # A stream under load disposes one watchdog per call: a reference cycle left behind would
    # hold each until the cyclic collector runs, whose passes then cost more.
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        external = AbortController()
        for fire in (False, True):
            clock = manual_clock()
            wd = watchdog(clock, external=external.signal)
            wd.open()
            if fire:  # a stall fired the signal before dispose()
                clock.advance(10_000_000)
                assert wd.check() is not None
            wd.dispose()
            del wd
        gc.collect()
        left = [o for o in gc.garbage if isinstance(o, StreamWatchdog)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_enabled:
            gc.enable()
    assert left == []


def test_stall_survives_dispose() -> None:
    clock = manual_clock()
    wd = watchdog(clock)
    wd.open()
    clock.advance(100)
    stall = wd.check()
    wd.dispose()
    assert wd.stall() == stall


def test_chunks_after_a_stall_are_ignored() -> None:
    clock = manual_clock()
    wd = watchdog(clock)
    wd.open()
    clock.advance(100)
    stall = wd.check()
    wd.observed_chunk("answer")
    assert wd.check() == stall


def test_bad_chunk_kind() -> None:
    wd = watchdog(manual_clock())
    wd.open()
    with pytest.raises(UsageError):
        wd.observed_chunk("content")  # type: ignore[arg-type]


# -- supervise(): trio's MockClock jumps virtual time, the injected clock reads it ---------------


def run_virtual(fn: Any) -> Any:
    return anyio.run(fn, backend="trio",
                     backend_options={"clock": trio.testing.MockClock(autojump_threshold=0)})


def virtual_ms() -> float:
    return trio.current_time() * 1000.0


def test_supervise_fires_the_first_token_budget_in_virtual_time() -> None:
    async def main() -> tuple[StreamStall | None, float]:
        wd = create_stream_watchdog(first_token_ms=5000, inter_chunk_ms=100, total_ms=None,
                                    clock=virtual_ms)
        start = virtual_ms()
        async with anyio.create_task_group() as tg:
            tg.start_soon(wd.supervise)
            await anyio.sleep(1)  # connecting: nothing armed yet
            wd.open()
            with anyio.CancelScope() as scope:
                wd.signal.add_listener(lambda _r: scope.cancel())
                await anyio.sleep_forever()  # the "transport", torn down by the signal
        stall = wd.stall()
        wd.dispose()
        return stall, virtual_ms() - start

    stall, elapsed = run_virtual(main)
    assert stall is not None and stall.kind == "first_token"
    assert elapsed == pytest.approx(6000)


def test_supervise_wakes_when_answer_output_shortens_the_deadline() -> None:
    async def main() -> float:
        wd = create_stream_watchdog(first_token_ms=60_000, inter_chunk_ms=100, total_ms=None,
                                    clock=virtual_ms)
        async with anyio.create_task_group() as tg:
            tg.start_soon(wd.supervise)
            wd.open()
            await anyio.sleep(0.5)
            wd.observed_chunk("answer")  # deadline moves from 60 s to 0.6 s
            fired = anyio.Event()
            wd.signal.add_listener(lambda _r: fired.set())
            await fired.wait()
        wd.dispose()
        return virtual_ms()

    assert run_virtual(main) == pytest.approx(600)


def test_supervise_returns_on_dispose_without_firing() -> None:
    async def main() -> bool:
        wd = create_stream_watchdog(first_token_ms=1000, inter_chunk_ms=100, clock=virtual_ms)
        async with anyio.create_task_group() as tg:
            tg.start_soon(wd.supervise)
            wd.open()
            for _ in range(20):
                await anyio.sleep(0.05)
                wd.observed_chunk("answer")
            wd.dispose()
        return wd.signal.aborted

    assert run_virtual(main) is False


def test_supervise_returns_on_external_abort() -> None:
    async def main() -> StreamStall | None:
        external = AbortController()
        wd = create_stream_watchdog(first_token_ms=1000, clock=virtual_ms, external=external.signal)
        async with anyio.create_task_group() as tg:
            tg.start_soon(wd.supervise)
            wd.open()
            await anyio.sleep(0.2)
            external.abort()
        return wd.stall()

    assert run_virtual(main) is None


# -- pause()/resume(): the consumer's time is not the provider's silence ---------------------------

def test_pause_stops_the_idle_clock_and_resume_shifts_it() -> None:
    clock = manual_clock()
    wd = watchdog(clock, inter_chunk_ms=10.0, total_ms=1000.0)
    wd.open()
    clock.advance(4)
    wd.observed_chunk("answer")  # idle from t=4, inter-chunk deadline t=14
    clock.advance(3)             # t=7: 3 ms of provider silence so far
    wd.pause()
    assert wd.paused
    assert wd.next_deadline_ms == 1000.0  # only the total cap is armed while paused
    clock.advance(500)           # the consumer's time
    assert wd.check() is None
    wd.resume()                  # t=507: the idle start moves by the 500 ms paused
    assert not wd.paused
    assert wd.next_deadline_ms == 514.0
    clock.advance(6.9)
    assert wd.check() is None
    clock.advance(0.1)
    stall = wd.check()
    assert stall is not None and stall.kind == "inter_chunk"
    assert stall.elapsed_ms == pytest.approx(10.0)  # provider silence only


def test_the_first_token_budget_is_paused_too() -> None:
    clock = manual_clock()
    wd = watchdog(clock, first_token_ms=100.0, total_ms=None)
    wd.open()
    clock.advance(60)
    wd.pause()
    assert wd.next_deadline_ms is None
    clock.advance(10_000)
    assert wd.check() is None
    wd.resume()
    clock.advance(39)
    assert wd.check() is None
    clock.advance(1)
    stall = wd.check()
    assert stall is not None and stall.kind == "first_token"


def test_total_keeps_counting_while_paused() -> None:
    clock = manual_clock()
    wd = watchdog(clock, total_ms=50.0)
    wd.open()
    wd.pause()
    clock.advance(50)
    stall = wd.check()
    assert stall is not None and stall.kind == "total"
    assert wd.signal.aborted


def test_a_chunk_recorded_while_paused_counts_from_the_pause() -> None:
    clock = manual_clock()
    wd = watchdog(clock, inter_chunk_ms=10.0)
    wd.open()
    clock.advance(5)
    wd.pause()                      # t=5
    clock.advance(100)
    wd.observed_chunk("answer")     # decoded while paused: progress as of t=5
    clock.advance(100)
    wd.resume()                     # t=205: idle start 5 + 200 = 205
    assert wd.next_deadline_ms == 215.0


def test_pause_and_resume_are_idempotent_and_need_open() -> None:
    clock = manual_clock()
    wd = watchdog(clock)
    with pytest.raises(ProtocolError):
        wd.pause()
    wd.resume()  # not paused: nothing to do
    wd.open()
    wd.pause()
    clock.advance(5)
    wd.pause()   # the first pause stands
    clock.advance(5)
    wd.resume()
    wd.resume()
    assert wd.next_deadline_ms == 110.0  # first-token 100 from t=0, shifted by 10 paused


def test_observed_progress_restarts_the_current_idle_budget_without_counting() -> None:
    clock = manual_clock()
    wd = watchdog(clock, first_token_ms=100.0, inter_chunk_ms=10.0, total_ms=None)
    with pytest.raises(ProtocolError):
        wd.observed_progress()
    wd.open()
    wd.observed_chunk("answer")
    for _ in range(20):              # 200 ms of bytes arriving, 9 ms apart, no chunk complete
        clock.advance(9)
        wd.observed_progress()
        assert wd.check() is None
    assert wd.next_deadline_ms == clock() + 10.0  # still the inter-chunk budget: mode unchanged
    clock.advance(10)
    stall = wd.check()
    assert stall is not None and stall.kind == "inter_chunk" and stall.answer_chunks == 1


def test_supervise_survives_a_clock_that_raises() -> None:
    async def main() -> tuple[object, bool]:
        broken = False
        error = OSError("the clock source went away")

        def clock() -> float:
            if broken:
                raise error
            return virtual_ms()

        wd = create_stream_watchdog(first_token_ms=1000, clock=clock)
        async with anyio.create_task_group() as tg:  # an error escaping would surface here
            tg.start_soon(wd.supervise)
            wd.open()
            broken = True
            await anyio.sleep(0.01)
        return wd.signal.reason, wd.signal.aborted and (wd.signal.reason is error)

    reason, same = run_virtual(main)
    assert isinstance(reason, OSError) and same


def test_supervise_sleeps_through_a_pause_and_wakes_for_the_resumed_deadline() -> None:
    async def main() -> tuple[StreamStall | None, float]:
        wd = create_stream_watchdog(first_token_ms=100, inter_chunk_ms=100, total_ms=None,
                                    clock=virtual_ms)
        async with anyio.create_task_group() as tg:
            tg.start_soon(wd.supervise)
            wd.open()
            wd.pause()
            await anyio.sleep(10)  # the consumer's time: the supervisor must not fire
            assert not wd.signal.aborted
            wd.resume()            # idle deadline back at t=10.1 s
            fired = anyio.Event()
            wd.signal.add_listener(lambda _r: fired.set())
            await fired.wait()
        return wd.stall(), virtual_ms()

    stall, now = run_virtual(main)
    assert stall is not None and stall.kind == "first_token"
    assert now == pytest.approx(10_100)


# -- an overloaded event loop: its lag is not the provider's silence ------------------------------
# A "hog" blocks the loop by jumping trio's MockClock forward without yielding: time passes and no
# task runs, as when the loop is busy elsewhere. The reader is the task feeding the stream: after a
# wake-up it needs two more turns of the loop before it records a chunk (as a socket read through
# anyio does), so a supervisor that decided at once would always decide before it.


def _reader_then(wd: StreamWatchdog, chunks: int) -> Any:
    async def read() -> None:
        for _ in range(chunks):
            await anyio.sleep(0.05)  # the provider sends a chunk every 50 ms
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
            wd.observed_chunk("answer")
    return read


def _hog(clock: trio.testing.MockClock, at_s: float, for_s: float) -> Any:
    async def hog() -> None:
        await anyio.sleep(at_s)
        clock.jump(for_s)  # the loop is blocked: nothing else runs meanwhile
    return hog


def run_overloaded(fn: Any) -> Any:
    clock = trio.testing.MockClock(autojump_threshold=0)
    return anyio.run(fn, clock, backend="trio", backend_options={"clock": clock})


def test_a_loop_blocked_past_the_budget_is_not_a_stall() -> None:
    async def main(clock: trio.testing.MockClock) -> tuple[StreamStall | None, float]:
        wd = create_stream_watchdog(first_token_ms=1000, inter_chunk_ms=1000, total_ms=None,
                                    clock=virtual_ms)
        async with anyio.create_task_group() as tg:
            tg.start_soon(wd.supervise)
            wd.open()
            wd.observed_chunk("answer")
            tg.start_soon(_hog(clock, 0.2, 1.2))  # past the 1 s budget the supervisor sleeps on
            await _reader_then(wd, 20)()
            wd.dispose()
        return wd.stall(), wd.loop_lag_ms

    stall, lag = run_overloaded(main)
    assert stall is None
    assert lag == pytest.approx(400.0)  # woke at 1.4 s for a deadline at 1.0 s


def test_a_silent_provider_on_a_lagging_loop_still_stalls_after_the_catch_up() -> None:
    async def main(clock: trio.testing.MockClock) -> tuple[StreamStall | None, float]:
        wd = create_stream_watchdog(first_token_ms=1000, inter_chunk_ms=1000, total_ms=None,
                                    clock=virtual_ms)
        async with anyio.create_task_group() as tg:
            tg.start_soon(wd.supervise)
            wd.open()
            tg.start_soon(_hog(clock, 0.1, 1.2))
            await _reader_then(wd, 2)()  # two chunks, at 0.05 s and 1.3 s, then silence
            fired = anyio.Event()
            wd.signal.add_listener(lambda _r: fired.set())
            await fired.wait()
        return wd.stall(), virtual_ms()

    stall, fired_at = run_overloaded(main)
    assert stall is not None and stall.kind == "inter_chunk"
    # The last chunk was recorded at 1.3 s, the loop ran on time after it: the budget, no excuse.
    assert fired_at == pytest.approx(2300.0)


def test_a_dead_stream_on_a_loop_that_never_catches_up_stalls_within_two_budgets() -> None:
    async def main(clock: trio.testing.MockClock) -> tuple[StreamStall | None, float, float]:
        wd = create_stream_watchdog(first_token_ms=1000, inter_chunk_ms=1000, total_ms=None,
                                    clock=virtual_ms)
        fired = anyio.Event()
        wd.signal.add_listener(lambda _r: fired.set())

        async def always_busy() -> None:  # every turn of the loop takes 300 ms
            while not fired.is_set():
                clock.jump(0.3)
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tg:
            tg.start_soon(wd.supervise)
            wd.open()
            wd.observed_chunk("answer")  # the last chunk, at 0 s
            tg.start_soon(always_busy)
            await fired.wait()
        return wd.stall(), virtual_ms(), wd.loop_lag_ms

    stall, fired_at, lag = run_overloaded(main)
    assert stall is not None and stall.kind == "inter_chunk"
    assert lag > 0
    # Two budgets (the silence, then at most one budget excused), plus how late the last wake-up
    # came (the loop's: under trio's scheduling here, within two of its 300 ms turns).
    assert 2000.0 <= fired_at <= 2000.0 + 2 * 300.0


def test_timer_jitter_is_not_lag() -> None:
    async def main(clock: trio.testing.MockClock) -> tuple[StreamStall | None, float, float]:
        wd = create_stream_watchdog(first_token_ms=100, inter_chunk_ms=100, total_ms=None,
                                    clock=virtual_ms)
        async with anyio.create_task_group() as tg:
            tg.start_soon(wd.supervise)
            wd.open()
            tg.start_soon(_hog(clock, 0.095, 0.01))  # 5 ms late: within the 10 ms tolerance
            fired = anyio.Event()
            wd.signal.add_listener(lambda _r: fired.set())
            await fired.wait()
        return wd.stall(), virtual_ms(), wd.loop_lag_ms

    stall, fired_at, lag = run_overloaded(main)
    assert stall is not None and stall.kind == "first_token"
    assert fired_at == pytest.approx(105.0) and lag == 0.0


# -- the supervisor fires at the deadline a reference model of the budgets gives ---------------

_KINDS = ("answer", "reasoning", "none")


def _expected_stall(budgets: tuple[float | None, float | None, float | None],
                    timeline: list[tuple[float, str]]) -> tuple[str, float] | None:
    """What the budgets say, read straight off the timeline (open at 0; each chunk at the sum of
    the gaps so far): the first deadline passed before the next chunk, its kind and its time."""
    first, inter, total = budgets
    idle_since, answer, now = 0.0, False, 0.0

    def due() -> tuple[str, float] | None:
        budget = inter if answer else first
        options = []
        if budget is not None:
            options.append(("inter_chunk" if answer else "first_token", idle_since + budget))
        if total is not None:
            options.append(("total", total))
        return min(options, key=lambda o: o[1]) if options else None

    for gap, kind in timeline:
        now += gap
        stall = due()
        if stall is not None and abs(stall[1] - now) <= 1:
            return ("tie", now)  # a chunk at the very reading a deadline runs out: a race
        if stall is not None and stall[1] < now:
            return stall
        if kind != "none":
            idle_since, answer = now, kind == "answer"
    return due()


@settings(max_examples=80, deadline=None)
@given(budgets=st.tuples(*[st.one_of(st.none(), st.integers(5, 400).map(float))] * 3),
       timeline=st.lists(st.tuples(st.integers(0, 300).map(float), st.sampled_from(_KINDS)),
                         max_size=12))
def test_supervise_fires_where_the_budgets_say(
        budgets: tuple[float | None, float | None, float | None],
        timeline: list[tuple[float, str]]) -> None:
    expected = _expected_stall(budgets, timeline)
    assume(expected is None or expected[0] != "tie")  # either answer would be right

    async def main() -> tuple[StreamStall | None, float]:
        first, inter, total = budgets
        wd = create_stream_watchdog(first_token_ms=first, inter_chunk_ms=inter, total_ms=total,
                                    clock=virtual_ms)
        start = virtual_ms()
        fired_at: list[float] = []
        wd.signal.add_listener(lambda _r: fired_at.append(virtual_ms() - start))
        async with anyio.create_task_group() as tg:
            tg.start_soon(wd.supervise)
            wd.open()
            for gap, kind in timeline:
                await anyio.sleep(gap / 1000.0)
                if wd.fired:
                    break
                wd.observed_chunk(kind)  # type: ignore[arg-type]
            if expected is not None and not wd.fired:
                await anyio.sleep((expected[1] + 50 - (virtual_ms() - start)) / 1000.0)
            stall = wd.stall()
            wd.dispose()
        return stall, fired_at[0] if fired_at else math.nan

    stall, at = run_virtual(main)
    if expected is None:
        assert stall is None
    else:
        assert stall is not None and stall.kind == expected[0]
        assert at == pytest.approx(expected[1], abs=0.5)
