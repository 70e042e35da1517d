"""One path per job: every way of watching a prompt (nobody, ``on_stream``, a trace, snapshots)
sees the same turn, priced once by the model's own fold."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel

from bindloop.agent import create_agent, equip_instruction, on_stream, prompt_chat, run_with
from bindloop.wire import HttpRequest, ModelAdapter, WireOptions, create_wire_adapter


def _sse(text: str) -> list[bytes]:
    def chunk(body: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    return [chunk({**base, "choices": [{"index": 0, "delta": {"content": part},
                                        "finish_reason": None}]}) for part in text.split(" ")] + [
        chunk({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}),
        b"data: [DONE]\n\n"]


class _Body:
    status = 200
    headers: tuple[tuple[str, str], ...] = ()

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self._chunks = chunks

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for c in self._chunks:
            await anyio.lowlevel.checkpoint()
            yield c


class ScriptedTransport:
    """Answers every request with the same streamed Chat Completions reply."""

    def __init__(self, text: str) -> None:
        self.chunks = _sse(text)
        self.requests = 0

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Body]:
        self.requests += 1
        yield _Body(self.chunks)


def _priced_adapter() -> ModelAdapter:
    return ModelAdapter(create_wire_adapter("openai_chat"), ScriptedTransport("hello there"),
                        WireOptions(model="m", stream=True), price=lambda usage: 7)


async def _chat(watch: bool) -> Any:
    seen: list[object] = []

    async def consume(events: AsyncIterator[object]) -> None:
        async for event in events:
            seen.append(event)

    async def handler(_: None) -> Any:
        equip_instruction("hi")
        if watch:
            on_stream(consume)
        return await prompt_chat()

    chat = await run_with(create_agent(id="a", handler=handler), initial_props=None,
                          model=_priced_adapter())
    return chat, seen


def test_cost_is_the_models_price_watched_or_not() -> None:
    plain, _ = anyio.run(_chat, False)
    watched, events = anyio.run(_chat, True)
    assert events  # the consumer did see the stream
    assert plain.data == watched.data == "hellothere"
    assert plain.stats.cost == 7
    assert watched.stats.cost == 7
