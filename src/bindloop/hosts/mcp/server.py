"""bindloop tools served over MCP's streamable HTTP transport (2025-11-25 sessions and the
stateless 2026-07-28 form, per request), as a plain ASGI app.

    app = McpServerApp([add, search])          # uvicorn module:app

The protocol's decisions are :class:`bindloop.mcp.server.McpServer`'s (pure); this module only moves
bytes: the endpoint (``/mcp`` by default) takes ``POST`` (one JSON-RPC message; a ``tools/call``
that sent a ``progressToken`` is answered on an event stream carrying its progress, everything
else with one JSON body), ``DELETE`` (ends the session) and answers ``GET`` with 405 (this server
opens no stream of its own). Before anything else: the ``Host`` and ``Origin`` checks (DNS
rebinding: a browser page's request from another origin is refused with 403) and the identity hook of the
web host (``authorize``, as :class:`bindloop.hosts.asgi.chat.ChatApp` takes it: 401/403 when it
refuses; the identity owns the sessions it opens). Bodies are bounded (413). A client that goes
away cancels its call.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import anyio
import msgspec

from bindloop.contracts import ToolError
from bindloop.mcp.server import (
    McpCall,
    McpReply,
    McpServer,
    mcp_param_headers,
    mcp_post_refusal,
)
from bindloop.tools import Tool

from bindloop.hosts.asgi.chat import chat_request, read_body
from bindloop.hosts.chat.access import Authorize, ChatRefused
from bindloop.hosts.chat.bodies import BodyRefused, staggered_timeout

__all__ = ("McpServerApp",)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

_LOG = logging.getLogger("bindloop.hosts.mcp.server")
_ENCODER = msgspec.json.Encoder()
_PROGRESS_BUFFER = 256  # progress notifications queued for a slow reader; more are dropped


class _Refused(Exception):
    def __init__(self, status: int, code: int, message: str,
                 headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.headers = list(headers)


def _log_tool_exception(tool: str, exc: BaseException) -> None:
    _LOG.error("MCP tool %r raised", tool, exc_info=exc)


class McpServerApp:
    """An ASGI app serving ``tools`` (bindloop :class:`~bindloop.tools.Tool` values, or an
    :class:`~bindloop.mcp.server.McpServer` built with its own options) at ``path``.

    ``authorize``: ``await authorize(ChatRequest) -> identity`` or raise
    :class:`~bindloop.hosts.chat.access.ChatRefused`, run on every request.
    ``allowed_origins``: origins (``scheme://host[:port]``) whose browser requests are served besides the request's own host
    (and, on loopback, loopback origins); a request without ``Origin`` (not a browser's) is not
    checked. Served on a loopback address, the app answers only ``Host`` names that are loopback
    (``localhost``, ``127.0.0.1``, ``[::1]``) or in ``allowed_hosts`` (``name`` or
    ``name:port``): the guard against DNS rebinding. ``www_authenticate``: the challenge sent
    with every 401 (e.g. ``Bearer resource_metadata="https://.../.well-known/oauth-protected-
    resource"``, which MCP clients follow to authorize). ``max_body``: bytes (413 above
    it). ``body_timeout_s``: how long a body may take to arrive (408; staggered over its last
    quarter, as the chat host's). Sessions get ids from
    ``secrets.token_urlsafe`` unless ``session_ids`` is given. A tool's raise is logged here
    (logger ``bindloop.hosts.mcp.server``) unless ``on_tool_exception`` says otherwise; the
    client reads what the model would (see :meth:`McpServer.run_call`). ``state_secret``: the
    key that lets a suspended tool ask a 2026-07-28 client for its answer, ``state_ttl_ms`` how
    long such a question stays answerable, ``required_client_capabilities`` the capabilities a
    tool's 2026-07-28 callers must declare (``McpServer``'s).
    """

    def __init__(self, tools: Sequence[Tool[Any, Any]] | McpServer, *, path: str = "/mcp",
                 authorize: Authorize | None = None, allowed_origins: Sequence[str] = (),
                 allowed_hosts: Sequence[str] = (), www_authenticate: str | None = None,
                 name: str = "bindloop", version: str = "", instructions: str | None = None,
                 sessions: bool = True, session_ids: Callable[[], str] | None = None,
                 max_body: int = 1024 * 1024, body_timeout_s: float = 30.0,
                 format_tool_exception: Callable[[Exception], ToolError] | None = None,
                 is_fatal_tool_error: Callable[[BaseException], bool] | None = None,
                 on_tool_exception: Callable[[str, BaseException], None] | None = None,
                 state_secret: bytes | None = None, state_ttl_ms: float = 3_600_000,
                 required_client_capabilities: Mapping[str, Iterable[str]] | None = None
                 ) -> None:
        if not body_timeout_s > 0:
            raise ValueError(f"body_timeout_s must be positive, got {body_timeout_s!r}")
        if isinstance(tools, McpServer):
            self.server = tools
        else:
            self.server = McpServer(
                tools, name=name, version=version, instructions=instructions, sessions=sessions,
                session_ids=session_ids or (lambda: secrets.token_urlsafe(24)),
                max_body=max_body, format_tool_exception=format_tool_exception,
                is_fatal_tool_error=is_fatal_tool_error,
                on_tool_exception=on_tool_exception or _log_tool_exception,
                state_secret=state_secret, state_ttl_ms=state_ttl_ms,
                required_client_capabilities=required_client_capabilities)
        self.path = "/" + path.strip("/")
        self._authorize = authorize
        self._origins = frozenset(o.rstrip("/").lower() for o in allowed_origins)
        self._hosts = frozenset(h.lower() for h in allowed_hosts)
        self._challenge = www_authenticate
        self._max_body = self.server.max_body
        self._body_timeout_s = body_timeout_s
        self._bodies = 0  # body reads started: their deadlines are staggered

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        headers = [(bytes(k).decode("latin-1").lower(), bytes(v).decode("latin-1"))
                   for k, v in scope.get("headers", ())]
        try:
            await self._handle(scope, receive, send, headers)
        except _Refused as exc:
            body = _ENCODER.encode({"jsonrpc": "2.0", "id": None,
                                    "error": {"code": exc.code, "message": str(exc)}})
            await _send_body(send, exc.status, body, exc.headers)

    async def _handle(self, scope: Scope, receive: Receive, send: Send,
                      headers: list[tuple[str, str]]) -> None:
        method = scope["method"]
        if (scope["path"].rstrip("/") or "/") != self.path:
            raise _Refused(404, -32000, "Not Found")
        self._check_origin(scope, headers)
        identity = await self._identify(scope)
        session_id = _header(headers, "mcp-session-id")
        if method == "DELETE":
            await _send_reply(send, self.server.delete(session_id, identity=identity), False)
            return
        if method != "POST":
            raise _Refused(405, -32000, "Method not allowed", [(b"allow", b"POST, DELETE")])
        refused = mcp_post_refusal(dict(headers))
        if refused is not None:
            raise _Refused(refused[0], -32000, refused[1])
        accept = (_header(headers, "accept") or "*/*").lower()
        wildcard = "*/*" in accept
        takes_json = wildcard or "application/json" in accept
        takes_sse = wildcard or "text/event-stream" in accept
        body = await self._body(scope, receive)
        decided = self.server.post(body, session_id=session_id, identity=identity,
                                   protocol_version=_header(headers, "mcp-protocol-version"),
                                   method_header=_header(headers, "mcp-method"),
                                   name_header=_header(headers, "mcp-name"),
                                   param_headers=mcp_param_headers(headers))
        if isinstance(decided, McpReply):
            await _send_reply(send, decided, not takes_json)
            return
        reply_session = decided.session_id
        if (decided.progress_token is not None and takes_sse) or not takes_json:
            await self._stream_call(decided, receive, send, reply_session)
        else:
            await self._json_call(decided, receive, send, reply_session)

    def _check_origin(self, scope: Scope, headers: list[tuple[str, str]]) -> None:
        # DNS rebinding: a page on evil.example whose name now resolves to 127.0.0.1 reaches a
        # loopback server with Host and Origin both evil.example. A server listening on loopback
        # therefore serves only loopback names (and allowed_hosts); everywhere a browser's Origin
        # must be the request's own host, a loopback name on loopback, or an allowed origin.
        host = (_header(headers, "host") or "").lower()
        server = scope.get("server")
        on_loopback = server is not None and _is_loopback(str(server[0]))
        if on_loopback and host and _hostname(host) not in _LOOPBACK \
                and host not in self._hosts and _hostname(host) not in self._hosts:
            raise _Refused(403, -32000, "Forbidden: the Host is not allowed")
        origin = _header(headers, "origin")
        if origin is None:
            return
        origin = origin.rstrip("/").lower()
        parts = urlsplit(origin)
        if origin in self._origins or (parts.netloc and parts.netloc == host) or (
                on_loopback and (parts.hostname or "") in _LOOPBACK):
            return
        raise _Refused(403, -32000, "Forbidden: the Origin is not allowed")

    async def _identify(self, scope: Scope) -> str:
        if self._authorize is None:
            return ""
        try:
            identity = await self._authorize(chat_request(scope))
        except ChatRefused as exc:
            raise _Refused(exc.status, -32000, str(exc), self._challenged(exc.status)) from None
        if not isinstance(identity, str) or not identity:
            raise _Refused(401, -32000, "not authorized", self._challenged(401))
        return identity

    def _challenged(self, status: int) -> list[tuple[bytes, bytes]]:
        if status != 401 or self._challenge is None:
            return []
        return [(b"www-authenticate", self._challenge.encode("latin-1"))]

    async def _body(self, scope: Scope, receive: Receive) -> bytes:
        n, self._bodies = self._bodies, self._bodies + 1
        try:
            return await read_body(scope, receive, max_bytes=self._max_body,
                                   timeout_s=staggered_timeout(self._body_timeout_s, n))
        except BodyRefused as exc:
            code = -32600 if exc.status == 413 else -32000
            raise _Refused(exc.status, code, str(exc)) from None

    async def _json_call(self, call: McpCall, receive: Receive, send: Send,
                         session_id: str | None) -> None:
        gone = _Disconnect()
        answer: bytes | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(gone.watch, receive, tg.cancel_scope)

            def drop(_: bytes) -> None:
                pass  # no progress token, so nothing is ever emitted

            answer = await self.server.run_call(call, drop)
            tg.cancel_scope.cancel()
        if answer is not None and not gone.seen:
            await _send_body(send, 200, answer, _session_header(session_id))

    async def _stream_call(self, call: McpCall, receive: Receive, send: Send,
                           session_id: str | None) -> None:
        out, into = anyio.create_memory_object_stream[bytes](_PROGRESS_BUFFER)
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
            *_session_header(session_id)]})

        def emit(message: bytes) -> None:
            try:
                out.send_nowait(message)
            except anyio.WouldBlock:
                pass  # a reader this far behind loses progress, never the answer

        async def run() -> None:
            try:
                answer = await self.server.run_call(call, emit)
                await out.send(answer)
            finally:
                out.close()

        gone = _Disconnect()
        async with anyio.create_task_group() as tg:
            tg.start_soon(gone.watch, receive, tg.cancel_scope)
            tg.start_soon(run)
            async with into:
                async for message in into:
                    await send({"type": "http.response.body", "more_body": True,
                                "body": b"event: message\ndata: " + message + b"\n\n"})
            tg.cancel_scope.cancel()
        if not gone.seen:
            await send({"type": "http.response.body", "body": b""})


class _Disconnect:
    """Watches for the client going away while a call runs: the call is cancelled (its
    ``ctx.signal`` fires) and nothing more is sent."""

    __slots__ = ("seen",)

    def __init__(self) -> None:
        self.seen = False

    async def watch(self, receive: Receive, scope: anyio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.seen = True
        scope.cancel()


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


def _is_loopback(address: str) -> bool:
    return address in _LOOPBACK or address.startswith("127.")


def _hostname(host: str) -> str:
    return urlsplit("//" + host).hostname or ""


def _header(headers: list[tuple[str, str]], name: str) -> str | None:
    return next((v for k, v in headers if k == name), None)


def _session_header(session_id: str | None) -> list[tuple[bytes, bytes]]:
    return [] if session_id is None else [(b"mcp-session-id", session_id.encode("latin-1"))]


async def _send_reply(send: Send, reply: McpReply, as_stream: bool) -> None:
    headers = _session_header(reply.session_id)
    if reply.body is None:
        await send({"type": "http.response.start", "status": reply.status, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
    elif as_stream and reply.status == 200:
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream"), *headers]})
        await send({"type": "http.response.body",
                    "body": b"event: message\ndata: " + reply.body + b"\n\n"})
    else:
        await _send_body(send, reply.status, reply.body, headers)


async def _send_body(send: Send, status: int, body: bytes,
                     headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), *headers]})
    await send({"type": "http.response.body", "body": body})
