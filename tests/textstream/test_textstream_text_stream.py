"""create_turn_text_stream: every contract of the retractable turn text stream."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindloop.textstream import (
    TurnResetEvent,
    TurnStreamEvent,
    TurnTextEvent,
    TurnTextStream,
    create_turn_text_stream,
)
from bindloop.errors import ProtocolError, UsageError
from bindloop.testing import RecordingSink, recording_sink


def text(epoch: int, seq: int, body: str, turn: str = "t1") -> TurnTextEvent:
    return TurnTextEvent(turn_id=turn, epoch=epoch, seq=seq, text=body)


def reset(epoch: int, seq: int, reason: str = "attempt_failed", turn: str = "t1") -> TurnResetEvent:
    return TurnResetEvent(turn_id=turn, epoch=epoch, seq=seq, reason=reason)  # type: ignore[arg-type]


def make(retractable: bool = True, max_resets: int | None = None) -> tuple[TurnTextStream, RecordingSink]:
    sink = recording_sink(retractable)
    return create_turn_text_stream(turn_id="t1", sink=sink, max_resets=max_resets), sink


class FlakySink:
    """Raises on the emit calls whose 0-based position is in ``fail_on``."""

    def __init__(self, retractable: bool, fail_on: set[int] | None = None) -> None:
        self.retractable = retractable
        self.fail_on = fail_on or set()
        self.calls = 0
        self.attempted: list[TurnStreamEvent] = []
        self.delivered: list[TurnStreamEvent] = []

    def emit(self, event: TurnStreamEvent) -> None:
        index = self.calls
        self.calls += 1
        self.attempted.append(event)
        if index in self.fail_on:
            raise ConnectionError("socket closed")
        self.delivered.append(event)


# -- construction ---------------------------------------------------------------------------------

@pytest.mark.parametrize("turn_id", ["", None, 7])
def test_turn_id_must_be_a_non_empty_string(turn_id: Any) -> None:
    with pytest.raises(UsageError, match="turn_id"):
        create_turn_text_stream(turn_id=turn_id, sink=recording_sink())


@pytest.mark.parametrize("max_resets", [-1, 1.5, math.nan, math.inf, True, "2"])
def test_max_resets_must_be_a_non_negative_integer(max_resets: Any) -> None:
    with pytest.raises(UsageError, match="max_resets"):
        create_turn_text_stream(turn_id="t", sink=recording_sink(), max_resets=max_resets)


def test_sink_shape_is_checked() -> None:
    class NoFlag:
        def emit(self, event: object) -> None: ...

    class BadEmit:
        retractable = True
        emit = None

    class TruthyFlag:
        retractable = "yes"

        def emit(self, event: object) -> None: ...

    for sink in (NoFlag(), BadEmit(), TruthyFlag()):
        with pytest.raises(UsageError, match="sink"):
            create_turn_text_stream(turn_id="t", sink=sink)  # type: ignore[arg-type]


def test_initial_read_outs() -> None:
    stream, sink = make()
    assert (stream.epoch, stream.reset_count, stream.sink_errors) == (-1, 0, 0)
    assert stream.produced_output is False and stream.finished is False
    assert stream.turn_id == "t1"
    assert sink.events == []


# -- the single-attempt path ----------------------------------------------------------------------

def test_observe_before_begin_attempt_raises_even_for_empty_text() -> None:
    for value in ("hi", "", None):
        stream, _ = make()
        with pytest.raises(ProtocolError, match="begin_attempt"):
            stream.observe(value)


def test_single_attempt_streams_text_with_gapless_seq() -> None:
    stream, sink = make()
    stream.begin_attempt()
    stream.observe("Hel")
    stream.observe("lo")
    stream.finish("succeeded")
    assert sink.events == [text(0, 0, "Hel"), text(0, 1, "lo")]
    assert stream.produced_output is False  # a retractable surface keeps the fallback chain


def test_empty_and_none_deltas_are_not_output() -> None:
    stream, sink = make(retractable=False)
    stream.begin_attempt()
    stream.observe("")
    stream.observe(None)
    assert sink.events == [] and stream.produced_output is False


def test_observe_rejects_non_text() -> None:
    stream, _ = make()
    stream.begin_attempt()
    with pytest.raises(UsageError):
        stream.observe(b"bytes")  # type: ignore[arg-type]


def test_a_turn_where_nothing_is_emitted_emits_no_events() -> None:
    stream, sink = make()
    for _ in range(3):
        stream.begin_attempt()
    stream.finish("succeeded")
    assert sink.events == [] and stream.epoch == 2


def test_events_are_frozen_and_encode_to_the_wire_shape() -> None:
    stream, sink = make()
    stream.begin_attempt()
    stream.observe("a")
    stream.begin_attempt()
    stream.observe("b")
    with pytest.raises(AttributeError):
        sink.events[0].text = "changed"
    assert msgspec.json.encode(sink.events[1]) == (
        b'{"kind":"reset","turn_id":"t1","epoch":1,"seq":1,"reason":"attempt_failed"}')
    assert msgspec.json.encode(sink.events[0]) == (
        b'{"kind":"text","turn_id":"t1","epoch":0,"seq":0,"text":"a"}')


# -- retries: epochs and the lazy reset -----------------------------------------------------------

def test_epoch_advances_on_every_attempt() -> None:
    stream, _ = make()
    for expected in range(4):
        stream.begin_attempt()
        assert stream.epoch == expected


def test_reset_is_lazy_and_fires_on_the_retrys_first_byte() -> None:
    stream, sink = make()
    stream.begin_attempt()
    stream.observe("partial")
    stream.begin_attempt()
    assert sink.events == [text(0, 0, "partial")]  # nothing wiped yet
    stream.observe("full")
    stream.observe(" answer")
    assert sink.events == [text(0, 0, "partial"), reset(1, 1), text(1, 2, "full"),
                           text(1, 3, " answer")]
    assert stream.reset_count == 1 and stream.produced_output is False


def test_silent_retries_leave_the_text_and_share_one_reset() -> None:
    stream, sink = make()
    stream.begin_attempt()
    stream.observe("a")
    stream.begin_attempt()  # dies before a byte (401, no endpoint)
    stream.begin_attempt()
    stream.observe("b")
    assert sink.events == [text(0, 0, "a"), reset(2, 1), text(2, 2, "b")]
    assert stream.reset_count == 1


def test_explicit_reason_sticks_through_a_later_default() -> None:
    stream, sink = make()
    stream.begin_attempt()
    stream.observe("{bad json")
    stream.begin_attempt("structured_output_retry")  # the caller's retry loop
    stream.begin_attempt()  # the executor's attempt function, default reason
    stream.observe("{}")
    assert sink.events[1] == reset(2, 1, "structured_output_retry")


def test_explicit_reason_overrides_an_armed_default() -> None:
    stream, sink = make()
    stream.begin_attempt()
    stream.observe("x")
    stream.begin_attempt()
    stream.begin_attempt("structured_output_retry")
    stream.observe("y")
    assert isinstance(sink.events[1], TurnResetEvent)
    assert sink.events[1].reason == "structured_output_retry"


def test_reason_resets_to_default_after_delivery() -> None:
    stream, sink = make()
    stream.begin_attempt()
    stream.observe("x")
    stream.begin_attempt("structured_output_retry")
    stream.observe("y")
    stream.begin_attempt()
    stream.observe("z")
    reasons = [e.reason for e in sink.events if isinstance(e, TurnResetEvent)]
    assert reasons == ["structured_output_retry", "attempt_failed"]


def test_bad_reason_is_refused() -> None:
    stream, _ = make()
    with pytest.raises(UsageError):
        stream.begin_attempt("because")  # type: ignore[arg-type]


# -- finish ---------------------------------------------------------------------------------------

def test_finish_succeeded_flushes_an_armed_reset() -> None:
    stream, sink = make()
    stream.begin_attempt()
    stream.observe("narration of a failed attempt")
    stream.begin_attempt()  # the retry answers with tool calls only: no text
    stream.finish("succeeded")
    assert sink.events[-1] == reset(1, 1)
    assert stream.reset_count == 1


def test_finish_failed_drops_an_armed_reset() -> None:
    stream, sink = make()
    stream.begin_attempt()
    stream.observe("partial text is better than a blank")
    stream.begin_attempt()
    stream.finish("failed")
    assert sink.events == [text(0, 0, "partial text is better than a blank")]
    assert stream.reset_count == 0


def test_finish_is_idempotent_and_everything_after_is_a_no_op() -> None:
    stream, sink = make()
    stream.begin_attempt()
    stream.observe("a")
    stream.finish("failed")
    stream.finish("succeeded")  # no flush: the first call decided
    stream.begin_attempt()
    stream.observe("b")
    stream.mark_produced_output()
    assert sink.events == [text(0, 0, "a")]
    assert stream.epoch == 0 and stream.finished and stream.produced_output is False


def test_finish_validates_its_outcome() -> None:
    stream, _ = make()
    with pytest.raises(UsageError):
        stream.finish("ok")  # type: ignore[arg-type]


def test_observe_after_finish_without_any_attempt_is_a_no_op() -> None:
    stream, sink = make()
    stream.finish("succeeded")
    stream.observe("late")
    assert sink.events == []


# -- produced_output and its latches ---------------------------------------------------------------

def test_non_retractable_latches_on_the_first_byte_and_never_resets() -> None:
    stream, sink = make(retractable=False)
    stream.begin_attempt()
    assert stream.produced_output is False
    stream.observe("posted")
    assert stream.produced_output is True
    stream.begin_attempt()
    stream.observe(" more")
    stream.finish("succeeded")
    assert all(isinstance(e, TurnTextEvent) for e in sink.events)
    assert stream.reset_count == 0


def test_retractable_flag_is_read_once() -> None:
    class Flipping:
        def __init__(self) -> None:
            self.reads = 0
            self.events: list[TurnStreamEvent] = []

        @property
        def retractable(self) -> bool:
            self.reads += 1
            return self.reads == 1  # True at construction, False ever after

        def emit(self, event: TurnStreamEvent) -> None:
            self.events.append(event)

    sink = Flipping()
    stream = create_turn_text_stream(turn_id="t", sink=sink)
    stream.begin_attempt()
    stream.observe("a")
    assert stream.produced_output is False
    stream.begin_attempt()
    stream.observe("b")
    assert sink.reads == 1
    assert isinstance(sink.events[1], TurnResetEvent)


def test_mark_produced_output_latches_without_stopping_emission() -> None:
    stream, sink = make()
    stream.begin_attempt()
    stream.mark_produced_output()
    assert stream.produced_output is True
    stream.observe("still delivered")
    assert sink.events == [text(0, 0, "still delivered")]
    stream.finish("succeeded")
    assert stream.produced_output is True


def test_reset_budget_spent_latches_but_the_attempt_in_flight_keeps_streaming() -> None:
    stream, sink = make(max_resets=1)
    stream.begin_attempt()
    stream.observe("a")
    assert stream.produced_output is False
    stream.begin_attempt()
    stream.observe("b")  # the one allowed wipe
    assert stream.produced_output is True
    stream.observe("c")  # the attempt in flight may be the one that succeeds
    assert sink.events == [text(0, 0, "a"), reset(1, 1), text(1, 2, "b"), text(1, 3, "c")]


def test_after_the_budget_a_new_attempt_is_not_spliced_onto_the_last() -> None:
    stream, sink = make(max_resets=1)
    stream.begin_attempt()
    stream.observe("a")
    stream.begin_attempt()
    stream.observe("b")
    stream.begin_attempt("structured_output_retry")  # caller-owned loop keeps going
    stream.observe("c")
    stream.finish("succeeded")
    assert sink.events == [text(0, 0, "a"), reset(1, 1), text(1, 2, "b")]
    assert stream.reset_count == 1


def test_zero_budget_latches_on_the_first_byte_of_a_retractable_surface() -> None:
    stream, sink = make(max_resets=0)
    stream.begin_attempt()
    stream.observe("a")
    assert stream.produced_output is True
    stream.begin_attempt()
    stream.observe("b")
    assert sink.events == [text(0, 0, "a")]


# -- sink errors ----------------------------------------------------------------------------------

def test_failed_text_on_a_retractable_surface_stays_replayable() -> None:
    sink = FlakySink(retractable=True, fail_on={0})
    stream = create_turn_text_stream(turn_id="t1", sink=sink)
    stream.begin_attempt()
    stream.observe("lost")
    stream.observe("kept")
    assert stream.sink_errors == 1
    assert stream.produced_output is False
    assert sink.delivered == [text(0, 1, "kept")]


def test_failed_text_on_a_permanent_surface_counts_as_output() -> None:
    sink = FlakySink(retractable=False, fail_on={0})
    stream = create_turn_text_stream(turn_id="t1", sink=sink)
    stream.begin_attempt()
    stream.observe("maybe sent")
    assert stream.sink_errors == 1 and stream.produced_output is True


def test_a_lost_reset_latches_and_strands_the_surface() -> None:
    sink = FlakySink(retractable=True, fail_on={1})  # the reset
    stream = create_turn_text_stream(turn_id="t1", sink=sink)
    stream.begin_attempt()
    stream.observe("first")
    stream.begin_attempt()
    stream.observe("second")  # its reset is lost: writing now would splice
    stream.observe("more")
    assert sink.delivered == [text(0, 0, "first")]
    assert stream.reset_count == 1 and stream.sink_errors == 1
    assert stream.produced_output is True


def test_a_later_reset_that_lands_unstrands_the_surface_but_the_latch_stays() -> None:
    sink = FlakySink(retractable=True, fail_on={1})
    stream = create_turn_text_stream(turn_id="t1", sink=sink)
    stream.begin_attempt()
    stream.observe("first")
    stream.begin_attempt()
    stream.observe("second")  # reset lost
    stream.begin_attempt()  # arms another reset
    stream.finish("succeeded")  # ...which the finish line flushes, and it lands
    assert sink.delivered[-1] == reset(2, 2)
    assert stream.produced_output is True  # never un-latches


def test_sink_base_exceptions_propagate() -> None:
    class Stop(BaseException):
        pass

    class Cancelling:
        retractable = True

        def emit(self, event: TurnStreamEvent) -> None:
            raise Stop

    stream = create_turn_text_stream(turn_id="t", sink=Cancelling())
    stream.begin_attempt()
    with pytest.raises(Stop):
        stream.observe("x")


def test_reentrant_sink_cannot_backdate_a_delta() -> None:
    class Reentrant:
        retractable = True

        def __init__(self) -> None:
            self.events: list[TurnStreamEvent] = []
            self.stream: TurnTextStream | None = None

        def emit(self, event: TurnStreamEvent) -> None:
            self.events.append(event)
            if self.stream is not None and len(self.events) == 1:
                self.stream.begin_attempt()

    sink = Reentrant()
    stream = create_turn_text_stream(turn_id="t", sink=sink)
    sink.stream = stream
    stream.begin_attempt()
    stream.observe("x")
    assert sink.events[0] == text(0, 0, "x", turn="t")
    assert stream.epoch == 1


# -- properties -----------------------------------------------------------------------------------

ops = st.lists(
    st.one_of(
        st.just(("begin", None)),
        st.just(("begin", "structured_output_retry")),
        st.sampled_from(["a", "bc", "", None, "xyz"]).map(lambda t: ("observe", t)),
        st.just(("mark", None)),
    ),
    max_size=40,
)


def drive(stream: TurnTextStream, script: list[tuple[str, Any]], outcome: str | None,
          watch: list[bool] | None = None) -> None:
    stream.begin_attempt()
    for op, arg in script:
        if op == "begin":
            stream.begin_attempt(arg)
        elif op == "observe":
            stream.observe(arg)
        else:
            stream.mark_produced_output()
        if watch is not None:
            watch.append(stream.produced_output)
    if outcome is not None:
        stream.finish(outcome)  # type: ignore[arg-type]
        if watch is not None:
            watch.append(stream.produced_output)


@given(ops, st.booleans(), st.none() | st.integers(0, 3), st.sets(st.integers(0, 30), max_size=4),
       st.sampled_from(["succeeded", "failed", None]))
def test_invariants_under_any_script(script: list[tuple[str, Any]], retractable: bool,
                                     max_resets: int | None, fail_on: set[int],
                                     outcome: str | None) -> None:
    sink = FlakySink(retractable, fail_on)
    stream = create_turn_text_stream(turn_id="t1", sink=sink, max_resets=max_resets)
    watch: list[bool] = []
    drive(stream, script, outcome, watch)
    # produced_output never goes from true to false.
    assert all(not before or after for before, after in zip(watch, watch[1:]))
    # seq is gap-free from 0 over every event handed to the sink; epochs never decrease.
    assert [e.seq for e in sink.attempted] == list(range(len(sink.attempted)))
    epochs = [e.epoch for e in sink.attempted]
    assert epochs == sorted(epochs)
    assert stream.sink_errors == len(sink.attempted) - len(sink.delivered)
    assert stream.reset_count == sum(isinstance(e, TurnResetEvent) for e in sink.attempted)
    if not retractable:
        assert stream.reset_count == 0
    if max_resets is not None:
        assert stream.reset_count <= max_resets
    # Never glued: between two delivered resets, every delivered text comes from one attempt.
    current: set[int] = set()
    for e in sink.delivered:
        if isinstance(e, TurnResetEvent):
            current = set()
        elif retractable:
            current.add(e.epoch)
            assert len(current) == 1, sink.delivered


@given(ops, st.sampled_from(["succeeded", "failed"]))
def test_retractable_surface_ends_showing_exactly_one_attempt(script: list[tuple[str, Any]],
                                                              outcome: str) -> None:
    sink = recording_sink(True)
    stream = create_turn_text_stream(turn_id="t1", sink=sink)
    drive(stream, script, outcome)
    # Model: which attempt's text is on screen at the end.
    attempts: list[str] = [""]
    for op, arg in script:
        if op == "begin":
            attempts.append("")
        elif op == "observe" and arg:
            attempts[-1] += arg
    emitting = [t for t in attempts if t]
    rendered = ""
    for e in sink.events:
        rendered = "" if isinstance(e, TurnResetEvent) else rendered + e.text
    if not emitting:
        assert rendered == ""
    elif attempts[-1] or outcome == "failed":
        assert rendered == emitting[-1]
    else:
        assert rendered == ""  # the successful attempt said nothing: its predecessor is wiped
    assert stream.produced_output is any(op == "mark" for op, _ in script)


def test_kind_mirrors_the_wire_tag() -> None:
    assert TurnTextEvent(turn_id="t", epoch=0, seq=0, text="x").kind == "text"
    assert reset(0, 0).kind == "reset"
    decoded = msgspec.json.decode(msgspec.json.encode(reset(1, 2)), type=TurnStreamEvent)
    assert decoded == reset(1, 2)
