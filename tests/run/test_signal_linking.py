"""``any_signal`` / ``linked_signal``: one signal for several, and (linked) a way to unlink it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bindloop.signal import AbortController, any_signal, linked_signal


@given(st.integers(0, 4), st.integers(0, 3), st.booleans())
def test_a_linked_signal_fires_with_the_first_reason_until_unlinked(
        count: int, which: int, unlink_first: bool) -> None:
    controllers = [AbortController() for _ in range(count)]
    signal, unlink = linked_signal(None, *(c.signal for c in controllers), None)
    if count == 0:
        assert signal is None
        return
    assert signal is not None
    if count == 1:
        assert signal is controllers[0].signal  # nothing to link
    if unlink_first:
        unlink()
    controllers[which % count].abort(f"reason {which % count}")
    expected = (not unlink_first) or count == 1
    assert signal.aborted == expected
    if expected:
        assert signal.reason == f"reason {which % count}"
    # Unlinking leaves no listener behind on any source.
    unlink()
    assert all(not c.signal._listeners for c in controllers)


def test_an_already_fired_signal_is_returned_itself() -> None:
    fired, live = AbortController(), AbortController()
    fired.abort("early")
    signal, unlink = linked_signal(live.signal, fired.signal)
    assert signal is fired.signal and not live.signal._listeners
    unlink()


def test_any_signal_keeps_its_listeners() -> None:
    a, b = AbortController(), AbortController()
    combined = any_signal(a.signal, b.signal)
    b.abort("b")
    assert combined.aborted and combined.reason == "b"
