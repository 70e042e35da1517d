"""bindloop as an MCP server: :class:`McpServerApp` under a real uvicorn on 127.0.0.1, read by the
official Python SDK's client and by bindloop's own client (and an agent equipping the served tools
through ``equip_mcp``); the transport's refusals over raw HTTP; hostile bodies (Hypothesis) against
the pure core and the ASGI app."""

from __future__ import annotations

import functools
import json
import math
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.hosts.stalled import stalled_body_deadlines
from bindloop.agent import ChatResult, create_agent, equip_instruction, equip_mcp, prompt_chat
from bindloop.contracts import FilePart, ImagePart, TextPart, ToolMessage, ToolResult
from bindloop.errors import ToolFailure
from bindloop.hosts.chat.access import ChatRefused, ChatRequest
from bindloop.hosts.transports.httpx import HttpxTransport
from bindloop.hosts.mcp.server import McpServerApp
from bindloop.mcp import (
    McpHttpClient,
    open_mcp_client,
)
from bindloop.mcp.server import (
    McpCall,
    McpReply,
    McpServer,
    McpToolContext,
)
from bindloop.mcp.session import McpProgress
from bindloop.tools import define_tool
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

pytestmark = pytest.mark.anyio

SECRET = "sk-live-abcdef0123456789"
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGP4z8DwHwAFAAH/iZk9HQAAAABJRU5ErkJggg=="


class AddArgs(msgspec.Struct):
    a: int
    b: int


class StepsArgs(msgspec.Struct):
    steps: int = 3


class NoArgs(msgspec.Struct):
    pass


async def _add(args: AddArgs, ctx: Any) -> ToolResult:
    return ToolResult(content=str(args.a + args.b))


async def _slow(args: StepsArgs, ctx: Any) -> ToolResult:
    report = getattr(ctx, "report_progress", None)
    for step in range(1, args.steps + 1):
        if report is not None:
            report(step, args.steps, f"step {step}")
            report(step, args.steps, "a repeated value is never sent")
        await anyio.sleep(0.005)
    return ToolResult(content="done")


async def _explode(args: NoArgs, ctx: Any) -> ToolResult:
    raise RuntimeError(f"database password {SECRET} rejected")


async def _refuse(args: NoArgs, ctx: Any) -> ToolResult:
    raise ToolFailure("not allowed on Sundays", kind="refused")


async def _picture(args: NoArgs, ctx: Any) -> ToolResult:
    return ToolResult(content=(TextPart(text="a red dot"), ImagePart(data=PNG, media_type="image/png"),
                               FilePart(data="UklGRg==", media_type="audio/wav"),
                               FilePart(data="JVBERi0=", media_type="application/pdf",
                                        filename="a.pdf")))


async def _whoami(args: NoArgs, ctx: Any) -> ToolResult:
    return ToolResult(content=f"{ctx.identity}|{ctx.session_id is not None}")


CANCELLED: list[object] = []
WAITING: list[object] = []  # one entry per ``wait`` call that is listening for its cancellation


async def _wait(args: NoArgs, ctx: Any) -> ToolResult:
    ctx.signal.add_listener(CANCELLED.append)
    WAITING.append(ctx.signal)
    await anyio.sleep(30)
    return ToolResult(content="never")


TOOLS = [
    define_tool(name="add", description="Add two integers.", args=AddArgs, execute=_add),
    define_tool(name="slow", description="Counts steps, reporting progress.", args=StepsArgs,
                execute=_slow),
    define_tool(name="explode", description="Always raises.", args=NoArgs, execute=_explode),
    define_tool(name="refuse", description="Refuses on purpose.", args=NoArgs, execute=_refuse),
    define_tool(name="picture", description="Mixed content.", args=NoArgs, execute=_picture),
    define_tool(name="whoami", description="The caller.", args=NoArgs, execute=_whoami),
    define_tool(name="wait", description="Waits to be cancelled.", args=NoArgs, execute=_wait),
]


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """``app`` under uvicorn on 127.0.0.1 (a free port), on a thread; yields the base URL."""
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
    logged: list[str] = []
    with serve(McpServerApp(TOOLS, name="served", version="1.0",
                            on_tool_exception=lambda name, exc: logged.append(name))) as base:
        yield base


