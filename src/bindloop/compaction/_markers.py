"""Compact-summary markers carried in a session, and the wire view that applies them.

A *session* is the durable, append-only history: canonical messages plus :class:`CompactMarker`
items. A marker is not a fifth message role: it is a separate frozen Struct (tag ``compact_summary``
on the same ``role`` field) that never reaches a provider, because only :func:`wire_view` reads it and
the wire view contains canonical messages alone. Markers name what they replace by *position* in the
session (half-open spans), since canonical messages carry no ids; positions are stable because a
session is only ever appended to.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, NamedTuple, TypeAlias

import msgspec

from ..contracts import Message, TurnUsage, UserMessage
from ..errors import TranscriptFormatError

__all__ = (
    "SUMMARY_PREFIX",
    "CompactMarker",
    "SessionItem",
    "Span",
    "WireView",
    "decode_session",
    "elided_positions",
    "encode_session",
    "render_summary",
    "spans_from_positions",
    "summary_to_turn",
    "wire_view",
    "wire_view_with_sources",
)

Span: TypeAlias = tuple[int, int]
"""A half-open range ``[start, stop)`` of session positions."""

SUMMARY_PREFIX: Final = "Summary of the earlier conversation:\n\n"


class CompactMarker(msgspec.Struct, frozen=True, kw_only=True, tag_field="role",
                    tag="compact_summary", omit_defaults=True):
    """A compaction's result, appended to the session after the messages it summarizes.

    ``replaces`` lists the session positions the summary stands in for (as sorted, disjoint spans); a
    position at or after the marker's own is ignored (a marker can only replace what came before it).
    Positions may include older markers: those are then *subsumed* (their summary fed this one).
    ``id``, ``model`` and ``usage`` are bookkeeping for the host; the wire view ignores them.
    """

    summary: str
    replaces: tuple[Span, ...] = ()
    id: str | None = None
    model: str | None = None
    usage: TurnUsage = TurnUsage()


SessionItem: TypeAlias = Message | CompactMarker


class WireView(NamedTuple):
    """The wire messages and, for each, the session position it came from (a summary's source is its
    marker's position)."""

    messages: Sequence[Message]
    sources: Sequence[int]


def render_summary(marker: CompactMarker) -> UserMessage:
    """The plain user-text message an active marker becomes on the wire (equal bytes every time)."""
    return UserMessage(content=SUMMARY_PREFIX + marker.summary)


def spans_from_positions(positions: Iterable[int]) -> tuple[Span, ...]:
    """Coalesce positions (any order, duplicates allowed, negatives dropped) into sorted spans."""
    spans: list[Span] = []
    for p in sorted(set(positions)):
        if p < 0:
            continue
        if spans and spans[-1][1] == p:
            spans[-1] = (spans[-1][0], p + 1)
        else:
            spans.append((p, p + 1))
    return tuple(spans)


def summary_to_turn(*, summary: str, replaces: Iterable[int], id: str | None = None,
                    model: str | None = None, usage: TurnUsage | None = None) -> CompactMarker:
    """Build the marker to append to a session after a compaction. ``replaces`` are the session
    positions summarized (see :attr:`WireView.sources` to map wire indices back). No id is invented:
    pass one if the host needs it (e.g. for durable replay)."""
    return CompactMarker(summary=summary, replaces=spans_from_positions(replaces), id=id,
                         model=model, usage=usage if usage is not None else TurnUsage())


def _coverage(items: Sequence[SessionItem],
              markers: list[int]) -> tuple[list[int], dict[int, list[int]]]:
    """Elision counts per position and, for each slot, the active markers rendered there."""
    n = len(items)
    diff = [0] * (n + 1)
    first: dict[int, int] = {}
    for p in markers:
        marker = items[p]
        assert isinstance(marker, CompactMarker)
        lo = p
        for start, stop in marker.replaces:
            start = max(start, 0)
            stop = min(stop, p)
            if start < stop:
                diff[start] += 1
                diff[stop] -= 1
                lo = min(lo, start)
        first[p] = lo
    covered = diff  # reuse: prefix sums in place
    running = 0
    for i in range(n):
        running += diff[i]
        covered[i] = running
    slots: dict[int, list[int]] = {}
    for p in markers:
        if covered[p] == 0:  # active: no newer marker replaced it
            slots.setdefault(first[p], []).append(p)
    return covered, slots


def elided_positions(items: Sequence[SessionItem]) -> frozenset[int]:
    """Every session position some marker replaces (monotone: appending never shrinks it)."""
    markers = [i for i, x in enumerate(items) if isinstance(x, CompactMarker)]
    if not markers:
        return frozenset()
    covered, _ = _coverage(items, markers)
    return frozenset(i for i in range(len(items)) if covered[i])


def _view(items: Sequence[SessionItem], with_sources: bool) -> WireView:
    markers = [i for i, x in enumerate(items) if isinstance(x, CompactMarker)]
    if not markers:
        return WireView(items, range(len(items)))  # type: ignore[arg-type]
    covered, slots = _coverage(items, markers)
    out: list[Message] = []
    sources: list[int] = []
    for i, item in enumerate(items):
        here = slots.get(i)
        if here is not None:
            for p in here:
                marker = items[p]
                assert isinstance(marker, CompactMarker)
                out.append(render_summary(marker))
                if with_sources:
                    sources.append(p)
        if covered[i] or isinstance(item, CompactMarker):
            continue
        out.append(item)
        if with_sources:
            sources.append(i)
    return WireView(out, sources)


def wire_view(items: Sequence[SessionItem]) -> Sequence[Message]:
    """What the provider sees for a session.

    Elision is monotone across every marker: a position replaced by *any* marker never reaches the
    wire again (honouring only the newest marker would resurrect what an older one replaced whenever
    a re-compaction did not subsume it). A marker never passes through. An *active* marker (one no
    newer marker replaced) becomes a user-text summary at the slot of its first replaced position, so
    the summary sits where the content it summarizes used to be; with no replaced position in range
    it renders at its own position. A *subsumed* marker contributes only its elision. Every other
    message passes through by reference.

    Linear in the session. With no marker the input object itself is returned. Consecutive user
    messages are not folded (providers fold or tolerate them). Never mutates the input.
    """
    return _view(items, False).messages


def wire_view_with_sources(items: Sequence[SessionItem]) -> WireView:
    """:func:`wire_view` plus each wire message's session position, to map a compaction of the wire
    view back to the positions its marker must replace."""
    return _view(items, True)


_ENCODER = msgspec.json.Encoder()
_SESSION_DECODER = msgspec.json.Decoder(list[SessionItem])


def encode_session(items: Sequence[SessionItem]) -> bytes:
    """Canonical JSON bytes of a session (messages and markers)."""
    return _ENCODER.encode(items)


def decode_session(data: bytes | str) -> list[SessionItem]:
    """Read a session from JSON. Raises :class:`~bindloop.errors.TranscriptFormatError`."""
    try:
        return _SESSION_DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise TranscriptFormatError(f"not a bindloop session: {exc}") from exc
