"""One SSE parse per chunk: the bytes of a streamed response become SSE events once, and those
events feed both the wire's stream decoder and the stall watchdog's progress signal."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..completion import ReasoningEvent, StreamEvent, TextEvent, ToolCallEvent
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
    arriving (progress a watchdog counts, although no event completed yet).

    Raises what the decoders raise: :class:`~bindloop.wire.SseLimitError` for an oversized line or
    event, :class:`~bindloop.wire.WireDecodeError` for a malformed one, and from :meth:`end`
    :class:`~bindloop.wire.IncompleteStreamError` when the wire's terminal event never came.
    """

    __slots__ = ("_decoder", "_sse")

    def __init__(self, decoder: StreamDecoder, *, sse: SseDecoder | None = None) -> None:
        self._decoder = decoder
        self._sse = sse if sse is not None else SseDecoder()

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
        that carry neither. The per-read path of a streamed call."""
        sse = self._sse
        raw = sse.feed(chunk)
        events = self._decoder.decode(raw) if raw else []
        if events:
            kind: ChunkKind = "none"
            for e in events:  # chunk_kind() inline: the decoders make exact event types
                if type(e) is TextEvent or type(e) is ToolCallEvent:
                    kind = "answer"
                    break
                if type(e) is ReasoningEvent:
                    kind = "reasoning"
            if kind != "none":
                watchdog.observed_chunk(kind)
        elif sse.grew:
            watchdog.observed_progress()  # a large event still arriving
        return events

    def end(self) -> list[StreamEvent]:
        """EOF: an unterminated last SSE event is dropped (the spec says so), then the decoder
        says whether the stream was whole."""
        self._sse.end()
        return self._decoder.end()


def decode_stream(adapter: WireAdapter, chunks: Iterable[bytes]) -> list[StreamEvent]:
    """A whole streamed body (in any chunking) as the adapter's stream events, ``end()`` included:
    for recorded streams, tests and tools. Raises as :class:`WireStream` does."""
    stream = WireStream(adapter.stream_decoder())
    out: list[StreamEvent] = []
    for chunk in chunks:
        out += stream.feed(chunk)
    return out + stream.end()
