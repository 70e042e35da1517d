"""One SSE parse per chunk: the bytes of a streamed response become SSE events once, and those
events feed both the wire's stream decoder and the stall watchdog's progress signal."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ..completion import ErrorEvent, ReasoningEvent, StreamEvent, TextEvent, ToolCallEvent
from ._watchdog import ChunkKind, StreamWatchdog
from ._sse import SseDecoder
from ._types import StreamDecoder, WireAdapter

__all__ = ("WireStream", "chunk_kind", "decode_stream")


def chunk_kind(events: Sequence[StreamEvent]) -> ChunkKind:
    """What a read's events mean to the watchdog: answer output, reasoning only, or nothing."""
    kind: ChunkKind = "none"
    for e in events:
        if isinstance(e, (TextEvent, ToolCallEvent)):
            return "answer"
        if isinstance(e, ReasoningEvent):
            kind = "reasoning"
    return kind


class WireStream:
    """A streamed response body, read once: one :class:`~bindloop.wire.SseDecoder` splits the bytes
    into SSE events and the wire's :class:`~bindloop.wire.StreamDecoder` turns each into stream
    events. After every :meth:`feed`, :attr:`grew` tells whether the bytes added to an event still
    arriving (progress a watchdog counts, although no event completed yet). ``scrub`` (a call's
    redactor) is applied to every in-stream :class:`~bindloop.completion.ErrorEvent` it yields
    (one may echo a credential) and to what :meth:`end` returns.

    Raises what the decoders raise: :class:`~bindloop.wire.SseLimitError` for an oversized line or
    event, :class:`~bindloop.wire.WireDecodeError` for a malformed one, and from :meth:`end`
    :class:`~bindloop.wire.IncompleteStreamError` when the wire's terminal event never came.
    """

    __slots__ = ("_decoder", "_scrub", "_sse")

    def __init__(self, decoder: StreamDecoder, *, sse: SseDecoder | None = None,
                 scrub: Callable[[StreamEvent], StreamEvent] | None = None) -> None:
        self._decoder = decoder
        self._sse = sse if sse is not None else SseDecoder()
        self._scrub = scrub

    @property
    def grew(self) -> bool:
        return self._sse.grew

    def feed(self, chunk: bytes) -> list[StreamEvent]:
        """The stream events ``chunk`` completed, in order."""
        events = self._sse.feed(chunk)
        return self._decoder.decode(events) if events else []

    def feed_watched(self, chunk: bytes, watchdog: StreamWatchdog) -> list[StreamEvent]:
        """:meth:`feed`, reporting the read to ``watchdog`` in the same pass: the kind of the
        events it completed (:func:`chunk_kind`: answer output or reasoning), or progress when it
        completed none but grew an event still arriving; nothing for a keep-alive or for events
        that carry neither; an error event scrubbed. The one per-read step of every streamed call
        (``ModelAdapter.complete``'s fold and ``open_stream``/``stream`` alike)."""
        sse = self._sse
        raw = sse.feed(chunk)
        events = self._decoder.decode(raw) if raw else []
        if events:
            kind: ChunkKind = "none"
            scrub = self._scrub
            for i, e in enumerate(events):  # chunk_kind() inline: the decoders make exact types
                if type(e) is TextEvent or type(e) is ToolCallEvent:
                    kind = "answer"
                elif type(e) is ReasoningEvent:
                    if kind == "none":
                        kind = "reasoning"
                elif type(e) is ErrorEvent and scrub is not None:
                    events[i] = scrub(e)  # the type check costs a tenth of isinstance() here
            if kind != "none":
                watchdog.observed_chunk(kind)
        elif sse.grew:
            watchdog.observed_progress()  # a large event still arriving
        return events

    def end(self) -> list[StreamEvent]:
        """EOF: an unterminated last SSE event is dropped (the spec says so), then the decoder
        says whether the stream was whole."""
        self._sse.end()
        scrub = self._scrub
        events = self._decoder.end()
        return events if scrub is None else [scrub(e) for e in events]


def decode_stream(adapter: WireAdapter, chunks: Iterable[bytes]) -> list[StreamEvent]:
    """A whole streamed body (in any chunking) as the adapter's stream events, ``end()`` included:
    for recorded streams, tests and tools. Raises as :class:`WireStream` does."""
    stream = WireStream(adapter.stream_decoder())
    out: list[StreamEvent] = []
    for chunk in chunks:
        out += stream.feed(chunk)
    return out + stream.end()
