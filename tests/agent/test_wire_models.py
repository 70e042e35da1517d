"""The wire's models under the agent API, over real HTTP to the scripted provider server:
ModelAdapter (native JSON-schema mode, additional options, the signal) and RoutedModel (fallback,
structured output through the forced output tool); tests/agent/test_routed_agent_model.py
has the rest of the route's agent surface."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from bindloop.agent import (
    create_agent,
    equip_instruction,
    prompt_agent,
    prompt_chat,
    run_with,
)
from bindloop.contracts import ModelTurnResult, ToolCall, TurnUsage
from bindloop.errors import RunCancelledError
from bindloop.hosts.transports.httpx import HttpxTransport
from harness.fixtures.scripted_server import ScriptedProviderServer, ScriptedReply, turn_reply
from bindloop.routing import (
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteStage,
    canonical_model_id,
    provider_id,
)
from bindloop.signal import AbortController
from bindloop.wire import AnthropicAdapter, ModelAdapter, OpenAIChatAdapter, RoutedModel, \
    WireOptions

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server() -> Iterator[ScriptedProviderServer]:
    with ScriptedProviderServer() as srv:
        yield srv


class Point(msgspec.Struct):
    x: int
    y: int


def _chat(server: ScriptedProviderServer, prefix: str = "openai") -> ModelAdapter:
    chat = OpenAIChatAdapter()
    return ModelAdapter(chat, HttpxTransport(server.base_url(prefix),
                                             headers=chat.auth_headers("k")),
                        WireOptions(model="gpt-x", stream=True))


def _text(text: str) -> ScriptedReply:
    return turn_reply("openai_chat", ModelTurnResult(text=text, usage=TurnUsage(
        input_tokens=10, output_tokens=5), finish_reason="stop"), stream=True, model="gpt-x")


async def _point(_: None) -> Point:
    equip_instruction("a point")
    return await prompt_agent(Point, additional_options={"temperature": 0.25})


async def test_model_adapter_sends_the_strict_schema_and_options(
        server: ScriptedProviderServer) -> None:
    server.enqueue("openai", _text('{"x": 1}'), _text('{"x": 1, "y": 2}'))
    model = _chat(server)
    assert await create_agent(id="p", handler=_point, model=model)(None) == Point(x=1, y=2)
    first, second = (msgspec.json.decode(r.body) for r in server.requests)
    assert first["response_format"]["json_schema"]["name"] == "Point"
    assert first["response_format"]["json_schema"]["strict"] is True
    assert first["temperature"] == 0.25 and first["stream"] is True
    assert second["messages"][-1]["role"] == "user"
    assert "does not match the schema" in second["messages"][-1]["content"]


async def test_an_aborted_run_signal_cancels_the_prompt(server: ScriptedProviderServer) -> None:
    controller = AbortController()
    controller.abort("user pressed stop")
    model = _chat(server)

    async def handler(_: None) -> str:
        equip_instruction("hi")
        return (await prompt_chat()).data

    with pytest.raises(RunCancelledError):
        await run_with(lambda: create_agent(id="s", handler=handler)(None), model=model,
                       signal=controller.signal)
    assert server.requests == []


async def test_routed_model_falls_back_and_uses_the_output_tool(
        server: ScriptedProviderServer) -> None:
    server.set_responder("primary", lambda _r: ScriptedReply(
        status=503, headers=(("content-type", "application/json"),),
        chunks=(b'{"type":"error","error":{"type":"overloaded_error","message":"busy"}}',),
        streamed=False))
    answer = ModelTurnResult(tool_calls=(ToolCall(id="out_1", name="Point",
                                                  arguments='{"x": 3, "y": 4}'),),
                             finish_reason="tool_calls")
    server.enqueue("backup", turn_reply("openai_chat", answer, stream=True, model="gpt-x"))
    model_id = canonical_model_id("demo/point")
    plan = RoutePlan(stages=(RouteStage(
        role="primary", model=model_id,
        policy=OrderedPolicy(providers=(provider_id("primary"), provider_id("backup"))),
        candidates=(
            RouteCandidate(provider_id=provider_id("primary"), canonical_model_id=model_id,
                           provider_invocation_model="claude-x", credential_source="platform"),
            RouteCandidate(provider_id=provider_id("backup"), canonical_model_id=model_id,
                           provider_invocation_model="gpt-x", credential_source="platform"),
        )),))
    anthropic = AnthropicAdapter()
    models: dict[str, Any] = {
        "primary": ModelAdapter(anthropic, HttpxTransport(server.base_url("primary")),
                                WireOptions(model="claude-x", max_tokens=100)),
        "backup": _chat(server, "backup"),
    }
    routed = RoutedModel(plan=plan, models=models, id="point-route", structured_output="tool")
    assert routed.structured_output == "tool"

    async def handler(_: None) -> Point:
        equip_instruction("a point")
        return await prompt_agent(Point)

    assert await create_agent(id="r", handler=handler, model=routed)(None) == Point(x=3, y=4)
    backup = [msgspec.json.decode(r.body) for r in server.requests
              if r.path.startswith("/backup")]
    assert [t["function"]["name"] for t in backup[0]["tools"]] == ["Point"]
    assert backup[0]["tool_choice"] == {"type": "function", "function": {"name": "Point"}}
    assert "response_format" not in backup[0]
