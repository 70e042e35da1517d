"""The dual-era client: MCP 2026-07-28 (stateless: ``server/discover``, the ``_meta`` envelope,
``Mcp-Method`` / ``Mcp-Name``, ``resultType``, Multi Round-Trip Requests, cache hints) against
bindloop's own server under uvicorn and against scripted stateless servers, the fallback to the
2025-11-25 handshake for a legacy server, and the typed version error naming both sides."""

from __future__ import annotations

import base64
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from hypothesis import given, strategies as st

from bindloop.agent import ChatResult, create_agent, equip_instruction, equip_mcp, prompt_chat
from bindloop.contracts import ToolMessage, ToolResult
from bindloop.hosts.transports.httpx import HttpxTransport
from bindloop.hosts.mcp.server import McpServerApp
from bindloop.mcp import (
    McpLimits,
    McpClientPorts,
    McpHttpClient,
    McpProtocolError,
    McpRpcError,
    McpVersionError,
    load_mcp_tools,
    open_mcp_client,
)
from bindloop.mcp.server_requests import (
    ElicitationRequest,
    ElicitationResult,
    ServerRequestHandlers,
)
from bindloop.mcp.session import McpClientSession
from bindloop.mcp._exchange import header_value, param_header_values, param_headers
from bindloop.mcp._oauth_model import application_type, registration_body
from bindloop.mcp._server import _header_value
from bindloop.tools import define_tool
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

pytestmark = pytest.mark.anyio

META_VERSION = "io.modelcontextprotocol/protocolVersion"


class AddArgs(msgspec.Struct):
    a: int
    b: int


async def _add(args: AddArgs, ctx: Any) -> ToolResult:
    return ToolResult(content=str(args.a + args.b))


