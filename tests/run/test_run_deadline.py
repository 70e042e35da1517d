from __future__ import annotations

import anyio
import pytest

from bindloop.errors import RunCancelledError, RunTimeoutError, UsageError
from bindloop.run import (
    call_with_deadline,
    cancel_on_signal,
    classify_run_failure,
    create_run_deadline,
    watch_deadline,
)
from bindloop.signal import AbortController


class ManualClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_deadline_is_checked_not_timed() -> None:
    clock = ManualClock()
    d = create_run_deadline(timeout_ms=500, label="agent run", now=clock)
    assert d.expires_at_ms == 1500 and d.remaining_ms() == 500
    d.throw_if_timed_out()
    clock.t = 1499.9
    assert not d.timed_out and not d.signal.aborted
    clock.t = 1500
    assert not d.signal.aborted  # nothing fires until something checks
    with pytest.raises(RunTimeoutError) as info:
        d.throw_if_timed_out()
    assert info.value.label == "agent run" and "agent run" in str(info.value)
    assert d.signal.aborted and d.signal.reason is info.value
    assert d.timed_out and d.remaining_ms() == 0.0


def test_external_signal_combines_without_marking_a_timeout() -> None:
    clock = ManualClock()
    d = create_run_deadline(timeout_ms=500, now=clock)
    ext = AbortController()
    combined = d.with_external(ext.signal)
    assert d.with_external(None) is d.signal
    ext.abort("user")
    assert combined.aborted and combined.reason == "user"
    assert not d.timed_out and not d.signal.aborted
    assert classify_run_failure(d, RuntimeError("x")) == "failed"


def test_deadline_reason_reaches_combined_signal() -> None:
    clock = ManualClock()
    d = create_run_deadline(timeout_ms=10, now=clock)
    combined = d.with_external(AbortController().signal)
    clock.t += 10
    assert d.timed_out
    assert combined.aborted and isinstance(combined.reason, RunTimeoutError)


def test_dispose_detaches_links() -> None:
    clock = ManualClock()
    d = create_run_deadline(timeout_ms=10, now=clock)
    ext = AbortController()
    combined = d.with_external(ext.signal)
    d.dispose()
    d.dispose()
    ext.abort("late")
    assert not combined.aborted and d.disposed
    clock.t += 10
    assert d.timed_out  # the clock check still works after dispose


def test_classify_run_failure() -> None:
    clock = ManualClock()
    d = create_run_deadline(timeout_ms=10, now=clock)
    assert classify_run_failure(d, RunTimeoutError()) == "timed_out"
    assert classify_run_failure(d, ValueError()) == "failed"
    clock.t += 10
    assert classify_run_failure(d, ValueError()) == "timed_out"


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), True, "10"])
def test_timeout_must_be_finite_positive(bad: object) -> None:
    with pytest.raises(UsageError):
        create_run_deadline(timeout_ms=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_watch_fires_the_signal_in_real_time(backend: str) -> None:
    async def main() -> None:
        d = create_run_deadline(timeout_ms=30)
        with anyio.fail_after(5):
            await watch_deadline(d)
        assert d.signal.aborted and isinstance(d.signal.reason, RunTimeoutError)

    anyio.run(main, backend=backend)


def test_watch_returns_on_dispose() -> None:
    async def main() -> None:
        d = create_run_deadline(timeout_ms=60_000)
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_deadline, d)
            await anyio.sleep(0.01)
            d.dispose()
        assert not d.signal.aborted

    with_timeout(main)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_call_with_deadline(backend: str) -> None:
    async def main() -> None:
        d = create_run_deadline(timeout_ms=5_000, label="fast")

        async def quick() -> str:
            await anyio.sleep(0)
            return "done"

        assert await call_with_deadline(d, quick) == "done"

        slow_deadline = create_run_deadline(timeout_ms=30, label="slow")

        async def slow() -> str:
            await anyio.sleep(10)
            return "never"

        with anyio.fail_after(5):
            with pytest.raises(RunTimeoutError) as info:
                await call_with_deadline(slow_deadline, slow)
        assert info.value.label == "slow"

        ext = AbortController()

        async def cancelled_soon() -> str:
            ext.abort("user")
            await anyio.sleep(10)
            return "never"

        with pytest.raises(RunCancelledError, match="user"):
            await call_with_deadline(create_run_deadline(timeout_ms=5_000), cancelled_soon,
                                     external=ext.signal)

        async def boom() -> str:
            raise KeyError("x")

        with pytest.raises(KeyError):
            await call_with_deadline(create_run_deadline(timeout_ms=5_000), boom)

    anyio.run(main, backend=backend)


def test_cancel_on_signal_scope() -> None:
    async def main() -> None:
        c = AbortController()
        with cancel_on_signal(c.signal) as scope:
            c.abort()
            await anyio.sleep(10)
        assert scope.cancelled_caught
        fired = AbortController()
        fired.abort()
        with cancel_on_signal(fired.signal) as scope2:
            await anyio.sleep(10)
        assert scope2.cancelled_caught
        with cancel_on_signal(None) as scope3:
            await anyio.sleep(0)
        assert not scope3.cancelled_caught

    with_timeout(main)


def with_timeout(fn: object) -> None:
    async def wrapper() -> None:
        with anyio.fail_after(5):
            await fn()  # type: ignore[operator]

    anyio.run(wrapper)
