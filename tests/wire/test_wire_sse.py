"""SseDecoder against the WHATWG event-stream rules, any chunking, and hostile input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.errors import UsageError
from bindloop.wire import SseDecoder, SseEvent, SseLimitError


def decode(data: bytes, **kw: int) -> list[SseEvent]:
    d = SseDecoder(**kw)
    out = d.feed(data)
    d.end()
    return out


def test_fields_comments_and_multiline_data() -> None:
    stream = (b": a comment\n"
              b"event: update\nid: 7\ndata: first\ndata:second\ndata\n\n"
              b"data: next\n\n")
    assert decode(stream) == [
        SseEvent(event="update", data="first\nsecond\n", id="7"),
        SseEvent(event="message", data="next", id="7"),  # the last event id persists
    ]


def test_block_without_data_dispatches_nothing_and_resets_event_type() -> None:
    assert decode(b"event: ping\n\ndata: x\n\n") == [SseEvent(data="x")]


def test_empty_data_field_dispatches_an_empty_event() -> None:
    assert decode(b"data\n\ndata:\n\n") == [SseEvent(data=""), SseEvent(data="")]


def test_id_with_nul_is_ignored_and_retry_needs_ascii_digits() -> None:
    d = SseDecoder()
    events = d.feed(b"id: a\x00b\nretry: 12x\ndata: 1\n\nretry: 3000\ndata: 2\n\n")
    assert [e.id for e in events] == [None, None]
    assert [e.retry for e in events] == [None, 3000]
    assert d.retry_ms == 3000


def test_only_one_leading_space_is_stripped_and_unknown_fields_ignored() -> None:
    assert decode(b"data:  two\nfoo: bar\n\n") == [SseEvent(data=" two")]


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"])
def test_each_line_ending(eol: bytes) -> None:
    stream = b"event: e" + eol + b"data: a" + eol + b"data: b" + eol + eol
    assert decode(stream) == [SseEvent(event="e", data="a\nb")]


def test_crlf_split_across_feeds_is_one_line_end() -> None:
    d = SseDecoder()
    assert d.feed(b"data: a\r") == []
    assert d.feed(b"\n\r") == [SseEvent(data="a")]
    assert d.feed(b"\ndata: b\r\n\r\n") == [SseEvent(data="b")]


def test_bom_is_stripped_once_even_when_split() -> None:
    d = SseDecoder()
    assert d.feed(b"\xef") == [] and d.feed(b"\xbb") == []
    assert d.feed(b"\xbfdata: x\n\n") == [SseEvent(data="x")]
    # A BOM later in the stream is data, not a marker.
    assert decode(b"data: \xef\xbb\xbfy\n\n") == [SseEvent(data="\ufeffy")]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    assert decode(b"data: \xff\xfe\n\n") == [SseEvent(data="\ufffd\ufffd")]


def test_end_reports_a_discarded_unterminated_event() -> None:
    d = SseDecoder()
    assert d.feed(b"data: done\n\ndata: cut") == [SseEvent(data="done")]
    assert d.end() is True
    d2 = SseDecoder()
    d2.feed(b"data: whole\n\n")
    assert d2.end() is False


def test_line_limit_raises_instead_of_buffering() -> None:
    d = SseDecoder(max_line_bytes=16)
    with pytest.raises(SseLimitError) as info:
        d.feed(b"data: " + b"x" * 20)
    assert info.value.limit == "line"
    with pytest.raises(UsageError):
        d.feed(b"\n\n")


@pytest.mark.parametrize("eol", [b"\n", b"\r", b"\r\n"])
@pytest.mark.parametrize("chunk", [1, 7, 1024])
def test_long_line_in_small_chunks_with_the_line_end_on_a_boundary(eol: bytes, chunk: int) -> None:
    # The pending line is buffered without rescanning; the line end may land anywhere, including
    # a CRLF whose CR ends one feed and whose LF starts the next.
    payload = b"x" * 5000
    stream = b"data: " + payload + eol + b"data: y" + eol + eol + b"data: z" + eol + eol
    for start in (0, 1, chunk - 1):
        d = SseDecoder()
        got = d.feed(stream[:start]) if start > 0 else []
        for i in range(start, len(stream), chunk):
            got += d.feed(stream[i:i + chunk])
        assert d.end() is False
        assert got == [SseEvent(data=payload.decode() + "\ny"), SseEvent(data="z")]


def test_line_limit_is_exact_across_feeds_without_a_line_end() -> None:
    d = SseDecoder(max_line_bytes=100)
    for _ in range(10):
        assert d.feed(b"d" * 10) == []  # exactly at the limit: still fine
    assert d.feed(b"\n") == []
    d2 = SseDecoder(max_line_bytes=100)
    for _ in range(10):
        d2.feed(b"d" * 10)
    with pytest.raises(SseLimitError):
        d2.feed(b"d")
    d3 = SseDecoder(max_line_bytes=100)
    d3.feed(b"d" * 95)
    with pytest.raises(SseLimitError):
        d3.feed(b"d" * 10 + b"\n")  # the line ends in this feed but is already over the limit


def test_event_limit_counts_joined_data() -> None:
    d = SseDecoder(max_event_bytes=10)
    with pytest.raises(SseLimitError) as info:
        d.feed(b"data: 123456\ndata: 123456\n")
    assert info.value.limit == "event"


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_limits_must_be_positive_ints(bad: object) -> None:
    with pytest.raises(UsageError):
        SseDecoder(max_line_bytes=bad)  # type: ignore[arg-type]


_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x00"),
                max_size=12)
_eol = st.sampled_from([b"\n", b"\r", b"\r\n"])


@st.composite
def sse_streams(draw: st.DrawFn) -> bytes:
    out = [b"\xef\xbb\xbf"] if draw(st.booleans()) else []
    for _ in range(draw(st.integers(0, 6))):
        for _ in range(draw(st.integers(0, 4))):
            field = draw(st.sampled_from(["data", "event", "id", "retry", ":", "other"]))
            value = draw(_text).encode()
            out.append((field + ":" if field != ":" else ":").encode() + b" " + value + draw(_eol))
        out.append(draw(_eol))
    return b"".join(out)


@given(sse_streams(), st.lists(st.integers(0, 400), max_size=12))
@settings(max_examples=150, deadline=None)
def test_any_chunking_gives_the_same_events(stream: bytes, cuts: list[int]) -> None:
    whole = decode(stream)
    points = sorted({c % (len(stream) + 1) for c in cuts})
    d = SseDecoder()
    got: list[SseEvent] = []
    prev = 0
    for p in [*points, len(stream)]:
        got += d.feed(stream[prev:p])
        prev = p
    d.end()
    assert got == whole


@given(st.binary(max_size=600), st.integers(1, 64))
@settings(max_examples=150, deadline=None)
def test_random_bytes_raise_only_limit_errors_and_stay_bounded(data: bytes, limit: int) -> None:
    d = SseDecoder(max_line_bytes=limit, max_event_bytes=limit * 2)
    try:
        for i in range(0, len(data), 7):
            d.feed(data[i:i + 7])
            assert len(d._buf) <= limit  # the unterminated line never outgrows the bound
            assert d._data_size <= limit * 2
    except SseLimitError:
        return


_data_events = st.builds(lambda t: b"data: " + t.encode() + b"\n\n", _text)


def _by_byte(stream: bytes, **limits: int) -> list[SseEvent] | str:
    d = SseDecoder(**limits)
    out: list[SseEvent] = []
    try:
        for i in range(len(stream)):
            out += d.feed(stream[i:i + 1])
    except SseLimitError as exc:
        return exc.limit
    return out


def _per_read(pieces: list[bytes], **limits: int) -> list[SseEvent] | str:
    d = SseDecoder(**limits)
    out: list[SseEvent] = []
    try:
        for piece in pieces:
            out += d.feed(piece)
            if piece.startswith(b"data: ") and piece.endswith(b"\n\n") and piece.count(b"\n") == 2:
                assert not d.grew  # a whole event dispatched in its own read is not progress
    except SseLimitError as exc:
        return exc.limit
    return out


@given(st.lists(st.one_of(_data_events, _data_events, sse_streams()), max_size=10))
@settings(max_examples=200, deadline=None)
def test_one_whole_event_per_read_gives_the_events_of_a_byte_at_a_time(
        pieces: list[bytes]) -> None:
    # The usual read of a streaming provider (one ``data:`` event, nothing pending) between
    # reads of every other shape: the same events as the stream fed one byte at a time.
    assert _per_read(pieces) == _by_byte(b"".join(pieces))


@pytest.mark.parametrize("size", [1, 5, 6, 7, 8, 9, 12])
def test_one_whole_event_per_read_keeps_both_limits(size: int) -> None:
    event = b"data: " + b"x" * size + b"\n\n"
    for limits in ({"max_line_bytes": 12}, {"max_event_bytes": 7},
                   {"max_line_bytes": 10, "max_event_bytes": 3}):
        assert _per_read([b": hi\n\n", event], **limits) == _by_byte(b": hi\n\n" + event, **limits)