TOKENS = {"Bearer alice-token": "alice", "Bearer bob-token": "bob"}


async def _authorize(request: ChatRequest) -> str:
    token = request.header("authorization")
    if token is None:
        raise ChatRefused("a bearer token is required")
    if token not in TOKENS:
        raise ChatRefused("that token may not use this server", status=403)
    return TOKENS[token]


@pytest.fixture(scope="module")
def auth_url() -> Iterator[str]:
    with serve(McpServerApp(TOOLS, authorize=_authorize,
                            www_authenticate='Bearer realm="tools"')) as base:
        yield base


# -- the official SDK's client -----------------------------------------------------------------


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_official_sdk_client_lists_and_calls_the_served_tools(
        url: str, anyio_backend: str) -> None:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async with streamable_http_client(url) as (read, write, *_):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.protocol_version == "2025-11-25"
            assert init.server_info.name == "served" and init.server_info.version == "1.0"
            listed = {t.name: t for t in (await session.list_tools()).tools}
            assert set(listed) == {t.name for t in TOOLS}
            assert listed["add"].input_schema == TOOLS[0].parameters
            assert listed["add"].description == "Add two integers."

            added = await session.call_tool("add", {"a": 2, "b": 40})
            assert not added.is_error and added.content[0].text == "42"  # type: ignore[union-attr]

            slow = await session.call_tool("slow", {"steps": 4}, progress_callback=on_progress)
            assert slow.content[0].text == "done"  # type: ignore[union-attr]
            assert progress == [(float(n), 4.0, f"step {n}") for n in range(1, 5)]

            # A raise: the client reads the redacted text the model would, never the message.
            boom = await session.call_tool("explode", {})
            assert boom.is_error and boom.content[0].text == "RuntimeError: the tool failed"  # type: ignore[union-attr]
            refused = await session.call_tool("refuse", {})
            assert refused.is_error
            assert refused.content[0].text == "not allowed on Sundays"  # type: ignore[union-attr]
            # Bad arguments: an error result the model can correct from.
            bad = await session.call_tool("add", {"a": "x", "b": 1})
            assert bad.is_error and "$.a" in bad.content[0].text  # type: ignore[union-attr]

            mixed = await session.call_tool("picture", {})
            assert [c.type for c in mixed.content] == ["text", "image", "audio", "resource"]

            with pytest.raises(MCPError) as unknown:
                await session.call_tool("nope", {})
            assert unknown.value.error.code == -32602
            await session.send_ping()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_2026_07_28_client_is_served_statelessly_on_the_same_endpoint(
        url: str, anyio_backend: str) -> None:
    """The SDK's ``Client`` probes ``server/discover`` and, finding 2026-07-28, speaks the
    stateless form (no initialize, no session); the same server answered the handshake above."""
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    progress: list[float] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(value)

    async with Client(url) as client:
        assert client.protocol_version == "2026-07-28"
        assert {t.name for t in (await client.list_tools()).tools} == {t.name for t in TOOLS}
        added = await client.call_tool("add", {"a": 2, "b": 40})
        assert added.content[0].text == "42" and added.result_type == "complete"  # type: ignore[union-attr]
        assert added.meta == {"io.modelcontextprotocol/serverInfo": {"name": "served",
                                                                     "version": "1.0"}}
        await client.call_tool("slow", {"steps": 3}, progress_callback=on_progress)
        assert progress == [1.0, 2.0, 3.0]
        boom = await client.call_tool("explode", {})
        assert boom.is_error and boom.content[0].text == "RuntimeError: the tool failed"  # type: ignore[union-attr]
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("nope", {})
        assert unknown.value.error.code == -32602


def _modern(method: str, params: dict[str, Any] | None = None, *, version: str = "2026-07-28",
            capabilities: bool = True) -> tuple[bytes, dict[str, str]]:
    meta: dict[str, Any] = {"io.modelcontextprotocol/protocolVersion": version}
    if capabilities:
        meta["io.modelcontextprotocol/clientCapabilities"] = {}
    headers = {**_HEADERS, "mcp-protocol-version": version, "mcp-method": method}
    if params is not None and "name" in params:
        headers["mcp-name"] = params["name"]
    return _rpc(method, {**(params or {}), "_meta": meta}), headers


