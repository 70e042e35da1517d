"""A routed model streams a healthy primary live by default (issue 20, item 4), measured over
real HTTP on 127.0.0.1 as a user sees it: the spread between the first and the last text delta
an ``on_stream`` consumer receives, for a primary that sends one word every 50 ms."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import pytest

from bindloop.agent import create_agent, equip_instruction, on_stream, prompt_chat
from bindloop.model import ModelRequest
from bindloop.completion import TextEvent
from bindloop.wire import StreamBudgets
from bindloop.hosts.transports.httpx import HttpxTransport
from harness.fixtures.provider_replies import sse_event
from harness.fixtures.scripted_server import ScriptedProviderServer, ScriptedReply
from bindloop.routing import (
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteStage,
    canonical_model_id,
    provider_id,
)
from bindloop.wire import ModelAdapter, RoutedModel, WireOptions, create_wire_adapter

pytestmark = pytest.mark.anyio

WORDS = ["Lisbon ", "is ", "sunny ", "and ", "warm ", "today."]
GAP_S = 0.05


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server() -> Iterator[ScriptedProviderServer]:
    with ScriptedProviderServer() as srv:
        yield srv


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return sse_event({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
                      "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _slow_answer() -> ScriptedReply:
    chunks = [_chunk({"role": "assistant", "content": ""})]
    chunks += [_chunk({"content": w}) for w in WORDS]
    chunks += [_chunk({}, "stop"), sse_event("[DONE]")]
    return ScriptedReply(headers=(("content-type", "text/event-stream"),), chunks=tuple(chunks),
                         delay_s=GAP_S)


def _route(server: ScriptedProviderServer, streaming: Any = None) -> RoutedModel:
    model_id = canonical_model_id("demo/m")
    names = ["primary", "backup"]
    models = {}
    for name in names:
        adapter = create_wire_adapter("openai_chat")
        models[name] = ModelAdapter(
            adapter, HttpxTransport(server.base_url(name), headers=adapter.auth_headers("k")),
            WireOptions(model="unused", stream=True),
            budgets=StreamBudgets(first_token_ms=5000, inter_chunk_ms=2000, total_ms=10000))
    plan = RoutePlan(stages=(RouteStage(
        role="primary", model=model_id,
        policy=OrderedPolicy(providers=tuple(provider_id(n) for n in names)),
        candidates=tuple(RouteCandidate(provider_id=provider_id(n), canonical_model_id=model_id,
                                        provider_invocation_model=f"{n}-model",
                                        credential_source="platform") for n in names)),))
    return RoutedModel(plan=plan, models=models, streaming=streaming)


async def _spread(server: ScriptedProviderServer, **options: Any) -> tuple[float, str]:
    server.enqueue("primary", _slow_answer())
    arrivals: list[float] = []

    async def handler(_: None) -> str:
        equip_instruction("weather?")

        async def ui(stream: Any) -> None:
            async for envelope in stream:
                if isinstance(envelope.event, TextEvent) and envelope.event.content:
                    arrivals.append(anyio.current_time())

        on_stream(ui)
        return (await prompt_chat()).data

    model = _route(server, **options)
    with anyio.fail_after(20):
        text = await create_agent(id="live", handler=handler, model=model)(None)
    assert len(arrivals) == len(WORDS)
    return arrivals[-1] - arrivals[0], text


async def test_a_routed_model_streams_a_healthy_primary_live_by_default(
        server: ScriptedProviderServer) -> None:
    default, text = await _spread(server)
    settled, _ = await _spread(server, streaming="settled")
    print(f"delta spread over loopback: default {default:.3f} s, settled {settled:.3f} s "
          f"(the primary sends a word every {GAP_S} s)")
    assert text == "".join(WORDS)
    # Live: the deltas arrive as the provider sends them (5 gaps of 50 ms; a slow machine only
    # widens it). Settled: held until the attempt ends, released together.
    assert default >= 0.6 * GAP_S * (len(WORDS) - 1)
    assert settled < default / 2


async def test_call_model_on_reset_retracts_a_failed_attempts_events(
        server: ScriptedProviderServer) -> None:
    """The wire port under the agent's "live": with ``on_reset`` every attempt streams at once,
    its content does not clamp the route, and the fallback is announced before its events."""
    from bindloop.contracts import UserMessage

    dropping = _slow_answer()
    server.enqueue("primary", ScriptedReply(headers=dropping.headers, chunks=dropping.chunks,
                                            drop_after=3))  # role + two words, then gone
    server.enqueue("backup", ScriptedReply(headers=dropping.headers, chunks=dropping.chunks))
    seen: list[str] = []
    routed = _route(server)
    turn = await routed.complete(
        [UserMessage(content="weather?")], ModelRequest(),
        lambda e: seen.append(e.content) if isinstance(e, TextEvent) and e.content else None,
        lambda: seen.append("<reset>"))
    assert turn.text == "".join(WORDS)
    assert seen == [*WORDS[:2], "<reset>", *WORDS]
    attempts = routed.last_result.attempts  # type: ignore[union-attr]
    assert [(a.outcome, a.produced_output) for a in attempts] == [("failed", False),
                                                                 ("succeeded", False)]


async def test_a_route_behind_a_stream_only_wrapper_still_falls_back_after_text(
        server: ScriptedProviderServer) -> None:
    """Behind ``create_limit_middleware`` (the Worker's path) the route keeps its own fold: a primary
    that drops after some text still falls back."""
    from bindloop.agent import augment_model
    from bindloop.agent.limits import create_simple_limit_middleware

    dropping = _slow_answer()
    server.enqueue("primary", ScriptedReply(headers=dropping.headers, chunks=dropping.chunks,
                                            drop_after=3))
    server.enqueue("backup", ScriptedReply(headers=dropping.headers, chunks=dropping.chunks))
    model = augment_model(_route(server), [create_simple_limit_middleware(concurrency=1)])

    async def handler(_: None) -> str:
        equip_instruction("weather?")
        return (await prompt_chat()).data

    with anyio.fail_after(20):
        assert await create_agent(id="w", handler=handler, model=model)(None) == "".join(WORDS)
