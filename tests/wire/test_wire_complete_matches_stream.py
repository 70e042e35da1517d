"""``ModelAdapter.complete()`` folds a streamed body with its own copy of the read loop that
``open_stream()`` runs (an async generator between the reads and the fold costs two calls per
chunk). The two must stay one behaviour: for every recorded stream of every wire, cut anywhere, the
sink of ``complete()`` sees exactly the events ``open_stream()`` yields (an in-stream error scrubbed
of the transport's credential), and the priced turn, or the error raised, is the same; also when
the body ends early."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.completion import ErrorEvent, StreamEvent, TurnCollector
from bindloop.contracts import TurnUsage, UserMessage
from bindloop.model import ModelRequest
from bindloop.wire import HttpRequest, ModelAdapter, Redactor, WireOptions, create_wire_adapter

from .wire_fixtures import fixture, stream_fixtures

KEY = "sk-live-0123456789abcdefXYZ"
BASE = "https://gateway.example/v1"
# A gateway's in-stream error that echoes the caller's key (OpenAI-compatible gateways send one).
LEAKY_ERROR = ("data: " + json.dumps({"error": {"message": f"key {KEY} is over quota",
                                                "type": "insufficient_quota", "code": 429}})
               + "\n\n").encode()
CASES = [*stream_fixtures(), ("openai_chat", "<leaky error>")]


class _Body:
    status = 200
    headers: tuple[tuple[str, str], ...] = (("content-type", "text/event-stream"),)

    def __init__(self, pieces: Sequence[bytes]) -> None:
        self._pieces = pieces

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            await anyio.lowlevel.checkpoint()
            yield piece


class _Transport:
    def __init__(self, pieces: Sequence[bytes]) -> None:
        self.pieces = pieces
        self.redactor = Redactor.for_credentials(BASE, [("authorization", f"Bearer {KEY}")])

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Body]:
        yield _Body(self.pieces)


def _plain(events: list[StreamEvent]) -> list[object]:
    """Events comparable by value (an exception compares by identity)."""
    return [(type(e.error), str(e.error)) if isinstance(e, ErrorEvent) else e for e in events]


def _price(usage: TurnUsage) -> int:
    return 3 + (usage.output_tokens or 0)


def _model(wire: str, pieces: Sequence[bytes]) -> ModelAdapter:
    return ModelAdapter(create_wire_adapter(wire), _Transport(pieces),
                        WireOptions(model="m", stream=True), price=_price, retry=None)


async def _via_complete(wire: str, pieces: Sequence[bytes]) -> tuple[list[object], Any]:
    seen: list[StreamEvent] = []
    try:
        turn: Any = await _model(wire, pieces).complete([UserMessage(content="x")],
                                                        ModelRequest(), seen.append)
    except Exception as exc:  # noqa: BLE001 - compared below
        turn = (type(exc), str(exc))
    return _plain(seen), turn


async def _via_open_stream(wire: str, pieces: Sequence[bytes]) -> tuple[list[object], Any]:
    seen: list[StreamEvent] = []
    collector = TurnCollector(price=_price)
    try:
        async with _model(wire, pieces).open_stream([UserMessage(content="x")]) as events:
            async for event in events:
                seen.append(event)
                collector.observe(event)
        turn: Any = collector.result()
    except Exception as exc:  # noqa: BLE001 - compared below
        turn = (type(exc), str(exc))
    return _plain(seen), turn


@given(st.sampled_from(CASES), st.lists(st.integers(0, 20_000), max_size=12), st.booleans())
@settings(max_examples=200, deadline=None)
def test_complete_sees_and_folds_what_open_stream_yields(case: tuple[str, str], cuts: list[int],
                                                         cut_short: bool) -> None:
    wire, name = case
    data = LEAKY_ERROR if name == "<leaky error>" else fixture(wire, name)
    points = sorted({c % (len(data) + 1) for c in cuts})
    bounds = [0, *points, len(data)]
    pieces = [data[a:b] for a, b in zip(bounds, bounds[1:])]
    if cut_short:
        pieces.pop()  # the connection ended early: the decoder's end() decides
    folded = anyio.run(_via_complete, wire, pieces)
    streamed = anyio.run(_via_open_stream, wire, pieces)
    assert folded == streamed
    assert KEY not in repr(folded)


def test_the_leaky_error_is_raised_scrubbed_by_both() -> None:
    # The property above would pass vacuously if the error case never raised: pin it down.
    seen, outcome = anyio.run(_via_complete, "openai_chat", [LEAKY_ERROR])
    assert isinstance(outcome, tuple) and "over quota" in outcome[1] and KEY not in outcome[1]
    assert anyio.run(_via_open_stream, "openai_chat", [LEAKY_ERROR]) == (seen, outcome)
