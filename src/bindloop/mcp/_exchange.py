"""The streamable HTTP mechanics under :class:`~bindloop.mcp.McpHttpClient`: building requests,
reading a reply (one JSON body or an event stream), resuming a dropped stream, routing what
arrives, and the one redaction rule every error and tool message passes.

Everything here is the client's own (a base class, not public API): the public contract is on
:class:`~bindloop.mcp.McpHttpClient`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
import base64
import re
from typing import Any, TypeVar

import msgspec

from ..wire import HttpRequest, SseDecoder, SseError, Transport, TransportError, TransportResponse
from ..wire import Redactor, transport_redactor
from ._errors import (
    McpConnectionError,
    McpError,
    McpHttpError,
    McpProtocolError,
    McpRpcError,
    McpSessionExpiredError,
)
from ._protocol import RequestId
from ._session import (
    McpClientSession,
    McpDiscarded,
    McpElicitationComplete,
    McpEvent,
    McpProgress,
    McpRequestFailed,
    McpResponse,
    McpServerRequest,
    Outgoing,
)

__all__ = ("Answer", "HttpExchange", "ParamHeader", "StreamRead", "content_type", "header",
           "header_value", "param_headers", "param_header_values")

Answer = McpResponse | McpRequestFailed
_E = TypeVar("_E", bound=McpError)
_MAX_ERROR_EXCERPT = 300
_JSON = msgspec.json.Encoder(order="sorted")


class StreamRead(msgspec.Struct):
    """What one read of an event stream left behind for a resumption."""

    answer: Answer | None = None
    last_id: str | None = None
    retry_ms: int | None = None
    events: int = 0  # messages that arrived: a resumption that brings any is not a failure
    problem: McpProtocolError | None = None  # the last unusable event, raised if nothing follows


class HttpExchange:
    """The request/response plumbing an :class:`McpHttpClient` is built on."""

    server: str
    session: McpClientSession
    session_id: str | None
    _transport: Transport
    _path: str
    _headers: tuple[tuple[str, str], ...]
    _max_body: int
    _max_resumes: int
    _sleep: Callable[[float], Awaitable[None]]
    _on_event: Callable[[McpEvent], None] | None
    _progress: dict[RequestId, Callable[[McpProgress], None]]
    _early: dict[RequestId, Answer]
    _secrets: list[str]
    _tokens: Redactor
    _redactors: tuple[Redactor, Redactor]

    def _init_redaction(self, transport: Transport, headers: Sequence[tuple[str, str]]) -> None:
        # The wire's one rule (Redactor), fed with three sources: the transport's credentials,
        # the client's own headers, and the tokens an auth provider obtains later.
        self._redactors = (transport_redactor(transport), Redactor.for_credentials("", headers))
        self._secrets = []
        self._tokens = Redactor()

    def add_secret(self, value: str) -> None:
        """Blank ``value`` (a token this client obtained) in every message from now on."""
        if value and value not in self._secrets:
            self._secrets.append(value)
            self._tokens = Redactor(self._secrets)

    def redact(self, text: str) -> str:
        """``text`` with every credential this client knows of (its headers, the transport's, the
        tokens it obtained) and every credential-shaped value blanked."""
        for redactor in self._redactors:
            text = redactor.text(text)
        return self._tokens.text(text)

    def _clean(self, exc: _E) -> _E:
        """``exc`` with its message and fields redacted (in place: the type and chain stay)."""
        scrub = self.redact
        exc.detail = scrub(exc.detail)
        exc.args = tuple(scrub(a) if isinstance(a, str) else a for a in exc.args)
        if isinstance(exc, McpHttpError):
            exc.body = scrub(exc.body)
        if isinstance(exc, McpRpcError):
            exc.rpc_message = scrub(exc.rpc_message)
            if exc.data is not None:
                try:
                    shown = _JSON.encode(exc.data).decode()
                except (TypeError, msgspec.EncodeError):
                    shown = repr(exc.data)
                if scrub(shown) != shown:
                    exc.data = scrub(shown)
        return exc

    # -- requests ---------------------------------------------------------------------------

    def _auth_headers(self) -> list[tuple[str, str]]:
        return []

    def _http(self, method: str, body: bytes, *, accept: str | None = "application/json, "
              "text/event-stream", last_event_id: str | None = None,
              out: Outgoing | None = None) -> HttpRequest:
        headers: list[tuple[str, str]] = []
        if method == "POST":
            headers.append(("content-type", "application/json"))
        if accept is not None:
            headers.append(("accept", accept))
        if self.session_id is not None:
            headers.append(("mcp-session-id", self.session_id))
        version = self.session.protocol_version
        if out is not None and out.version is not None:
            # The stateless form: the headers repeat the body, for intermediaries to route on.
            version = out.version
            headers.append(("mcp-method", out.method))
            if out.name is not None:
                headers.append(("mcp-name", header_value(out.name)))
            headers.extend(out.headers)
        if version is not None:
            headers.append(("mcp-protocol-version", version))
        if last_event_id is not None:
            headers.append(("last-event-id", last_event_id))
        headers.extend(self._headers)
        headers.extend(self._auth_headers())
        return HttpRequest(method=method, path=self._path, headers=tuple(headers), body=body)

    @asynccontextmanager
    async def _open(self, request: HttpRequest, what: str) -> AsyncIterator[TransportResponse]:
        try:
            async with self._transport.open(request) as resp:
                yield resp
        except TransportError as exc:
            raise self._clean(McpConnectionError(self.server, f"{what}: {exc}")) from exc

    async def _check_status(self, resp: TransportResponse, what: str, *,
                            expect_answer: bool) -> None:
        status = resp.status
        if status == 200 or (status == 202 and not expect_answer):
            return
        if status == 202:
            raise McpProtocolError(self.server, f"accepted {what} (HTTP 202) without answering it")
        error_type = (McpSessionExpiredError if status == 404 and self.session_id is not None
                      else McpHttpError)
        raise self._clean(error_type(self.server, status, await self._excerpt(resp), what=what,
                                     www_authenticate=header(resp, "www-authenticate")))

    async def _read_body(self, resp: TransportResponse, what: str) -> bytes:
        body = bytearray()
        try:
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > self._max_body:
                    raise McpProtocolError(self.server, f"answered {what} with more than "
                                                        f"{self._max_body} bytes")
        except TransportError as exc:
            raise self._clean(McpConnectionError(self.server, f"the {what} reply was cut off: "
                                                              f"{exc}")) from exc
        return bytes(body)

    async def _excerpt(self, resp: TransportResponse) -> str:
        body = bytearray()
        try:
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) >= 4 * _MAX_ERROR_EXCERPT:
                    break
        except TransportError:
            pass
        # Redacted before the cut, so a credential the cut would split is still recognised.
        text = self.redact(bytes(body).decode("utf-8", "replace"))
        text = " ".join(text.split())
        return text[:_MAX_ERROR_EXCERPT]

    async def _notify(self, message: Outgoing) -> None:
        """POST a notification or an answer to the server; a 202 (or 200) is all it gets back."""
        async with self._open(self._http("POST", message.body), message.method) as resp:
            if resp.status not in (200, 202):
                raise self._clean(McpHttpError(self.server, resp.status,
                                               await self._excerpt(resp), what=message.method))

    # -- one exchange -----------------------------------------------------------------------

    async def _exchange(self, out: Outgoing) -> Answer:
        """POST ``out`` and read its answer, resuming a dropped event stream. ``max_resumes``
        bounds the resumptions in a row that bring nothing; one that delivers a message resets
        the count (servers that poll close every stream after a while, by design)."""
        request_id = out.request_id
        assert request_id is not None
        async with self._open(self._http("POST", out.body, out=out), out.method) as resp:
            if out.version is not None and resp.status in (400, 404, 405) \
                    and content_type(resp) == "application/json":
                # A stateless server answers its refusals (an unsupported revision, a header
                # mismatch, an unknown method) with a 4xx that carries the JSON-RPC error.
                refused = await self._modern_refusal(resp, out)
                if refused is not None:
                    return refused
            await self._check_status(resp, out.method, expect_answer=True)
            if out.method == "initialize":
                self.session_id = header(resp, "mcp-session-id")
            kind = content_type(resp)
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
            state = await self._read_stream(resp, request_id, out.method)
            if state.answer is not None:
                return state.answer
        failures = 0
        problem = state.problem
        while failures < self._max_resumes:
            early = self._early.pop(request_id, None)
            if early is not None:
                return early
            if state.last_id is None:
                break
            if state.retry_ms:
                await self._sleep(min(state.retry_ms, 30_000) / 1000.0)
            what = f"{out.method} (resuming)"
            request = self._http("GET", b"", accept="text/event-stream",
                                 last_event_id=state.last_id)
            async with self._open(request, what) as resp:
                await self._check_status(resp, what, expect_answer=True)
                if content_type(resp) != "text/event-stream":
                    raise McpProtocolError(self.server, "answered a resumption without an event "
                                                        "stream")
                resumed = await self._read_stream(resp, request_id, out.method, state.last_id)
            if resumed.answer is not None:
                return resumed.answer
            failures = 0 if resumed.events else failures + 1
            problem = resumed.problem or problem
            state = StreamRead(last_id=resumed.last_id or state.last_id,
                            retry_ms=resumed.retry_ms or state.retry_ms)
        early = self._early.pop(request_id, None)
        if early is not None:
            return early
        if problem is not None:
            raise problem
        how = ("and the server numbered no events to resume from" if state.last_id is None
               else f"and {self._max_resumes} resumptions in a row brought nothing")
        raise McpConnectionError(self.server,
                                 f"the reply stream for {out.method} ended before its response, "
                                 f"{how}")

    async def _modern_refusal(self, resp: TransportResponse, out: Outgoing) -> Answer | None:
        """The JSON-RPC error answer in a stateless request's 4xx body; otherwise (not JSON-RPC,
        not its answer: a server that does not speak the form) :class:`McpHttpError`."""
        body = await self._read_body(resp, out.method)
        try:
            events = self.session.receive(body)
        except McpProtocolError:
            events = []
        answer = next((e for e in events if isinstance(e, McpRequestFailed)
                       and e.request_id == out.request_id), None)
        if answer is not None:
            return answer
        text = " ".join(self.redact(body[:4 * _MAX_ERROR_EXCERPT].decode("utf-8", "replace"))
                        .split())[:_MAX_ERROR_EXCERPT]
        raise self._clean(McpHttpError(self.server, resp.status, text, what=out.method,
                                       www_authenticate=header(resp, "www-authenticate")))

    async def _read_stream(self, resp: TransportResponse, request_id: RequestId | None,
                           method: str, last_id: str | None = None) -> StreamRead:
        # The client's body bound is the stream's line and event bound too: an event carries one
        # JSON-RPC message, which may be as large as a JSON reply.
        decoder = SseDecoder(max_line_bytes=self._max_body, max_event_bytes=self._max_body)
        state = StreamRead(last_id=last_id)
        try:
            async for chunk in resp.aiter_bytes():
                for event in decoder.feed(chunk):
                    if event.id is not None:
                        if event.id != state.last_id:
                            state.events += 1  # a new event id is progress, even a priming one
                        state.last_id = event.id
                    if event.event != "message" or not event.data.strip():
                        continue  # a priming event (id only) or a named event MCP does not use
                    state.events += 1
                    try:
                        events = self.session.receive(event.data)
                    except McpProtocolError as exc:
                        if (request_id is not None and request_id not in self._early
                                and request_id not in self.session.pending()):
                            # The session took this event as the call's answer and could not use
                            # it (a revision it does not speak, a malformed result): no answer can
                            # follow, so the exchange ends here rather than resuming until the
                            # timeout.
                            raise self._clean(exc) from exc
                        # One unusable event does not cost the call whose answer may follow.
                        state.problem = self._clean(exc)
                        self._report(McpDiscarded(reason=exc.detail))
                        continue
                    answer = await self._take(events, request_id)
                    if answer is not None:
                        state.answer = answer
                        state.retry_ms = decoder.retry_ms
                        return state
        except TransportError:
            pass  # dropped mid-stream: the caller resumes from last_id if it can
        except SseError as exc:
            raise McpProtocolError(self.server, f"sent an unusable event stream for {method}: "
                                                f"{exc}") from exc
        decoder.end()
        state.retry_ms = decoder.retry_ms
        return state

    def _report(self, event: McpEvent) -> None:
        if self._on_event is not None:
            self._on_event(event)

    async def _serve(self, request: McpServerRequest) -> None:
        """Answer a server request the host serves (overridden by the client)."""
        await self._notify(self.session.respond_error(request.request_id, -32601,
                                                      f"client does not support {request.method}"))

    def _elicitation_complete(self, event: McpElicitationComplete) -> None:
        """A URL-mode elicitation finished out of band (the client wakes whoever waits)."""
        self._report(event)

    def _saw_progress(self, request_id: RequestId) -> None:
        """Progress arrived for ``request_id`` (the client extends its timeout)."""

    async def _take(self, events: list[McpEvent], request_id: RequestId | None
                    ) -> Answer | None:
        """Route ``events``: the answer for ``request_id`` is returned; answers to other requests
        wait for their callers; progress goes to its call's callback; server requests the host
        serves are answered; the rest goes to ``on_event``. Then whatever the session decided to
        send (answers to server pings, ``initialized``) goes."""
        mine: Answer | None = None
        for event in events:
            if isinstance(event, (McpResponse, McpRequestFailed)):
                if event.request_id == request_id:
                    mine = event
                else:
                    self._early[event.request_id] = event
            elif isinstance(event, McpProgress) and event.progress_token in self._progress:
                self._saw_progress(event.progress_token)
                self._progress[event.progress_token](event)
            elif isinstance(event, McpServerRequest):
                await self._serve(event)
            elif isinstance(event, McpElicitationComplete):
                self._elicitation_complete(event)
            else:
                self._report(event)
        for message in self.session.take_outgoing():
            await self._notify(message)
        return mine


def header_value(value: str) -> str:
    """``value`` as an HTTP header value: as is when it is plain visible ASCII (inner spaces
    allowed) or empty, else in the ``=?base64?...?=`` form the 2026-07-28 transport defines."""
    if not value:
        return value
    if value == value.strip() and all(" " <= ch <= "~" for ch in value) \
            and not (value.startswith("=?base64?") and value.endswith("?=")):
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


ParamHeader = tuple[str, tuple[str, ...], str]
"""One ``x-mcp-header`` annotation: the header's name part, the ``properties`` path to the value,
and the property's type (``string``, ``integer`` or ``boolean``)."""

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_TYPES = ("string", "integer", "boolean")
_SAFE_INTEGER = 2 ** 53 - 1


