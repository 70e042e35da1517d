"""Hostile and broken servers, scripted on real HTTP over loopback: every failure is a typed
:class:`McpError` naming the server, and a loop whose tool met it still has a valid transcript."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from bindloop.contracts import ToolCall, ToolMessage, ToolOutcome
from bindloop.errors import ToolFailure
from bindloop.hosts.transports.httpx import HttpxTransport
from harness.fixtures.scripted_server import RecordedRequest, ScriptedProviderServer, ScriptedReply
from bindloop.loop import run_tool_loop
from bindloop.mcp import (
    McpClientPorts,
    McpLimits,
    McpConnectionError,
    McpError,
    McpHttpClient,
    McpProtocolError,
    McpServerPlugin,
    McpSessionExpiredError,
    McpTimeoutError,
    McpVersionError,
    load_mcp_tools,
)
from bindloop.testing import final_answer, loop_harness, tool_call, tool_call_turn
from bindloop.transcript import validate_and_heal_messages
from bindloop.loop import ToolRunner

pytestmark = pytest.mark.anyio


def assert_valid_transcript(messages: list[Any]) -> None:
    """Nothing for the healer to repair: every call paired, a turn structure providers accept."""
    assert validate_and_heal_messages(messages, for_request=False).issues == ()

Handler = Callable[[dict[str, Any], RecordedRequest], ScriptedReply]
ADD_TOOL = {"name": "add", "description": "Add.", "inputSchema": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"]}}


def json_reply(payload: Any, *, headers: tuple[tuple[str, str], ...] = ()) -> ScriptedReply:
    return ScriptedReply(headers=(("content-type", "application/json"), *headers),
                         chunks=(json.dumps(payload).encode(),), streamed=False)


def sse_reply(*events: tuple[str | None, Any], drop_after: int | None = None,
              retry: int | None = None) -> ScriptedReply:
    chunks = []
    for n, (event_id, payload) in enumerate(events):
        head = f"id: {event_id}\n" if event_id is not None else ""
        if retry is not None and n == 0:
            head += f"retry: {retry}\n"
        data = payload if isinstance(payload, str) else json.dumps(payload)
        chunks.append(f"{head}data: {data}\n\n".encode())
    return ScriptedReply(headers=(("content-type", "text/event-stream"),), chunks=tuple(chunks),
                         drop_after=drop_after)


def result(rpc: dict[str, Any], value: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc["id"], "result": value}


def initialize_result(rpc: dict[str, Any], version: str = "2025-06-18") -> ScriptedReply:
    return json_reply(result(rpc, {"protocolVersion": version, "capabilities": {"tools": {}},
                                   "serverInfo": {"name": "scripted", "version": "1"}}),
                      headers=(("mcp-session-id", "sess-1"),))


class McpScript:
    """A responder: ``initialize`` and notifications are answered like a server would; each
    method's handler gives the rest (``tools/list`` lists ``add`` by default)."""

    def __init__(self, **handlers: Handler) -> None:
        self.handlers = {k.replace("_", "/"): v for k, v in handlers.items()}
        self.handlers.setdefault("tools/list", lambda rpc, _: json_reply(
            result(rpc, {"tools": [ADD_TOOL]})))
        self.requests: list[RecordedRequest] = []

    def __call__(self, request: RecordedRequest) -> ScriptedReply:
        self.requests.append(request)
        if request.method == "DELETE":
            return ScriptedReply(status=200, streamed=False)
        if request.method == "GET":
            return self.handlers["GET"]({}, request)
        rpc = json.loads(request.body)
        handler = self.handlers.get(rpc.get("method", "reply"))
        if handler is not None:
            return handler(rpc, request)
        if rpc.get("method") == "initialize":
            return initialize_result(rpc)
        return ScriptedReply(status=202, streamed=False)  # notifications and replies

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.body) for r in self.requests if r.body]


def client(transport: HttpxTransport, limits: McpLimits = McpLimits(timeout_ms=2_000,
                                                                   notify_timeout_ms=300),
           **options: Any) -> McpHttpClient:
    return McpHttpClient(transport, server="hostile", limits=limits,
                         **{"modern_versions": (), **options})


