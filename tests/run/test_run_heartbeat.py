from __future__ import annotations

import functools

import anyio
import pytest

from bindloop.errors import UsageError
from bindloop.run import create_coalesced_heartbeat


class ManualClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_beats_coalesce_within_the_window_and_force_always_flushes() -> None:
    clock = ManualClock()
    writes: list[float] = []

    async def main() -> None:
        hb = create_coalesced_heartbeat(coalesce_ms=10_000, flush=lambda: writes.append(clock.t),
                                        now=clock)
        assert await hb.beat() is True
        clock.t = 9_999
        assert await hb.beat() is False
        assert await hb.beat(force=True) is True
        clock.t = 19_998
        assert await hb.beat() is False  # the window restarts at the forced flush
        clock.t = 19_999
        assert await hb.beat() is True
        s = hb.statistics()
        assert (s.beats, s.flushes, s.coalesced, s.failures) == (5, 3, 2, 0)

    anyio.run(main)
    assert writes == [0, 9_999, 19_999]


def test_flush_errors_are_swallowed_to_on_error() -> None:
    errors: list[Exception] = []
    calls = [0]

    async def flaky() -> None:
        calls[0] += 1
        if calls[0] == 1:
            raise ConnectionError("db hiccup")

    async def main() -> None:
        hb = create_coalesced_heartbeat(coalesce_ms=0, flush=flaky, on_error=errors.append,
                                        now=ManualClock())
        assert await hb.beat() is True
        assert await hb.beat() is True
        assert hb.statistics().failures == 1

    anyio.run(main)
    assert [str(e) for e in errors] == ["db hiccup"] and calls[0] == 2


def test_without_on_error_failures_are_still_swallowed() -> None:
    async def boom() -> None:
        raise RuntimeError("x")

    async def main() -> None:
        hb = create_coalesced_heartbeat(coalesce_ms=0, flush=boom)
        await hb.beat()

    anyio.run(main)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_flushes_are_serialized_in_order(backend: str) -> None:
    active = [0]
    order: list[int] = []
    seq = [0]

    async def slow_flush() -> None:
        seq[0] += 1
        me = seq[0]
        active[0] += 1
        assert active[0] == 1, "two flushes overlapped"
        await anyio.sleep(0.01 if me % 2 else 0.0)
        order.append(me)
        active[0] -= 1

    async def main() -> None:
        hb = create_coalesced_heartbeat(coalesce_ms=0, flush=slow_flush)
        async with anyio.create_task_group() as tg:
            for _ in range(6):
                tg.start_soon(functools.partial(hb.beat, force=True))
                await anyio.sleep(0)

    anyio.run(main, backend=backend)
    assert order == [1, 2, 3, 4, 5, 6]


def test_concurrent_beats_during_a_slow_flush_coalesce() -> None:
    clock = ManualClock()
    flushes = [0]

    async def slow() -> None:
        flushes[0] += 1
        await anyio.sleep(0.01)

    async def main() -> None:
        hb = create_coalesced_heartbeat(coalesce_ms=1_000, flush=slow, now=clock)
        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(hb.beat)
        assert hb.statistics().coalesced == 9

    anyio.run(main)
    assert flushes[0] == 1


def test_cancellation_is_not_swallowed() -> None:
    async def hang() -> None:
        await anyio.sleep(10)

    async def main() -> None:
        hb = create_coalesced_heartbeat(coalesce_ms=0, flush=hang, on_error=lambda e: None)
        with anyio.move_on_after(0.01) as scope:
            await hb.beat()
        assert scope.cancelled_caught and hb.statistics().failures == 0

    anyio.run(main)


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), True])
def test_bad_configuration(bad: object) -> None:
    with pytest.raises(UsageError):
        create_coalesced_heartbeat(coalesce_ms=bad, flush=lambda: None)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        create_coalesced_heartbeat(coalesce_ms=1, flush="nope")  # type: ignore[arg-type]