def param_headers(schema: dict[str, Any]) -> tuple[tuple[ParamHeader, ...], str | None]:
    """The ``x-mcp-header`` annotations of a tool's ``inputSchema`` (2026-07-28), or the reason the
    tool must be left out: a name that is not an HTTP token or repeats another (case-insensitively),
    a property that is not a string, integer or boolean, or an annotation that is not reached from
    the root through ``properties`` alone."""
    found: list[ParamHeader] = []
    seen: set[str] = set()
    problem: str | None = None

    def walk(node: Any, path: tuple[str, ...]) -> None:
        nonlocal problem
        props = node.get("properties") if isinstance(node, dict) else None
        if not isinstance(props, dict):
            return
        for key, sub in props.items():
            if not isinstance(sub, dict):
                continue
            if "x-mcp-header" in sub:
                name = sub["x-mcp-header"]
                kind = sub.get("type")
                if not isinstance(name, str) or not _TOKEN.fullmatch(name):
                    problem = problem or f"x-mcp-header {str(name)[:40]!r} is not an HTTP token"
                elif name.lower() in seen:
                    problem = problem or f"x-mcp-header {name!r} is used twice"
                elif kind not in _HEADER_TYPES:
                    problem = problem or (f"x-mcp-header {name!r} is on a {kind!r} property "
                                          "(string, integer or boolean only)")
                else:
                    seen.add(name.lower())
                    found.append((name, (*path, key), kind))
            walk(sub, (*path, key))

    walk(schema, ())
    if problem is None and _count_annotations(schema) != len(found):
        problem = "an x-mcp-header is not reached from the root through properties alone"
    return tuple(found), problem


