"""The streamable HTTP binding: an :class:`McpClientSession` driven over the host's ``Transport``.

Every message is a POST to the server's MCP endpoint with ``Accept: application/json,
text/event-stream``; the answer is one JSON body or an event stream whose events carry JSON-RPC
messages (progress, server requests, then the response). ``Mcp-Session-Id`` from the ``initialize``
answer is sent on every later request, with ``MCP-Protocol-Version``. A stream that drops before the
response is resumed by GET with ``Last-Event-ID`` when the server numbered its events; closing sends
DELETE. Credentials are the host's: pass them as ``headers`` (or configure the transport); nothing
is read from the environment.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec

from ..clock import Clock, monotonic_ms
from ..errors import RunCancelledError, UsageError
from ..signal import AbortSignal
from ..wire import HttpRequest, SseDecoder, SseError, Transport, TransportError, TransportResponse
from ._errors import (
    McpConnectionError,
    McpError,
    McpHttpError,
    McpProtocolError,
    McpSessionExpiredError,
    McpTimeoutError,
)
from ._protocol import (
    PROTOCOL_VERSIONS,
    CallToolResult,
    Implementation,
    InitializeResult,
    McpToolInfo,
    RequestId,
    SkippedMcpTool,
)
from ._session import (
    McpClientSession,
    McpEvent,
    McpProgress,
    McpRequestFailed,
    McpResponse,
    Outgoing,
)

__all__ = ("McpHttpClient", "ProgressCallback", "open_mcp_client")

ProgressCallback = Callable[[McpProgress], None]
_Answer = McpResponse | McpRequestFailed
_MAX_ERROR_EXCERPT = 300


class McpHttpClient:
    """An MCP client over streamable HTTP. Connect with :meth:`connect` (or use
    :func:`open_mcp_client`), then :meth:`list_tools`, :meth:`call_tool`, :meth:`ping`; end with
    :meth:`aclose`. Concurrent calls are fine: each request has its own POST and stream.

    ``transport`` holds the endpoint: its base URL plus ``path`` is the MCP endpoint (e.g. base
    ``http://127.0.0.1:8000/mcp`` and ``path=""``). ``server`` names the server in every error.
    ``timeout_ms`` bounds each request (``None``: unbounded); a request that times out, or whose
    ``signal`` fires, is cancelled on the server with ``notifications/cancelled``.
    ``on_event(event)`` sees every event that is not a response (progress not claimed by a call,
    ``tools/list_changed``, logging). ``sleep`` waits before a resumption (the stream's ``retry``).
    ``notify_timeout_ms`` bounds each fire-and-forget POST (a cancellation, the closing DELETE).
    With ``renew_expired_session`` (the default), a request the server refuses with 404 because it
    ended the session is sent once more in a fresh session (a new ``initialize``; the server never
    ran the refused request, so nothing runs twice), and ``session.tools_stale`` is set.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        server: str,
        path: str = "",
        headers: Sequence[tuple[str, str]] = (),
        timeout_ms: float | None = 30_000.0,
        now: Clock = monotonic_ms,
        ids: Callable[[], RequestId] | None = None,
        protocol_versions: tuple[str, ...] = PROTOCOL_VERSIONS,
        client_info: Implementation | None = None,
        on_event: Callable[[McpEvent], None] | None = None,
        max_resumes: int = 3,
        max_body_bytes: int = 16 * 1024 * 1024,
        renew_expired_session: bool = True,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
        notify_timeout_ms: float = 2_000.0,
    ) -> None:
        if timeout_ms is not None and not (timeout_ms > 0):
            raise UsageError(f"timeout_ms must be positive or None, got {timeout_ms!r}")
        if max_resumes < 0 or max_body_bytes < 1:
            raise UsageError("max_resumes must be >= 0 and max_body_bytes positive")
        if ids is None:
            counter = itertools.count(1)
            ids = lambda: next(counter)  # noqa: E731 - one counter across renewed sessions
        self._ids = ids
        self._client_info = client_info
        self._versions = protocol_versions
        self._now = now
        self.session = McpClientSession(server=server, client_info=client_info,
                                        protocol_versions=protocol_versions, ids=ids, now=now)
        self.server = server
        self.session_id: str | None = None
        """``Mcp-Session-Id`` as the server assigned it (``None`` for a stateless server)."""
        self._transport = transport
        self._path = path
        self._headers = tuple(headers)
        self._timeout_ms = timeout_ms
        self._on_event = on_event
        self._max_resumes = max_resumes
        self._max_body = max_body_bytes
        self._sleep = sleep
        self._renew = renew_expired_session
        self._renewal: anyio.Lock | None = None  # made on first use, inside the event loop
        self._notify_s = notify_timeout_ms / 1000.0
        self._progress: dict[RequestId, ProgressCallback] = {}
        self._early: dict[RequestId, _Answer] = {}

    def __repr__(self) -> str:
        return f"McpHttpClient(server={self.server!r}, phase={self.session.phase!r})"

    # -- public API -------------------------------------------------------------------------

    async def connect(self) -> InitializeResult:
        """``initialize`` (version negotiated), then ``notifications/initialized``.

        Raises
        ------
        McpVersionError
            The server chose a revision this client does not speak.
        McpError
            Any other failure (HTTP status, not MCP, unreachable, timeout).
        """
        answer = await self._call(self.session.initialize())
        result = answer.result
        assert isinstance(result, InitializeResult)
        return result

    async def list_tools(self, *, max_pages: int = 100
                         ) -> tuple[tuple[McpToolInfo, ...], tuple[SkippedMcpTool, ...]]:
        """Every tool, following ``nextCursor`` page by page, and the entries that are not tools
        (skipped with a reason). Clears the session's ``tools_stale``.

        Raises
        ------
        McpProtocolError
            A page repeats a cursor already followed, or there are more than ``max_pages``.
        """
        tools: list[McpToolInfo] = []
        skipped: list[SkippedMcpTool] = []
        cursor: str | None = None
        seen: set[str] = set()
        for _ in range(max_pages):
            answer = await self._renewing(lambda session: session.list_tools(cursor))
            page = answer.result
            for raw in page.tools:
                try:
                    tools.append(msgspec.convert(raw, McpToolInfo))
                except msgspec.ValidationError as exc:
                    name = raw.get("name") if isinstance(raw, dict) else None
                    label = name if isinstance(name, str) else f"#{len(tools) + len(skipped)}"
                    skipped.append(SkippedMcpTool(server=self.server, name=label,
                                                  reason=f"not a valid tool entry: {exc}"))
            cursor = page.next_cursor
            if not cursor:
                self.session.mark_tools_fresh()
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
        (``isError``) is a normal result. ``on_progress`` asks the server for progress and receives
        it. ``timeout_ms``: ``True`` uses the client's timeout.

        Raises
        ------
        RunCancelledError
            ``signal`` fired first; ``notifications/cancelled`` was sent for the call.
        McpTimeoutError, McpError
            As for every request.
        """
        answer = await self._renewing(
            lambda session: session.call_tool(name, arguments, progress=on_progress is not None),
            signal=signal, on_progress=on_progress, timeout_ms=timeout_ms)
        result = answer.result
        assert isinstance(result, CallToolResult)
        return result

    async def ping(self) -> float:
        """``ping``; returns the round trip in ms on the injected clock."""
        return (await self._renewing(lambda session: session.ping())).elapsed_ms

    async def listen(self) -> bool:
        """Open the server's own event stream (GET) and route what arrives on it — ``tools/
        list_changed``, logging, server pings — to the session and ``on_event``, until the server
        ends the stream or the caller cancels (run it in a task). Returns ``False`` at once when
        the server offers no such stream (HTTP 405), ``True`` when a stream ended.

        Raises
        ------
        McpError
            Any other status, or a stream that is not MCP.
        """
        if self.session.phase != "ready":
            raise UsageError(f"MCP server {self.server!r}: connect() before listen()")
        request = self._http("GET", b"", accept="text/event-stream")
        async with self._open(request, "GET stream") as resp:
            if resp.status == 405:
                return False
            await self._check_status(resp, "GET stream", expect_answer=True)
            if _content_type(resp) != "text/event-stream":
                raise McpProtocolError(self.server, "answered the GET stream without an event "
                                                    "stream")
            await self._read_stream(resp, None, "GET stream")
        return True

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

    # -- one request ------------------------------------------------------------------------

    async def _renewing(self, build: Callable[[McpClientSession], Outgoing], *,
                        signal: AbortSignal | None = None,
                        on_progress: ProgressCallback | None = None,
                        timeout_ms: float | None | bool = True) -> McpResponse:
        expired = self.session
        try:
            return await self._call(build(expired), signal=signal, on_progress=on_progress,
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
                self.session = McpClientSession(server=self.server,
                                                client_info=self._client_info,
                                                protocol_versions=self._versions, ids=self._ids,
                                                now=self._now)
                self.session_id = None
                await self.connect()
                self.session.tools_stale = True  # a new session may offer other tools
        return await self._call(build(self.session), signal=signal, on_progress=on_progress,
                                timeout_ms=timeout_ms)

    async def _call(self, out: Outgoing, *, signal: AbortSignal | None = None,
                    on_progress: ProgressCallback | None = None,
                    timeout_ms: float | None | bool = True) -> McpResponse:
        request_id = out.request_id
        assert request_id is not None
        timeout = self._timeout_ms if timeout_ms is True else timeout_ms
        if isinstance(timeout, bool):
            raise UsageError("timeout_ms must be a number, None, or True (the client default)")
        if on_progress is not None:
            self._progress[request_id] = on_progress
        if signal is not None and signal.aborted:
            self.session.cancel(request_id)
            self._progress.pop(request_id, None)
            raise RunCancelledError(_reason(signal))
        scope = anyio.CancelScope()
        remove = signal.add_listener(lambda _reason: scope.cancel()) if signal else None
        answer: _Answer | None = None
        try:
            with anyio.move_on_after(None if timeout is None else timeout / 1000.0) as timer:
                with scope:
                    answer = await self._exchange(out)
        except McpHttpError:
            self.session.cancel(request_id)  # refused by status: nothing runs there to cancel
            raise
        except BaseException:
            # Cancelled from outside (the caller's scope) or failed: the server may still be
            # working on it, so tell it to stop before the error goes on.
            await self._send_cancel(request_id, "the client abandoned the request")
            raise
        finally:
            if remove is not None:
                remove()
            self._progress.pop(request_id, None)
        if answer is None:
            if scope.cancel_called:
                await self._send_cancel(request_id, _reason(signal) or "cancelled")
                raise RunCancelledError(_reason(signal) or f"{out.method} was cancelled")
            assert timer.cancel_called
            await self._send_cancel(request_id, "timed out")
            raise McpTimeoutError(self.server, out.method, float(timeout or 0.0))
        if isinstance(answer, McpRequestFailed):
            raise answer.error
        return answer

    async def _exchange(self, out: Outgoing) -> _Answer:
        request_id = out.request_id
        assert request_id is not None
        last_id: str | None = None
        retry_ms: int | None = None
        async with self._open(self._http("POST", out.body), out.method) as resp:
            await self._check_status(resp, out.method, expect_answer=True)
            if out.method == "initialize":
                self.session_id = _header(resp, "mcp-session-id")
            kind = _content_type(resp)
            if kind == "application/json":
                body = await self._read_body(resp, out.method)
                answer = await self._take(self.session.receive(body), request_id)
                if answer is not None:
                    return answer
                raise McpProtocolError(self.server,
                                       f"answered {out.method} with JSON that is not its response")
            if kind != "text/event-stream":
                raise McpProtocolError(self.server, f"answered {out.method} with "
                                       f"{kind or 'no content type'}, not JSON or an event stream")
            answer, last_id, retry_ms = await self._read_stream(resp, request_id, out.method)
            if answer is not None:
                return answer
        for _ in range(self._max_resumes):
            early = self._early.pop(request_id, None)
            if early is not None:
                return early
            if last_id is None:
                break
            if retry_ms:
                await self._sleep(min(retry_ms, 30_000) / 1000.0)
            request = self._http("GET", b"", accept="text/event-stream", last_event_id=last_id)
            async with self._open(request, f"{out.method} (resuming)") as resp:
                await self._check_status(resp, f"{out.method} (resuming)", expect_answer=True)
                if _content_type(resp) != "text/event-stream":
                    raise McpProtocolError(self.server, "answered a resumption without an event "
                                                        "stream")
                answer, new_id, retry_ms = await self._read_stream(resp, request_id, out.method)
                if answer is not None:
                    return answer
                last_id = new_id or last_id
        early = self._early.pop(request_id, None)
        if early is not None:
            return early
        how = ("and the server numbered no events to resume from" if last_id is None
               else f"and {self._max_resumes} resumptions did not bring it")
        raise McpConnectionError(self.server,
                                 f"the reply stream for {out.method} ended before its response, "
                                 f"{how}")

    async def _read_stream(self, resp: TransportResponse, request_id: RequestId | None,
                           method: str) -> tuple[_Answer | None, str | None, int | None]:
        decoder = SseDecoder()
        last_id: str | None = None
        try:
            async for chunk in resp.aiter_bytes():
                for event in decoder.feed(chunk):
                    last_id = event.id if event.id is not None else last_id
                    if event.event != "message" or not event.data.strip():
                        continue  # a priming event (id only) or a named event MCP does not use
                    answer = await self._take(self.session.receive(event.data), request_id)
                    if answer is not None:
                        return answer, last_id, decoder.retry_ms
        except TransportError:
            pass  # dropped mid-stream: the caller resumes from last_id if it can
        except SseError as exc:
            raise McpProtocolError(self.server, f"sent an unusable event stream for {method}: "
                                                f"{exc}") from exc
        decoder.end()
        return None, last_id, decoder.retry_ms

    async def _take(self, events: list[McpEvent], request_id: RequestId | None
                    ) -> _Answer | None:
        """Route ``events``: the answer for ``request_id`` is returned; answers to other requests
        wait for their callers; progress goes to its call's callback; the rest to ``on_event``.
        Then whatever the session decided to send (answers to server pings, ``initialized``) goes."""
        mine: _Answer | None = None
        for event in events:
            if isinstance(event, (McpResponse, McpRequestFailed)):
                if event.request_id == request_id:
                    mine = event
                else:
                    self._early[event.request_id] = event
            elif isinstance(event, McpProgress) and event.progress_token in self._progress:
                self._progress[event.progress_token](event)
            elif self._on_event is not None:
                self._on_event(event)
        for message in self.session.take_outgoing():
            await self._notify(message)
        return mine

    # -- HTTP -------------------------------------------------------------------------------

    def _http(self, method: str, body: bytes, *, accept: str | None = "application/json, "
              "text/event-stream", last_event_id: str | None = None) -> HttpRequest:
        headers: list[tuple[str, str]] = []
        if method == "POST":
            headers.append(("content-type", "application/json"))
        if accept is not None:
            headers.append(("accept", accept))
        if self.session_id is not None:
            headers.append(("mcp-session-id", self.session_id))
        version = self.session.protocol_version
        if version is not None:
            headers.append(("mcp-protocol-version", version))
        if last_event_id is not None:
            headers.append(("last-event-id", last_event_id))
        headers.extend(self._headers)
        return HttpRequest(method=method, path=self._path, headers=tuple(headers), body=body)

    @asynccontextmanager
    async def _open(self, request: HttpRequest, what: str) -> AsyncIterator[TransportResponse]:
        try:
            async with self._transport.open(request) as resp:
                yield resp
        except TransportError as exc:
            raise McpConnectionError(self.server, f"{what}: {exc}") from exc

    async def _check_status(self, resp: TransportResponse, what: str, *,
                            expect_answer: bool) -> None:
        status = resp.status
        if status == 200 or (status == 202 and not expect_answer):
            return
        if status == 202:
            raise McpProtocolError(self.server, f"accepted {what} (HTTP 202) without answering it")
        if status == 404 and self.session_id is not None:
            raise McpSessionExpiredError(self.server, status, await self._excerpt(resp), what=what)
        raise McpHttpError(self.server, status, await self._excerpt(resp), what=what)

    async def _read_body(self, resp: TransportResponse, what: str) -> bytes:
        body = bytearray()
        try:
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > self._max_body:
                    raise McpProtocolError(self.server, f"answered {what} with more than "
                                                        f"{self._max_body} bytes")
        except TransportError as exc:
            raise McpConnectionError(self.server, f"the {what} reply was cut off: {exc}") from exc
        return bytes(body)

    async def _notify(self, message: Outgoing) -> None:
        """POST a notification or an answer to the server; a 202 (or 200) is all it gets back."""
        async with self._open(self._http("POST", message.body), message.method) as resp:
            if resp.status not in (200, 202):
                raise McpHttpError(self.server, resp.status, await self._excerpt(resp),
                                   what=message.method)

    async def _send_cancel(self, request_id: RequestId, reason: str) -> None:
        message = self.session.cancel(request_id, reason)
        if message is None:
            return
        # Shielded and bounded: this runs while the caller is being cancelled, and a server that
        # no longer answers must not hold the caller up.
        with anyio.move_on_after(self._notify_s, shield=True):
            try:
                await self._notify(message)
            except McpError:
                pass  # best effort: the request is forgotten here whatever the server does

    async def _excerpt(self, resp: TransportResponse) -> str:
        body = bytearray()
        try:
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) >= _MAX_ERROR_EXCERPT:
                    break
        except TransportError:
            pass
        text = bytes(body[:_MAX_ERROR_EXCERPT]).decode("utf-8", "replace").strip()
        return " ".join(text.split())


def _reason(signal: AbortSignal | None) -> str | None:
    if signal is None or signal.reason is None:
        return None
    return str(signal.reason)


def _header(resp: TransportResponse, name: str) -> str | None:
    for key, value in resp.headers:
        if key.lower() == name:
            return value
    return None


def _content_type(resp: TransportResponse) -> str:
    value = _header(resp, "content-type") or ""
    return value.split(";", 1)[0].strip().lower()


@asynccontextmanager
async def open_mcp_client(transport: Transport, *, server: str,
                          **options: Any) -> AsyncIterator[McpHttpClient]:
    """Connect (``initialize``) on entry, close (DELETE) on exit. ``options`` are
    :class:`McpHttpClient`'s keywords."""
    client = McpHttpClient(transport, server=server, **options)
    try:
        await client.connect()
        yield client
    finally:
        await client.aclose()
