"""What a protocol run (``POST /api/chat``, ``POST /ag-ui``) keeps so that it can go on after its
process or isolate died (the ASGI host's and the Worker's continuations): the inputs it fed its
encoder.

The encoders are deterministic -- the same inputs give the same bytes -- so a continuation that
feeds a fresh encoder (built from the same request and message id) the inputs the dead run had fed
by its last save writes the very frames the dead run had logged by then, offset for offset, and
goes on from there with ``resume_chat`` from the saved checkpoint. A client reading the log sees
one stream: the dead run's frames up to the save, then the continuation's.

Model turns are numbered per prompt (a resumed chat counts from 0 again), so :class:`RecordedFrames`
shifts a continuation's turn indices past the turns already fed: the encoder's steps go on.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator, Sequence
from typing import Any

import msgspec

from bindloop.protocols import EncoderInput

from bindloop.hosts.chat.run import Frames

__all__ = ("Fed", "RecordedFrames", "decode_fed", "encode_fed", "replay")

Fed = tuple[int | None, EncoderInput]
"""One encoder input as fed: ``(turn_index, event)``."""


def _members(tp: Any) -> Iterator[type[msgspec.Struct]]:
    args = typing.get_args(tp)
    if not args:
        yield tp
        return
    for arg in args:
        yield from _members(arg)


_KINDS: dict[str, type[msgspec.Struct]] = {c.__name__: c for c in _members(EncoderInput)}


class _Line(msgspec.Struct, array_like=True):
    turn: int | None
    kind: str
    event: msgspec.Raw


_LINE = msgspec.json.Decoder(_Line)


def encode_fed(items: Sequence[Fed]) -> str:
    """``items`` as JSON lines, ``[turn, kind, event]`` each (the event types do not share one
    tag field, so the kind names the class)."""
    out = []
    for turn, event in items:
        kind = type(event).__name__
        if kind not in _KINDS:
            raise TypeError(f"{kind} is not an encoder input")
        out.append(msgspec.json.encode([turn, kind, event]).decode() + "\n")
    return "".join(out)


def decode_fed(text: str) -> list[Fed]:
    """The inverse of :func:`encode_fed` (several of its outputs concatenated, too)."""
    out: list[Fed] = []
    for line in text.splitlines():
        if line:
            item = _LINE.decode(line)
            event = msgspec.json.decode(item.event, type=_KINDS[item.kind])
            out.append((item.turn, typing.cast(EncoderInput, event)))
    return out


class RecordedFrames:
    """``inner`` (a protocol's :class:`~bindloop.hosts.asgi.Frames`) remembering every input it is
    fed, with turn indices shifted by ``turn_base``; ``fed`` are the inputs a continuation
    replayed (already saved)."""

    def __init__(self, inner: Frames, *, fed: Sequence[Fed] = (), turn_base: int = 0) -> None:
        self.inner = inner
        self.fed: list[Fed] = list(fed)
        self.saved = len(self.fed)
        self._base = turn_base

    @property
    def turns(self) -> int:
        """One past the highest turn index fed: the base for a continuation's turns."""
        return _turns(self.fed)

    def unsaved(self) -> list[Fed]:
        """What was fed since :attr:`saved` (advance ``saved`` once they are stored)."""
        return self.fed[self.saved:]

    def start(self) -> list[bytes]:
        return self.inner.start()

    def feed(self, event: EncoderInput, turn_index: int | None) -> list[bytes]:
        turn = None if turn_index is None else turn_index + self._base
        self.fed.append((turn, event))
        return self.inner.feed(event, turn)

    def finish(self, result: Any) -> list[bytes]:
        return self.inner.finish(result)

    def abort(self) -> list[bytes]:
        return self.inner.abort()

    def fail(self, text: str) -> list[bytes]:
        return self.inner.fail(text)

    def close(self) -> list[bytes]:
        return self.inner.close()


def replay(frames: Frames, fed: Sequence[Fed]) -> tuple[RecordedFrames, list[bytes]]:
    """Start ``frames`` (a fresh encoder's) and feed it ``fed`` again: the recorder a
    continuation goes on with (its turns after the replayed ones) and the payloads the replay
    wrote, the dead run's first ones."""
    payloads = frames.start()
    for turn, event in fed:
        payloads.extend(frames.feed(event, turn))
    return RecordedFrames(frames, fed=fed, turn_base=_turns(fed)), payloads


def _turns(fed: Sequence[Fed]) -> int:
    return max((t + 1 for t, _ in fed if t is not None), default=0)
