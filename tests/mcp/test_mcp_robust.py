"""Defects found by running the client against servers nobody here wrote, each pinned by a test on
real HTTP over loopback (a scripted server): large event-stream replies, credentials echoed by a
server, resumption of polling servers, stray messages, the server's own stream, output schemas,
the 401 challenge, and the agent run's abort signal reaching an MCP call."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from bindloop.errors import RunCancelledError, ToolFailure
from bindloop.hosts.transports.httpx import HttpxTransport
from harness.fixtures.scripted_server import RecordedRequest, ScriptedProviderServer, ScriptedReply
from bindloop.mcp import (
    McpClientPorts,
    McpLimits,
    McpHttpError,
    McpProtocolError,
    McpRpcError,
    McpVersionError,
    load_mcp_tools,
)
from bindloop.mcp.server_requests import (
    McpRoot,
    ServerRequestHandlers,
)
from bindloop.mcp.session import McpDiscarded
from test_mcp_hostile import ADD_TOOL, McpScript, client, json_reply, result, sse_reply

pytestmark = pytest.mark.anyio

SECRET = "sk-live-0123456789abcdef"


async def test_an_event_stream_reply_may_be_as_large_as_max_body_bytes(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    big = "x" * (5 * 1024 * 1024)  # one 5 MiB line: over the SSE decoder's own default
    scripted.set_responder("mcp", McpScript(tools_call=lambda rpc, _: sse_reply(
        (None, result(rpc, {"content": [{"type": "text", "text": big}]})))))
    mcp = client(transport)
    await mcp.connect()
    answer = await mcp.call_tool("add", {"a": 1, "b": 2})
    assert answer.content[0]["text"] == big
    small = client(transport, McpLimits(timeout_ms=2_000, notify_timeout_ms=300,
                                       max_body_bytes=1024 * 1024))
    await small.connect()
    with pytest.raises(McpProtocolError, match="unusable event stream"):
        await small.call_tool("add", {"a": 1, "b": 2})


async def test_a_credential_a_server_echoes_reaches_no_error_and_no_tool_message(
        scripted: ScriptedProviderServer) -> None:
    def echo(request: RecordedRequest) -> str:
        return dict(request.headers).get("authorization", "") + " " + dict(request.headers).get(
            "x-api-key", "")

    def tools_call(rpc: dict[str, Any], request: RecordedRequest) -> ScriptedReply:
        name = rpc["params"]["name"]
        if name == "http":
            return ScriptedReply(status=500, chunks=(f"bad token {echo(request)}".encode(),),
                                 streamed=False)
        if name == "rpc":
            return json_reply({"jsonrpc": "2.0", "id": rpc["id"], "error": {
                "code": -32000, "message": f"denied for {echo(request)}",
                "data": {"sent": echo(request)}}})
        return json_reply(result(rpc, {"isError": True, "content": [
            {"type": "text", "text": f"upstream refused {echo(request)}"}]}))

    tools = {"tools": [{**ADD_TOOL, "name": n} for n in ("http", "rpc", "tool")]}
    scripted.set_responder("mcp", McpScript(
        tools_call=tools_call, tools_list=lambda rpc, _: json_reply(result(rpc, tools))))
    # One credential on the transport, one on the client: both are the client's to redact.
    transport = HttpxTransport(scripted.base_url("mcp"),
                               headers=[("authorization", f"Bearer {SECRET}")])
    try:
        mcp = client(transport, headers=(("x-api-key", "key-abcdef987654"),))
        await mcp.connect()
        with pytest.raises(McpHttpError) as http:
            await mcp.call_tool("http", {"a": 1, "b": 2})
        with pytest.raises(McpRpcError) as rpc:
            await mcp.call_tool("rpc", {"a": 1, "b": 2})
        toolset = await load_mcp_tools(mcp, prefix="")
        by_name = {t.name: t for t in toolset.tools}
        with pytest.raises(ToolFailure) as failure:
            await by_name["http"].execute({"a": 1, "b": 2}, None)
        refused = await by_name["tool"].execute({"a": 1, "b": 2}, None)
    finally:
        await transport.aclose()
    shown = [str(http.value), http.value.body, str(rpc.value), rpc.value.rpc_message,
             json.dumps(rpc.value.data), failure.value.message, str(refused)]
    for text in shown:
        assert SECRET not in text and "key-abcdef987654" not in text, text
    assert "upstream refused" in str(refused) and "bad token" in http.value.body


async def test_max_resumes_counts_resumptions_in_a_row_that_bring_nothing(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    """A polling server closes the stream after every event (each resumption brings a new event
    id); six of them in a row are fine with max_resumes=3. A server whose resumptions bring
    nothing fails after three."""
    call: dict[str, Any] = {}
    gets = {"n": 0}

    def tools_call(rpc: dict[str, Any], _: RecordedRequest) -> ScriptedReply:
        call.update(rpc)
        return sse_reply(("p0", ""), retry=1)

    def polling(_: dict[str, Any], request: RecordedRequest) -> ScriptedReply:
        gets["n"] += 1
        if gets["n"] < 6:
            return sse_reply((f"p{gets['n']}", ""))
        return sse_reply(("done", result(call, {"content": [{"type": "text", "text": "ok"}]})))

    scripted.set_responder("mcp", McpScript(tools_call=tools_call, GET=polling))
    mcp = client(transport)
    await mcp.connect()
    answer = await mcp.call_tool("add", {"a": 1, "b": 2})
    assert answer.content == [{"type": "text", "text": "ok"}] and gets["n"] == 6

    gets["n"] = 0
    scripted.set_responder("mcp", McpScript(tools_call=tools_call, GET=lambda _r, _q: (
        gets.__setitem__("n", gets["n"] + 1) or sse_reply(("p0", "")))))
    stuck = client(transport)
    await stuck.connect()
    with pytest.raises(Exception, match="3 resumptions in a row brought nothing"):
        await stuck.call_tool("add", {"a": 1, "b": 2})
    assert gets["n"] == 3


async def test_stray_messages_in_a_stream_do_not_fail_the_call_whose_answer_follows(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    def tools_call(rpc: dict[str, Any], _: RecordedRequest) -> ScriptedReply:
        return sse_reply((None, "{this is not json"),
                         (None, {"jsonrpc": "2.0", "id": 4242, "result": {}}),
                         (None, [result(rpc, {"content": [{"type": "text", "text": "3"}]}),
                                 result(rpc, {"content": []})]))

    scripted.set_responder("mcp", McpScript(tools_call=tools_call))
    seen: list[Any] = []
    mcp = client(transport, on_event=seen.append)
    await mcp.connect()
    answer = await mcp.call_tool("add", {"a": 1, "b": 2})
    assert answer.content == [{"type": "text", "text": "3"}]
    discarded = [e for e in seen if isinstance(e, McpDiscarded)]
    assert len(discarded) == 3  # the non-JSON line, the unknown id, the duplicate in the batch
    assert "not JSON" in discarded[0].reason and discarded[1].request_id == 4242


async def test_a_bad_event_with_nothing_after_it_is_the_error_reported(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    scripted.set_responder("mcp", McpScript(tools_call=lambda rpc, _: sse_reply(
        (None, "{this is not json"))))
    mcp = client(transport)
    await mcp.connect()
    with pytest.raises(McpProtocolError, match="not JSON"):
        await mcp.call_tool("add", {"a": 1, "b": 2})


async def test_server_requests_on_the_get_stream_are_answered_by_default(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    """Nothing but ``async with``: the GET stream opens by itself and the server's roots/list
    request on it is answered from the host's list (not left to hang until a timeout)."""
    def get(_: dict[str, Any], request: RecordedRequest) -> ScriptedReply:
        return sse_reply((None, {"jsonrpc": "2.0", "id": "r1", "method": "roots/list"}))

    script = McpScript(GET=get)
    scripted.set_responder("mcp", script)  # the server runs in its own thread: poll what it saw
    roots = [McpRoot(uri="file:///work/project", name="project")]
    async with client(transport, handlers=ServerRequestHandlers(roots=roots)) as mcp:
        with anyio.fail_after(5):
            while not any(b.get("id") == "r1" for b in script.bodies()):
                await anyio.sleep(0.02)
        assert mcp.session.phase == "ready"
    init = script.bodies()[0]
    assert init["params"]["capabilities"] == {"roots": {"listChanged": True}}
    [answer] = [b for b in script.bodies() if b.get("id") == "r1"]
    assert answer["result"] == {"roots": [{"uri": "file:///work/project", "name": "project"}]}


