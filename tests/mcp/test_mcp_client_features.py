"""The 2025-11-25 client features against the official SDK's server over loopback HTTP: sampling
with tools (the server's ``forecast`` tool shown to the client's model, its ``tool_use`` answered
and the ``tool_result`` read back), URL-mode elicitation (the request path and the
URLElicitationRequired error with its completion notification), and the capabilities declared."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from bindloop.contracts import (
    AssistantMessage,
    Message,
    ModelTurnResult,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from bindloop.hosts.httpx_transport import HttpxTransport
from bindloop.mcp import (
    McpHttpClient,
    McpRequestRefused,
    McpSampling,
    McpServerRequest,
    SamplingRequest,
    ServerRequestHandlers,
)
from bindloop.mcp._serve import serve_request

pytestmark = pytest.mark.anyio


@pytest.fixture
async def transport(reference_url: str) -> AsyncIterator[HttpxTransport]:
    t = HttpxTransport(reference_url)
    try:
        yield t
    finally:
        await t.aclose()


async def test_sampling_with_tools_round_trips_tool_use_and_tool_result(
        transport: HttpxTransport) -> None:
    seen: list[tuple[list[Message], list[Any]]] = []
    policies: list[SamplingRequest] = []

    async def model(messages: list[Message], tools: list[Any]) -> ModelTurnResult:
        seen.append((messages, tools))
        if not any(isinstance(m, ToolMessage) for m in messages):
            return ModelTurnResult(text="Let me look.", tool_calls=(ToolCall(
                id="call-1", name="forecast", arguments='{"city": "Lyon"}'),),
                finish_reason="tool_calls")
        tool_text = next(m.content for m in messages if isinstance(m, ToolMessage))
        return ModelTurnResult(text=f"It is {tool_text}.", finish_reason="stop")

    def policy(request: SamplingRequest) -> bool:
        policies.append(request)
        return True

    handlers = ServerRequestHandlers(sampling=McpSampling(model, policy=policy))
    async with McpHttpClient(transport, server="ref", handlers=handlers) as client:
        result = await client.call_tool("weather_report", {"city": "Lyon"})
    assert result.content[0]["text"] == "It is sunny in Lyon."
    first, second = seen
    assert first[1] == [ToolDefinition(
        name="forecast", description="Today's forecast for a city",
        parameters=first[1][0].parameters)]
    assert first[1][0].parameters["required"] == ["city"]
    assert first[0] == [UserMessage(content="Weather in Lyon?")]
    # The second request replays the model's tool use and carries the server's tool result.
    assert second[0][1] == AssistantMessage(content="Let me look.", tool_calls=(ToolCall(
        id="call-1", name="forecast", arguments='{"city":"Lyon"}'),))
    assert second[0][2] == ToolMessage(tool_call_id="call-1", content="sunny in Lyon")
    assert policies[0].tools is not None and policies[0].tools[0]["name"] == "forecast"


async def test_sampling_tools_capability_is_declared_only_for_mcp_sampling() -> None:
    async def model(messages: list[Message], tools: list[Any]) -> ModelTurnResult:
        return ModelTurnResult(text="x")

    async def raw(request: SamplingRequest) -> dict[str, Any]:
        return {}

    assert ServerRequestHandlers(sampling=McpSampling(model)).capabilities() == {
        "sampling": {"tools": {}}}
    assert ServerRequestHandlers(sampling=raw).capabilities() == {"sampling": {}}




def _ask(**extra: Any) -> SamplingRequest:
    return SamplingRequest(messages=[{"role": "user", "content": {"type": "text", "text": "hi"}}],
                           max_tokens=10, tools=[{"name": "forecast", "inputSchema": {
                               "type": "object", "properties": {}}}], **extra)


async def test_tool_choice_none_hides_the_tools_and_required_insists_on_a_call() -> None:
    shown: list[list[Any]] = []

    async def chatty(messages: list[Message], tools: list[Any]) -> ModelTurnResult:
        shown.append(tools)
        return ModelTurnResult(text="no tools needed")

    sampling = McpSampling(chatty)
    answer = await sampling(_ask(tool_choice={"mode": "none"}))
    assert shown[-1] == [] and answer["content"] == {"type": "text", "text": "no tools needed"}
    with pytest.raises(McpRequestRefused, match="without a tool call"):
        await sampling(_ask(tool_choice={"mode": "required"}))
    with pytest.raises(McpRequestRefused, match="not one of") as bad:
        await sampling(_ask(tool_choice={"mode": "sometimes"}))
    assert bad.value.code == -32602


async def test_a_call_to_a_tool_not_offered_or_with_bad_arguments_is_refused() -> None:
    async def rogue(messages: list[Message], tools: list[Any]) -> ModelTurnResult:
        return ModelTurnResult(tool_calls=(ToolCall(id="1", name="rm_rf", arguments="{}"),))

    async def garbled(messages: list[Message], tools: list[Any]) -> ModelTurnResult:
        return ModelTurnResult(tool_calls=(ToolCall(id="1", name="forecast", arguments="[1"),))

    with pytest.raises(McpRequestRefused, match="did not offer"):
        await McpSampling(rogue)(_ask())
    with pytest.raises(McpRequestRefused, match="not a JSON object"):
        await McpSampling(garbled)(_ask())


async def test_tool_results_must_answer_the_tool_uses_before_them() -> None:
    async def model(messages: list[Message], tools: list[Any]) -> ModelTurnResult:
        raise AssertionError("never reached")

    orphan = SamplingRequest(max_tokens=5, messages=[
        {"role": "user", "content": [{"type": "tool_result", "toolUseId": "nope",
                                      "content": []}]}])
    with pytest.raises(McpRequestRefused, match="answers no tool_use") as refused:
        await McpSampling(model)(orphan)
    assert refused.value.code == -32602
    mixed = SamplingRequest(max_tokens=5, messages=[
        {"role": "assistant", "content": [{"type": "tool_use", "id": "u1", "name": "f",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "toolUseId": "u1", "content": []},
                                     {"type": "text", "text": "and more"}]}])
    with pytest.raises(McpRequestRefused, match="alone"):
        await McpSampling(model)(mixed)


async def test_a_raw_sampling_port_refuses_requests_with_tools() -> None:
    async def raw(request: SamplingRequest) -> dict[str, Any]:
        raise AssertionError("never reached")

    asked = McpServerRequest(request_id=1, method="sampling/createMessage", params={
        "messages": [], "maxTokens": 5, "tools": [{"name": "f", "inputSchema": {}}]})
    with pytest.raises(McpRequestRefused, match="sampling.tools") as refused:
        await serve_request(ServerRequestHandlers(sampling=raw), asked)
    assert refused.value.code == -32602