ADD = define_tool(name="add", description="Add two integers.", args=AddArgs, execute=_add)
UNICODE = define_tool(name="añadir", description="Add, by a name that is not ASCII.",
                      args=AddArgs, execute=_add)


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """``app`` under uvicorn on 127.0.0.1 (a free port), on a thread; yields the MCP endpoint."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serve(McpServerApp([ADD, UNICODE], name="served", version="1.0",
                            instructions="Adds.")) as base:
        yield base


# -- against bindloop's own server (dual-era) --------------------------------------------------


async def test_a_2026_07_28_server_is_spoken_to_statelessly(url: str) -> None:
    transport = HttpxTransport(url)
    try:
        async with open_mcp_client(transport, server="served") as client:
            session = client.session
            assert session.era == "modern" and session.protocol_version == "2026-07-28"
            assert client.session_id is None  # no Mcp-Session-Id in this form
            assert session.discover_result is not None
            assert "2026-07-28" in session.discover_result.supported_versions
            init = session.initialize_result
            assert init is not None and init.server_info.name == "served"
            assert init.instructions == "Adds."
            tools, skipped = await client.list_tools()
            assert {t.name for t in tools} == {"add", "añadir"} and not skipped
            # The server's hint is ttlMs 0: the list is stale at once, and listed again.
            assert session.tools_stale and session.tools_cache_scope == "private"
            # The server refuses any request whose headers disagree with its body (400/-32020):
            # these pass, Mcp-Name in its base64 form for the name that is not ASCII.
            assert (await client.call_tool("add", {"a": 2, "b": 3})).content[0]["text"] == "5"
            assert (await client.call_tool("añadir", {"a": 1, "b": 1})).content[0]["text"] == "2"
            with pytest.raises(McpRpcError) as refused:
                await client.request("prompts/list")
            assert refused.value.code == -32601
    finally:
        await transport.aclose()


async def test_modern_versions_empty_keeps_the_handshake(url: str) -> None:
    transport = HttpxTransport(url)
    try:
        async with open_mcp_client(transport, server="served", modern_versions=(),
                                   listen=False) as client:
            assert client.session.era == "legacy"
            assert client.session.protocol_version == "2025-11-25"
            assert client.session_id is not None
            assert (await client.call_tool("add", {"a": 2, "b": 2})).content[0]["text"] == "4"
    finally:
        await transport.aclose()


async def test_an_agent_equips_a_2026_07_28_server_unchanged(url: str) -> None:
    transport = HttpxTransport(url)
    try:
        async with open_mcp_client(transport, server="served") as client:
            model = scripted_stream_model([
                tool_call_turn([tool_call("srv__add", {"a": 2, "b": 40}, id="c1")]),
                final_answer("42"),
            ])

            async def handler(_: None) -> ChatResult:
                equip_instruction("Add 2 and 40.")
                await equip_mcp(client, allow=["add"], prefix="srv")
                return await prompt_chat(max_turn_steps=4)

            result = await create_agent(id="calc", handler=handler, model=model)(None)
            assert client.session.era == "modern"
            assert result.data == "42" and result.stop_reason == "done"
            answers = {m.tool_call_id: m for m in result.delta if isinstance(m, ToolMessage)}
            assert "42" in str(answers["c1"].content) and not answers["c1"].is_error
    finally:
        await transport.aclose()


# -- scripted stateless servers ----------------------------------------------------------------

Handler = Callable[[dict[str, Any], httpx.Request], Awaitable[httpx.Response]]


def _reply(request_id: Any, result: dict[str, Any], status: int = 200) -> httpx.Response:
    return httpx.Response(status, json={"jsonrpc": "2.0", "id": request_id, "result": result})


def _fail(request_id: Any, code: int, message: str, data: Any = None,
          status: int = 400) -> httpx.Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return httpx.Response(status, json={"jsonrpc": "2.0", "id": request_id, "error": error})


def _complete(result: dict[str, Any]) -> dict[str, Any]:
    return {"resultType": "complete", **result}


class Scripted:
    """A stateless MCP server as a function, behind httpx's MockTransport: every request is
    recorded (with its headers checked against its body, as the revision requires)."""

    def __init__(self, on_call: Handler, versions: tuple[str, ...] = ("2026-07-28",)) -> None:
        self.on_call = on_call
        self.versions = versions
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        body = msgspec.json.decode(request.content)
        self.seen.append(body)
        params = body.get("params") or {}
        meta = params.get("_meta") or {}
        version = meta.get(META_VERSION)
        assert request.headers.get("mcp-protocol-version") == version
        assert request.headers.get("mcp-method") == body["method"]
        assert "io.modelcontextprotocol/clientCapabilities" in meta
        assert "mcp-session-id" not in request.headers
        if version not in self.versions:
            return _fail(body["id"], -32022, "Unsupported protocol version",
                         {"supported": list(self.versions), "requested": version})
        if body["method"] == "server/discover":
            return _reply(body["id"], _complete({
                "supportedVersions": list(self.versions), "capabilities": {"tools": {}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "scripted",
                                                                 "version": "9"}}}))
        if body["method"] == "tools/list":
            return _reply(body["id"], _complete({
                "tools": [{"name": "ask", "inputSchema": {"type": "object"}}],
                "ttlMs": 60_000, "cacheScope": "public"}))
        assert request.headers.get("mcp-name") == params.get("name")
        return await self.on_call(body, request)


def client_for(server: Scripted, **options: Any) -> tuple[McpHttpClient, httpx.AsyncClient]:
    http = httpx.AsyncClient(transport=httpx.MockTransport(server))
    transport = HttpxTransport("http://scripted.test/mcp", client=http)
    return McpHttpClient(transport, server="scripted", listen=False, **options), http


async def _sample(request: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": "Paris"},
            "model": "scripted", "stopReason": "endTurn"}


async def test_input_required_is_answered_through_the_ports_and_reissued() -> None:
    asked: list[ElicitationRequest] = []

    async def elicit(request: ElicitationRequest) -> ElicitationResult:
        asked.append(request)
        return ElicitationResult(action="accept", content={"name": "octocat"})

    async def on_call(body: dict[str, Any], _: httpx.Request) -> httpx.Response:
        params = body["params"]
        state = params.get("requestState")
        if state is None:
            assert "inputResponses" not in params
            return _reply(body["id"], {"resultType": "input_required", "requestState": "one",
                                       "inputRequests": {
                "login": {"method": "elicitation/create", "params": {
                    "message": "Your GitHub name?", "requestedSchema": {
                        "type": "object", "properties": {"name": {"type": "string"}},
                        "required": ["name"]}}},
                "capital": {"method": "sampling/createMessage", "params": {
                    "messages": [{"role": "user", "content": {"type": "text",
                                                               "text": "Capital of France?"}}],
                    "maxTokens": 10}}}})
        if state == "one":
            responses = params["inputResponses"]
            assert responses["login"] == {"action": "accept", "content": {"name": "octocat"}}
            assert responses["capital"]["content"]["text"] == "Paris"
            # A second round that only sheds load: state, no requests.
            return _reply(body["id"], {"resultType": "input_required",
                                       "requestState": "two:octocat:Paris"})
        assert state == "two:octocat:Paris" and "inputResponses" not in params
        assert params["name"] == "ask" and params["arguments"] == {"q": 1}
        return _reply(body["id"], _complete({"content": [{"type": "text",
                                                          "text": "octocat in Paris"}]}))

    server = Scripted(on_call)
    client, http = client_for(server, handlers=ServerRequestHandlers(elicitation=elicit,
                                                                     sampling=_sample))
    try:
        await client.connect()
        result = await client.call_tool("ask", {"q": 1})
        assert result.content == [{"type": "text", "text": "octocat in Paris"}]
        assert [r["method"] for r in server.seen] == ["server/discover"] + ["tools/call"] * 3
        assert len(asked) == 1 and asked[0].message == "Your GitHub name?"
        # The capabilities the ports give travel in every request's _meta.
        caps = server.seen[1]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
        assert "elicitation" in caps and "sampling" in caps
    finally:
        await http.aclose()


async def test_a_server_that_keeps_asking_is_abandoned_after_max_input_rounds() -> None:
    async def on_call(body: dict[str, Any], _: httpx.Request) -> httpx.Response:
        return _reply(body["id"], {"resultType": "input_required", "requestState": "again"})

    server = Scripted(on_call)
    client, http = client_for(server, limits=McpLimits(max_input_rounds=3))
    try:
        await client.connect()
        with pytest.raises(McpProtocolError, match="after 3 rounds"):
            await client.call_tool("ask", {})
        assert [r["method"] for r in server.seen].count("tools/call") == 3
    finally:
        await http.aclose()


async def test_input_the_client_cannot_give_is_a_typed_error_not_a_guess() -> None:
    async def on_call(body: dict[str, Any], _: httpx.Request) -> httpx.Response:
        return _reply(body["id"], {"resultType": "input_required", "inputRequests": {
            "roots": {"method": "roots/list", "params": {}}}})

    server = Scripted(on_call)
    client, http = client_for(server)
    try:
        await client.connect()
        with pytest.raises(McpProtocolError, match="roots/list"):
            await client.call_tool("ask", {})
        assert [r["method"] for r in server.seen].count("tools/call") == 1
    finally:
        await http.aclose()


@pytest.mark.parametrize("result", [
    {"resultType": "task_created", "content": []},
    {"resultType": "input_required"},
    {"resultType": "input_required", "inputRequests": {"x": "not a request"}},
    {"resultType": "input_required", "requestState": 7},
])
async def test_an_unusable_result_type_is_a_protocol_error(result: dict[str, Any]) -> None:
    async def on_call(body: dict[str, Any], _: httpx.Request) -> httpx.Response:
        return _reply(body["id"], result)

    client, http = client_for(Scripted(on_call))
    try:
        await client.connect()
        with pytest.raises(McpProtocolError):
            await client.call_tool("ask", {})
    finally:
        await http.aclose()


async def test_a_cache_hint_keeps_the_list_fresh_for_its_ttl() -> None:
    clock = [0.0]

    async def on_call(body: dict[str, Any], _: httpx.Request) -> httpx.Response:
        raise AssertionError("no call")

    client, http = client_for(Scripted(on_call), ports=McpClientPorts(now=lambda: clock[0]))
    try:
        await client.connect()
        toolset = await load_mcp_tools(client)
        assert [t.name for t in toolset.tools] == ["scripted__ask"]
        assert not client.session.tools_stale
        clock[0] = 59_999.0
        assert not client.session.tools_stale
        clock[0] = 60_000.0
        assert client.session.tools_stale  # ttlMs 60000 ran out
        await client.list_tools()
        assert not client.session.tools_stale
    finally:
        await http.aclose()


async def test_an_unsupported_revision_is_retried_with_one_the_server_lists() -> None:
    async def on_call(body: dict[str, Any], _: httpx.Request) -> httpx.Response:
        return _reply(body["id"], _complete({"content": []}))

    server = Scripted(on_call)
    client, http = client_for(server, modern_versions=("2027-01-01", "2026-07-28"))
    try:
        init = await client.connect()
        assert init.protocol_version == "2026-07-28" and init.server_info.name == "scripted"
        asked = [r["params"]["_meta"][META_VERSION] for r in server.seen]
        assert asked == ["2027-01-01", "2026-07-28"]
        await client.call_tool("ask", {})
        assert server.seen[-1]["params"]["_meta"][META_VERSION] == "2026-07-28"
    finally:
        await http.aclose()


async def test_a_server_in_no_known_revision_is_a_version_error_naming_both() -> None:
    async def on_call(body: dict[str, Any], _: httpx.Request) -> httpx.Response:
        raise AssertionError("no call")

    client, http = client_for(Scripted(on_call, versions=("2099-01-01",)))
    try:
        with pytest.raises(McpVersionError) as failed:
            await client.connect()
        text = str(failed.value)
        assert "2099-01-01" in text and "2026-07-28" in text and "2025-11-25" in text
    finally:
        await http.aclose()


async def test_a_legacy_server_gets_the_handshake_after_the_probe() -> None:
    seen: list[str] = []

    async def legacy(request: httpx.Request) -> httpx.Response:
        body = msgspec.json.decode(request.content)
        seen.append(body["method"])
        if body["method"] == "initialize":
            return httpx.Response(200, headers={"mcp-session-id": "s-1"}, json={
                "jsonrpc": "2.0", "id": body["id"], "result": {
                    "protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                    "serverInfo": {"name": "old", "version": "1"}}})
        if "id" not in body:
            return httpx.Response(202)
        if request.headers.get("mcp-session-id") != "s-1":
            # What the SDKs answer a request outside a session: 400, no modern error.
            return httpx.Response(400, json={"jsonrpc": "2.0", "id": None, "error": {
                "code": -32000, "message": "Bad Request: No valid session ID provided"}})
        assert request.headers.get("mcp-protocol-version") == "2025-11-25"
        assert "_meta" not in (body.get("params") or {}) or \
            META_VERSION not in body["params"]["_meta"]
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": body["id"], "result": {
            "content": [{"type": "text", "text": "old"}]}})

    http = httpx.AsyncClient(transport=httpx.MockTransport(legacy))
    client = McpHttpClient(HttpxTransport("http://legacy.test/mcp", client=http),
                           server="old", listen=False)
    try:
        init = await client.connect()
        assert init.protocol_version == "2025-11-25" and client.session.era == "legacy"
        assert client.session_id == "s-1"
        assert (await client.call_tool("x", {})).content[0]["text"] == "old"
        assert seen == ["server/discover", "initialize", "notifications/initialized",
                        "tools/call"]
    finally:
        await http.aclose()


# -- pure parts ------------------------------------------------------------------------------


@given(st.text(max_size=40))
def test_mcp_name_header_values_are_visible_ascii_and_decode_back(name: str) -> None:
    value = header_value(name)
    assert all(" " <= ch <= "~" for ch in value)
    assert value == value.strip() or not value
    assert _header_value(value) == name  # what bindloop's server reads back


def test_the_base64_form_is_used_only_when_needed() -> None:
    assert header_value("get_weather") == "get_weather"
    assert header_value("file:///a b.txt") == "file:///a b.txt"
    encoded = header_value("añadir")
    assert encoded.startswith("=?base64?") and encoded.endswith("?=")
    assert base64.b64decode(encoded[9:-2]).decode() == "añadir"


def test_the_session_envelope_carries_version_info_and_capabilities() -> None:
    session = McpClientSession(server="s", capabilities={"elicitation": {}})
    probe = session.discover("2026-07-28")
    body = msgspec.json.decode(probe.body)
    meta = body["params"]["_meta"]
    assert probe.version == "2026-07-28" and probe.method == "server/discover"
    assert meta[META_VERSION] == "2026-07-28"
    assert meta["io.modelcontextprotocol/clientCapabilities"] == {"elicitation": {}}
    assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "bindloop"
    assert isinstance(body["id"], str)  # the probe spends no id of the ids port
    with pytest.raises(McpVersionError):
        from bindloop.mcp._protocol import DiscoverResult

        session.adopt("2026-07-28", DiscoverResult(supported_versions=["2030-01-01"]))


def test_x_mcp_header_annotations_are_read_or_the_tool_refused() -> None:
    schema = {"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "n": {"type": "integer", "x-mcp-header": "N"},
        "flag": {"type": "boolean", "x-mcp-header": "Flag"},
        "deep": {"type": "object", "properties": {"id": {"type": "string",
                                                          "x-mcp-header": "Id"}}},
        "plain": {"type": "string"}}}
    params, problem = param_headers(schema)
    assert problem is None
    assert [(p[0], p[1]) for p in params] == [("Region", ("region",)), ("N", ("n",)),
                                            ("Flag", ("flag",)), ("Id", ("deep", "id"))]
    values = dict(param_header_values(params, {"region": "us-west1", "n": 42, "flag": False,
                                               "deep": {"id": "Hello, 世界"}, "plain": "x"}))
    assert values == {"mcp-param-Region": "us-west1", "mcp-param-N": "42",
                      "mcp-param-Flag": "false",
                      "mcp-param-Id": "=?base64?" + base64.b64encode(
                          "Hello, 世界".encode()).decode() + "?="}
    assert param_header_values(params, {"n": 1.5, "region": None}) == ()  # wrong type: none
    for bad in (
        {"properties": {"x": {"type": "number", "x-mcp-header": "X"}}},
        {"properties": {"x": {"type": "string", "x-mcp-header": "A B"}}},
        {"properties": {"x": {"type": "string", "x-mcp-header": "A"},
                        "y": {"type": "string", "x-mcp-header": "a"}}},
        {"properties": {"x": {"type": "array", "items": {"type": "string",
                                                          "x-mcp-header": "X"}}}},
        {"anyOf": [{"properties": {"x": {"type": "string", "x-mcp-header": "X"}}}]},
    ):
        assert param_headers(bad)[1] is not None, bad


async def test_a_tool_with_an_invalid_x_mcp_header_is_skipped_and_params_are_mirrored() -> None:
    async def on_call(body: dict[str, Any], request: httpx.Request) -> httpx.Response:
        assert request.headers.get("mcp-param-region") == "eu"
        return _reply(body["id"], _complete({"content": []}))

    class WithHeaders(Scripted):
        async def __call__(self, request: httpx.Request) -> httpx.Response:
            body = msgspec.json.decode(request.content)
            if body["method"] == "tools/list":
                return _reply(body["id"], _complete({"tools": [
                    {"name": "ask", "inputSchema": {"type": "object", "properties": {
                        "region": {"type": "string", "x-mcp-header": "Region"}}}},
                    {"name": "bad", "inputSchema": {"type": "object", "properties": {
                        "v": {"type": "number", "x-mcp-header": "V"}}}}]}))
            return await super().__call__(request)

    client, http = client_for(WithHeaders(on_call))
    try:
        await client.connect()
        tools, skipped = await client.list_tools()
        assert [t.name for t in tools] == ["ask"] and [s.name for s in skipped] == ["bad"]
        await client.call_tool("ask", {"region": "eu"})
    finally:
        await http.aclose()


async def test_subscriptions_listen_replaces_the_get_stream_for_a_stateless_server() -> None:
    listened: list[dict[str, Any]] = []

    async def on_call(body: dict[str, Any], _: httpx.Request) -> httpx.Response:
        raise AssertionError("no call")

    class Listening(Scripted):
        async def __call__(self, request: httpx.Request) -> httpx.Response:
            assert request.method == "POST"  # never a GET stream
            body = msgspec.json.decode(request.content)
            if body["method"] != "subscriptions/listen":
                return await super().__call__(request)
            listened.append(body)
            sub = {"io.modelcontextprotocol/subscriptionId": body["id"]}
            events = [
                {"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
                 "params": {"notifications": {"toolsListChanged": True}, "_meta": sub}},
                {"jsonrpc": "2.0", "method": "notifications/tools/list_changed",
                 "params": {"_meta": sub}},
                {"jsonrpc": "2.0", "id": body["id"], "result": {"resultType": "complete",
                                                                "_meta": sub}},
            ]
            text = "".join(f"event: message\ndata: {msgspec.json.encode(e).decode()}\n\n"
                           for e in events)
            return httpx.Response(200, headers={"content-type": "text/event-stream"},
                                  content=text.encode())

    seen: list[Any] = []
    http = httpx.AsyncClient(transport=httpx.MockTransport(Listening(on_call)))
    client = McpHttpClient(HttpxTransport("http://scripted.test/mcp", client=http),
                           server="scripted", on_event=seen.append,
                           ports=McpClientPorts(sleep=_no_sleep))
    try:
        async with client:
            await client.list_tools()
            for _ in range(100):
                if any(type(e).__name__ == "McpToolListChanged" for e in seen):
                    break
                await anyio.sleep(0.01)
            await anyio.sleep(0.05)
        # Closed by the server's answer: not reopened.
        assert len(listened) == 1
        assert listened[0]["params"]["notifications"]["toolsListChanged"] is True
        assert listened[0]["params"]["_meta"][META_VERSION] == "2026-07-28"
        assert any(getattr(e, "method", "") == "notifications/subscriptions/acknowledged"
                   for e in seen)
        assert any(type(e).__name__ == "McpToolListChanged" for e in seen)
    finally:
        await http.aclose()


async def test_a_stateless_server_without_subscriptions_is_left_alone(url: str) -> None:
    transport = HttpxTransport(url)
    try:
        async with open_mcp_client(transport, server="served") as client:
            assert client.listening == 0  # bindloop's server refuses the method: no stream
            assert (await client.call_tool("add", {"a": 1, "b": 2})).content[0]["text"] == "3"
    finally:
        await transport.aclose()


async def _no_sleep(_: float) -> None:
    return None


@pytest.mark.parametrize(("uris", "kind"), [
    (["http://localhost:3000/callback"], "native"),
    (["http://127.0.0.1:8765/cb"], "native"),
    (["http://[::1]:8765/cb"], "native"),
    (["com.example.app:/oauth"], "native"),
    (["https://app.example.com/callback"], "web"),
    (["http://localhost/cb", "https://app.example.com/cb"], "web"),
    ([], "native"),
])
def test_registration_names_its_application_type(uris: list[str], kind: str) -> None:
    body = registration_body(client_name="c", redirect_uris=uris, grant_types=["x"],
                             methods=None, scope=None)
    assert body["application_type"] == application_type(uris) == kind
