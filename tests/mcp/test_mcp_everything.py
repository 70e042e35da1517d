"""bindloop's client against the TypeScript "everything" server (npm
``@modelcontextprotocol/server-everything``, streamable HTTP on 127.0.0.1), on asyncio and trio:
tools with images and structured content, resources (list, read, templates, subscribe and the
updates), prompts and argument completion, and the server's own requests (sampling, elicitation,
roots) and logging."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio
import pytest

from bindloop.contracts import ImagePart, Message, ModelTurnResult, UserMessage
from bindloop.hosts.transports.httpx import HttpxTransport
from bindloop.testing import function_model
from bindloop.mcp import (
    McpLimits,
    McpHttpClient,
    load_mcp_tools,
)
from bindloop.mcp.features import (
    complete,
    get_prompt,
    list_prompts,
    list_resource_templates,
    list_resources,
    prompt_messages,
    read_resource,
    resource_parts,
    subscribe_resource,
    unsubscribe_resource,
)
from bindloop.mcp.server_requests import (
    ElicitationRequest,
    ElicitationResult,
    McpRoot,
    McpSampling,
    ServerRequestHandlers,
)
from bindloop.mcp.session import (
    McpEvent,
    McpServerNotification,
)

pytestmark = pytest.mark.anyio

asked: list[Any] = []


async def respond(messages: Sequence[Message], request: Any) -> ModelTurnResult:
    asked.append(messages)
    return ModelTurnResult(text="sampled by bindloop", finish_reason="stop")


async def elicit(request: ElicitationRequest) -> ElicitationResult:
    fields = (request.requested_schema or {}).get("properties", {})
    if "interpretation" in fields:  # the research task asking for a clarification
        return ElicitationResult(action="accept", content={"interpretation": "the protocol"})
    return ElicitationResult(action="accept", content={"name": "Ada Lovelace", "check": True})


@pytest.fixture
async def everything(everything_url: str) -> AsyncIterator[tuple[McpHttpClient, list[McpEvent]]]:
    events: list[McpEvent] = []
    transport = HttpxTransport(everything_url)
    handlers = ServerRequestHandlers(sampling=McpSampling(function_model(respond), model_name="bindloop-test"),
                                     elicitation=elicit,
                                     roots=[McpRoot(uri="file:///work/project", name="project")])
    try:
        async with McpHttpClient(transport, server="everything", handlers=handlers,
                                 on_event=events.append, limits=McpLimits(timeout_ms=20_000)) as client:
            yield client, events
    finally:
        await transport.aclose()


async def test_tools_images_and_structured_content(
        everything: tuple[McpHttpClient, list[McpEvent]]) -> None:
    client, _ = everything
    toolset = await load_mcp_tools(client, prefix="ev")
    tools = {t.mcp_name: t for t in toolset.tools}
    assert {"echo", "get-sum", "get-tiny-image", "get-structured-content",
            "trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"} <= set(tools)
    assert (await tools["echo"].execute({"message": "hi"}, None)).content == "Echo: hi"  # type: ignore[union-attr]
    image = await tools["get-tiny-image"].execute({}, None)
    assert any(isinstance(p, ImagePart) and p.media_type == "image/png"
               for p in image.content)  # type: ignore[union-attr]
    # get-structured-content declares an outputSchema; its answer is checked against it.
    weather = await client.call_tool("get-structured-content", {"location": "Chicago"})
    assert set(weather.structured_content) >= {"temperature", "conditions", "humidity"}


async def test_server_requests_sampling_elicitation_roots(
        everything: tuple[McpHttpClient, list[McpEvent]]) -> None:
    client, _ = everything
    sampled = await client.call_tool("trigger-sampling-request", {"prompt": "hello"})
    assert "sampled by bindloop" in str(sampled.content)
    assert any(isinstance(m, UserMessage) and "hello" in str(m.content)
               for messages in asked for m in messages)
    form = await client.call_tool("trigger-elicitation-request", {})
    assert "Ada Lovelace" in str(form.content)
    assert "pet-1" in str(form.content) or "Pet Type" in str(form.content)  # a default applied
    roots = await client.call_tool("get-roots-list", {})
    assert "file:///work/project" in str(roots.content)


async def test_resources_templates_and_parts(
        everything: tuple[McpHttpClient, list[McpEvent]]) -> None:
    client, _ = everything
    resources = await list_resources(client)
    assert resources and all(r.uri for r in resources)
    first = await read_resource(client, resources[0].uri)
    parts = resource_parts(first)
    assert parts and all(p.__class__.__name__ in ("TextPart", "FilePart", "ImagePart")
                         for p in parts)
    templates = await list_resource_templates(client)
    text_template = next(t for t in templates if "text" in t.uri_template)
    [content] = await read_resource(client, text_template.uri_template.replace(
        "{resourceId}", "7"))
    assert content.text is not None and "7" in content.text
    suggestion = await complete(client, ref="resource", name=text_template.uri_template,
                                argument="resourceId", value="1")
    assert all(v.startswith("1") for v in suggestion.values)


async def test_prompts_and_argument_completion(
        everything: tuple[McpHttpClient, list[McpEvent]]) -> None:
    client, _ = everything
    prompts = {p.name: p for p in await list_prompts(client)}
    assert {"simple-prompt", "args-prompt", "completable-prompt"} <= set(prompts)
    assert [a.name for a in prompts["args-prompt"].arguments] == ["city", "state"]
    assert prompts["args-prompt"].arguments[0].required
    got = await get_prompt(client, "args-prompt", {"city": "Paris"})
    [message] = prompt_messages(got)
    assert isinstance(message, UserMessage) and "Paris" in str(message.content)
    departments = await complete(client, ref="prompt", name="completable-prompt",
                                 argument="department", value="S")
    assert departments.values == ["Sales", "Support"]
    people = await complete(client, ref="prompt", name="completable-prompt", argument="name",
                            value="", context={"department": "Sales"})
    assert people.values == ["David", "Eve", "Frank"]


async def test_subscriptions_and_logging_arrive_on_the_get_stream(
        everything: tuple[McpHttpClient, list[McpEvent]]) -> None:
    client, events = everything
    resources = await list_resources(client)
    await subscribe_resource(client, resources[0].uri)
    await client.set_log_level("debug")
    await client.call_tool("toggle-subscriber-updates", {})
    await client.call_tool("toggle-simulated-logging", {})

    def methods() -> set[str]:
        return {e.method for e in events if isinstance(e, McpServerNotification)}

    with anyio.fail_after(15):  # the server sends both every 5 s
        while not {"notifications/resources/updated", "notifications/message"} <= methods():
            await anyio.sleep(0.1)
    updated = next(e for e in events if isinstance(e, McpServerNotification)
                   and e.method == "notifications/resources/updated")
    assert updated.params == {"uri": resources[0].uri}
    await client.call_tool("toggle-subscriber-updates", {})
    await client.call_tool("toggle-simulated-logging", {})
    await unsubscribe_resource(client, resources[0].uri)


async def test_an_agent_reads_a_resource_and_a_prompt_into_its_context(
        everything: tuple[McpHttpClient, list[McpEvent]]) -> None:
    from bindloop.agent import ChatResult, create_agent, equip_history, prompt_chat
    from bindloop.testing import final_answer, scripted_stream_model

    client, _ = everything
    template = next(t for t in await list_resource_templates(client) if "text" in t.uri_template)
    uri = template.uri_template.replace("{resourceId}", "3")
    model = scripted_stream_model([final_answer("read it")])

    async def handler(_: None) -> ChatResult:
        prompt = await get_prompt(client, "args-prompt", {"city": "Oslo"})
        contents = await read_resource(client, uri)
        equip_history([UserMessage(content=resource_parts(contents)), *prompt_messages(prompt)])
        return await prompt_chat()

    result = await create_agent(id="reader", handler=handler, model=model)(None)
    assert result.data == "read it"
    sent = str(model.requests[0].messages)
    assert uri in sent and "Oslo" in sent  # the resource (headed by its URI) and the prompt


async def test_a_tool_call_runs_as_a_task(everything: tuple[McpHttpClient, list[McpEvent]]) -> None:
    from bindloop.mcp.tasks import McpTask, get_task, list_tasks, run_tool_task

    client, _ = everything
    seen: list[McpTask] = []
    result = await run_tool_task(client, "simulate-research-query", {"topic": "sans-I/O"},
                                 ttl_ms=60_000, poll_ms=200, on_status=seen.append)
    assert "sans-I/O" in str(result.content) and not result.is_error
    assert seen[0].status == "working" and seen[0].task_id
    assert (await get_task(client, seen[0].task_id)).status == "completed"
    assert seen[0].task_id in [t.task_id for t in await list_tasks(client)]


async def test_a_task_that_needs_input_asks_through_the_elicitation_handler(
        everything: tuple[McpHttpClient, list[McpEvent]]) -> None:
    from bindloop.mcp.tasks import McpTask, run_tool_task

    client, _ = everything
    seen: list[McpTask] = []
    result = await run_tool_task(client, "simulate-research-query",
                                 {"topic": "MCP", "ambiguous": True}, poll_ms=200,
                                 on_status=seen.append)
    # input_required: tasks/result's stream carried the server's elicitation to the handler.
    assert seen[-1].status == "input_required"
    assert "the protocol" in str(result.content)


@pytest.fixture
async def everything_2025_11(everything_url: str) -> AsyncIterator[tuple[McpHttpClient, list[Any]]]:
    """A client offering the 2025-11-25 client features: URL elicitation and server tasks."""
    shown: list[Any] = []

    async def consent(request: ElicitationRequest) -> ElicitationResult:
        shown.append(request)
        return ElicitationResult(action="accept")

    transport = HttpxTransport(everything_url)
    handlers = ServerRequestHandlers(sampling=McpSampling(function_model(respond), model_name="bindloop-test"),
                                     elicitation=elicit, url_elicitation=consent, tasks=True)
    try:
        async with McpHttpClient(transport, server="everything", handlers=handlers,
                                 limits=McpLimits(timeout_ms=30_000, url_elicitation_wait_ms=200)) as client:
            yield client, shown
    finally:
        await transport.aclose()


async def test_url_elicitation_on_the_request_and_the_error_path(
        everything_2025_11: tuple[McpHttpClient, list[Any]]) -> None:
    client, shown = everything_2025_11
    url = "https://example.com/connect"
    direct = await client.call_tool("trigger-url-elicitation", {"url": url})
    assert "completed the URL elicitation" in str(direct.content)
    # The error path: -32042 with a prerequisite URL; the handler consents, the client waits
    # (this server never announces completion) and sends the call again, which goes through.
    retried = await client.call_tool("trigger-url-elicitation", {"url": url, "errorPath": True})
    assert "completed the URL elicitation" in str(retried.content)
    assert [r.url for r in shown] == [url, "https://modelcontextprotocol.io", url]


async def test_the_server_polls_sampling_and_elicitation_run_as_client_tasks(
        everything_2025_11: tuple[McpHttpClient, list[Any]]) -> None:
    client, _ = everything_2025_11
    sampled = str((await client.call_tool("trigger-sampling-request-async",
                                          {"prompt": "hello"})).content)
    assert "[COMPLETED]" in sampled and "sampled by bindloop" in sampled
    asked = str((await client.call_tool("trigger-elicitation-request-async", {})).content)
    assert "[COMPLETED]" in asked and "Ada Lovelace" in asked
    assert [t.status for t in client.server_tasks()] == ["completed", "completed"]
