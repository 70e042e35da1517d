"""Issue 23 end to end over real HTTP on 127.0.0.1: the scripted server replays the recorded
shapes, ``run_tool_loop`` drives a ``ModelAdapter`` over ``HttpxTransport``, and the requests the
server received show what went back — the opaque items byte for byte, the cache controls — while
the run's stats carry the usage details."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from bindloop.contracts import (
    AssistantMessage,
    ModelTurnResult,
    ProviderItemPart,
    ToolCall,
    ToolDefinition,
    ToolOutcome,
    ToolResult,
    TurnUsage,
)
from bindloop.loop import ToolLoopParams, run_tool_loop
from bindloop.testing import fresh_state
from bindloop.wire import CachePolicy, ModelAdapter, WireOptions, create_wire_adapter

from .wire_fixtures import fixture

httpx = pytest.importorskip("httpx")
from bindloop.hosts.transports.httpx import HttpxTransport  # noqa: E402
from harness.fixtures.scripted_server import (  # noqa: E402
    ScriptedProviderServer,
    ScriptedReply,
    turn_reply,
)
from bindloop.loop import ToolRunner

pytestmark = pytest.mark.anyio

DONE = ModelTurnResult(text="done", usage=TurnUsage(input_tokens=9, output_tokens=1),
                       finish_reason="stop")
TOOLS = [ToolDefinition(name=n, parameters={"type": "object", "properties": {}})
         for n in ("get_forecast", "get_weather")]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedProviderServer]:
    with ScriptedProviderServer() as srv:
        yield srv


def _recorded(name: str, wire: str) -> ScriptedReply:
    """A fixture stream sent one SSE event per chunk, as a provider flushes them."""
    events = [e + b"\n\n" for e in fixture(wire, name).split(b"\n\n") if e.strip()]
    return ScriptedReply(headers=(("content-type", "text/event-stream"),), chunks=tuple(events))


async def _tool(call: ToolCall) -> ToolOutcome:
    return ToolResult(content=f"{call.name}: sunny")


async def _run(server: ScriptedProviderServer, prefix: str, wire: str,
               options: WireOptions) -> tuple[Any, list[Any], list[bytes]]:
    before = len(server.requests)
    model = ModelAdapter(create_wire_adapter(wire), HttpxTransport(server.base_url(prefix)),
                         options)
    state = fresh_state(prompt="plan my trip")
    result = await run_tool_loop(ToolLoopParams(
        state=state,
        model=model,
        max_iterations=4,
        runner=ToolRunner(run_tool_call=_tool, build_tools=lambda: TOOLS),
    ))
    bodies = [r.body for r in server.requests[before:] if r.path.startswith(f"/{prefix}")]
    return result, list(state.messages), bodies


async def test_responses_items_go_back_byte_for_byte_over_http(
        server: ScriptedProviderServer) -> None:
    server.enqueue("items", _recorded("stream_provider_items.sse", "openai_responses"),
                   turn_reply("openai_responses", DONE, stream=True))
    result, messages, bodies = await _run(server, "items", "openai_responses", WireOptions(
        model="gpt-x", stream=True, cache=CachePolicy(key="tenant-7", retention="24h")))
    assert result.stop_reason == "done"
    assert len(bodies) == 2
    assistant = next(m for m in messages if isinstance(m, AssistantMessage) and m.tool_calls)
    items = [p for p in assistant.content or () if isinstance(p, ProviderItemPart)]
    assert {p.kind for p in items} >= {"tool_search_call", "shell_call", "mcp_approval_request"}
    for part in items:
        assert part.data.encode() in bodies[1]  # sent back as received
    second = json.loads(bodies[1])
    assert (second["prompt_cache_key"], second["prompt_cache_retention"]) == ("tenant-7", "24h")
    stats = result.stats
    assert (stats.reasoning_tokens, stats.cached_input_tokens) == (64, 1024)


async def test_anthropic_call_in_message_start_is_dispatched_over_http(
        server: ScriptedProviderServer) -> None:
    server.enqueue("mstart", _recorded("stream_message_start_tool_use.sse", "anthropic"),
                   turn_reply("anthropic", DONE, stream=True))
    result, _, bodies = await _run(server, "mstart", "anthropic",
                                WireOptions(model="claude-x", stream=True, cache=CachePolicy()))
    assert result.stop_reason == "done"
    second = json.loads(bodies[1])
    results = [b for t in second["messages"] if t["role"] == "user" for b in t["content"]
               if isinstance(b, dict) and b.get("type") == "tool_result"]
    assert [r["tool_use_id"] for r in results] == ["toolu_01SbnXy8WkUBGxLqg4vT6eZd"]
    assert results[-1]["cache_control"] == {"type": "ephemeral"}  # the newest user turn
    assert second["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert result.stats.cached_input_tokens == 1536