async def test_headers_session_id_protocol_version_auth_and_delete_on_close(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    script = McpScript()
    scripted.set_responder("mcp", script)
    # generous bounds: the closing DELETE is bounded by the notify timeout, and nothing here
    # tests a timeout (a loaded machine missed the short default once)
    mcp = client(transport, McpLimits(timeout_ms=60_000, notify_timeout_ms=60_000),
                 headers=(("authorization", "Bearer s3cret"),))
    await mcp.connect()
    await mcp.list_tools()
    await mcp.aclose()
    init, initialized, listing, delete = script.requests
    assert dict(init.headers)["accept"] == "application/json, text/event-stream"
    assert "mcp-session-id" not in dict(init.headers)
    assert json.loads(initialized.body)["method"] == "notifications/initialized"
    for later in (initialized, listing, delete):
        headers = dict(later.headers)
        assert headers["mcp-session-id"] == "sess-1"
        assert headers["mcp-protocol-version"] == "2025-06-18"
        assert headers["authorization"] == "Bearer s3cret"
    assert delete.method == "DELETE"


async def test_an_unknown_protocol_revision_is_refused_with_both_sides_named(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    scripted.set_responder("mcp", McpScript(initialize=lambda rpc, _: initialize_result(
        rpc, version="2099-01-01")))
    with pytest.raises(McpVersionError) as caught:
        await client(transport).connect()
    message = str(caught.value)
    assert "'hostile'" in message and "2099-01-01" in message and "2025-11-25" in message


async def test_html_instead_of_mcp(scripted: ScriptedProviderServer,
                                   transport: HttpxTransport) -> None:
    scripted.set_responder("mcp", McpScript(initialize=lambda rpc, _: ScriptedReply(
        headers=(("content-type", "text/html; charset=utf-8"),),
        chunks=(b"<html><body>Sign in</body></html>",), streamed=False)))
    with pytest.raises(McpProtocolError, match=r"MCP server 'hostile': answered initialize with "
                                               r"text/html"):
        await client(transport).connect()


async def test_an_http_error_keeps_a_bounded_excerpt_and_never_the_token(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    from bindloop.mcp import McpHttpError

    scripted.set_responder("mcp", McpScript(initialize=lambda rpc, _: ScriptedReply(
        status=401, chunks=(b"unauthorized " + b"x" * 5000,), streamed=False)))
    with pytest.raises(McpHttpError) as caught:
        await client(transport, headers=(("authorization", "Bearer s3cret"),)).connect()
    assert caught.value.status == 401 and len(caught.value.body) <= 300
    assert "s3cret" not in str(caught.value)


async def test_an_expired_session_is_its_own_error(scripted: ScriptedProviderServer,
                                                   transport: HttpxTransport) -> None:
    script = McpScript(tools_list=lambda rpc, _: ScriptedReply(
        status=404, chunks=(b"no such session",), streamed=False))
    scripted.set_responder("mcp", script)
    mcp = client(transport, renew_expired_session=False)
    await mcp.connect()
    with pytest.raises(McpSessionExpiredError, match="HTTP 404"):
        await mcp.list_tools()
    renewing = client(transport)
    await renewing.connect()
    with pytest.raises(McpSessionExpiredError):  # renewed once, refused again: raised
        await renewing.list_tools()
    methods = [json.loads(r.body).get("method") for r in script.requests if r.body]
    assert methods[-3:] == ["initialize", "notifications/initialized", "tools/list"]
    assert "notifications/cancelled" not in methods  # a refused request is not cancelled


async def test_an_expired_session_is_renewed_and_the_request_sent_once_more(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    sessions = iter(["sess-1", "sess-2"])

    def initialize(rpc: dict[str, Any], _: RecordedRequest) -> ScriptedReply:
        return json_reply(result(rpc, {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "serverInfo": {"name": "s"}}),
                          headers=(("mcp-session-id", next(sessions)),))

    def tools_call(rpc: dict[str, Any], request: RecordedRequest) -> ScriptedReply:
        if dict(request.headers)["mcp-session-id"] == "sess-1":
            return ScriptedReply(status=404, chunks=(b"gone",), streamed=False)
        return json_reply(result(rpc, {"content": [{"type": "text", "text": "ok"}]}))

    script = McpScript(initialize=initialize, tools_call=tools_call)
    scripted.set_responder("mcp", script)
    mcp = client(transport)
    await mcp.connect()
    answer = await mcp.call_tool("add", {"a": 1, "b": 2})
    assert answer.content == [{"type": "text", "text": "ok"}]
    assert mcp.session_id == "sess-2" and mcp.session.tools_stale
    calls = [json.loads(r.body) for r in script.requests
             if r.body and json.loads(r.body).get("method") == "tools/call"]
    assert len(calls) == 2 and calls[0]["id"] != calls[1]["id"]  # ids keep counting


async def test_a_dropped_stream_is_resumed_with_last_event_id(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    call: dict[str, Any] = {}

    def tools_call(rpc: dict[str, Any], _: RecordedRequest) -> ScriptedReply:
        call.update(rpc)
        progress = {"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": rpc["id"], "progress": 1, "total": 2}}
        return sse_reply(("", ""), ("e1", progress), ("e2", result(rpc, {})), drop_after=2,
                         retry=10)

    def resume(_: dict[str, Any], request: RecordedRequest) -> ScriptedReply:
        assert dict(request.headers)["last-event-id"] == "e1"
        return sse_reply(("e2", result(call, {"content": [{"type": "text", "text": "resumed"}]})))

    scripted.set_responder("mcp", McpScript(tools_call=tools_call, GET=resume))
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    mcp = client(transport, ports=McpClientPorts(sleep=sleep))
    seen: list[Any] = []
    await mcp.connect()
    answer = await mcp.call_tool("add", {"a": 1, "b": 2}, on_progress=seen.append)
    assert answer.content == [{"type": "text", "text": "resumed"}]
    assert [p.progress for p in seen] == [1.0] and slept == [0.01]


async def test_a_dropped_stream_without_event_ids_is_a_connection_error(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    scripted.set_responder("mcp", McpScript(tools_call=lambda rpc, _: sse_reply(
        (None, {"jsonrpc": "2.0", "method": "notifications/message",
                "params": {"level": "info", "data": "working"}}),
        (None, result(rpc, {})), drop_after=1)))
    events: list[Any] = []
    mcp = client(transport, on_event=events.append)
    await mcp.connect()
    with pytest.raises(McpConnectionError, match="ended before its response"):
        await mcp.call_tool("add", {"a": 1, "b": 2})
    assert events and events[0].method == "notifications/message"


@pytest.mark.parametrize("body", [
    b"{not json",
    b'{"jsonrpc": "1.0", "id": 2, "result": {}}',
    b'{"jsonrpc": "2.0", "id": 2}',
    b'{"jsonrpc": "2.0", "id": 99, "result": {}}',
    b'{"jsonrpc": "2.0", "id": 2, "result": {"content": "not a list"}}',
    b"[]",
    b'"just a string"',
])
async def test_malformed_json_rpc(scripted: ScriptedProviderServer, transport: HttpxTransport,
                                  body: bytes) -> None:
    scripted.set_responder("mcp", McpScript(tools_call=lambda rpc, _: ScriptedReply(
        headers=(("content-type", "application/json"),), chunks=(body,), streamed=False)))
    mcp = client(transport)
    await mcp.connect()
    with pytest.raises(McpProtocolError) as caught:
        await mcp.call_tool("add", {"a": 1, "b": 2})
    assert caught.value.server == "hostile"


async def test_a_server_that_never_answers_times_out_and_is_told_to_cancel(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    script = McpScript(tools_call=lambda rpc, _: ScriptedReply(stall_before_headers=True))
    scripted.set_responder("mcp", script)
    # Only the silent call is bounded by the short timeout (what is tested); connecting, and the
    # cancellation the test then looks for, get all the time a loaded machine needs.
    mcp = client(transport, McpLimits(timeout_ms=60_000, notify_timeout_ms=60_000))
    await mcp.connect()
    mcp._timeout_ms = 200
    with pytest.raises(McpTimeoutError, match="'hostile': tools/call got no response within 200"):
        await mcp.call_tool("add", {"a": 1, "b": 2})
    cancelled = [b for b in script.bodies() if b.get("method") == "notifications/cancelled"]
    assert cancelled and cancelled[0]["params"]["requestId"] == 2


async def test_a_hostile_tool_list_skips_the_bad_entries_with_reasons(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    deep: dict[str, Any] = {"type": "object"}
    for _ in range(100):
        deep = {"type": "object", "properties": {"x": deep}}
    pages = {
        None: {"tools": [ADD_TOOL, {"name": "no_schema"}, "not even an object",
                         {"name": "deep", "inputSchema": deep}], "nextCursor": "p2"},
        "p2": {"tools": [
            {"name": "external", "inputSchema": {"$ref": "https://evil.example/schema.json"}},
            {"name": "x" * 70, "inputSchema": {"type": "object"}},
            {"name": "add", "inputSchema": {"type": "object"}},
            {"name": "dotted.name", "inputSchema": {"type": "object", "properties": {}}}]},
    }

    def tools_list(rpc: dict[str, Any], _: RecordedRequest) -> ScriptedReply:
        cursor = (rpc.get("params") or {}).get("cursor")
        return json_reply(result(rpc, pages[cursor]))

    scripted.set_responder("mcp", McpScript(tools_list=tools_list))
    mcp = client(transport)
    toolset = await load_mcp_tools(mcp, prefix="h")
    assert [t.name for t in toolset.tools] == ["h__add", "h__dotted_name"]
    reasons = {s.name: s.reason for s in toolset.skipped}
    assert set(reasons) == {"no_schema", "#2", "deep", "external", "x" * 70, "add"}
    assert "not a valid tool entry" in reasons["no_schema"]
    assert "input schema refused" in reasons["deep"] and "deeper" in reasons["deep"]
    assert "local $ref" in reasons["external"]
    assert "already taken" in reasons["add"] and "1-64" in reasons["x" * 70]
    assert all(s.server == "hostile" for s in toolset.skipped)


async def test_a_repeated_cursor_is_refused(scripted: ScriptedProviderServer,
                                            transport: HttpxTransport) -> None:
    scripted.set_responder("mcp", McpScript(tools_list=lambda rpc, _: json_reply(
        result(rpc, {"tools": [], "nextCursor": "again"}))))
    with pytest.raises(McpProtocolError, match="repeated cursor 'again'"):
        await load_mcp_tools(client(transport))


async def test_server_ping_inside_a_stream_is_answered_and_list_changed_marks_stale(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    listings = {"n": 0}

    def tools_list(rpc: dict[str, Any], _: RecordedRequest) -> ScriptedReply:
        listings["n"] += 1
        tools = [ADD_TOOL] if listings["n"] == 1 else [ADD_TOOL, {**ADD_TOOL, "name": "sub"}]
        return json_reply(result(rpc, {"tools": tools}))

    script = McpScript(tools_list=tools_list, tools_call=lambda rpc, _: sse_reply(
        (None, {"jsonrpc": "2.0", "id": "srv-1", "method": "ping"}),
        (None, {"jsonrpc": "2.0", "id": "srv-2", "method": "sampling/createMessage"}),
        (None, {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
        (None, result(rpc, {"content": [{"type": "text", "text": "3"}]}))))
    scripted.set_responder("mcp", script)
    mcp = client(transport)
    plugin = McpServerPlugin(name="h", description="hostile", connect=lambda: _ready(mcp))
    await plugin.load()
    assert [d.name for d in plugin.tool_definitions()] == ["h__add"]
    outcome = await plugin.execute("h__add", '{"a": 1, "b": 2}', None)
    assert outcome.content == "3"  # type: ignore[union-attr]
    replies = {b["id"]: b for b in script.bodies() if "method" not in b}
    assert replies["srv-1"]["result"] == {}
    assert replies["srv-2"]["error"]["code"] == -32601
    assert mcp.session.tools_stale
    assert await plugin.refresh_if_stale()
    assert [d.name for d in plugin.tool_definitions()] == ["h__add", "h__sub"]
    assert not await plugin.refresh_if_stale()


async def _ready(mcp: McpHttpClient) -> McpHttpClient:
    return mcp


HOSTILE_CALLS: dict[str, tuple[Handler, type[McpError]]] = {
    "html": (lambda rpc, _: ScriptedReply(headers=(("content-type", "text/html"),),
                                          chunks=(b"<h1>502 Bad Gateway</h1>",), streamed=False),
             McpProtocolError),
    "dropped": (lambda rpc, _: sse_reply((None, {"jsonrpc": "2.0", "method": "x"}),
                                         (None, result(rpc, {})), drop_after=1),
                McpConnectionError),
    "malformed": (lambda rpc, _: json_reply({"jsonrpc": "2.0", "id": rpc["id"], "oops": 1}),
                  McpProtocolError),
    "silent": (lambda rpc, _: ScriptedReply(stall_before_headers=True), McpTimeoutError),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_CALLS))
async def test_a_hostile_call_inside_the_loop_leaves_a_valid_transcript(
        scripted: ScriptedProviderServer, transport: HttpxTransport, case: str) -> None:
    handler, error_type = HOSTILE_CALLS[case]
    scripted.set_responder("mcp", McpScript(tools_call=handler))
    # Only the silent call is bounded by a timeout (the thing it tests). Connecting and listing
    # are answered at once but may take any time on a loaded machine: a short timeout over them
    # tested the machine's load, not the client ("initialize got no response within 300 ms").
    mcp = client(transport, McpLimits(timeout_ms=60_000, notify_timeout_ms=300))  # a hang guard
    toolset = await load_mcp_tools(mcp, prefix="h")
    if case == "silent":
        mcp._timeout_ms = 300  # from here on: the tool calls
    add = toolset.tools[0]
    with pytest.raises(ToolFailure) as caught:
        await add.execute({"a": 1, "b": 2}, None)
    # Raised on purpose with bindloop's own message, so the model reads it; the cause is typed.
    assert isinstance(caught.value.__cause__, error_type)
    assert caught.value.__cause__.server == "hostile"
    assert "MCP server 'hostile'" in caught.value.message

    async def dispatch(call: ToolCall) -> ToolOutcome:
        return await add.execute(call.arguments, None)

    h = loop_harness(
        [tool_call_turn([tool_call("h__add", {"a": 1, "b": 2}, id="c")]),
                      final_answer("the server is broken")],
        runner=ToolRunner(run_tool_call=dispatch),
    )
    assert (await run_tool_loop(h.params)).stop_reason == "done"
    answer = next(m for m in h.state.messages if isinstance(m, ToolMessage))
    assert answer.is_error and "MCP server 'hostile'" in str(answer.content)
    assert_valid_transcript(h.state.messages)


async def test_listen_routes_the_servers_own_stream(scripted: ScriptedProviderServer,
                                                    transport: HttpxTransport) -> None:
    script = McpScript(GET=lambda _rpc, _req: sse_reply(
        (None, {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
        (None, {"jsonrpc": "2.0", "id": "srv-ping", "method": "ping"})))
    scripted.set_responder("mcp", script)
    events: list[Any] = []
    mcp = client(transport, on_event=events.append)
    await mcp.connect()
    assert await mcp.listen() is True
    assert mcp.session.tools_stale and type(events[0]).__name__ == "McpToolListChanged"
    assert any(b.get("id") == "srv-ping" and b.get("result") == {} for b in script.bodies())
    get = next(r for r in script.requests if r.method == "GET")
    assert dict(get.headers)["accept"] == "text/event-stream"
    assert dict(get.headers)["mcp-session-id"] == "sess-1"


async def test_listen_without_a_server_stream_returns_false(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    scripted.set_responder("mcp", McpScript(GET=lambda _rpc, _req: ScriptedReply(
        status=405, streamed=False)))
    mcp = client(transport)
    await mcp.connect()
    assert await mcp.listen() is False


async def test_concurrent_calls_that_meet_one_expiry_share_one_renewal(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    import anyio

    sessions = iter(["old", "new", "extra"])

    def initialize(rpc: dict[str, Any], _: RecordedRequest) -> ScriptedReply:
        return json_reply(result(rpc, {"protocolVersion": "2025-06-18", "capabilities": {},
                                       "serverInfo": {"name": "s"}}),
                          headers=(("mcp-session-id", next(sessions)),))

    def tools_call(rpc: dict[str, Any], request: RecordedRequest) -> ScriptedReply:
        if dict(request.headers)["mcp-session-id"] == "old":
            return ScriptedReply(status=404, chunks=(b"gone",), streamed=False, delay_s=0.05)
        return json_reply(result(rpc, {"content": [{"type": "text", "text": "ok"}]}))

    script = McpScript(initialize=initialize, tools_call=tools_call)
    scripted.set_responder("mcp", script)
    mcp = client(transport)
    await mcp.connect()
    answers: list[Any] = []

    async def one() -> None:
        answers.append(await mcp.call_tool("add", {"a": 1, "b": 2}))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(one)
    assert len(answers) == 3 and mcp.session_id == "new"
    inits = [r for r in script.requests if r.body and json.loads(r.body).get("method") ==
             "initialize"]
    assert len(inits) == 2
