"""The streamable HTTP binding: an :class:`McpClientSession` driven over the host's ``Transport``.

Every message is a POST to the server's MCP endpoint with ``Accept: application/json,
text/event-stream``; the answer is one JSON body or an event stream whose events carry JSON-RPC
messages (progress, server requests, then the response). ``Mcp-Session-Id`` from the ``initialize``
answer is sent on every later request, with ``MCP-Protocol-Version``. A stream that drops before the
response is resumed by GET with ``Last-Event-ID`` when the server numbered its events; closing sends
DELETE. Credentials are the host's: pass them as ``headers`` (or configure the transport), or give
an ``auth`` provider (:class:`~bindloop.mcp.auth.McpOAuth`); nothing is read from the environment.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import anyio.abc
import msgspec

from ..errors import RunCancelledError, UsageError
from ..signal import AbortSignal
from ..wire import Transport
from ._errors import (
    McpError,
    McpHttpError,
    McpProtocolError,
    McpRequestRefused,
    McpRpcError,
    McpSessionExpiredError,
    McpTimeoutError,
    McpUrlElicitationRequired,
    McpVersionError,
)
from ._exchange import Answer, ParamHeader, param_header_values, param_headers
from ._deferred import PendingMcpInput, defers_input
from ._errors import McpInputPending
from ._pending import CALLING
from ._server_tasks import ServerTasks
from ._client_options import McpClientPorts, McpLimits
from ._oauth import McpAuth
from ._protocol import (
    MODERN_VERSIONS,
    PROTOCOL_VERSIONS,
    CallToolResult,
    DiscoverResult,
    Implementation,
    InitializeResult,
    McpToolInfo,
    RequestId,
    SkippedMcpTool,
)
from ._serve import ServerRequestHandlers, serve_request
from ._session import (
    McpClientSession,
    McpEvent,
    McpInputRequired,
    McpProgress,
    McpServerRequest,
    McpRequestFailed,
    McpResponse,
    Outgoing,
)

__all__ = ("McpHttpClient", "ProgressCallback", "open_mcp_client")

ProgressCallback = Callable[[McpProgress], None]
_AUTO_OVERALL = 10  # max_timeout_ms="auto": the overall bound, in request timeouts
_UNSUPPORTED_VERSION = -32022  # the 2026-07-28 UnsupportedProtocolVersionError
_MODERN_ERRORS = (-32020, -32021, _UNSUPPORTED_VERSION)  # codes only a stateless server sends
_LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class McpHttpClient(ServerTasks):
    """An MCP client over streamable HTTP. Connect with :meth:`connect` (or ``async with``, or
    :func:`open_mcp_client`), then :meth:`list_tools`, :meth:`call_tool`, :meth:`request`,
    :meth:`ping`; end with :meth:`aclose`. Concurrent calls are fine: each request has its own
    POST and stream.

    ``transport`` holds the endpoint: its base URL plus ``path`` is the MCP endpoint (e.g. base
    ``http://127.0.0.1:8000/mcp`` and ``path=""``). ``server`` names the server in every error.
    ``limits`` (:class:`McpLimits`) holds the timeouts and bounds: ``timeout_ms`` bounds each
    request (``None``: unbounded); progress from the server starts it again, up to
    ``max_timeout_ms`` in all: ``"auto"`` (the default) is ten times the request's timeout, so a
    server that keeps sending progress cannot hold a call open forever; ``None`` removes the
    overall bound. A request that times out, or whose ``signal`` fires, is cancelled on the server
    with ``notifications/cancelled``. ``ports`` (:class:`McpClientPorts`) holds the clocks, the
    ``sleep`` before a resumption (the stream's ``retry``) and the id sources.
    ``on_event(event)`` sees every event that is not a response (progress not claimed by a call,
    ``tools/list_changed``, logging, discarded messages). ``limits.max_resumes`` bounds the
    resumptions in a row that bring nothing; ``limits.notify_timeout_ms`` each fire-and-forget POST
    (a cancellation, the closing DELETE). With ``renew_expired_session`` (the default), a request the server refuses with 404 because it
    ended the session is sent once more in a fresh session (a new ``initialize``; the server never
    ran the refused request, so nothing runs twice), and ``session.tools_stale`` is set.

    ``handlers`` serve the server's own requests (roots, sampling, elicitation: see
    :class:`~bindloop.mcp.server_requests.ServerRequestHandlers`); each one given is declared as a capability.
    ``listen`` (default on) opens the server's GET stream in the background while the client is
    used as ``async with`` (or through :func:`open_mcp_client`), so requests and notifications a
    server sends outside any call are seen; a server without one answers 405 and nothing more
    happens. For a 2026-07-28 server it is a ``subscriptions/listen`` stream asking for every list
    change (a server that refuses it: nothing more happens). ``auth`` is an authorization
    provider (:class:`McpOAuth`).

    The era is decided per server by :meth:`connect`: ``modern_versions`` (default
    ``("2026-07-28",)``) are tried first with ``server/discover``, the handshake revisions
    (``protocol_versions``) after; ``modern_versions=()`` keeps the handshake. A 2026-07-28 call
    answered ``input_required`` is answered through ``handlers`` and sent again, at most
    ``limits.max_input_rounds`` times.

    With a ``url_elicitation`` handler, a ``tools/call`` refused with URLElicitationRequired
    (-32042) shows each URL to the handler; when every one is accepted, the client waits for the
    server's ``notifications/elicitation/complete`` for them (at most
    ``limits.url_elicitation_wait_ms``: servers need not send it) and sends the call once more.

    With ``handlers.tasks``, a task-augmented sampling or elicitation request runs as a task the
    server polls (``tasks/get``, ``tasks/list``, ``tasks/cancel``, ``tasks/result``); its id comes
    from ``ports.task_ids`` (default ``task-1``, ...), its times from ``ports.wall_clock``;
    ``server_tasks()`` lists them.

    Every error message, ``McpHttpError.body`` and tool error text passes the wire's redaction
    rule with the credentials of the transport, of ``headers`` and of ``auth``.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        server: str,
        path: str = "",
        headers: Sequence[tuple[str, str]] = (),
        auth: McpAuth | None = None,
        handlers: ServerRequestHandlers | None = None,
        on_event: Callable[[McpEvent], None] | None = None,
        listen: bool = True,
        renew_expired_session: bool = True,
        client_info: Implementation | None = None,
        protocol_versions: tuple[str, ...] = PROTOCOL_VERSIONS,
        modern_versions: tuple[str, ...] = MODERN_VERSIONS,
        limits: McpLimits = McpLimits(),
        ports: McpClientPorts = McpClientPorts(),
    ) -> None:
        if not isinstance(limits, McpLimits):
            raise UsageError("limits= takes an McpLimits")
        if not isinstance(ports, McpClientPorts):
            raise UsageError("ports= takes an McpClientPorts")
        if handlers is not None and not isinstance(handlers, ServerRequestHandlers):
            raise UsageError("handlers= takes a ServerRequestHandlers")
        ids = ports.ids
        if ids is None:
            counter = itertools.count(1)
            ids = lambda: next(counter)  # noqa: E731 - one counter across renewed sessions
        self._ids = ids
        self._client_info = client_info
        self._versions = protocol_versions
        self._modern = modern_versions
        self._max_rounds = limits.max_input_rounds
        self._now = ports.now
        self._handlers = handlers or ServerRequestHandlers()
        self.server = server
        self.session = self._new_session()
        self.session_id: str | None = None
        """``Mcp-Session-Id`` as the server assigned it (``None`` for a stateless server)."""
        self._transport = transport
        self._path = path
        self._headers = tuple(headers)
        self._timeout_ms = limits.timeout_ms
        self._max_timeout_ms = limits.max_timeout_ms
        self._on_event = on_event
        self._max_resumes = limits.max_resumes
        self._max_body = limits.max_body_bytes
        self._sleep = ports.sleep
        self._renew = renew_expired_session
        self._renewal: anyio.Lock | None = None  # made on first use, inside the event loop
        self._notify_s = limits.notify_timeout_ms / 1000.0
        self._progress: dict[RequestId, ProgressCallback] = {}
        # Per pending call with a timeout: its timer, the timeout, the overall deadline.
        self._extend: dict[RequestId, tuple[anyio.CancelScope, float, float | None]] = {}
        self._early: dict[RequestId, Answer] = {}
        self._output_schemas: dict[str, dict[str, Any]] = {}
        self._param_headers: dict[str, tuple[ParamHeader, ...]] = {}
        self._listen_by_default = listen
        self.listening = 0
        """How many GET streams from the server are open now (the background one included)."""
        self._auth = auth
        self._url_wait_s = limits.url_elicitation_wait_ms / 1000.0
        # URL-mode elicitations the user accepted, by id: set when the server says it finished.
        self._url_waits: dict[str, anyio.Event] = {}
        self._wall = ports.wall_clock
        task_ids = ports.task_ids
        if task_ids is None:
            tasks_made = itertools.count(1)
            task_ids = lambda: f"task-{next(tasks_made)}"  # noqa: E731
        self._task_ids = task_ids
        self._server_tasks = {}
        self._tasks: anyio.abc.TaskGroup | None = None
        self._stack: AsyncExitStack | None = None
        self._init_redaction(transport, headers)
        bind = getattr(auth, "bind", None)
        if callable(bind):
            bind(self)

    def __repr__(self) -> str:
        return f"McpHttpClient(server={self.server!r}, phase={self.session.phase!r})"

    def _new_session(self) -> McpClientSession:
        return McpClientSession(server=self.server, client_info=self._client_info,
                                protocol_versions=self._versions, ids=self._ids, now=self._now,
                                capabilities=self._handlers.capabilities(),
                                serves=self._handlers.serves(),
                                modern_versions=self._modern)

    # -- public API -------------------------------------------------------------------------

    async def connect(self) -> InitializeResult:
        """Decide the server's era, then start: a 2026-07-28 server (it answers
        ``server/discover`` in the stateless form, or refuses the revision asked with
        UnsupportedProtocolVersionError listing one this client speaks) needs no handshake; any
        other gets ``initialize`` (version negotiated), then ``notifications/initialized``. For
        a stateless server the result is made from its ``server/discover`` answer
        (``session.discover_result``). With ``modern_versions=()`` only the handshake is tried.

        Raises
        ------
        McpVersionError
            The server speaks no revision this client does (both sides named).
        McpError
            Any other failure (HTTP status, not MCP, unreachable, timeout).
        """
        if self._modern and self.session.phase == "new":
            adopted = await self._discover()
            if adopted is not None:
                return adopted
        return await self._initialize()

    async def _discover(self) -> InitializeResult | None:
        """``server/discover`` in the stateless form: the result when the server speaks a
        stateless revision this client does, ``None`` for a server to start with ``initialize``
        (a 4xx without a stateless error, or an error only a legacy server sends)."""
        tried: list[str] = []
        version = self._modern[0]
        attempts = 0
        while True:
            tried.append(version)
            try:
                answer = await self._call(self.session.discover(version))
            except McpVersionError:
                raise
            except McpProtocolError:
                return None  # an answer that is not a stateless one: a legacy server
            except McpHttpError as exc:
                if attempts < 3 and await self._reauthorize(exc):
                    attempts += 1
                    continue
                if 400 <= exc.status < 500 and exc.status not in (401, 403):
                    return None  # not a stateless server: the handshake decides
                raise
            except McpRpcError as exc:
                if exc.code not in _MODERN_ERRORS:
                    return None  # a legacy server's refusal (no session, unknown method)
                if exc.code != _UNSUPPORTED_VERSION:
                    raise
                supported = _supported(exc.data)
                # The first revision the server lists that this client speaks: once more even
                # when it is the one just refused (a server may refuse a request transiently),
                # within one try per revision offered and one more.
                retry = next((v for v in self._modern if v in supported), None)
                if retry is not None and len(tried) <= len(self._modern):
                    version = retry
                    continue
                if any(v in supported for v in self._versions):
                    return None  # a dual-era server that speaks a handshake revision we know
                raise McpVersionError(self.server, ", ".join(supported) or "no revision",
                                      self._modern + self._versions) from None
            break
        discovered = answer.result
        assert isinstance(discovered, DiscoverResult)
        chosen = next((v for v in self._modern if v in discovered.supported_versions), None)
        if chosen is None:
            if any(v in discovered.supported_versions for v in self._versions):
                return None
            raise McpVersionError(self.server, ", ".join(discovered.supported_versions),
                                  self._modern + self._versions)
        self.session.adopt(chosen, discovered)
        result = self.session.initialize_result
        assert result is not None
        return result

    async def _initialize(self) -> InitializeResult:
        attempts = 0
        while True:
            try:
                answer = await self._call(self.session.initialize())
                break
            except McpHttpError as exc:
                # A server that wants a token from the start: authorize, then a fresh handshake.
                if attempts >= 3 or not await self._reauthorize(exc):
                    raise
                attempts += 1
                self.session = self._new_session()
        result = answer.result
        assert isinstance(result, InitializeResult)
        return result

    async def __aenter__(self) -> McpHttpClient:
        """Connect if new, and open a background task group: (with ``listen``) the server's GET
        stream runs there, and so do the tasks the server asks this client to run."""
        if self.session.phase == "new":
            await self.connect()
        stack = AsyncExitStack()
        group = await stack.enter_async_context(anyio.create_task_group())
        if self._listen_by_default:
            # The GET stream; for a stateless server, subscriptions/listen.
            try:
                # Returns once the stream is open (or refused): what the server sends there from
                # now on is seen, even for the very next call.
                await group.start(self._listen_quietly)
            except BaseException:
                group.cancel_scope.cancel()
                await stack.aclose()
                raise
        self._tasks, self._stack = group, stack
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        group, stack, self._tasks, self._stack = self._tasks, self._stack, None, None
        if group is not None and stack is not None:
            group.cancel_scope.cancel()
            await stack.aclose()
        await self.aclose()

    async def list_tools(self, *, max_pages: int = 100
                         ) -> tuple[tuple[McpToolInfo, ...], tuple[SkippedMcpTool, ...]]:
        """Every tool, following ``nextCursor`` page by page, and the entries that are not tools
        (skipped with a reason). Clears the session's ``tools_stale``; remembers each tool's
        ``outputSchema`` so :meth:`call_tool` can check its ``structuredContent``.

        Raises
        ------
        McpProtocolError
            A page repeats a cursor already followed, or there are more than ``max_pages``.
        """
        tools: list[McpToolInfo] = []
        skipped: list[SkippedMcpTool] = []
        headers: dict[str, tuple[ParamHeader, ...]] = {}
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(max_pages):
            answer = await self._renewing(lambda session: session.list_tools(cursor))
            page = answer.result
            for raw in page.tools:
                try:
                    tool = msgspec.convert(raw, McpToolInfo)
                    if self.session.era == "modern":
                        params, problem = param_headers(tool.input_schema)
                        if problem is not None:
                            # The 2026-07-28 transport: a tool whose x-mcp-header is invalid is
                            # left out, and the others stay usable.
                            skipped.append(SkippedMcpTool(server=self.server, name=tool.name,
                                                          reason=problem))
                            continue
                        headers[tool.name] = params
                    tools.append(tool)
                except msgspec.ValidationError as exc:
                    name = raw.get("name") if isinstance(raw, dict) else None
                    label = name if isinstance(name, str) else f"#{len(tools) + len(skipped)}"
                    skipped.append(SkippedMcpTool(server=self.server, name=label,
                                                  reason=f"not a valid tool entry: {exc}"))
            cursor = page.next_cursor
            if not cursor:
                self.session.mark_tools_fresh(page.ttl_ms, page.cache_scope)
                self._output_schemas = {t.name: t.output_schema for t in tools
                                        if t.output_schema is not None}
                self._param_headers = {n: p for n, p in headers.items() if p}
                return tuple(tools), tuple(skipped)
            if cursor in seen:
                raise McpProtocolError(self.server, f"tools/list repeated cursor {cursor!r}")
            seen.add(cursor)
        raise McpProtocolError(self.server, f"tools/list has more than {max_pages} pages")

    async def call_tool(self, name: str, arguments: Mapping[str, Any], *,
                        signal: AbortSignal | None = None,
                        on_progress: ProgressCallback | None = None,
                        timeout_ms: float | None | bool = True) -> CallToolResult:
        """``tools/call``. A JSON-RPC error answer raises :class:`McpRpcError`; a tool that failed
        (``isError``) is a normal result. The call asks for progress, which extends its timeout;
        ``on_progress`` receives it. ``timeout_ms``: ``True`` uses the client's timeout. A tool
        listed with an ``outputSchema`` must answer with ``structuredContent`` that matches it.

        Raises
        ------
        RunCancelledError
            ``signal`` fired first; ``notifications/cancelled`` was sent for the call.
        McpProtocolError
            ``structuredContent`` missing or not matching the tool's ``outputSchema``.
        McpTimeoutError, McpError
            As for every request.
        """
        return await self._call_tool(name, arguments, signal=signal, on_progress=on_progress,
                                     timeout_ms=timeout_ms)

    async def _call_tool(self, name: str, arguments: Mapping[str, Any], *,
                         first: dict[str, Any] | None = None,
                         signal: AbortSignal | None = None,
                         on_progress: ProgressCallback | None = None,
                         timeout_ms: float | None | bool = True) -> CallToolResult:
        """:meth:`call_tool`, its first request carrying ``first`` (a kept call's
        ``inputResponses`` and ``requestState``); an ``input_required`` round the handlers keep
        for later raises :class:`McpInputPending`."""
        # x-mcp-header parameters (2026-07-28) mirrored into Mcp-Param-* headers.
        mirrored = param_header_values(self._param_headers.get(name, ()), arguments)
        calling = CALLING.set((self.server, name))  # what a pending elicitation names
        kept = (name, arguments)
        try:
            try:
                answer = await self._rounds(
                    lambda session, extra: session.call_tool(name, arguments, progress=True,
                                                             extra=extra, headers=mirrored),
                    signal=signal, on_progress=on_progress or _ignore, timeout_ms=timeout_ms,
                    first=first, keep=kept)
            except McpUrlElicitationRequired as refused:
                if not await self._complete_url_elicitations(refused, signal, self._handlers):
                    raise
                # The user did what the server asked: the call goes once more (a second -32042
                # is raised; the server never ran the refused call).
                answer = await self._rounds(
                    lambda session, extra: session.call_tool(name, arguments, progress=True,
                                                             extra=extra, headers=mirrored),
                    signal=signal, on_progress=on_progress or _ignore, timeout_ms=timeout_ms,
                    keep=kept)
        finally:
            CALLING.reset(calling)
        result = answer.result
        assert isinstance(result, CallToolResult)
        schema = self._output_schemas.get(name)
        if schema is not None and not result.is_error:
            if result.structured_content is None:
                raise McpProtocolError(self.server, f"tool {name!r} declares an outputSchema but "
                                                    "answered without structuredContent")
            from ._tools import output_schema_violation  # the tools' one validator

            problem = output_schema_violation(result.structured_content, schema)
            if problem is not None:
                raise self._clean(McpProtocolError(
                    self.server, f"tool {name!r} answered structuredContent that does not match "
                                 f"its outputSchema: {problem}"))
        return result

    async def request(self, method: str, params: Mapping[str, Any] | None = None, *,
                      signal: AbortSignal | None = None, timeout_ms: float | None | bool = True,
                      raw: bool = True) -> Any:
        """Any request by method name (``resources/read``, ``prompts/get``, ...): its raw
        result (``raw=False``: typed where the session types it, as for ``tools/call``). The
        typed helpers are in :mod:`bindloop.mcp` (:func:`list_resources`, ...)."""
        answer = await self._rounds(
            lambda session, extra: session.request(
                method, params if extra is None else {**(params or {}), **extra}, raw=raw),
            signal=signal, timeout_ms=timeout_ms)
        return answer.result

    async def set_log_level(self, level: str) -> None:
        """``logging/setLevel``: the server sends ``notifications/message`` at ``level`` and above
        (``debug`` ... ``emergency``); they reach ``on_event`` as :class:`McpServerNotification`.

        Raises
        ------
        UsageError
            ``level`` is not one of the eight syslog levels MCP names.
        """
        if level not in _LOG_LEVELS:
            raise UsageError(f"log level {level!r} is not one of {', '.join(_LOG_LEVELS)}")
        await self.request("logging/setLevel", {"level": level})

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a notification (``notifications/roots/list_changed``, ...)."""
        await self._notify(self.session.notify(method, params))

    async def ping(self) -> float:
        """``ping``; returns the round trip in ms on the injected clock."""
        return (await self._renewing(lambda session: session.ping())).elapsed_ms

    async def aclose(self) -> None:
        """End the session: DELETE with the session id (a server that does not allow it answers
        405, which is fine). Best effort and bounded: a failure here is not raised."""
        self.session.close()
        if self.session_id is None:
            return
        request = self._http("DELETE", b"", accept=None)
        with anyio.move_on_after(self._notify_s, shield=True):
            try:
                async with self._open(request, "DELETE"):
                    pass
            except McpError:
                pass  # the server is gone or refuses: the session is over either way
        self.session_id = None

    # -- Multi Round-Trip Requests (2026-07-28) -----------------------------------------------

    async def _rounds(self, build: Callable[[McpClientSession, dict[str, Any] | None], Outgoing],
                      *, signal: AbortSignal | None = None,
                      on_progress: ProgressCallback | None = None,
                      timeout_ms: float | None | bool = True,
                      first: dict[str, Any] | None = None,
                      keep: tuple[str, Mapping[str, Any]] | None = None) -> McpResponse:
        """One request, re-issued while a stateless server answers ``input_required``: each
        input request is answered through the host's ports (``handlers``: elicitation, sampling,
        roots, as a legacy server's own requests are) and the request goes again with
        ``inputResponses`` and the ``requestState`` as received, at most ``max_input_rounds``
        times in all. ``first`` is the first request's extra params. For a tool call
        (``keep``: its name and arguments), a round whose elicitation goes to a durable port is
        not answered: :class:`McpInputPending` carries it to be kept."""
        extra: dict[str, Any] | None = first
        for _ in range(self._max_rounds):
            answer = await self._renewing(lambda session: build(session, extra), signal=signal,
                                          on_progress=on_progress, timeout_ms=timeout_ms)
            asked = answer.result
            if not isinstance(asked, McpInputRequired):
                return answer
            if keep is not None and defers_input(self._handlers, asked.input_requests):
                raise McpInputPending(PendingMcpInput(
                    server=self.server, tool=keep[0], arguments=dict(keep[1]),
                    input_requests=asked.input_requests, request_state=asked.request_state))
            extra = {}
            if asked.input_requests:
                extra["inputResponses"] = {
                    key: await self._input_response(answer.method, key, request)
                    for key, request in asked.input_requests.items()}
            if asked.request_state is not None:
                extra["requestState"] = asked.request_state
        raise McpProtocolError(self.server, f"still asked for input after {self._max_rounds} "
                                            "rounds; the request is abandoned")

    async def _input_response(self, method: str, key: str,
                              request: dict[str, Any]) -> dict[str, Any]:
        asked = McpServerRequest(request_id=key, method=request["method"],
                                 params=request.get("params") if isinstance(
                                     request.get("params"), dict) else None)
        try:
            return await serve_request(self._handlers, asked)
        except McpRequestRefused as refusal:
            # An input response has no error form: the request cannot go on.
            raise self._clean(McpProtocolError(
                self.server, f"{method} needs input {key!r} ({asked.method}) that this client "
                             f"cannot give: {refusal.message}")) from None

    # -- auth and server requests -------------------------------------------------------------

    def _auth_headers(self) -> list[tuple[str, str]]:
        return [] if self._auth is None else list(self._auth.headers())

    async def _reauthorize(self, exc: McpHttpError) -> bool:
        """Whether the auth provider obtained a token for a 401 / 403 ``insufficient_scope``
        (its own failure is raised, redacted like every error)."""
        if self._auth is None or not _auth_challenge(exc):
            return False
        try:
            renewed = await self._auth.unauthorized(exc)
        except McpError as failure:
            raise self._clean(failure) from None
        if renewed and self.session.tools_cache_scope == "private":
            self.session.tools_stale = True  # listed under other credentials: not to be reused
        return renewed

    def _saw_progress(self, request_id: RequestId) -> None:
        entry = self._extend.get(request_id)
        if entry is not None:
            timer, timeout_ms, limit = entry
            deadline = anyio.current_time() + timeout_ms / 1000.0
            timer.deadline = deadline if limit is None else min(deadline, limit)

    # -- one request ------------------------------------------------------------------------

    async def _renewing(self, build: Callable[[McpClientSession], Outgoing], *,
                        signal: AbortSignal | None = None,
                        on_progress: ProgressCallback | None = None,
                        timeout_ms: float | None | bool = True) -> McpResponse:
        expired = self.session
        try:
            return await self._authorized(build, signal=signal, on_progress=on_progress,
                                          timeout_ms=timeout_ms)
        except McpSessionExpiredError:
            if not self._renew:
                raise
        # The server forgot the session, so it never ran that request: start a new session and
        # send it there once. A second 404 is raised. Concurrent calls that met the same 404
        # share one renewal: whoever comes second finds the session replaced already.
        if self._renewal is None:
            self._renewal = anyio.Lock()
        async with self._renewal:
            if self.session is expired:
                expired.close()
                self.forget_server_tasks()  # they belonged to the session the server ended
                self.session = self._new_session()
                self.session_id = None
                await self.connect()
                self.session.tools_stale = True  # a new session may offer other tools
        return await self._authorized(build, signal=signal, on_progress=on_progress,
                                      timeout_ms=timeout_ms)

    async def _authorized(self, build: Callable[[McpClientSession], Outgoing], *,
                          signal: AbortSignal | None, on_progress: ProgressCallback | None,
                          timeout_ms: float | None | bool) -> McpResponse:
        # A 401 (or a 403 asking for more scope) means the server never ran the request: the
        # auth provider gets a token and the request goes again, a few times at most.
        attempts = 0
        while True:
            try:
                return await self._call(build(self.session), signal=signal,
                                        on_progress=on_progress, timeout_ms=timeout_ms)
            except McpHttpError as exc:
                if attempts >= 3 or not await self._reauthorize(exc):
                    raise
                attempts += 1

    async def _call(self, out: Outgoing, *, signal: AbortSignal | None = None,
                    on_progress: ProgressCallback | None = None,
                    timeout_ms: float | None | bool = True) -> McpResponse:
        request_id = out.request_id
        assert request_id is not None
        timeout = self._timeout_ms if timeout_ms is True else timeout_ms
        if isinstance(timeout, bool):
            raise UsageError("timeout_ms must be a number, None, or True (the client default)")
        if self._auth is not None:
            await self._auth.prepare()
        if on_progress is not None:
            self._progress[request_id] = on_progress
        if signal is not None and signal.aborted:
            self.session.cancel(request_id)
            self._progress.pop(request_id, None)
            raise RunCancelledError(_reason(signal))
        scope = anyio.CancelScope()
        remove = signal.add_listener(lambda _reason: scope.cancel()) if signal else None
        answer: Answer | None = None
        try:
            with anyio.move_on_after(None if timeout is None else timeout / 1000.0) as timer:
                if timeout is not None:
                    overall = (timeout * _AUTO_OVERALL if self._max_timeout_ms == "auto"
                               else self._max_timeout_ms)
                    limit = (None if overall is None else
                             anyio.current_time() + overall / 1000.0)
                    self._extend[request_id] = (timer, timeout, limit)
                with scope:
                    answer = await self._exchange(out)
        except McpHttpError:
            self.session.cancel(request_id)  # refused by status: nothing runs there to cancel
            raise
        except BaseException as exc:
            # Cancelled from outside (the caller's scope) or failed: the server may still be
            # working on it, so tell it to stop before the error goes on.
            await self._send_cancel(request_id, "the client abandoned the request")
            if isinstance(exc, McpError):
                self._clean(exc)
            raise
        finally:
            if remove is not None:
                remove()
            self._progress.pop(request_id, None)
            self._extend.pop(request_id, None)
        if answer is None:
            if scope.cancel_called:
                await self._send_cancel(request_id, _reason(signal) or "cancelled")
                raise RunCancelledError(_reason(signal) or f"{out.method} was cancelled")
            assert timer.cancel_called
            await self._send_cancel(request_id, "timed out")
            raise McpTimeoutError(self.server, out.method, float(timeout or 0.0))
        if isinstance(answer, McpRequestFailed):
            raise self._clean(answer.error)
        return answer

    async def _send_cancel(self, request_id: RequestId, reason: str) -> None:
        message = self.session.cancel(request_id, reason)
        if message is None or self.session.era == "modern":
            return  # a stateless server stops the call when its request's stream is closed
        # Shielded and bounded: this runs while the caller is being cancelled, and a server that
        # no longer answers must not hold the caller up.
        with anyio.move_on_after(self._notify_s, shield=True):
            try:
                await self._notify(message)
            except McpError:
                pass  # best effort: the request is forgotten here whatever the server does


def _supported(data: object) -> list[str]:
    listed = data.get("supported") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        return []
    return [v for v in listed if isinstance(v, str)][:20]


def _ignore(_: McpProgress) -> None:
    return None


def _auth_challenge(exc: McpHttpError) -> bool:
    if exc.status == 401:
        return True
    return exc.status == 403 and "insufficient_scope" in (exc.www_authenticate or "")


def _reason(signal: AbortSignal | None) -> str | None:
    if signal is None or signal.reason is None:
        return None
    return str(signal.reason)


@asynccontextmanager
async def open_mcp_client(transport: Transport, *, server: str,
                          **options: Any) -> AsyncIterator[McpHttpClient]:
    """Connect (``initialize``) on entry, open the server's GET stream in the background (unless
    ``listen=False``), close (DELETE) on exit. ``options`` are :class:`McpHttpClient`'s
    keywords."""
    client = McpHttpClient(transport, server=server, **options)
    try:
        async with client:
            yield client
    finally:
        if client.session.phase != "closed":
            await client.aclose()