async def test_the_stateless_form_checks_its_envelope_and_headers(url: str) -> None:
    async with httpx.AsyncClient() as http:
        body, headers = _modern("server/discover")
        discover = await http.post(url, content=body, headers=headers)  # no session needed
        result = discover.json()["result"]
        assert result["supportedVersions"][:2] == ["2026-07-28", "2025-11-25"]
        assert result["capabilities"] == {"tools": {}} and result["resultType"] == "complete"
        assert "mcp-session-id" not in discover.headers

        body, headers = _modern("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
        named = {**headers, "mcp-name": "=?base64?YWRk?="}  # "add", base64-encoded
        call = await http.post(url, content=body, headers=named)
        assert call.json()["result"]["content"] == [{"type": "text", "text": "3"}]

        async def refused(body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
            reply = await http.post(url, content=body, headers=headers)
            return reply.status_code, reply.json()["error"]

        status, error = await refused(*_modern("tools/list", capabilities=False))
        assert (status, error["code"]) == (400, -32602)
        body, headers = _modern("tools/list")
        for wrong in ({"mcp-method": "tools/call"}, {"mcp-protocol-version": "2025-11-25"}):
            status, error = await refused(body, {**headers, **wrong})
            assert (status, error["code"]) == (400, -32020)
        body, headers = _modern("tools/call", {"name": "add", "arguments": {}})
        status, error = await refused(body, {**headers, "mcp-name": "other"})
        assert (status, error["code"]) == (400, -32020)
        status, error = await refused(*_modern("tools/list", version="2099-01-01"))
        assert (status, error["code"]) == (400, -32022)
        assert error["data"] == {"supported": ["2026-07-28"], "requested": "2099-01-01"}
        status, error = await refused(*_modern("ping"))  # removed in 2026-07-28
        assert (status, error["code"]) == (404, -32601)


# -- bindloop's own client, and an agent equipping the served tools ------------------------------


@pytest.fixture
async def ours(url: str) -> AsyncIterator[McpHttpClient]:
    transport = HttpxTransport(url)
    try:
        async with open_mcp_client(transport, server="served") as mcp:
            yield mcp
    finally:
        await transport.aclose()


async def test_bindloops_client_round_trips_through_bindloops_server(
        ours: McpHttpClient) -> None:
    listed, skipped = await ours.list_tools()
    assert {t.name for t in listed} == {t.name for t in TOOLS} and skipped == ()
    assert {t.name: t.input_schema for t in listed}["add"] == TOOLS[0].parameters
    assert (await ours.call_tool("add", {"a": 1, "b": 2})).content == [
        {"type": "text", "text": "3"}]
    seen: list[McpProgress] = []
    done = await ours.call_tool("slow", {"steps": 3}, on_progress=seen.append)
    assert done.content[0]["text"] == "done"
    assert [(p.progress, p.total) for p in seen] == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]
    boom = await ours.call_tool("explode", {})
    assert boom.is_error and SECRET not in json.dumps(boom.content)


async def test_an_agent_equips_the_served_tools_through_equip_mcp(ours: McpHttpClient) -> None:
    model = scripted_stream_model([
        tool_call_turn([tool_call("srv__add", {"a": 2, "b": 40}, id="c1"),
                        tool_call("srv__explode", {}, id="c2")]),
        final_answer("42"),
    ])

    async def handler(_: None) -> ChatResult:
        equip_instruction("Add 2 and 40.")
        await equip_mcp(ours, allow=["add", "explode"], prefix="srv")
        return await prompt_chat(max_turn_steps=4)

    result = await create_agent(id="calc", handler=handler, model=model)(None)
    assert result.data == "42" and result.stop_reason == "done"
    assert sorted(t.name for t in model.requests[0].request.tools) == ["srv__add", "srv__explode"]
    answers = {m.tool_call_id: m for m in result.delta if isinstance(m, ToolMessage)}
    assert "42" in str(answers["c1"].content) and not answers["c1"].is_error
    assert answers["c2"].is_error and SECRET not in str(answers["c2"].content)


# -- the transport over raw HTTP ---------------------------------------------------------------

_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _rpc(method: str, params: dict[str, Any] | None = None, ident: int | None = 1) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    if ident is not None:
        message["id"] = ident
    return json.dumps(message).encode()


_INIT = _rpc("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                            "clientInfo": {"name": "raw", "version": "0"}})


async def _open_session(http: httpx.AsyncClient, url: str, **headers: str) -> str:
    reply = await http.post(url, content=_INIT, headers={**_HEADERS, **headers})
    assert reply.status_code == 200, reply.text
    return reply.headers["mcp-session-id"]


async def test_sessions_are_required_known_and_ended_by_delete(url: str) -> None:
    async with httpx.AsyncClient() as http:
        session = await _open_session(http, url)
        assert len(session) >= 24  # a secure random id from the ASGI host, not a counter
        listing = _rpc("tools/list")
        missing = await http.post(url, content=listing, headers=_HEADERS)
        assert missing.status_code == 400 and missing.json()["error"]["code"] == -32000
        unknown = await http.post(url, content=listing,
                                  headers={**_HEADERS, "mcp-session-id": "nope"})
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == -32001
        ok = await http.post(url, content=listing, headers={**_HEADERS, "mcp-session-id": session})
        assert ok.status_code == 200 and len(ok.json()["result"]["tools"]) == len(TOOLS)
        note = await http.post(url, content=_rpc("notifications/initialized", ident=None),
                               headers={**_HEADERS, "mcp-session-id": session})
        assert note.status_code == 202 and note.content == b""
        ended = await http.delete(url, headers={"mcp-session-id": session})
        assert ended.status_code == 200
        after = await http.post(url, content=listing,
                                headers={**_HEADERS, "mcp-session-id": session})
        assert after.status_code == 404
        again = await http.delete(url, headers={"mcp-session-id": session})
        assert again.status_code == 404


async def test_refusals_are_typed_json_rpc_errors(url: str) -> None:
    async with httpx.AsyncClient() as http:
        session = await _open_session(http, url)
        headers = {**_HEADERS, "mcp-session-id": session}

        async def post(body: bytes, **extra: str) -> httpx.Response:
            return await http.post(url, content=body, headers={**headers, **extra})

        cases = [
            (await post(b"{not json"), 400, -32700),
            (await post(b"[" + _rpc("ping") + b"]"), 400, -32600),
            (await post(b'"just a string"'), 400, -32600),
            (await post(b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}'), 400, -32600),
            (await post(b'{"jsonrpc": "2.0", "id": 1, "method": 7}'), 400, -32600),
            (await post(b"[" * 100_000), 400, -32700),
            (await post(_rpc("resources/list")), 200, -32601),
            (await post(_rpc("tools/call", {"name": 3})), 200, -32602),
            (await post(_rpc("tools/call", {"name": "add", "arguments": [1]})), 200, -32602),
            (await post(_rpc("ping"), **{"mcp-protocol-version": "1999-01-01"}), 400, -32000),
        ]
        for reply, status, code in cases:
            assert reply.status_code == status, reply.text
            body = reply.json()
            assert body["jsonrpc"] == "2.0" and body["error"]["code"] == code, body
        assert cases[6][0].json()["id"] == 1  # the request's id is kept where it was readable
        big = await post(b" " * (1024 * 1024 + 1))
        assert big.status_code == 413
        wrong_type = await post(_rpc("ping"), **{"content-type": "text/plain"})
        assert wrong_type.status_code == 415
        html_only = await post(_rpc("ping"), accept="text/html")
        assert html_only.status_code == 406
        get = await http.get(url, headers={"accept": "text/event-stream",
                                           "mcp-session-id": session})
        assert get.status_code == 405 and get.headers["allow"] == "POST, DELETE"
        elsewhere = await http.post(url.replace("/mcp", "/other"), content=_rpc("ping"),
                                    headers=headers)
        assert elsewhere.status_code == 404
        rebinding = await post(_rpc("ping"), origin="http://evil.example")
        assert rebinding.status_code == 403
        rebound = await post(_rpc("ping"), host="evil.example", origin="http://evil.example")
        assert rebound.status_code == 403  # DNS rebinding: a loopback server serves loopback names
        same = await post(_rpc("ping"), origin=url.rsplit("/", 1)[0])
        assert same.status_code == 200 and same.json()["result"] == {}


async def _until_waiting() -> None:
    """Until the served ``wait`` tool runs and listens for its cancellation (a generous deadline:
    on a loaded machine the call can take a while to reach it)."""
    with anyio.fail_after(20):
        while not WAITING:
            await anyio.sleep(0.01)


async def test_a_cancelled_call_is_stopped_and_answered_as_cancelled(url: str) -> None:
    CANCELLED.clear()
    WAITING.clear()
    async with httpx.AsyncClient(timeout=30) as http:
        session = await _open_session(http, url)
        headers = {**_HEADERS, "mcp-session-id": session}
        answer: dict[str, Any] = {}

        async def call() -> None:
            reply = await http.post(url, content=_rpc("tools/call", {"name": "wait"}, ident=9),
                                    headers=headers)
            answer.update(reply.json())

        async with anyio.create_task_group() as tg:
            tg.start_soon(call)
            await _until_waiting()  # the call is running: the cancellation has a call to stop
            started = time.monotonic()
            cancel = await http.post(url, content=_rpc("notifications/cancelled", {
                "requestId": 9, "reason": "user pressed stop"}, ident=None), headers=headers)
            assert cancel.status_code == 202
        # answered at the cancellation, far before the tool's 30 s wait (even on a loaded machine)
        assert time.monotonic() - started < 20
        assert answer["id"] == 9 and answer["error"]["code"] == -32800
        assert CANCELLED == ["user pressed stop"]


async def test_a_client_that_goes_away_cancels_its_call(url: str) -> None:
    CANCELLED.clear()
    WAITING.clear()
    async with httpx.AsyncClient(timeout=30) as http:
        session = await _open_session(http, url)
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(
                http.post, url, content=_rpc("tools/call", {"name": "wait"}),
                headers={**_HEADERS, "mcp-session-id": session}))
            await _until_waiting()  # the call runs on the server ...
            tg.cancel_scope.cancel()  # ... when its client goes away mid-request
    with anyio.fail_after(20):
        while not CANCELLED:
            await anyio.sleep(0.02)
    assert CANCELLED == ["the call was cancelled"]


async def test_the_identity_hook_applies_and_owns_its_sessions(auth_url: str) -> None:
    async with httpx.AsyncClient() as http:
        none = await http.post(auth_url, content=_INIT, headers=_HEADERS)
        assert none.status_code == 401 and "bearer token" in none.json()["error"]["message"]
        assert none.headers["www-authenticate"] == 'Bearer realm="tools"'
        wrong = await http.post(auth_url, content=_INIT,
                                headers={**_HEADERS, "authorization": "Bearer mallory"})
        assert wrong.status_code == 403 and "www-authenticate" not in wrong.headers
        alice = {"authorization": "Bearer alice-token"}
        session = await _open_session(http, auth_url, **alice)
        call = _rpc("tools/call", {"name": "whoami", "arguments": {}})
        mine = await http.post(auth_url, content=call,
                               headers={**_HEADERS, **alice, "mcp-session-id": session})
        assert mine.json()["result"]["content"][0]["text"] == "alice|True"
        theirs = await http.post(auth_url, content=call, headers={
            **_HEADERS, "authorization": "Bearer bob-token", "mcp-session-id": session})
        assert theirs.status_code == 404  # another identity's session does not exist for bob


async def test_progress_without_a_token_or_out_of_order_is_not_sent() -> None:
    server = McpServer(TOOLS, sessions=False)
    emitted: list[bytes] = []
    body = _rpc("tools/call", {"name": "slow", "arguments": {"steps": 2}})
    call = server.post(body, session_id="made-up")  # no sessions: a client's id means nothing
    assert isinstance(call, McpCall) and call.progress_token is None and call.session_id is None
    answer = json.loads(await server.run_call(call, emitted.append))
    assert answer["result"]["content"] == [{"type": "text", "text": "done"}] and emitted == []
    with_token = server.post(_rpc("tools/call", {"name": "slow", "arguments": {"steps": 2},
                                                 "_meta": {"progressToken": "t"}}))
    assert isinstance(with_token, McpCall)
    await server.run_call(with_token, emitted.append)
    sent = [json.loads(m)["params"] for m in emitted]
    assert [p["progress"] for p in sent] == [1, 2]  # the repeated values were dropped
    assert all(p["progressToken"] == "t" for p in sent)


# -- hostile input ---------------------------------------------------------------------------

_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12)
_MESSAGES = st.fixed_dictionaries({}, optional={
    "jsonrpc": st.sampled_from(["2.0", "1.0", 2]) | _JSON_VALUES,
    "id": st.integers() | st.text(max_size=8) | _JSON_VALUES,
    "method": st.sampled_from(["initialize", "ping", "tools/list", "tools/call",
                               "notifications/cancelled", "x"]) | _JSON_VALUES,
    "params": st.fixed_dictionaries({}, optional={
        "name": st.sampled_from([t.name for t in TOOLS]) | _JSON_VALUES,
        "arguments": _JSON_VALUES, "protocolVersion": _JSON_VALUES,
        "_meta": st.fixed_dictionaries({}, optional={
            "io.modelcontextprotocol/protocolVersion": st.sampled_from(["2026-07-28", "x"])
            | _JSON_VALUES,
            "io.modelcontextprotocol/clientCapabilities": _JSON_VALUES,
            "progressToken": _JSON_VALUES}) | _JSON_VALUES,
        "requestId": _JSON_VALUES}) | _JSON_VALUES,
    "result": _JSON_VALUES, "error": _JSON_VALUES})
_BODIES = st.binary(max_size=200) | _MESSAGES.map(lambda m: json.dumps(m).encode()) | \
    _JSON_VALUES.map(lambda v: json.dumps(v).encode())


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_BODIES, session=st.none() | st.sampled_from(["session-1", "x"]),
       version=st.none() | st.sampled_from(["2025-11-25", "2026-07-28", "bogus"]),
       method=st.none() | st.sampled_from(["tools/call", "tools/list", "server/discover"]),
       name=st.none() | st.sampled_from(["add", "=?base64?!!?=", "=?base64?YWRk?="]))
