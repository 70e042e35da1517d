"""The binding-neutral MCP handler (``answer_mcp_http``): one request in, one whole answer out —
what the Worker's ``/mcp`` route sends. Its refusals, a session's header, a call's JSON reply and
a progress call buffered as one event stream; Hypothesis over hostile bodies and headers."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.contracts import ToolResult
from bindloop.mcp.server import (
    McpCall,
    McpHttpAnswer,
    McpServer,
    answer_mcp_call,
    answer_mcp_http,
    decide_mcp_http,
    mcp_http_streams,
)
from bindloop.tools import define_tool

pytestmark = pytest.mark.anyio


class Steps(msgspec.Struct):
    steps: int = 2


async def _count(args: Steps, ctx: Any) -> ToolResult:
    for step in range(1, args.steps + 1):
        ctx.report_progress(step, args.steps)
    return ToolResult(content=f"counted {args.steps}")


COUNT = define_tool(name="count", description="Count with progress.", args=Steps, execute=_count)
JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _rpc(method: str, params: dict[str, Any] | None = None, ident: int = 1) -> bytes:
    return msgspec.json.encode({"jsonrpc": "2.0", "id": ident, "method": method,
                                **({"params": params} if params is not None else {})})


def _error(answer: McpHttpAnswer) -> dict[str, Any]:
    error: dict[str, Any] = msgspec.json.decode(answer.body)["error"]
    return error


async def test_refusals_before_the_body_is_read() -> None:
    server = McpServer([COUNT], sessions=False)
    get = await answer_mcp_http(server, method="GET", headers=JSON, body=b"")
    assert get.status == 405 and ("allow", "POST, DELETE") in get.headers
    plain = await answer_mcp_http(server, method="POST", body=_rpc("tools/list"),
                                  headers={**JSON, "content-type": "text/plain"})
    assert plain.status == 415 and _error(plain)["code"] == -32000
    html = await answer_mcp_http(server, method="POST", body=_rpc("tools/list"),
                                 headers={**JSON, "accept": "text/html"})
    assert html.status == 406
    big = await answer_mcp_http(McpServer([COUNT], max_body=10), method="POST", headers=JSON,
                                body=_rpc("tools/list"))
    assert big.status == 413
    delete = await answer_mcp_http(server, method="DELETE", headers=JSON, body=b"")
    assert delete.status == 405  # no sessions to end


async def test_a_session_a_json_call_and_a_buffered_progress_stream() -> None:
    server = McpServer([COUNT])
    opened = await answer_mcp_http(server, method="POST", headers=JSON, body=_rpc(
        "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "1"}}))
    session = dict(opened.headers)["mcp-session-id"]
    headers = {**JSON, "mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    plain = await answer_mcp_http(server, method="POST", headers=headers, body=_rpc(
        "tools/call", {"name": "count", "arguments": {"steps": 3}}, 2))
    assert dict(plain.headers)["content-type"] == "application/json"
    assert msgspec.json.decode(plain.body)["result"]["content"][0]["text"] == "counted 3"
    streamed = await answer_mcp_http(server, method="POST", headers=headers, body=_rpc(
        "tools/call", {"name": "count", "arguments": {"steps": 2},
                       "_meta": {"progressToken": "p"}}, 3))
    assert dict(streamed.headers)["content-type"] == "text/event-stream"
    events = [msgspec.json.decode(line[6:]) for line in streamed.body.decode().splitlines()
              if line.startswith("data: ")]
    assert [e.get("method") for e in events] == ["notifications/progress"] * 2 + [None]
    assert events[-1]["id"] == 3 and events[-1]["result"]["content"][0]["text"] == "counted 2"
    ended = await answer_mcp_http(server, method="DELETE", headers=headers, body=b"")
    assert ended.status == 200 and server.session_count == 0


async def test_the_halves_decide_then_run_a_call_and_say_when_it_streams() -> None:
    server = McpServer([COUNT], sessions=False)
    refused = decide_mcp_http(server, method="GET", headers=JSON, body=b"")
    assert isinstance(refused, McpHttpAnswer) and refused.status == 405
    listed = decide_mcp_http(server, method="POST", headers=JSON, body=_rpc("tools/list"))
    assert isinstance(listed, McpHttpAnswer) and listed.status == 200
    progress = {"name": "count", "arguments": {"steps": 2}, "_meta": {"progressToken": 1}}
    call = decide_mcp_http(server, method="POST", headers=JSON, body=_rpc("tools/call", progress))
    assert isinstance(call, McpCall)
    assert mcp_http_streams(call, JSON)
    assert not mcp_http_streams(call, {**JSON, "accept": "application/json"})
    quiet = decide_mcp_http(server, method="POST", headers=JSON,
                            body=_rpc("tools/call", {"name": "count"}))
    assert isinstance(quiet, McpCall) and not mcp_http_streams(quiet, JSON)
    answered = await answer_mcp_call(server, call, JSON)
    assert dict(answered.headers)["content-type"] == "text/event-stream"
    assert answered.body.count(b"notifications/progress") == 2


_HEADER_NAMES = st.sampled_from(["content-type", "accept", "mcp-session-id",
                                 "mcp-protocol-version", "mcp-method", "mcp-name"])


@settings(max_examples=150, deadline=None)
@given(method=st.sampled_from(["POST", "DELETE", "GET", "PUT", "post"]),
       headers=st.dictionaries(_HEADER_NAMES, st.text(max_size=40), max_size=6),
       body=st.one_of(st.binary(max_size=200), st.builds(
           lambda m, p: _rpc(m, p), st.sampled_from(
               ["tools/call", "tools/list", "initialize", "server/discover", "ping", "x"]),
           st.one_of(st.none(), st.dictionaries(st.sampled_from(
               ["name", "arguments", "_meta", "protocolVersion"]), st.one_of(
               st.text(max_size=10), st.integers(), st.dictionaries(
                   st.text(max_size=5), st.text(max_size=5), max_size=2)), max_size=4)))))
async def test_no_request_makes_the_handler_raise_or_leak(method: str, headers: dict[str, str],
                                                          body: bytes) -> None:
    server = McpServer([COUNT], sessions=False, max_body=150)
    answer = await answer_mcp_http(server, method=method, headers=headers, body=body)
    assert answer.status in (200, 202, 400, 404, 405, 406, 413, 415)
    assert b"Traceback" not in answer.body
    if answer.status >= 400 and answer.body:
        assert "code" in _error(answer)
