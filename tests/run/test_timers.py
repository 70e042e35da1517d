"""wait_woken: the same wait whether it is taken in one timer or in slices (the Pyodide mode), on
asyncio and trio; a Hypothesis property on trio's autojumping mock clock."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, settings, strategies as st

from bindloop._timers import PYODIDE_SLICE_S, wait_woken


async def _wait(timeout_s: float | None, set_after_s: float | None,
                slice_s: float | None) -> tuple[bool, float]:
    event = anyio.Event()
    t0 = anyio.current_time()
    async with anyio.create_task_group() as tg:
        if set_after_s is not None:
            async def setter() -> None:
                await anyio.sleep(set_after_s)
                event.set()
            tg.start_soon(setter)
        woken = await wait_woken(event, timeout_s, slice_s=slice_s)
        tg.cancel_scope.cancel()
    return woken, anyio.current_time() - t0


@settings(max_examples=60, deadline=None)
@given(timeout=st.one_of(st.none(), st.floats(0.0, 600.0)),
       set_after=st.one_of(st.none(), st.floats(0.0, 900.0)),
       slice_s=st.one_of(st.none(), st.floats(0.01, 5.0)))
def test_property_slices_change_no_outcome(timeout: float | None, set_after: float | None,
                                           slice_s: float | None) -> None:
    import trio.testing

    if timeout is None and set_after is None:
        set_after = 1.0  # a wait nothing ends is not a test
    woken, elapsed = trio.run(_wait, timeout, set_after, slice_s,
                              clock=trio.testing.MockClock(autojump_threshold=0))
    expect_woken = set_after is not None and (timeout is None or set_after < timeout)
    end = set_after if expect_woken else timeout
    assert end is not None
    if woken != expect_woken:  # a tie at the same instant may go either way
        assert set_after is not None and timeout is not None and abs(set_after - timeout) < 1e-6
    assert elapsed == pytest.approx(end, abs=1e-6)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_real_time_waits_on_both_backends(backend: str) -> None:
    # upper bounds far from the waits' lengths: a loaded machine is late, never early
    woken, elapsed = anyio.run(_wait, 0.3, None, 0.05, backend=backend)
    assert not woken and 0.29 <= elapsed < 10.0
    woken, elapsed = anyio.run(_wait, 30.0, 0.05, 0.02, backend=backend)
    assert woken and elapsed < 10.0


def test_the_pyodide_slice_is_short() -> None:
    assert 0 < PYODIDE_SLICE_S <= 1.0