async def test_structured_content_is_checked_against_the_output_schema(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    typed = {**ADD_TOOL, "outputSchema": {"type": "object", "properties": {
        "sum": {"type": "integer"}}, "required": ["sum"]}}
    answers = iter([{"sum": 3}, {"sum": "three"}, None])

    def tools_call(rpc: dict[str, Any], _: RecordedRequest) -> ScriptedReply:
        value = next(answers)
        body: dict[str, Any] = {"content": [{"type": "text", "text": json.dumps(value)}]}
        if value is not None:
            body["structuredContent"] = value
        return json_reply(result(rpc, body))

    scripted.set_responder("mcp", McpScript(
        tools_call=tools_call,
        tools_list=lambda rpc, _: json_reply(result(rpc, {"tools": [typed]}))))
    toolset = await load_mcp_tools(client(transport), prefix="")
    add = toolset.tools[0]
    assert (await add.execute({"a": 1, "b": 2}, None)).content == '{"sum": 3}'  # type: ignore[union-attr]
    with pytest.raises(ToolFailure, match=r"does not match its outputSchema: /sum"):
        await add.execute({"a": 1, "b": 2}, None)
    with pytest.raises(ToolFailure, match="without structuredContent"):
        await add.execute({"a": 1, "b": 2}, None)


async def test_the_401_challenge_is_exposed(scripted: ScriptedProviderServer,
                                            transport: HttpxTransport) -> None:
    challenge = 'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"'
    scripted.set_responder("mcp", McpScript(initialize=lambda rpc, _: ScriptedReply(
        status=401, headers=(("www-authenticate", challenge),), chunks=(b"no",), streamed=False)))
    with pytest.raises(McpHttpError) as caught:
        await client(transport).connect()
    assert caught.value.status == 401 and caught.value.www_authenticate == challenge


async def test_an_aborted_agent_run_cancels_its_mcp_call_on_the_server(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    from bindloop.agent import ChatResult, create_agent, equip_instruction, prompt_chat, run_with
    from bindloop.agent import equip_mcp
    from bindloop.signal import AbortController
    from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

    def tools_call(rpc: dict[str, Any], _: RecordedRequest) -> ScriptedReply:
        return ScriptedReply(stall_before_headers=True)

    script = McpScript(tools_call=tools_call)
    scripted.set_responder("mcp", script)
    mcp = client(transport, McpLimits(timeout_ms=30_000, notify_timeout_ms=300))
    model = scripted_stream_model([tool_call_turn([tool_call("s__add", {"a": 1, "b": 2},
                                                             id="c1")]),
                                   final_answer("never")])

    async def handler(_: None) -> ChatResult:
        equip_instruction("Add.")
        await equip_mcp(mcp, prefix="s")
        return await prompt_chat()

    controller = AbortController()
    agent = create_agent(id="a", handler=handler, model=model)
    outcome: dict[str, Any] = {}

    async def run() -> None:
        try:
            await run_with(lambda: agent(None), signal=controller.signal)
        except RunCancelledError as exc:
            outcome["error"] = exc

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            while not any(b.get("method") == "tools/call" for b in script.bodies()):
                await anyio.sleep(0.02)
            controller.abort("user pressed stop")
    assert "aborted" in str(outcome["error"])  # promptly: not after the 30 s call timeout
    cancelled = [b for b in script.bodies() if b.get("method") == "notifications/cancelled"]
    assert cancelled and "user pressed stop" in cancelled[0]["params"]["reason"]


async def test_the_get_stream_is_reopened_after_its_last_event(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    """A server that ends its GET stream is listened to again, from the last event id, waiting its
    retry; three ends in a row that bring nothing stop the reopening."""
    gets: list[RecordedRequest] = []

    def get(_: dict[str, Any], request: RecordedRequest) -> ScriptedReply:
        gets.append(request)
        if len(gets) == 1:
            return sse_reply(("g1", {"jsonrpc": "2.0", "method": "notifications/message",
                                     "params": {"level": "info", "data": "one"}}), retry=5)
        return sse_reply(("g1", ""))  # nothing new

    scripted.set_responder("mcp", McpScript(GET=get))
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await anyio.sleep(0)

    seen: list[Any] = []
    async with client(transport, ports=McpClientPorts(sleep=sleep), on_event=seen.append):
        with anyio.fail_after(20):
            while len(gets) < 4:
                await anyio.sleep(0.02)
        await anyio.sleep(0.1)
    assert len(gets) == 4  # the first, then three that brought nothing
    assert "last-event-id" not in dict(gets[0].headers)
    assert all(dict(g.headers)["last-event-id"] == "g1" for g in gets[1:])
    assert slept[0] == 0.005
    assert any(getattr(e, "method", None) == "notifications/message" for e in seen)


async def test_a_task_call_answered_directly_is_refused_by_name(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    from bindloop.mcp.tasks import call_tool_as_task

    script = McpScript(tools_call=lambda rpc, _: json_reply(result(rpc, {"content": []})))
    scripted.set_responder("mcp", script)
    mcp = client(transport)
    await mcp.connect()
    with pytest.raises(McpProtocolError, match="without a valid task"):
        await call_tool_as_task(mcp, "add", {"a": 1, "b": 2}, ttl_ms=5_000)
    assert script.bodies()[-1]["params"]["task"] == {"ttl": 5000}


@pytest.mark.parametrize("answer", ["unknown_version", "malformed_result"])
async def test_a_fatal_initialize_answer_on_a_numbered_stream_ends_the_exchange_at_once(
        scripted: ScriptedProviderServer, transport: HttpxTransport, answer: str) -> None:
    """``initialize`` answered on an event stream with numbered events: a revision the client does
    not speak is the documented McpVersionError (a malformed result its McpProtocolError), raised
    at once — not one unusable event followed by a Last-Event-ID resumption the server holds open
    until the whole timeout has passed."""
    gets = {"n": 0}

    def initialize(rpc: dict[str, Any], _: RecordedRequest) -> ScriptedReply:
        value: dict[str, Any] = {"protocolVersion": "2099-01-01", "capabilities": {},
                                 "serverInfo": {"name": "future", "version": "1"}}
        if answer == "malformed_result":
            value = {"protocolVersion": 7}
        return sse_reply(("ev-0", ""), ("ev-1", result(rpc, value)))

    def get(_: dict[str, Any], __: RecordedRequest) -> ScriptedReply:
        gets["n"] += 1
        return ScriptedReply(headers=(("content-type", "text/event-stream"),),
                             chunks=(b": held\n\n", b": never sent\n\n"), stall_after=1)

    scripted.set_responder("mcp", McpScript(initialize=initialize, GET=get))
    # a fatal answer ends the exchange at once: far below the 30 s timeout, even when loaded
    mcp = client(transport, McpLimits(timeout_ms=30_000, notify_timeout_ms=300))
    started = anyio.current_time()
    with pytest.raises(McpProtocolError) as caught:
        await mcp.connect()
    elapsed = anyio.current_time() - started
    assert elapsed < 10.0 and gets["n"] == 0
    if answer == "unknown_version":
        assert isinstance(caught.value, McpVersionError)
        assert "2099-01-01" in str(caught.value) and "2025-11-25" in str(caught.value)
    else:
        assert not isinstance(caught.value, McpVersionError)
        assert "malformed result" in str(caught.value)