def _count_annotations(node: Any, depth: int = 0) -> int:
    if depth > 64:
        return 0
    if isinstance(node, dict):
        return ("x-mcp-header" in node) + sum(_count_annotations(v, depth + 1)
                                              for v in node.values())
    if isinstance(node, list):
        return sum(_count_annotations(v, depth + 1) for v in node)
    return 0


def param_header_values(params: tuple[ParamHeader, ...],
                        arguments: Any) -> tuple[tuple[str, str], ...]:
    """The ``Mcp-Param-{name}`` headers of one call: each annotated value found in
    ``arguments`` at its path, as text (booleans lowercase), encoded like ``Mcp-Name``. A value
    missing, ``null`` or not of the declared type sends no header."""
    out: list[tuple[str, str]] = []
    for name, path, kind in params:
        value: Any = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if kind == "boolean" and isinstance(value, bool):
            text = "true" if value else "false"
        elif kind == "integer" and isinstance(value, int) and not isinstance(value, bool) \
                and abs(value) <= _SAFE_INTEGER:
            text = str(value)
        elif kind == "string" and isinstance(value, str):
            text = value
        else:
            continue
        out.append((f"mcp-param-{name}", header_value(text)))
    return tuple(out)


def header(resp: TransportResponse, name: str) -> str | None:
    for key, value in resp.headers:
        if key.lower() == name:
            return value
    return None


def content_type(resp: TransportResponse) -> str:
    value = header(resp, "content-type") or ""
    return value.split(";", 1)[0].strip().lower()

