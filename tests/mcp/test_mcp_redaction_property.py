"""A Hypothesis property over the one redaction rule of the MCP client: whatever credential the
host sends (on the client's headers), wherever a server echoes it (an HTTP error body, a JSON-RPC
error's message or data, a tool's error text, an unusable event) and in whatever spelling (as
sent, JSON-escaped, URL-encoded), it reaches no exception text, no error field and no tool message
the model reads. An in-memory transport keeps it fast enough for many examples."""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings, strategies as st

from bindloop.errors import ToolFailure
from bindloop.mcp import McpError, McpHttpClient, McpHttpError, McpRpcError, load_mcp_tools
from bindloop.mcp import McpLimits
from bindloop.wire import HttpRequest

PLACES = ("http_body", "rpc_message", "rpc_data", "tool_error", "bad_event")
SPELLINGS = ("raw", "json", "url")


class _Response:
    def __init__(self, status: int, body: bytes, headers: Sequence[tuple[str, str]]) -> None:
        self.status = status
        self.headers = list(headers)
        self._body = body

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        yield self._body


class EchoTransport:
    """A server that echoes the request's credential into one place of its tools/call answer."""

    def __init__(self, place: str, spelling: str) -> None:
        self.place = place
        self.spelling = spelling

    def _echo(self, request: HttpRequest) -> str:
        sent = dict(request.headers).get("authorization", "")
        if self.spelling == "json":
            return json.dumps(sent)[1:-1]
        if self.spelling == "url":
            return urllib.parse.quote(sent, safe="")
        return sent

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Response]:
        json_type = [("content-type", "application/json")]
        if request.method != "POST":
            yield _Response(405, b"", [])
            return
        rpc = json.loads(request.body)
        if "id" not in rpc:
            yield _Response(202, b"", [])
            return
        if rpc["method"] == "initialize":
            result: Any = {"protocolVersion": "2025-11-25", "capabilities": {},
                           "serverInfo": {"name": "echo"}}
        elif rpc["method"] == "tools/list":
            result = {"tools": [{"name": "t", "inputSchema": {"type": "object"}}]}
        else:
            echo = self._echo(request)
            if self.place == "http_body":
                yield _Response(500, f"denied: {echo}".encode(), [])
                return
            if self.place == "bad_event":
                yield _Response(200, f"data: not json {echo}\n\n".encode(),
                                [("content-type", "text/event-stream")])
                return
            if self.place in ("rpc_message", "rpc_data"):
                error = {"code": -32000, "message": f"denied for {echo}"
                         if self.place == "rpc_message" else "denied",
                         "data": {"seen": echo} if self.place == "rpc_data" else None}
                body = {"jsonrpc": "2.0", "id": rpc["id"], "error": error}
                yield _Response(200, json.dumps(body).encode(), json_type)
                return
            result = {"isError": True, "content": [{"type": "text", "text": f"no: {echo}"}]}
        body = json.dumps({"jsonrpc": "2.0", "id": rpc["id"], "result": result}).encode()
        yield _Response(200, body, [*json_type, ("mcp-session-id", "s")])


async def _shown(secret: str, place: str, spelling: str) -> list[str]:
    mcp = McpHttpClient(EchoTransport(place, spelling), server="echo", modern_versions=(),
                        headers=[("authorization", f"Bearer {secret}")],
                        limits=McpLimits(timeout_ms=5_000))
    texts: list[str] = []
    try:
        await mcp.connect()
        await mcp.call_tool("t", {})
    except McpError as exc:
        texts += [str(exc), repr(exc), exc.detail]
        if isinstance(exc, McpHttpError):
            texts.append(exc.body)
        if isinstance(exc, McpRpcError):
            texts += [exc.rpc_message, json.dumps(exc.data)]
    tool = (await load_mcp_tools(mcp, prefix="")).tools[0]
    try:
        outcome = await tool.execute({}, None)
        texts.append(str(outcome))
    except ToolFailure as exc:
        texts += [str(exc), exc.message]
    return texts


secrets = st.text(alphabet="abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ0123456789-_.~+/",
                  min_size=12, max_size=40).filter(lambda s: any(c.isdigit() for c in s))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(secret=secrets, place=st.sampled_from(PLACES), spelling=st.sampled_from(SPELLINGS))
def test_an_echoed_credential_never_reaches_an_error_or_the_model(secret: str, place: str,
                                                                  spelling: str) -> None:
    texts = anyio.run(_shown, secret, place, spelling)
    assert texts, "the scenario produced nothing to check"
    forms = {secret, json.dumps(secret)[1:-1], urllib.parse.quote(secret, safe="")}
    for text in texts:
        for form in forms:
            assert form not in text, (place, spelling, text)
