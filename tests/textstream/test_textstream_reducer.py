"""TurnStreamReducer: the shared JSON vectors (also run by node --test) and reorder properties."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindloop.textstream import TurnStreamReducer, TurnView
from bindloop.textstream import (
    TurnResetEvent,
    TurnStreamEvent,
    TurnTextEvent,
    create_turn_text_stream,
)
from bindloop.errors import UsageError
from bindloop.testing import recording_sink

VECTORS = json.loads(
    (Path(__file__).parent / "vectors" / "turn_stream_vectors.json").read_text(encoding="utf-8")
)


def test_vector_file_has_cases() -> None:
    assert len(VECTORS["cases"]) >= 10


@pytest.mark.parametrize("case", VECTORS["cases"], ids=[c["name"] for c in VECTORS["cases"]])
def test_shared_vector(case: dict[str, Any]) -> None:
    options = {k: case[k] for k in ("max_held", "remember_ended") if k in case}
    reducer = TurnStreamReducer(**options)
    for i, step in enumerate(case["steps"]):
        if "end_turn" in step:
            reducer.end_turn(step["end_turn"])
            continue
        event = step["apply"]
        assert reducer.apply(event) == step["outcome"], f"step {i}"
        assert reducer.text(event["turn_id"]) == step["text"], f"step {i}"
    for turn_id, expected in case["final"].items():
        view = reducer.view(turn_id)
        if expected is None:
            assert view is None
        else:
            assert view == TurnView(turn_id=turn_id, **expected)


def test_struct_events_and_json_mappings_are_both_accepted() -> None:
    reducer = TurnStreamReducer()
    assert reducer.apply(TurnTextEvent(turn_id="t", epoch=0, seq=0, text="a")) == "applied"
    assert reducer.apply({"kind": "text", "turn_id": "t", "epoch": 0, "seq": 1, "text": "b"}) == "applied"
    assert reducer.text("t") == "ab"


@pytest.mark.parametrize("bad", [
    {"kind": "text", "turn_id": "t", "epoch": 0, "seq": 0},
    {"kind": "reset", "turn_id": "t", "epoch": 0, "seq": 0, "reason": "nope"},
    {"kind": "wipe", "turn_id": "t", "epoch": 0, "seq": 0},
    {"kind": "text", "turn_id": "t", "epoch": 0.5, "seq": 0, "text": "x"},
    "text",
])
def test_malformed_events_are_usage_errors(bad: Any) -> None:
    with pytest.raises(UsageError):
        TurnStreamReducer().apply(bad)


@pytest.mark.parametrize("options", [{"max_held": 0}, {"remember_ended": 0}, {"max_held": True}])
def test_bounds_are_validated(options: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        TurnStreamReducer(**options)


def test_view_is_a_fresh_snapshot_per_change() -> None:
    reducer = TurnStreamReducer()
    reducer.apply(TurnTextEvent(turn_id="t", epoch=0, seq=0, text="a"))
    first = reducer.view("t")
    reducer.apply(TurnTextEvent(turn_id="t", epoch=0, seq=1, text="b"))
    second = reducer.view("t")
    assert first is not None and second is not None
    assert (first.text, second.text) == ("a", "ab")
    assert reducer.view("unknown") is None and reducer.text("unknown") is None


def test_turns_and_needs_resync() -> None:
    reducer = TurnStreamReducer(max_held=1)
    reducer.apply(TurnTextEvent(turn_id="a", epoch=0, seq=2, text="x"))
    assert reducer.apply(TurnTextEvent(turn_id="a", epoch=0, seq=3, text="y")) == "resync_needed"
    reducer.apply(TurnTextEvent(turn_id="b", epoch=0, seq=0, text="z"))
    assert reducer.turns == ("a", "b")
    assert reducer.needs_resync("a") and not reducer.needs_resync("b")
    reducer.end_turn("a")
    assert reducer.turns == ("b",) and not reducer.needs_resync("a")


# -- properties: a producer's events, reordered and duplicated, render what in-order delivery does --

script = st.lists(
    st.one_of(st.just(("begin", None)), st.sampled_from(["a", "bc", "", "xyz", "!"]).map(
        lambda t: ("observe", t))),
    max_size=25,
)


def produce(turn_id: str, ops: list[tuple[str, Any]], outcome: str) -> list[TurnStreamEvent]:
    sink = recording_sink(True)
    stream = create_turn_text_stream(turn_id=turn_id, sink=sink)
    stream.begin_attempt()
    for op, arg in ops:
        if op == "begin":
            stream.begin_attempt()
        else:
            stream.observe(arg)
    stream.finish(outcome)  # type: ignore[arg-type]
    return list(sink.events)


def in_order_text(events: list[TurnStreamEvent]) -> str:
    rendered = ""
    for e in events:
        rendered = "" if isinstance(e, TurnResetEvent) else rendered + e.text
    return rendered


@st.composite
def delivery(draw: st.DrawFn) -> tuple[dict[str, list[TurnStreamEvent]], list[TurnStreamEvent]]:
    turns = {
        turn_id: produce(turn_id, draw(script), draw(st.sampled_from(["succeeded", "failed"])))
        for turn_id in ("t1", "t2")
    }
    wire = [e for events in turns.values() for e in events]
    wire += draw(st.lists(st.sampled_from(wire), max_size=8)) if wire else []  # duplicates
    return turns, draw(st.permutations(wire))


@given(delivery())
def test_any_reorder_or_duplication_that_fits_renders_the_in_order_text(
    case: tuple[dict[str, list[TurnStreamEvent]], list[TurnStreamEvent]],
) -> None:
    turns, wire = case
    reducer = TurnStreamReducer(max_held=max(1, len(wire)))
    for event in wire:
        assert reducer.apply(event) != "resync_needed"
    for turn_id, events in turns.items():
        if events:
            assert reducer.text(turn_id) == in_order_text(events)
            view = reducer.view(turn_id)
            assert view is not None and view.held == 0 and view.last_seq == len(events) - 1


@given(delivery(), st.integers(1, 4))
def test_a_small_hold_buffer_either_renders_correctly_or_asks_for_resync(
    case: tuple[dict[str, list[TurnStreamEvent]], list[TurnStreamEvent]], max_held: int,
) -> None:
    turns, wire = case
    reducer = TurnStreamReducer(max_held=max_held)
    for event in wire:
        reducer.apply(event)
    for turn_id, events in turns.items():
        view = reducer.view(turn_id)
        if not events:
            continue
        assert view is not None and view.held <= max_held
        if not view.resync_needed:
            assert view.text == in_order_text(events)


@given(delivery())
def test_rendering_never_glues_two_attempts(
    case: tuple[dict[str, list[TurnStreamEvent]], list[TurnStreamEvent]],
) -> None:
    turns, wire = case
    reducer = TurnStreamReducer(max_held=max(1, len(wire)))
    texts_by_epoch: dict[tuple[str, int], str] = {}
    for events in turns.values():
        for e in events:
            if isinstance(e, TurnTextEvent):
                key = (e.turn_id, e.epoch)
                texts_by_epoch[key] = texts_by_epoch.get(key, "") + e.text
    for event in wire:
        reducer.apply(event)
        view = reducer.view(event.turn_id)
        assert view is not None
        # Whatever is on screen is a prefix of a single attempt's text.
        if view.text:
            assert texts_by_epoch[(event.turn_id, view.epoch)].startswith(view.text)


def test_vectors_decode_as_bindloop_events() -> None:
    for case in VECTORS["cases"]:
        for step in case["steps"]:
            if "apply" in step:
                msgspec.convert(step["apply"], TurnTextEvent | TurnResetEvent)
