"""The Worker as an MCP server: ``POST /mcp`` (and ``DELETE``) serves the agent's tools
(the entrypoint's ``tools``, the ones the agent equips) to any MCP client, through bindloop's
binding-neutral handler (:func:`bindloop.mcp.server.answer_mcp_http`). Stateless: the 2026-07-28 form
needs no session, and 2025-11-25 clients get no ``Mcp-Session-Id`` (``McpServer(sessions=False)``),
so any request may reach any isolate and no Durable Object is involved. A call whose client asked
for progress and takes an event stream is answered on one as it runs (each
``notifications/progress`` when the tool reports it, then the result), kept alive with
``ctx.waitUntil`` and cancelled when the client hangs up; any other answer is sent whole. The caller is who
:meth:`~bindloop.hosts.workers.app.ChatWorker.authorize` says; a refusal is a JSON-RPC error
body. A tool that suspends for the user (``ask_user``) asks a 2026-07-28 client for the
answer (Multi Round-Trip Requests) when the Worker has an ``MCP_STATE_SECRET`` secret (at least
16 bytes, the same on every isolate: it seals the call's state into the ``requestState`` the
client sends back, to any isolate); without one, or for a 2025-11-25 client, the suspend is an
error result saying the call cannot be resumed.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from workers import Response  # type: ignore[import-not-found]

from bindloop.hosts.workers.agent import HttpError, _setting
from bindloop.hosts.workers.web import EventStream, Routes, read_text
from bindloop.mcp.server import (
    McpCall,
    McpHttpAnswer,
    McpServer,
    answer_mcp_call,
    decide_mcp_http,
    mcp_http_streams,
)
from bindloop.tools import Tool

__all__ = ("add_mcp_routes",)

MAX_BODY = 1024 * 1024
LIVE_HEARTBEAT_MS = 5_000
"""A streamed call's keep-alive comment interval while the tool is quiet."""
_HEADERS = ("content-type", "accept", "mcp-session-id", "mcp-protocol-version", "mcp-method",
            "mcp-name")
"""The request headers the MCP handler reads, besides the ``Mcp-Param-*`` ones the served tools'
``x-mcp-header`` annotations name."""


class _Servers:
    # One server per tool set and state secret, made on first use (not at import: the Worker's
    # tools are its entrypoint's class attribute); a server holds no request state
    # (``sessions=False``).
    made: dict[tuple[tuple[Tool[Any, Any], ...], bytes | None], McpServer] = {}


def state_secret(env: Any) -> bytes | None:
    """``MCP_STATE_SECRET`` as the server's key (``None`` when unset); shorter than 16 bytes is a
    ``misconfigured`` 500 that never shows the value."""
    text = _setting(env, "MCP_STATE_SECRET")
    if text is None:
        return None
    secret = text.encode()
    if len(secret) < 16:
        raise HttpError(500, "misconfigured", "MCP_STATE_SECRET must be at least 16 bytes; set "
                        "it with `uv run pywrangler secret put MCP_STATE_SECRET`")
    return secret


def server_for(tools: tuple[Tool[Any, Any], ...], secret: bytes | None = None) -> McpServer:
    """The stateless MCP server of ``tools`` sealing with ``secret``, one per isolate, tool set
    and secret."""
    server = _Servers.made.get((tools, secret))
    if server is None:
        server = _Servers.made[tools, secret] = McpServer(
            tools, name="bindloop-worker", sessions=False, max_body=MAX_BODY,
            state_secret=secret)
    return server


async def mcp(owner: Any, request: Any, _match: Any) -> Response:
    try:
        secret = state_secret(owner.env)
        identity = await owner.authorize(request)
        body = await read_text(request, max_bytes=MAX_BODY) if str(request.method) == "POST" \
            else ""
    except HttpError as exc:
        refusal = {"jsonrpc": "2.0", "id": None, "error": {"code": -32000,
                                                           "message": exc.body()["message"]}}
        return Response(json.dumps(refusal), status=exc.status,
                        headers={"content-type": "application/json"})
    server = server_for(owner.tools, secret)
    wanted = (*_HEADERS, *(f"mcp-param-{name}" for name in sorted(server.param_header_names)))
    headers = {name: str(value) for name in wanted
               if (value := request.headers.get(name)) is not None}
    decided = decide_mcp_http(server, method=str(request.method), headers=headers,
                              body=body.encode(), identity=identity)
    if isinstance(decided, McpCall) and mcp_http_streams(decided, headers):
        return _live(owner, server, decided)
    answer = decided if isinstance(decided, McpHttpAnswer) \
        else await answer_mcp_call(server, decided, headers)
    return Response(answer.body.decode(), status=answer.status, headers=dict(answer.headers))


def _live(owner: Any, server: McpServer, call: McpCall) -> Response:
    """``call`` answered on an event stream written as it runs: each progress notification as
    the tool reports it (``event: message``), then the response; the run outlives this handler
    through ``ctx.waitUntil``."""
    # The keep-alive comments also find a client that hung up (on_gone): workerd stops taking
    # a stream's writes then, without erroring it.
    stream = EventStream(heartbeat_ms=LIVE_HEARTBEAT_MS,
                         headers={"content-type": "text/event-stream",
                                  "cache-control": "no-cache"})

    def emit(message: bytes) -> None:
        stream.send_encoded("message", message.decode())

    async def run() -> None:
        try:
            emit(await server.run_call(call, emit))
        except asyncio.CancelledError:
            pass  # the client went away: the tool's signal fired, nothing is left to answer
        finally:
            await stream.close()

    task = asyncio.ensure_future(run())
    # a client that hangs up cancels its call, as on CPython
    stream.on_gone(task.cancel, every_ms=LIVE_HEARTBEAT_MS)
    owner.ctx.waitUntil(task)
    return stream.response()


def add_mcp_routes(routes: Routes) -> None:
    """``POST /mcp`` and ``DELETE /mcp`` (any other method: 405 from the route table)."""
    routes.add("POST", "/mcp", mcp)
    routes.add("DELETE", "/mcp", mcp)