def test_no_body_makes_the_core_raise_or_answer_outside_json_rpc(
        body: bytes, session: str | None, version: str | None, method: str | None,
        name: str | None) -> None:
    server = McpServer(TOOLS)
    server.post(_INIT)  # session-1 exists
    decided = server.post(body, session_id=session, protocol_version=version,
                          method_header=method, name_header=name)
    if isinstance(decided, McpCall):
        assert decided.tool in server.tools
        return
    assert isinstance(decided, McpReply) and decided.status in (200, 202, 400, 404, 413)
    if decided.body is not None:
        reply = json.loads(decided.body)
        assert reply["jsonrpc"] == "2.0" and ("result" in reply) != ("error" in reply)
        if "error" in reply:
            assert reply["error"]["code"] in (-32700, -32600, -32601, -32602, -32000, -32001,
                                              -32020, -32022)
            assert "Traceback" not in reply["error"]["message"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_no_request_makes_the_asgi_app_answer_500_or_leak(anyio_backend: str) -> None:
    app = McpServerApp(TOOLS, max_body=4096)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        session = await _open_session(http, "/mcp")
        seen: set[int] = set()

        @settings(max_examples=150, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
        @given(body=_BODIES | st.binary(min_size=4097, max_size=5000),
               method=st.sampled_from(["POST", "POST", "POST", "GET", "DELETE", "PUT"]),
               content_type=st.sampled_from(["application/json", "text/plain", ""]),
               with_session=st.booleans())
        def one(body: bytes, method: str, content_type: str, with_session: bool) -> None:
            headers = {"accept": "application/json, text/event-stream"}
            if content_type:
                headers["content-type"] = content_type
            if with_session:
                headers["mcp-session-id"] = session

            async def go() -> httpx.Response:
                return await http.request(method, "/mcp", content=body, headers=headers)

            reply = anyio.from_thread.run(go)
            seen.add(reply.status_code)
            assert reply.status_code < 500
            assert b"Traceback" not in reply.content and SECRET.encode() not in reply.content

        await anyio.to_thread.run_sync(one)
        assert 413 in seen and 200 in seen


@settings(max_examples=200, deadline=None)
@given(reports=st.lists(st.tuples(
    st.integers(-5, 20) | st.floats(allow_nan=True, allow_infinity=True) | st.booleans(),
    st.none() | st.floats(allow_nan=True) | st.integers(0, 30),
    st.none() | st.text(max_size=5)), max_size=12), token=st.none() | st.sampled_from([7, "t"]))
def test_progress_sent_is_finite_and_strictly_increasing(
        reports: list[tuple[Any, Any, Any]], token: int | str | None) -> None:
    from bindloop.signal import AbortController

    sent: list[bytes] = []
    ctx = McpToolContext(tool_name="t", request_id=1, session_id=None, identity="",
                         signal=AbortController().signal, progress_token=token, emit=sent.append)
    answers = [ctx.report_progress(p, t, m) for p, t, m in reports]
    assert answers.count(True) == len(sent)
    values = [json.loads(m)["params"] for m in sent]
    if token is None:
        assert sent == []
    progress = [v["progress"] for v in values]
    assert progress == sorted(set(progress)) and all(math.isfinite(p) for p in progress)
    assert all(v["progressToken"] == token and math.isfinite(v.get("total", 0)) for v in values)
    assert all(json.loads(m)["method"] == "notifications/progress" for m in sent)


def test_sessions_are_bounded_and_minted_ids_checked() -> None:
    from bindloop.errors import PortContractError

    server = McpServer(TOOLS, max_sessions=2)
    first, second, third = (server.post(_INIT) for _ in range(3))
    assert server.session_count == 2
    ping = _rpc("ping")
    assert server.post(ping, session_id=first.session_id).status == 404  # type: ignore[union-attr]
    assert server.post(ping, session_id=third.session_id).status == 200  # type: ignore[union-attr]
    server.close()
    assert server.session_count == 0
    bad = McpServer(TOOLS, session_ids=lambda: "same id")
    with pytest.raises(PortContractError, match="session_ids"):
        bad.post(_INIT)


def test_tools_are_checked_when_served() -> None:
    from bindloop.errors import UsageError

    with pytest.raises(UsageError, match="two tools"):
        McpServer([TOOLS[0], TOOLS[0]])
    with pytest.raises(UsageError, match="bindloop Tools"):
        McpServer([object()])  # type: ignore[list-item]


def _docs_example() -> dict[str, Any]:
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text()
    section = text.split("## bindloop as an MCP server", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    namespace: dict[str, Any] = {"__name__": "docs_mcp"}
    exec(compile(block, "docs/mcp.md", "exec"), namespace)
    return namespace


async def test_the_docs_example_serves_a_tool_and_an_agent_as_one_tool() -> None:
    """docs/mcp.md's server example, as written, with a scripted model for the agent: bindloop's
    client (behind the example's bearer token) calls the plain tool and the agent-tool."""
    example = _docs_example()
    model = scripted_stream_model([final_answer("Paris.")])
    app = example["build_app"](model)
    with serve(app) as base:
        transport = HttpxTransport(base, headers=[("authorization", "Bearer let-me-in")])
        try:
            async with open_mcp_client(transport, server="docs") as mcp:
                assert (await mcp.call_tool("add", {"a": 1, "b": 2})).content[0]["text"] == "3"
                seen: list[McpProgress] = []
                answer = await mcp.call_tool("ask_researcher", {"question": "Capital of France?"},
                                             on_progress=seen.append)
                assert answer.content == [{"type": "text", "text": "Paris."}]
                assert [p.message for p in seen] == ["thinking"]
        finally:
            await transport.aclose()
        async with httpx.AsyncClient() as http:
            refused = await http.post(base, content=_INIT, headers=_HEADERS)
            assert refused.status_code == 401


def test_a_body_timeout_that_is_not_positive_is_refused_when_the_app_is_built() -> None:
    for bad in (0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="body_timeout_s"):
            McpServerApp([], body_timeout_s=bad)


def test_stalled_bodies_that_arrived_together_time_out_at_deadlines_of_their_own() -> None:
    """As on the chat host: each stalled body's 408 names its own deadline, all within the last
    quarter of ``body_timeout_s`` -- a crowd is not refused in one instant."""
    with serve(McpServerApp(TOOLS, body_timeout_s=2.0)) as url:
        deadlines = stalled_body_deadlines(int(url.split(":")[2].split("/")[0]), (
            b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b"accept: application/json, text/event-stream\r\ncontent-length: 100\r\n\r\n{"))
    assert all(1.5 <= d <= 2.0 for d in deadlines), deadlines
    assert len(set(deadlines)) == 4, deadlines
