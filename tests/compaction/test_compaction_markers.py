from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.compaction import (
    SUMMARY_PREFIX,
    CompactMarker,
    CompactResult,
    append_compaction,
    decode_session,
    elided_positions,
    encode_session,
    render_summary,
    spans_from_positions,
    summary_to_turn,
    wire_view,
    wire_view_with_sources,
)
from bindloop.contracts import AssistantMessage, SystemMessage, TurnUsage, UserMessage
from bindloop.errors import TranscriptFormatError

from transcript.strategies import messages

SETTINGS = settings(max_examples=200, deadline=None)


def u(t: str) -> UserMessage:
    return UserMessage(content=t)


def a(t: str) -> AssistantMessage:
    return AssistantMessage(content=t)


def summary(text: str) -> UserMessage:
    return UserMessage(content=SUMMARY_PREFIX + text)


def test_no_marker_returns_the_input_itself() -> None:
    s = [u("1"), a("2")]
    assert wire_view(s) is s
    assert wire_view_with_sources(s).messages is s


def test_active_marker_renders_at_its_first_replaced_slot() -> None:
    s = [u("0"), a("1"), u("2"), a("3"), summary_to_turn(summary="S", replaces=[2, 3]), u("5")]
    view = wire_view_with_sources(s)
    assert list(view.messages) == [s[0], s[1], summary("S"), s[5]]
    assert list(view.sources) == [0, 1, 4, 5]
    assert view.messages[0] is s[0] and view.messages[3] is s[5]


def test_subsumed_marker_only_elides_and_older_elision_is_never_undone() -> None:
    m1 = summary_to_turn(summary="S1", replaces=range(0, 4))  # at 4
    # m2 summarizes the wire view *after* a head-drop: it does not subsume m1 nor its slot.
    s = [u("0"), a("1"), u("2"), a("3"), m1, u("5"), a("6"), u("7")]
    m2 = summary_to_turn(summary="S2", replaces=[5, 6])
    s2 = [*s, m2]
    assert list(wire_view(s2)) == [summary("S1"), summary("S2"), s[7]]
    # m3 subsumes m1 (its position 4) and the rest.
    m3 = summary_to_turn(summary="S3", replaces=[4, 7, 8])
    s3 = [*s2, m3, u("10")]
    assert list(wire_view(s3)) == [summary("S3"), s3[10]]
    assert elided_positions(s2) <= elided_positions(s3)


def test_marker_with_no_replaced_slot_renders_at_its_own_position() -> None:
    s = [u("0"), CompactMarker(summary="S", replaces=((50, 60),)), u("2")]
    assert list(wire_view(s)) == [s[0], summary("S"), s[2]]
    forward = [u("0"), CompactMarker(summary="F", replaces=((1, 3),)), u("2")]
    assert list(wire_view(forward)) == [forward[0], summary("F"), forward[2]]


def test_spans_and_summary_to_turn() -> None:
    assert spans_from_positions([5, 1, 2, 2, 3, -1, 9]) == ((1, 4), (5, 6), (9, 10))
    m = summary_to_turn(summary="x", replaces=[3, 4], id="cmp-1", model="m",
                        usage=TurnUsage(input_tokens=5))
    assert m == CompactMarker(summary="x", replaces=((3, 5),), id="cmp-1", model="m",
                              usage=TurnUsage(input_tokens=5))
    assert summary_to_turn(summary="x", replaces=[]).id is None  # no hidden uuid


def test_checkpoints_codec_round_trips_and_rejects_garbage() -> None:
    s = [SystemMessage(content="s"), u("1"), summary_to_turn(summary="S", replaces=[1])]
    data = encode_session(s)
    assert b'"role":"compact_summary"' in data
    assert decode_session(data) == s
    try:
        decode_session(b'[{"role":"narrator"}]')
    except TranscriptFormatError:
        pass
    else:
        raise AssertionError("expected TranscriptFormatError")


def test_append_compaction_maps_wire_indices_back_and_keeps_system() -> None:
    s = [SystemMessage(content="sys"), u("1"), a("2"), u("3")]
    view = wire_view_with_sources(s)
    s2 = append_compaction(s, view, CompactResult(summary="S", start=0, stop=3))
    assert s2[-1] == CompactMarker(summary="S", replaces=((1, 3),))
    assert list(wire_view(s2)) == [s[0], summary("S"), s[3]]
    # A second compaction of the new wire view subsumes the first marker.
    v2 = wire_view_with_sources(s2)
    s3 = append_compaction(s2, v2, CompactResult(summary="T", start=1, stop=3))
    assert list(wire_view(s3)) == [s[0], summary("T")]
    assert render_summary(s3[-1]) == summary("T")  # type: ignore[arg-type]


@st.composite
def sessions(draw: st.DrawFn) -> list:
    items: list = []
    for _ in range(draw(st.integers(0, 25))):
        if items and draw(st.integers(0, 4)) == 0:
            n = len(items)
            spans = draw(st.lists(st.tuples(st.integers(-2, n + 2), st.integers(-2, n + 3)),
                                  max_size=3))
            items.append(CompactMarker(summary=f"S{n}", replaces=tuple(spans)))
        else:
            items.append(draw(messages))
    return items


@SETTINGS
@given(sessions(), st.data())
def test_elision_is_monotone_and_replaced_messages_never_reach_the_wire(items: list,
                                                                        data: st.DataObject) -> None:
    before = encode_session(items)
    view = wire_view_with_sources(items)
    assert encode_session(items) == before
    elided = elided_positions(items)
    marker_positions = {i for i, x in enumerate(items) if isinstance(x, CompactMarker)}
    for msg, src in zip(view.messages, view.sources, strict=True):
        assert src not in elided
        if src in marker_positions:
            assert msg == render_summary(items[src])
        else:
            assert msg is items[src]  # passes through by reference
    # Every surviving message appears exactly once, in session order.
    survivors = [i for i in range(len(items)) if i not in elided and i not in marker_positions]
    assert [s for s in view.sources if s not in marker_positions] == survivors
    # Appending any marker never brings back what was elided.
    n = len(items)
    extra = CompactMarker(summary="new", replaces=tuple(data.draw(
        st.lists(st.tuples(st.integers(0, n), st.integers(0, n + 1)), max_size=2))))
    assert elided <= elided_positions([*items, extra])
