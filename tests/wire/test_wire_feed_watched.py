"""``WireStream.feed_watched`` (the per-read path of a streamed call, issue 19 item 6) reports to
the watchdog exactly what the two-step path did: ``feed()``, then progress for a read that only grew
an event, else the read's :func:`chunk_kind` (a ``"none"`` report being a no-op)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.wire import create_stream_watchdog
from bindloop.wire import WireStream, create_wire_adapter
from bindloop.wire._stream import chunk_kind

from .wire_fixtures import fixture, stream_fixtures


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[Any] = []

    def observed_chunk(self, kind: str) -> None:
        if kind != "none":  # the watchdog ignores "none"
            self.calls.append(kind)

    def observed_progress(self) -> None:
        self.calls.append("progress")


def _reference(wire: str, pieces: list[bytes]) -> tuple[list[Any], list[Any]]:
    stream, rec, out = WireStream(create_wire_adapter(wire).stream_decoder()), _Recorder(), []
    for piece in pieces:
        events = stream.feed(piece)
        if not events and stream.grew:
            rec.observed_progress()
        else:
            rec.observed_chunk(chunk_kind(events))
        out += events
    return out, rec.calls


def _watched(wire: str, pieces: list[bytes]) -> tuple[list[Any], list[Any]]:
    stream, rec, out = WireStream(create_wire_adapter(wire).stream_decoder()), _Recorder(), []
    for piece in pieces:
        out += stream.feed_watched(piece, rec)  # type: ignore[arg-type]
    return out, rec.calls


@given(st.sampled_from(stream_fixtures()), st.lists(st.integers(0, 20_000), max_size=30))
@settings(max_examples=200, deadline=None)
def test_feed_watched_reports_what_feed_and_chunk_kind_reported(key: tuple[str, str],
                                                                cuts: list[int]) -> None:
    wire, name = key
    data = fixture(wire, name)
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    pieces = [data[a:b] for a, b in zip(bounds, bounds[1:])]
    try:
        expected = _reference(wire, pieces)
    except Exception as exc:  # a fixture that ends in a decode error: both must raise it
        try:
            _watched(wire, pieces)
        except type(exc):
            return
        raise AssertionError("feed_watched did not raise what feed raised") from exc
    got = _watched(wire, pieces)
    # repr: an ErrorEvent holds an exception, and exceptions compare by identity
    assert (repr(got[0]), got[1]) == (repr(expected[0]), expected[1])


def test_the_watchdog_says_it_fired_without_a_call() -> None:
    now = [0.0]
    dog = create_stream_watchdog(first_token_ms=10, inter_chunk_ms=5, total_ms=100,
                                 clock=lambda: now[0])
    dog.open()
    assert dog.fired is False
    now[0] = 11
    assert dog.check() is not None
    assert dog.fired is True and dog.signal.aborted
