"""The 2025-11-25 client features against the official SDK's server over loopback HTTP: sampling
with tools (the server's ``forecast`` tool shown to the client's model, its ``tool_use`` answered
and the ``tool_result`` read back), URL-mode elicitation (the request path and the
URLElicitationRequired error with its completion notification), and the capabilities declared."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.contracts import (
    AssistantMessage,
    Message,
    ModelTurnResult,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from bindloop.hosts.transports.httpx import HttpxTransport
from bindloop.model import ModelRequest
from bindloop.testing import function_model
from bindloop.mcp import McpHttpClient
from bindloop.mcp import McpClientPorts, McpLimits
from bindloop.mcp.server import McpRequestRefused
from bindloop.mcp.server_requests import (
    ElicitationRequest,
    ElicitationResult,
    McpSampling,
    McpUrlElicitationRequired,
    SamplingRequest,
    ServerRequestHandlers,
)
from bindloop.mcp.session import (
    McpElicitationComplete,
    McpEvent,
    McpServerRequest,
)
from bindloop.mcp._serve import elicit, serve_request

pytestmark = pytest.mark.anyio


@pytest.fixture
async def transport(reference_features_url: str) -> AsyncIterator[HttpxTransport]:
    t = HttpxTransport(reference_features_url)
    try:
        yield t
    finally:
        await t.aclose()


async def test_sampling_with_tools_round_trips_tool_use_and_tool_result(
        transport: HttpxTransport) -> None:
    seen: list[tuple[list[Message], list[Any]]] = []
    policies: list[SamplingRequest] = []

    async def model(messages: Sequence[Message], request: ModelRequest) -> ModelTurnResult:
        seen.append((list(messages), list(request.tools)))
        if not any(isinstance(m, ToolMessage) for m in messages):
            return ModelTurnResult(text="Let me look.", tool_calls=(ToolCall(
                id="call-1", name="forecast", arguments='{"city": "Lyon"}'),),
                finish_reason="tool_calls")
        tool_text = next(m.content for m in messages if isinstance(m, ToolMessage))
        return ModelTurnResult(text=f"It is {tool_text}.", finish_reason="stop")

    def policy(request: SamplingRequest) -> bool:
        policies.append(request)
        return True

    handlers = ServerRequestHandlers(sampling=McpSampling(function_model(model), policy=policy))
    async with McpHttpClient(transport, server="ref", modern_versions=(), handlers=handlers) as client:
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
    async def model(messages: Sequence[Message], request: ModelRequest) -> ModelTurnResult:
        return ModelTurnResult(text="x")

    async def raw(request: SamplingRequest) -> dict[str, Any]:
        return {}

    assert ServerRequestHandlers(sampling=McpSampling(function_model(model))).capabilities() == {
        "sampling": {"tools": {}}}
    assert ServerRequestHandlers(sampling=raw).capabilities() == {"sampling": {}}




def _ask(**extra: Any) -> SamplingRequest:
    return SamplingRequest(messages=[{"role": "user", "content": {"type": "text", "text": "hi"}}],
                           max_tokens=10, tools=[{"name": "forecast", "inputSchema": {
                               "type": "object", "properties": {}}}], **extra)


async def test_tool_choice_none_hides_the_tools_and_required_insists_on_a_call() -> None:
    shown: list[list[Any]] = []

    async def chatty(messages: Sequence[Message], request: ModelRequest) -> ModelTurnResult:
        shown.append(list(request.tools))
        return ModelTurnResult(text="no tools needed")

    sampling = McpSampling(function_model(chatty))
    answer = await sampling(_ask(tool_choice={"mode": "none"}))
    assert shown[-1] == [] and answer["content"] == {"type": "text", "text": "no tools needed"}
    with pytest.raises(McpRequestRefused, match="without a tool call"):
        await sampling(_ask(tool_choice={"mode": "required"}))
    with pytest.raises(McpRequestRefused, match="not one of") as bad:
        await sampling(_ask(tool_choice={"mode": "sometimes"}))
    assert bad.value.code == -32602


async def test_a_call_to_a_tool_not_offered_or_with_bad_arguments_is_refused() -> None:
    async def rogue(messages: Sequence[Message], request: ModelRequest) -> ModelTurnResult:
        return ModelTurnResult(tool_calls=(ToolCall(id="1", name="rm_rf", arguments="{}"),))

    async def garbled(messages: Sequence[Message], request: ModelRequest) -> ModelTurnResult:
        return ModelTurnResult(tool_calls=(ToolCall(id="1", name="forecast", arguments="[1"),))

    with pytest.raises(McpRequestRefused, match="did not offer"):
        await McpSampling(function_model(rogue))(_ask())
    with pytest.raises(McpRequestRefused, match="not a JSON object"):
        await McpSampling(function_model(garbled))(_ask())


async def test_tool_results_must_answer_the_tool_uses_before_them() -> None:
    async def model(messages: Sequence[Message], request: ModelRequest) -> ModelTurnResult:
        raise AssertionError("never reached")

    orphan = SamplingRequest(max_tokens=5, messages=[
        {"role": "user", "content": [{"type": "tool_result", "toolUseId": "nope",
                                      "content": []}]}])
    with pytest.raises(McpRequestRefused, match="answers no tool_use") as refused:
        await McpSampling(function_model(model))(orphan)
    assert refused.value.code == -32602
    mixed = SamplingRequest(max_tokens=5, messages=[
        {"role": "assistant", "content": [{"type": "tool_use", "id": "u1", "name": "f",
                                           "input": {}}]},
        {"role": "user", "content": [{"type": "tool_result", "toolUseId": "u1", "content": []},
                                     {"type": "text", "text": "and more"}]}])
    with pytest.raises(McpRequestRefused, match="alone"):
        await McpSampling(function_model(model))(mixed)


async def test_a_raw_sampling_port_refuses_requests_with_tools() -> None:
    async def raw(request: SamplingRequest) -> dict[str, Any]:
        raise AssertionError("never reached")

    asked = McpServerRequest(request_id=1, method="sampling/createMessage", params={
        "messages": [], "maxTokens": 5, "tools": [{"name": "f", "inputSchema": {}}]})
    with pytest.raises(McpRequestRefused, match="sampling.tools") as refused:
        await serve_request(ServerRequestHandlers(sampling=raw), asked)
    assert refused.value.code == -32602


async def test_url_elicitation_request_path_reaches_the_url_handler(
        transport: HttpxTransport) -> None:
    asked: list[ElicitationRequest] = []

    async def consent(request: ElicitationRequest) -> ElicitationResult:
        asked.append(request)
        return ElicitationResult(action="accept")

    async def form(request: ElicitationRequest) -> ElicitationResult:
        raise AssertionError("a URL request never reaches the form handler")

    handlers = ServerRequestHandlers(elicitation=form, url_elicitation=consent)
    assert handlers.capabilities()["elicitation"] == {"form": {}, "url": {}}
    async with McpHttpClient(transport, server="ref", modern_versions=(), handlers=handlers) as client:
        result = await client.call_tool("open_dashboard", {})
        assert result.content[0]["text"] == "accept"
        # This server never announces completion: waiting says so instead of hanging.
        assert await client.wait_for_elicitation("export-42", timeout_ms=50) is False
        assert await client.wait_for_elicitation("never-asked", timeout_ms=None) is False
    assert [(a.mode, a.url, a.elicitation_id) for a in asked] == [
        ("url", "https://dashboard.example/export/42", "export-42")]


async def test_url_elicitation_required_is_shown_waited_for_and_the_call_retried(
        transport: HttpxTransport) -> None:
    events: list[McpEvent] = []
    shown: list[ElicitationRequest] = []

    async def browser(request: ElicitationRequest) -> ElicitationResult:
        shown.append(request)
        assert request.url is not None
        async with httpx.AsyncClient() as http:  # the user follows the link
            (await http.get(request.url)).raise_for_status()
        return ElicitationResult(action="accept")

    handlers = ServerRequestHandlers(url_elicitation=browser)
    async with McpHttpClient(transport, server="ref", modern_versions=(), handlers=handlers,
                             on_event=events.append,
                             limits=McpLimits(url_elicitation_wait_ms=20_000)) as client:
        started = anyio.current_time()
        result = await client.call_tool("link_account", {})
        elapsed = anyio.current_time() - started
    assert result.content[0]["text"] == "account linked"
    assert len(shown) == 1 and shown[0].mode == "url" and "/verify/" in (shown[0].url or "")
    # Woken by the server's notifications/elicitation/complete, not by the 20 s bound.
    assert [e for e in events if isinstance(e, McpElicitationComplete)] == [
        McpElicitationComplete(elicitation_id=shown[0].elicitation_id or "")]
    assert elapsed < 10


async def test_a_declined_url_elicitation_raises_the_typed_error(
        transport: HttpxTransport) -> None:
    async def decline(request: ElicitationRequest) -> ElicitationResult:
        return ElicitationResult(action="decline")

    async with McpHttpClient(transport, server="ref", modern_versions=(), handlers=ServerRequestHandlers(
            url_elicitation=decline)) as client:
        with pytest.raises(McpUrlElicitationRequired) as refused:
            await client.call_tool("link_account", {})
    assert refused.value.code == -32042
    (needed,) = refused.value.elicitations
    assert needed.mode == "url" and needed.elicitation_id and "/verify/" in (needed.url or "")


async def test_without_a_url_handler_the_error_is_raised_and_url_requests_refused(
        transport: HttpxTransport) -> None:
    async def form(request: ElicitationRequest) -> ElicitationResult:
        return ElicitationResult(action="accept", content={})

    handlers = ServerRequestHandlers(elicitation=form)
    assert handlers.capabilities()["elicitation"] == {"form": {}}
    async with McpHttpClient(transport, server="ref", modern_versions=(), handlers=handlers) as client:
        with pytest.raises(McpUrlElicitationRequired):
            await client.call_tool("link_account", {})
    url_request = ElicitationRequest(message="go", mode="url", url="https://x.example",
                                     elicitation_id="e1")
    with pytest.raises(McpRequestRefused, match="URL-mode") as refused:
        await elicit(handlers, url_request)
    assert refused.value.code == -32602


async def test_url_answers_carry_no_content_and_need_an_id() -> None:
    async def chatty(request: ElicitationRequest) -> ElicitationResult:
        return ElicitationResult(action="accept", content={"password": "hunter2"})

    handlers = ServerRequestHandlers(url_elicitation=chatty)
    with pytest.raises(McpRequestRefused, match="without content"):
        await elicit(handlers, ElicitationRequest(message="go", mode="url",
                                                  url="https://x.example", elicitation_id="e"))
    with pytest.raises(McpRequestRefused, match="elicitationId") as refused:
        await elicit(handlers, ElicitationRequest(message="go", mode="url",
                                                  url="https://x.example"))
    assert refused.value.code == -32602


def _steps(result: Any) -> list[tuple[str, Any]]:
    return [(what, answer) for what, answer in json.loads(result.content[0]["text"])]


async def test_a_task_augmented_sampling_request_runs_as_a_task_the_server_polls(
        transport: HttpxTransport) -> None:
    async def model(messages: Sequence[Message], request: ModelRequest) -> ModelTurnResult:
        await anyio.sleep(1.0)  # long enough for the server to see the task working, even loaded
        return ModelTurnResult(text="Tasks let work outlive a request.")

    times = iter(range(1_767_225_600_000, 1_767_225_600_000 + 10_000_000, 250))
    handlers = ServerRequestHandlers(sampling=McpSampling(function_model(model), model_name="m"),
                                     tasks=True)
    assert handlers.capabilities()["tasks"] == {
        "list": {}, "cancel": {}, "requests": {"sampling": {"createMessage": {}}}}
    async with McpHttpClient(transport, server="ref", modern_versions=(), handlers=handlers,
                             ports=McpClientPorts(wall_clock=lambda: float(next(times)))) as client:
        steps = _steps(await client.call_tool(
            "task_round", {"method": "sampling/createMessage", "cancel": False}))
        kept = client.server_tasks()
        client.forget_server_tasks()  # what a session renewal does
        assert client.server_tasks() == ()
    created = steps[0][1]["task"]
    assert created["taskId"] == "task-1" and created["status"] == "working"
    assert created["ttl"] == 60_000 and created["createdAt"] == "2026-01-01T00:00:00.250Z"
    assert [t["taskId"] for t in steps[1][1]["tasks"]] == ["task-1"]
    polls = [answer["status"] for what, answer in steps[:-1] if what == "tasks/get"]
    assert polls[0] == "working" and polls[-1] == "completed"
    result = next(answer for what, answer in steps if what == "tasks/result")
    assert result["content"] == {"type": "text", "text": "Tasks let work outlive a request."}
    assert result["_meta"]["io.modelcontextprotocol/related-task"] == {"taskId": "task-1"}
    assert steps[-1] == ("tasks/get", {"error": -32602, "message": "no task 'no-such-task' here"})
    assert [t.status for t in kept] == ["completed"]


async def test_a_task_augmented_elicitation_is_cancelled_by_the_server(
        transport: HttpxTransport) -> None:
    cancelled = anyio.Event()

    async def never_answers(request: ElicitationRequest) -> ElicitationResult:
        try:
            await anyio.sleep_forever()
        finally:
            cancelled.set()
        raise AssertionError("unreachable")

    handlers = ServerRequestHandlers(elicitation=never_answers, tasks=True)
    async with McpHttpClient(transport, server="ref", modern_versions=(), handlers=handlers) as client:
        steps = _steps(await client.call_tool(
            "task_round", {"method": "elicitation/create", "cancel": True}))
        assert cancelled.is_set()  # the user's form was closed: its work was cancelled
    assert steps[0][1]["task"]["status"] == "working"
    assert steps[2] == ("tasks/cancel", {**steps[2][1], "status": "cancelled"})
    assert steps[3][1]["error"] == -32602  # cancelling a cancelled task is refused
    assert steps[4][0] == "tasks/result" and steps[4][1]["error"] == -32603


async def test_a_failed_task_answers_tasks_result_with_the_requests_own_error(
        transport: HttpxTransport) -> None:
    async def model(messages: Sequence[Message], request: ModelRequest) -> ModelTurnResult:
        raise AssertionError("refused before the model")

    handlers = ServerRequestHandlers(
        sampling=McpSampling(function_model(model), policy=lambda _: "no sampling today"),
        tasks=True)
    async with McpHttpClient(transport, server="ref", modern_versions=(), handlers=handlers) as client:
        steps = _steps(await client.call_tool(
            "task_round", {"method": "sampling/createMessage", "cancel": False}))
    final = [answer for what, answer in steps[:-1] if what == "tasks/get"][-1]
    assert final["status"] == "failed" and "no sampling today" in final["statusMessage"]
    result = next(answer for what, answer in steps if what == "tasks/result")
    assert result == {"error": -1, "message": "sampling refused: no sampling today"}


async def test_without_tasks_a_task_augmented_request_is_answered_directly(
        transport: HttpxTransport) -> None:
    async def model(messages: Sequence[Message], request: ModelRequest) -> ModelTurnResult:
        return ModelTurnResult(text="direct")

    handlers = ServerRequestHandlers(sampling=McpSampling(function_model(model)))
    assert "tasks" not in handlers.capabilities()
    async with McpHttpClient(transport, server="ref", modern_versions=(), handlers=handlers) as client:
        steps = _steps(await client.call_tool(
            "task_round", {"method": "sampling/createMessage", "cancel": False}))
    assert steps[0][1]["content"] == {"type": "text", "text": "direct"}
    assert steps[1][1]["error"] == -32601  # tasks/* are not served without the capability


async def test_the_agents_own_model_answers_sampling_with_tools(
        transport: HttpxTransport) -> None:
    """One scripted model is both the agent's model and the sampling port's: the agent
    calls ``weather_report``; inside it the server samples with its ``forecast`` tool, which the
    same model calls; the server's tool result comes back and the model answers; the agent
    finishes."""
    from bindloop.agent import ChatResult, create_agent, equip_instruction, equip_mcp, prompt_chat
    from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

    model = scripted_stream_model([
        tool_call_turn([tool_call("ref__weather_report", {"city": "Oslo"}, id="w1")]),
        tool_call_turn([tool_call("forecast", {"city": "Oslo"}, id="f1")]),  # sampling
        final_answer("Oslo looks sunny."),                                  # sampling
        final_answer("The forecast for Oslo is sunny."),
    ])
    handlers = ServerRequestHandlers(sampling=McpSampling(model, model_name="agent-model"))
    async with McpHttpClient(transport, server="ref", modern_versions=(), handlers=handlers) as client:
        async def handler(_: None) -> ChatResult:
            equip_instruction("What is the weather in Oslo?")
            await equip_mcp(client, allow=["weather_report"], prefix="ref")
            return await prompt_chat(max_turn_steps=3)

        result = await create_agent(id="weather", handler=handler, model=model)(None)
    assert result.stop_reason == "done" and result.data == "The forecast for Oslo is sunny."
    (answer,) = [m for m in result.delta if isinstance(m, ToolMessage)]
    assert "Oslo looks sunny." in str(answer.content)
    sampled = model.requests[1]
    assert [t.name for t in sampled.request.tools] == ["forecast"]
    assert sampled.request.tool_choice is None
    # The sampling follow-up carries the model's tool use and the server's tool result.
    assert ToolMessage(tool_call_id="f1", content="sunny in Oslo") in model.requests[2].messages


@st.composite
def _tool_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A sampling conversation as servers send it: a user question, then rounds of an assistant
    message with text and tool uses followed by a user message with one result per use."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": {"type": "text", "text": "q"}}]
    for round_ in range(draw(st.integers(0, 4))):
        uses = [{"type": "tool_use", "id": f"u{round_}-{i}", "name": draw(st.sampled_from(
                     ["forecast", "search"])),
                 "input": draw(st.dictionaries(st.sampled_from("abc"), st.integers(), max_size=2))}
                for i in range(draw(st.integers(1, 3)))]
        text = draw(st.one_of(st.none(), st.text(min_size=1, max_size=5)))
        blocks = ([{"type": "text", "text": text}] if text else []) + uses
        messages.append({"role": "assistant", "content": blocks})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "toolUseId": use["id"], "isError": draw(st.booleans()),
             "content": [{"type": "text", "text": draw(st.text(max_size=5))}]}
            for use in draw(st.permutations(uses))]})
    return messages


@given(conversation=_tool_conversations())
@settings(max_examples=80, deadline=None)
def test_sampled_tool_conversations_become_transcripts_providers_accept(
        conversation: list[dict[str, Any]]) -> None:
    """Every well-formed tool_use / tool_result conversation maps to a transcript the healer
    has nothing to repair in: each result is a tool message answering a call of the assistant
    message before it, in the server's order, with its error flag kept."""
    from bindloop.mcp._sampling import sampling_messages
    from bindloop.transcript import validate_and_heal_messages

    mapped = sampling_messages(SamplingRequest(messages=conversation, max_tokens=5))
    assert validate_and_heal_messages(mapped, for_request=False).issues == ()
    results = [b for m in conversation if isinstance(m["content"], list)
               for b in m["content"] if b["type"] == "tool_result"]
    tools = [m for m in mapped if isinstance(m, ToolMessage)]
    assert [(t.tool_call_id, t.is_error) for t in tools] == [
        (b["toolUseId"], b["isError"]) for b in results]
    calls = [c for m in mapped if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert {c.id for c in calls} == {t.tool_call_id for t in tools}
