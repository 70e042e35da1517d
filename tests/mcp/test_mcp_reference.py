"""Against the official ``mcp`` SDK's server over streamable HTTP on 127.0.0.1: the client, the
tools through ``run_tool_loop`` (asyncio and trio), cancellation, progress, and the plugin
registry with activation and rehydration."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

from bindloop.contracts import ImagePart, ToolCall, ToolMessage, ToolOutcome
from bindloop.hosts.transports.httpx import HttpxTransport
from bindloop.loop import run_tool_loop
from bindloop.mcp import (
    McpLimits,
    McpHttpClient,
    McpServerPlugin,
    McpToolset,
    PROTOCOL_VERSIONS,
    load_mcp_tools,
    mcp_plugin_resolver,
    open_mcp_client,
)
from bindloop.mcp.session import McpProgress
from bindloop.tools import (
    create_tool_registry,
    partition_plugin_catalog,
    plugin_from_tools,
    rehydrate_activation,
)
from bindloop.signal import AbortController
from bindloop.testing import final_answer, loop_harness, tool_call, tool_call_turn
from bindloop.transcript import validate_and_heal_messages
from bindloop.loop import LoopHooks, ToolRunner

pytestmark = pytest.mark.anyio


def assert_valid_transcript(messages: list[Any]) -> None:
    """Nothing for the healer to repair: every call paired, a turn structure providers accept."""
    assert validate_and_heal_messages(messages, for_request=False).issues == ()


@pytest.fixture
async def client(reference_url: str) -> AsyncIterator[McpHttpClient]:
    transport = HttpxTransport(reference_url)
    try:
        async with open_mcp_client(transport, server="ref", modern_versions=()) as mcp:
            yield mcp
    finally:
        await transport.aclose()


def by_id(messages: list[Any]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


async def test_handshake_negotiates_a_known_revision_and_keeps_the_session_id(
        client: McpHttpClient) -> None:
    info = client.session.initialize_result
    assert info is not None and info.server_info.name == "bindloop-reference"
    assert client.session.protocol_version == PROTOCOL_VERSIONS[0]
    assert client.session_id  # the SDK's stateful server assigns one
    assert await client.ping() >= 0


async def test_tools_are_namespaced_sanitized_and_typed(client: McpHttpClient) -> None:
    toolset = await load_mcp_tools(client)
    names = [t.name for t in toolset.tools]
    assert names == ["ref__add", "ref__describe", "ref__render_square", "ref__slow",
                     "ref__cancellations", "ref__explode"]
    assert toolset.skipped == ()
    add = toolset.tools[0]
    assert add.mcp_name == "add" and add.parameters["required"] == ["a", "b"]
    # Validated before anything is sent: a string where the schema says integer.
    refused = await add.execute('{"a": "two", "b": 3}', None)
    assert refused.kind == "validation" and "/a: expected integer" in refused.error  # type: ignore[union-attr]
    limited = await load_mcp_tools(client, allow=["add"], prefix="calc")
    assert [t.name for t in limited.tools] == ["calc__add"]
    assert {s.name for s in limited.skipped} == set(names_mcp(toolset)) - {"add"}


def names_mcp(toolset: McpToolset) -> list[str]:
    return [t.mcp_name for t in toolset.tools]


async def test_the_loop_runs_typed_image_structured_and_raising_tools(
        client: McpHttpClient) -> None:
    toolset = await load_mcp_tools(client)
    plugin = plugin_from_tools(name="ref", description="reference server", tools=toolset.tools)

    async def dispatch(call: ToolCall) -> ToolOutcome:
        return await plugin.execute(call.name, call.arguments, None)

    h = loop_harness(
        [tool_call_turn([tool_call("ref__add", {"a": 2, "b": 40}, id="sum"),
                         tool_call("ref__render_square", {"red": 255, "green": 0, "blue": 0},
                                   id="img"),
                         tool_call("ref__describe", {"shape": "square", "size": 3}, id="desc"),
                         tool_call("ref__explode", {"message": "boom"}, id="err"),
                         tool_call("ref__add", {"a": 1}, id="bad")]),
         final_answer("done")],
        runner=ToolRunner(
            run_tool_call=dispatch,
            build_tools=lambda: list(plugin.tool_definitions()),
        ),
    )
    result = await run_tool_loop(h.params)
    assert result.stop_reason == "done"
    answers = by_id(h.state.messages)
    assert answers["sum"].content == "42" and not answers["sum"].is_error
    image = answers["img"].content
    assert isinstance(image, tuple) and isinstance(image[0], ImagePart)
    assert image[0].media_type == "image/png"
    assert base64.b64decode(image[0].data or "").startswith(b"\x89PNG")
    assert '"area": 9' in str(answers["desc"].content)
    assert answers["err"].is_error and '"kind":"error"' in str(answers["err"].content)
    assert answers["bad"].is_error and "missing required property 'b'" in str(answers["bad"].content)
    assert_valid_transcript(h.state.messages)


async def test_a_fired_signal_cancels_the_slow_call_on_the_server(client: McpHttpClient) -> None:
    toolset = await load_mcp_tools(client)
    tools = {t.name: t for t in toolset.tools}
    before = (await client.call_tool("cancellations", {})).structured_content
    controller = AbortController()
    progress: list[tuple[str, McpProgress]] = []
    with_progress = await load_mcp_tools(client, on_progress=lambda n, p: progress.append((n, p)))
    slow = {t.name: t for t in with_progress.tools}["ref__slow"]

    async def dispatch(call: ToolCall) -> ToolOutcome:
        if call.name == "ref__slow":
            return await slow.execute(call.arguments, controller.signal)
        return await tools[call.name].execute(call.arguments, controller.signal)

    async def abort_soon() -> None:
        while not progress:
            await anyio.sleep(0.01)
        controller.abort("user pressed stop")

    h = loop_harness(
        [tool_call_turn([tool_call("ref__slow", {"seconds": 30}, id="s")]),
                      final_answer("never")],
        signal=controller.signal,
        runner=ToolRunner(run_tool_call=dispatch),
    )
    with anyio.fail_after(15):  # the abort ends it, far before the 30 s call would
        async with anyio.create_task_group() as tg:
            tg.start_soon(abort_soon)
            result = await run_tool_loop(h.params)
    assert result.stop_reason == "aborted"
    answer = by_id(h.state.messages)["s"]
    assert answer.is_error and '"kind":"cancelled"' in str(answer.content)
    assert "user pressed stop" in str(answer.content)
    assert progress and progress[0][0] == "ref__slow" and progress[0][1].total is not None
    assert_valid_transcript(h.state.messages)
    # The server saw notifications/cancelled and cancelled its handler.
    with anyio.fail_after(15):
        while (await client.call_tool("cancellations", {})).structured_content == before:
            await anyio.sleep(0.05)


async def test_a_timeout_cancels_on_the_server_and_raises_typed(reference_url: str) -> None:
    from bindloop.mcp import McpTimeoutError

    transport = HttpxTransport(reference_url)
    try:
        async with open_mcp_client(transport, server="ref", modern_versions=(),
                                   limits=McpLimits(max_timeout_ms=2500)) as client:
            # Progress every 50 ms starts the 600 ms timeout again: a 1.5 s call finishes (a
            # loaded machine may delay one progress, not by the 550 ms left) ...
            done = await client.call_tool("slow", {"seconds": 1.5}, timeout_ms=600)
            assert "slept 1.5s" in str(done.content)
            # ... and max_timeout_ms bounds it all the same.
            with pytest.raises(McpTimeoutError) as caught:
                await client.call_tool("slow", {"seconds": 8}, timeout_ms=600)
            assert caught.value.server == "ref" and "tools/call" in str(caught.value)
            assert client.session.pending() == ()
            with pytest.raises(McpTimeoutError):  # no progress at all: the plain timeout
                await client.call_tool("slow", {"seconds": 0.5}, timeout_ms=20)
    finally:
        await transport.aclose()


async def test_server_side_refusals_come_back_as_tool_errors(client: McpHttpClient) -> None:
    # The SDK answers an unknown tool, and arguments its own validation refuses, with isError
    # results, which map to ToolErrors the model reads.
    from bindloop.mcp import map_call_result

    unknown = await client.call_tool("no_such_tool", {})
    assert unknown.is_error and "no_such_tool" in str(unknown.content)
    refused = await client.call_tool("add", {"a": "x", "b": 1})  # bypassing our own check
    outcome = map_call_result(refused, server="ref", tool="add")
    assert outcome.kind == "error" and "valid integer" in outcome.error  # type: ignore[union-attr]


async def test_json_response_mode_works_too(reference_json_url: str) -> None:
    transport = HttpxTransport(reference_json_url)
    try:
        async with open_mcp_client(transport, server="json", modern_versions=()) as mcp:
            toolset = await load_mcp_tools(mcp)
            add = {t.name: t for t in toolset.tools}["json__add"]
            assert (await add.execute({"a": 5, "b": 6}, None)).content == "11"  # type: ignore[union-attr]
    finally:
        await transport.aclose()


async def test_a_server_is_a_plugin_loaded_on_activation_and_rehydrated(
        reference_url: str) -> None:
    transports: list[HttpxTransport] = []

    async def connect() -> McpHttpClient:
        transport = HttpxTransport(reference_url)
        transports.append(transport)
        return McpHttpClient(transport, server="ref", modern_versions=())

    plugin = McpServerPlugin(name="shapes", description="Shapes and arithmetic over MCP.",
                             connect=connect)
    registry = create_tool_registry()
    registry.register(plugin)
    active: set[str] = set()
    # Announced in the catalog before anything connects.
    catalog = partition_plugin_catalog(active, registry.summaries())
    assert [s.name for s in catalog.loadable] == ["shapes"] and not transports
    assert registry.tool_definitions(["shapes"]) == []

    async def activate(kind: str, names: tuple[str, ...]) -> None:
        for name in names:
            found = registry.get(name)
            if isinstance(found, McpServerPlugin):
                await found.load()
            active.add(registry.canonicalize_name(name))

    async def dispatch(call: ToolCall) -> ToolOutcome:
        if call.name == "load":
            from bindloop.contracts import ToolResult
            return ToolResult(content="loaded", activate_plugins=("shapes",))
        return await registry.run_tool_call(call, None, active)

    h = loop_harness(
        [tool_call_turn([tool_call("load", {}, id="l")]),
                      tool_call_turn([tool_call("shapes__add", {"a": 1, "b": 2}, id="a")]),
                      final_answer("3")],
        runner=ToolRunner(
            run_tool_call=dispatch,
            build_tools=lambda: registry.tool_definitions(active),
        ),
        hooks=LoopHooks(activate=activate),
    )
    try:
        assert (await run_tool_loop(h.params)).stop_reason == "done"
        assert by_id(h.state.messages)["a"].content == "3"
        assert "shapes__add" in h.model.calls[1][1]
        # A persisted activation set reconnects through resolve.
        await plugin.aclose()
        assert not plugin.loaded
        restored = await rehydrate_activation(
            ["shapes", "gone"], canonicalize_name=registry.canonicalize_name,
            resolve=mcp_plugin_resolver(registry))
        assert restored.active == ("shapes",) and restored.dropped[0].name == "gone"
        assert plugin.loaded and len(transports) == 2
    finally:
        await plugin.aclose()
        for transport in transports:
            await transport.aclose()


async def test_the_servers_own_stream_stays_open_until_cancelled(reference_url: str) -> None:
    transport = HttpxTransport(reference_url)
    try:
        async with open_mcp_client(transport, server="ref", modern_versions=(), listen=False) as client:
            with anyio.move_on_after(0.3) as scope:
                await client.listen()
            assert scope.cancelled_caught
            assert await client.ping() >= 0  # the session is unharmed
    finally:
        await transport.aclose()


async def test_the_get_stream_is_open_by_default(client: McpHttpClient) -> None:
    from bindloop.mcp import McpHttpError

    # open_mcp_client opened the server's GET stream in the background ...
    with anyio.fail_after(3):
        while not client.listening:
            await anyio.sleep(0.02)
    # ... and the SDK allows one per session, so a second is refused while the first is held.
    with pytest.raises(McpHttpError) as caught:
        await client.listen()
    assert caught.value.status == 409 and client.listening == 1
    assert await client.ping() >= 0


async def test_a_session_the_server_ended_is_renewed(client: McpHttpClient,
                                                    reference_url: str) -> None:
    import httpx

    old = client.session_id
    assert old is not None
    async with httpx.AsyncClient() as raw:  # end the session behind the client's back
        gone = await raw.delete(reference_url, headers={"mcp-session-id": old})
    assert gone.status_code in (200, 204)
    result = await client.call_tool("add", {"a": 2, "b": 2})
    assert result.structured_content == {"result": 4}
    assert client.session_id not in (None, old)


async def test_progress_forever_is_bounded_by_default(reference_url: str) -> None:
    """No max_timeout_ms given: a server that keeps sending progress still cannot hold a call open
    past ten request timeouts (a 15 s call with a 400 ms timeout ends after about 4 s; progress
    every 50 ms leaves a loaded machine 350 ms to be late by)."""
    from bindloop.mcp import McpTimeoutError

    transport = HttpxTransport(reference_url)
    try:
        async with open_mcp_client(transport, server="ref", modern_versions=()) as client:
            started = anyio.current_time()
            with anyio.fail_after(12), pytest.raises(McpTimeoutError):
                await client.call_tool("slow", {"seconds": 15}, timeout_ms=400)
            assert anyio.current_time() - started >= 3.9
            assert client.session.pending() == ()
    finally:
        await transport.aclose()
