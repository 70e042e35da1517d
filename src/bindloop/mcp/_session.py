"""The MCP client session: a synchronous state machine over JSON-RPC 2.0, with no I/O.

The driver asks it for the bytes of a request (:meth:`McpClientSession.initialize`,
:meth:`~McpClientSession.list_tools`, :meth:`~McpClientSession.call_tool`, ...), sends them however
its transport does, and feeds every message the server sends back to
:meth:`~McpClientSession.receive`, which returns events. Messages the machine itself decides to send
(``notifications/initialized`` after a successful handshake, answers to a server's ``ping``) queue
up for :meth:`~McpClientSession.take_outgoing`. Request ids and the clock are injected.
"""

from __future__ import annotations

import itertools
from types import MappingProxyType
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeAlias

import msgspec

from ..clock import Clock, monotonic_ms
from ..errors import ProtocolError, UsageError
from ._errors import McpProtocolError, McpRpcError, McpVersionError, rpc_error
from ._protocol import (
    META_CAPABILITIES,
    META_CLIENT_INFO,
    META_SERVER_INFO,
    META_VERSION,
    MODERN_VERSIONS,
    PROTOCOL_VERSIONS,
    CallToolResult,
    DiscoverResult,
    Implementation,
    InitializeResult,
    ListToolsResult,
    RequestId,
    RpcErrorObject,
    RpcIncoming,
    RpcNotification,
    RpcRequest,
    RpcResponse,
)

__all__ = (
    "McpClientSession",
    "McpDiscarded",
    "McpElicitationComplete",
    "McpEra",
    "McpEvent",
    "McpInputRequired",
    "McpPhase",
    "McpProgress",
    "McpRequestFailed",
    "McpResponse",
    "McpServerNotification",
    "McpServerRequest",
    "McpToolListChanged",
    "Outgoing",
)

McpPhase: TypeAlias = Literal["new", "initializing", "ready", "closed"]
McpEra: TypeAlias = Literal["legacy", "modern"]

_ENCODER = msgspec.json.Encoder()
_METHOD_NOT_FOUND = -32601
_MAX_FORGOTTEN = 4096


class Outgoing(msgspec.Struct, frozen=True, kw_only=True):
    """One message to send: its JSON ``body``, its ``method``, and ``request_id`` when it expects a
    response (``None`` for a notification or an answer to the server)."""

    body: bytes
    method: str
    request_id: RequestId | None = None
    version: str | None = None
    """The revision a stateless (2026-07-28) request names in its ``_meta``: it goes in the
    ``MCP-Protocol-Version`` header with ``Mcp-Method`` (``None``: a legacy message)."""
    name: str | None = None
    """The ``Mcp-Name`` header of a stateless request (the tool or prompt name, the URI)."""
    headers: tuple[tuple[str, str], ...] = ()
    """More headers of a stateless request (a tool's ``Mcp-Param-*`` headers)."""


class McpResponse(msgspec.Struct, frozen=True, kw_only=True):
    """The response to a request this session sent. ``result`` is typed by method:
    :class:`InitializeResult`, :class:`ListToolsResult`, :class:`CallToolResult`, or the raw object
    for ``ping`` and any other method. ``elapsed_ms`` is measured on the injected clock."""

    request_id: RequestId
    method: str
    result: Any
    elapsed_ms: float


class McpRequestFailed(msgspec.Struct, frozen=True, kw_only=True):
    """The server answered a request with a JSON-RPC error; ``error`` is ready to raise."""

    request_id: RequestId
    method: str
    error: McpRpcError


class McpProgress(msgspec.Struct, frozen=True, kw_only=True):
    """``notifications/progress`` for a request that asked for progress (its ``progress_token``)."""

    progress_token: RequestId
    progress: float
    total: float | None = None
    message: str | None = None


class McpToolListChanged(msgspec.Struct, frozen=True, kw_only=True):
    """``notifications/tools/list_changed``: the session's :attr:`~McpClientSession.tools_stale` is
    now set; list the tools again before trusting the old list."""


class McpServerNotification(msgspec.Struct, frozen=True, kw_only=True):
    """Any other notification (logging, resource updates, the server cancelling its own request)."""

    method: str
    params: dict[str, Any] | None = None


class McpServerRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A request from the server that the host serves (``sampling/createMessage``,
    ``elicitation/create``, ``roots/list``, ...: a method named in the session's ``serves``).
    Answer it with :meth:`McpClientSession.respond` or :meth:`McpClientSession.respond_error`."""

    request_id: RequestId
    method: str
    params: dict[str, Any] | None = None


class McpElicitationComplete(msgspec.Struct, frozen=True, kw_only=True):
    """``notifications/elicitation/complete``: the out-of-band interaction of the URL-mode
    elicitation ``elicitation_id`` finished (servers may send it; clients must not rely on it)."""

    elicitation_id: str


class McpDiscarded(msgspec.Struct, frozen=True, kw_only=True):
    """Something the server sent that the session dropped without failing anything: a response to
    an id never sent (or answered already: a duplicate in a batch), or a malformed member of a
    batch. ``reason`` says which; the other messages of the same delivery were processed."""

    reason: str
    request_id: RequestId | None = None


class McpInputRequired(msgspec.Struct, frozen=True, kw_only=True):
    """A 2026-07-28 server answered with ``resultType: "input_required"`` (Multi Round-Trip
    Requests): ``input_requests`` are server requests by key (``elicitation/create``,
    ``sampling/createMessage``, ``roots/list``: ``{"method": ..., "params": ...}``) and
    ``request_state`` is opaque. The request is re-issued with ``inputResponses`` (one result per
    key) and the ``requestState`` as they came. It is the ``result`` of an :class:`McpResponse`."""

    input_requests: dict[str, Any]
    request_state: str | None = None


McpEvent: TypeAlias = (McpResponse | McpRequestFailed | McpProgress | McpToolListChanged
                       | McpServerNotification | McpServerRequest | McpElicitationComplete
                       | McpDiscarded)


class _Pending(msgspec.Struct, frozen=True):
    method: str
    started_ms: float
    raw: bool = False  # the result stays a dict (a task-augmented call answers a task)
    modern: bool = False  # sent in the stateless form: the result names its resultType


class McpClientSession:
    """One MCP session with one server, named ``server`` in every error.

    ``protocol_versions`` are the revisions offered, preferred first (the first is what
    ``initialize`` asks for); a server that answers with another is refused with
    :class:`McpVersionError` naming both sides. ``ids()`` mints request ids (default: 1, 2, 3, ...);
    ``now()`` times each request.

    ``capabilities`` are the client capabilities ``initialize`` declares (``roots``, ``sampling``,
    ``elicitation``); ``serves`` the server-request methods the host answers: each arrives as an
    :class:`McpServerRequest` event. ``ping`` is always answered by the machine itself, anything
    else gets JSON-RPC "method not found".

    A response to a request the session forgot (cancelled, timed out) is dropped silently, as the
    protocol expects; a response to an id never issued (or answered already) is an
    :class:`McpDiscarded` event: it fails nothing, and the messages beside it are processed.

    The stateless era (``modern_versions``, 2026-07-28): :meth:`discover` builds the probe (its own
    id, ``discover-N``) and :meth:`adopt` makes the session ready with no handshake; from then on
    every request carries the ``_meta`` envelope (:attr:`Outgoing.version` and
    :attr:`Outgoing.name` give the headers), a result must name a known ``resultType``, and an
    ``input_required`` one comes back as an :class:`McpInputRequired` result.
    """

    __slots__ = ("_capabilities", "_client_info", "_era", "_forgotten", "_fresh_until", "_ids",
                 "_inbound", "_modern", "_now", "_outbox", "_pending", "_phase", "_probes",
                 "_serves", "_stale", "_versions", "discover_result", "initialize_result", "server",
                 "tools_cache_scope")

    def __init__(self, *, server: str, client_info: Implementation | None = None,
                 protocol_versions: tuple[str, ...] = PROTOCOL_VERSIONS,
                 ids: Callable[[], RequestId] | None = None, now: Clock = monotonic_ms,
                 capabilities: Mapping[str, Any] | None = None,
                 serves: frozenset[str] = frozenset(),
                 modern_versions: tuple[str, ...] = MODERN_VERSIONS) -> None:
        if not isinstance(server, str) or not server:
            raise UsageError("McpClientSession(server=...) must be a non-empty name")
        if not protocol_versions or not all(isinstance(v, str) and v for v in protocol_versions):
            raise UsageError("protocol_versions must be a non-empty tuple of revision strings")
        if not all(isinstance(v, str) and v for v in modern_versions):
            raise UsageError("modern_versions must be a tuple of revision strings")
        self.server = server
        self._client_info = client_info or Implementation(name="bindloop", version="0.1.0")
        self._versions = tuple(protocol_versions)
        self._modern = tuple(modern_versions)
        self._era: McpEra | None = None
        self._probes = 0
        counter = itertools.count(1)
        self._ids: Callable[[], RequestId] = ids if ids is not None else lambda: next(counter)
        self._now = now
        self._phase: McpPhase = "new"
        self._pending: dict[RequestId, _Pending] = {}
        # Ids whose late answers are dropped, oldest first; bounded so a long-lived session that
        # times out often does not grow without end.
        self._forgotten: dict[RequestId, None] = {}
        self._outbox: list[Outgoing] = []
        self._capabilities: dict[str, Any] = dict(capabilities or {})
        self._serves = frozenset(serves)
        # Server requests handed to the host and not answered yet (answered at most once).
        self._inbound: dict[RequestId, str] = {}
        self.initialize_result: InitializeResult | None = None
        """The server's ``initialize`` answer once the handshake succeeded (for a 2026-07-28
        server: made from its ``server/discover`` answer, with the revision chosen)."""
        self.discover_result: DiscoverResult | None = None
        """The ``server/discover`` answer of a 2026-07-28 server."""
        self._stale = False
        self._fresh_until: float | None = None
        self.tools_cache_scope: str | None = None
        """The ``cacheScope`` of the last tool list (``"private"``: not to be reused under other
        credentials)."""

    def __repr__(self) -> str:
        return f"McpClientSession(server={self.server!r}, phase={self._phase!r})"

    @property
    def phase(self) -> McpPhase:
        return self._phase

    @property
    def era(self) -> McpEra | None:
        """``"modern"`` (2026-07-28, stateless), ``"legacy"`` (the ``initialize`` handshake), or
        ``None`` before either was chosen."""
        return self._era

    @property
    def modern_versions(self) -> tuple[str, ...]:
        return self._modern

    @property
    def protocol_versions(self) -> tuple[str, ...]:
        return self._versions

    @property
    def tools_stale(self) -> bool:
        """Whether the tool list must be fetched again: the server said it changed
        (``notifications/tools/list_changed``), or its cache hint (``ttlMs``) has run out."""
        return self._stale or (self._fresh_until is not None and self._now() >= self._fresh_until)

    @tools_stale.setter
    def tools_stale(self, value: bool) -> None:
        self._stale = value

    @property
    def protocol_version(self) -> str | None:
        """The negotiated revision (``None`` before the handshake)."""
        return None if self.initialize_result is None else self.initialize_result.protocol_version

    def pending(self) -> tuple[RequestId, ...]:
        """Ids of requests sent and not yet answered, in the order they were sent."""
        return tuple(self._pending)

    # -- requests ---------------------------------------------------------------------------

    def _request(self, method: str, params: dict[str, Any] | None,
                 request_id: RequestId | None = None, *, raw: bool = False,
                 version: str | None = None) -> Outgoing:
        if request_id is None:
            request_id = self._ids()
        if request_id in self._pending or request_id in self._forgotten:
            raise UsageError(f"the ids port returned {request_id!r} twice; request ids must be unique")
        if version is None and self._era == "modern":
            version = self.protocol_version
        name: str | None = None
        if version is not None:
            params = self._envelope(params, version)
            key = _NAME_BEARING.get(method)
            named = params.get(key) if key is not None else None
            name = named if isinstance(named, str) else None
        self._pending[request_id] = _Pending(method, self._now(), raw, version is not None)
        body = _ENCODER.encode(RpcRequest(jsonrpc="2.0", id=request_id, method=method, params=params))
        return Outgoing(body=body, method=method, request_id=request_id, version=version,
                        name=name)

    def _envelope(self, params: dict[str, Any] | None, version: str) -> dict[str, Any]:
        """``params`` with the stateless ``_meta``: the revision, this client and its
        capabilities (kept beside what ``_meta`` holds already, e.g. a progress token)."""
        out = dict(params or {})
        meta = dict(out.get("_meta") or {})
        meta[META_VERSION] = version
        meta[META_CLIENT_INFO] = msgspec.to_builtins(self._client_info)
        meta[META_CAPABILITIES] = dict(self._capabilities)
        out["_meta"] = meta
        return out

    def discover(self, version: str) -> Outgoing:
        """``server/discover`` in the stateless form naming ``version`` (one of the
        ``modern_versions``): what the server speaks. Only before the era is chosen."""
        if self._phase != "new":
            raise ProtocolError(f"MCP server {self.server!r}: server/discover after the session "
                                "started")
        if version not in self._modern:
            raise UsageError(f"server/discover names {version!r}, not one of {self._modern}")
        # Its own id, not one of the ids port's: a legacy server answers the probe as it likes
        # (an error, a stray reply), and the handshake that follows starts at the first id.
        self._probes += 1
        return self._request("server/discover", None, f"discover-{self._probes}",
                             version=version)

    def adopt(self, version: str, discovered: DiscoverResult) -> None:
        """Speak the stateless revision ``version`` from now on (the server listed it in
        ``discovered``): the session is ready with no handshake."""
        if self._phase != "new":
            raise ProtocolError(f"MCP server {self.server!r}: the era is chosen already")
        if version not in self._modern or version not in discovered.supported_versions:
            raise McpVersionError(self.server, ", ".join(discovered.supported_versions),
                                  self._modern + self._versions)
        info = discovered.meta.get(META_SERVER_INFO)
        try:
            server_info = msgspec.convert(info, Implementation)
        except msgspec.ValidationError:
            server_info = Implementation(name=self.server)
        self.discover_result = discovered
        self.initialize_result = InitializeResult(
            protocol_version=version, server_info=server_info,
            capabilities=dict(discovered.capabilities), instructions=discovered.instructions)
        self._era = "modern"
        self._phase = "ready"

    def _require_ready(self, method: str) -> None:
        if self._phase != "ready":
            raise ProtocolError(f"MCP server {self.server!r}: cannot send {method} while the session "
                                f"is {self._phase!r} (initialize first)")

    def initialize(self) -> Outgoing:
        """The ``initialize`` request, offering the preferred revision. Only from phase ``new``."""
        if self._phase != "new":
            raise ProtocolError(f"MCP server {self.server!r}: initialize sent twice")
        self._phase = "initializing"
        self._era = "legacy"
        return self._request("initialize", {
            "protocolVersion": self._versions[0],
            "capabilities": dict(self._capabilities),
            "clientInfo": msgspec.to_builtins(self._client_info),
        })

    def list_tools(self, cursor: str | None = None) -> Outgoing:
        """One page of ``tools/list`` (``cursor`` from the previous page's ``next_cursor``)."""
        self._require_ready("tools/list")
        return self._request("tools/list", None if cursor is None else {"cursor": cursor})

    def call_tool(self, name: str, arguments: Mapping[str, Any], *,
                  progress: bool = False, extra: Mapping[str, Any] | None = None,
                  headers: tuple[tuple[str, str], ...] = ()) -> Outgoing:
        """``tools/call``. With ``progress`` the request's own id is its progress token, so the
        server's :class:`McpProgress` events carry it. ``extra`` params go beside the name and
        arguments (a Multi Round-Trip retry's ``inputResponses`` and ``requestState``)."""
        self._require_ready("tools/call")
        request_id = self._ids()
        params: dict[str, Any] = {**(extra or {}), "name": name, "arguments": dict(arguments)}
        if progress:
            params["_meta"] = {"progressToken": request_id}
        out = self._request("tools/call", params, request_id)
        if headers and out.version is not None:
            out = msgspec.structs.replace(out, headers=headers)
        return out

    def ping(self) -> Outgoing:
        self._require_ready("ping")
        return self._request("ping", None)

    def request(self, method: str, params: Mapping[str, Any] | None = None, *,
                raw: bool = False) -> Outgoing:
        """Any other request (``resources/read``, ``prompts/get``, ``logging/setLevel``, ...); its
        result comes back raw (a ``dict``) unless the method has a typed result here and ``raw``
        is false."""
        self._require_ready(method)
        return self._request(method, None if params is None else dict(params), raw=raw)

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> Outgoing:
        """A notification to the server (``notifications/roots/list_changed``, ...)."""
        return Outgoing(body=_ENCODER.encode(RpcNotification(
            jsonrpc="2.0", method=method, params=None if params is None else dict(params))),
            method=method)

    def respond(self, request_id: RequestId, result: Mapping[str, Any]) -> Outgoing:
        """The answer to an :class:`McpServerRequest`.

        Raises
        ------
        UsageError
            ``request_id`` is not a server request waiting for its answer (answered already?).
        """
        method = self._answering(request_id)
        return Outgoing(body=_ENCODER.encode(RpcResponse(jsonrpc="2.0", id=request_id,
                                                         result=dict(result))),
                        method=f"reply:{method}")

    def respond_error(self, request_id: RequestId, code: int, message: str,
                      data: Any = None) -> Outgoing:
        """A JSON-RPC error answer to an :class:`McpServerRequest` (a refusal, a failure)."""
        method = self._answering(request_id)
        return Outgoing(body=_ENCODER.encode(RpcResponse(jsonrpc="2.0", id=request_id, error=(
            RpcErrorObject(code=code, message=message, data=data)))), method=f"reply:{method}")

    def _answering(self, request_id: RequestId) -> str:
        method = self._inbound.pop(request_id, None)
        if method is None:
            raise UsageError(f"MCP server {self.server!r}: no server request {request_id!r} is "
                             "waiting for an answer")
        return method

    def cancel(self, request_id: RequestId, reason: str | None = None) -> Outgoing | None:
        """Forget ``request_id`` and return its ``notifications/cancelled`` (``None`` when it is not
        pending any more: answered already, or cancelled twice). ``initialize`` is never cancelled
        this way (the protocol forbids it); the session is closed instead."""
        entry = self._pending.pop(request_id, None)
        if entry is None:
            return None
        self._forget(request_id)
        if entry.method == "initialize":
            self._phase = "closed"
            return None
        params: dict[str, Any] = {"requestId": request_id}
        if reason:
            params["reason"] = reason
        return Outgoing(body=_ENCODER.encode(RpcNotification(jsonrpc="2.0", method="notifications/cancelled",
                                                             params=params)),
                        method="notifications/cancelled")

    def _forget(self, request_id: RequestId) -> None:
        self._forgotten[request_id] = None
        if len(self._forgotten) > _MAX_FORGOTTEN:
            del self._forgotten[next(iter(self._forgotten))]

    def mark_tools_fresh(self, ttl_ms: float | None = None, scope: str | None = None) -> None:
        """The host has listed the tools again; with the server's cache hint ``ttl_ms`` the list
        goes stale by itself that long after now (0: at once; ``None``: until the server says it
        changed). ``scope`` is the hint's ``cacheScope``."""
        self._stale = False
        self._fresh_until = (None if ttl_ms is None or not ttl_ms >= 0
                             else self._now() + float(ttl_ms))
        self.tools_cache_scope = scope

    def close(self) -> None:
        """No more requests; late responses are dropped."""
        for request_id in self._pending:
            self._forget(request_id)
        self._pending.clear()
        self._inbound.clear()
        self._phase = "closed"

    def take_outgoing(self) -> list[Outgoing]:
        """Messages the session decided to send, oldest first (the queue is emptied)."""
        out, self._outbox = self._outbox, []
        return out

    # -- incoming ---------------------------------------------------------------------------

    def receive(self, data: bytes | str) -> list[McpEvent]:
        """Consume one JSON-RPC message (or a batch array) from the server.

        Raises
        ------
        McpProtocolError
            The data is not JSON-RPC 2.0 from an MCP server (the session stays usable).
        McpVersionError
            The ``initialize`` answer names a revision not offered; the session is closed.
        """
        try:
            decoded = msgspec.json.decode(data)
        except msgspec.DecodeError as exc:
            raise McpProtocolError(self.server, f"sent a message that is not JSON: {exc}") from exc
        items = decoded if isinstance(decoded, list) else [decoded]
        if not items:
            raise McpProtocolError(self.server, "sent an empty JSON-RPC batch")
        if len(items) == 1:
            return self._item(items[0])
        # A batch: one bad member is reported, never costs the others their answers.
        events: list[McpEvent] = []
        for item in items:
            try:
                events.extend(self._item(item))
            except McpProtocolError as exc:
                events.append(McpDiscarded(reason=exc.detail))
        return events

    def _item(self, item: Any) -> list[McpEvent]:
        try:
            message = msgspec.convert(item, RpcIncoming)
        except msgspec.ValidationError as exc:
            raise McpProtocolError(self.server,
                                   f"sent a malformed JSON-RPC message: {exc}") from exc
        return self._one(message)

    def _one(self, message: RpcIncoming) -> list[McpEvent]:
        if message.jsonrpc != "2.0":
            raise McpProtocolError(self.server, f"sent jsonrpc={message.jsonrpc!r}, expected '2.0'")
        if message.method is not None:
            if message.id is not None:
                return self._answer_server_request(message.id, message.method, message.params)
            return [self._notification(message.method, message.params)]
        if message.id is None:
            raise McpProtocolError(self.server, "sent a message with neither method nor id")
        return self._response(message)

    def _answer_server_request(self, request_id: RequestId, method: str,
                               params: dict[str, Any] | None) -> list[McpEvent]:
        # ping is answered here; what the host serves goes to it; anything else gets "method not
        # found", as JSON-RPC asks.
        if method in self._serves and method != "ping":
            if request_id in self._inbound:
                return [McpDiscarded(reason=f"repeated server request id {request_id!r}",
                                     request_id=request_id)]
            self._inbound[request_id] = method
            return [McpServerRequest(request_id=request_id, method=method, params=params)]
        if method == "ping":
            reply = RpcResponse(jsonrpc="2.0", id=request_id, result={})
        else:
            reply = RpcResponse(jsonrpc="2.0", id=request_id, error=RpcErrorObject(
                code=_METHOD_NOT_FOUND, message=f"client does not support {method}"))
        self._outbox.append(Outgoing(body=_ENCODER.encode(reply), method=f"reply:{method}"))
        return []

    def _notification(self, method: str, params: dict[str, Any] | None) -> McpEvent:
        if method == "notifications/progress" and params is not None:
            token = params.get("progressToken")
            progress = params.get("progress")
            total = params.get("total")
            note = params.get("message")
            if (isinstance(token, (int, str)) and not isinstance(token, bool)
                    and isinstance(progress, (int, float)) and not isinstance(progress, bool)
                    and (total is None or _is_number(total))):
                return McpProgress(progress_token=token, progress=float(progress),
                                   total=None if total is None else float(total),
                                   message=note if isinstance(note, str) else None)
        if method == "notifications/tools/list_changed":
            self.tools_stale = True
            return McpToolListChanged()
        if method == "notifications/elicitation/complete" and params is not None:
            ident = params.get("elicitationId")
            if isinstance(ident, str) and ident:
                return McpElicitationComplete(elicitation_id=ident)
        return McpServerNotification(method=method, params=params)

    def _response(self, message: RpcIncoming) -> list[McpEvent]:
        request_id = message.id
        assert request_id is not None
        entry = self._pending.pop(request_id, None)
        if entry is None:
            if request_id in self._forgotten:
                return []
            return [McpDiscarded(reason=f"answered request id {request_id!r}, which is not "
                                        "waiting for an answer (never sent, or answered already)",
                                 request_id=request_id)]
        if message.error is not None:
            if entry.method == "initialize":
                self._phase = "closed"
            error = rpc_error(self.server, entry.method, message.error.code,
                              message.error.message, message.error.data)
            return [McpRequestFailed(request_id=request_id, method=entry.method, error=error)]
        if message.result is msgspec.UNSET:
            self._pending[request_id] = entry  # still unanswered: a malformed reply is no answer
            raise McpProtocolError(self.server, f"answered {entry.method} with neither result "
                                                "nor error")
        result: Any = message.result
        if entry.modern:
            kind = message.result.get("resultType", "complete")
            if kind == "input_required":
                return [McpResponse(request_id=request_id, method=entry.method,
                                    result=self._input_required(entry.method, message.result),
                                    elapsed_ms=self._now() - entry.started_ms)]
            if kind != "complete":
                raise McpProtocolError(self.server, f"answered {entry.method} with resultType "
                                                    f"{str(kind)[:60]!r}, which this client does "
                                                    "not know")
        typed = None if entry.raw else _RESULT_TYPES.get(entry.method)
        if typed is not None:
            try:
                result = msgspec.convert(message.result, typed)
            except msgspec.ValidationError as exc:
                if entry.method == "initialize":
                    self._phase = "closed"
                raise McpProtocolError(self.server,
                                       f"answered {entry.method} with a malformed result: {exc}"
                                       ) from exc
        if entry.method == "initialize":
            self._handshake(result)
        return [McpResponse(request_id=request_id, method=entry.method, result=result,
                            elapsed_ms=self._now() - entry.started_ms)]

    def _input_required(self, method: str, result: dict[str, Any]) -> McpInputRequired:
        requests = result.get("inputRequests")
        state = result.get("requestState")
        if requests is None:
            requests = {}
        if not isinstance(requests, dict) or not all(
                isinstance(v, dict) and isinstance(v.get("method"), str)
                for v in requests.values()):
            raise McpProtocolError(self.server, f"answered {method} with malformed inputRequests")
        if state is not None and not isinstance(state, str):
            raise McpProtocolError(self.server, f"answered {method} with a requestState that is "
                                                "not a string")
        if not requests and state is None:
            raise McpProtocolError(self.server, f"answered {method} input_required with neither "
                                                "inputRequests nor requestState")
        return McpInputRequired(input_requests=requests, request_state=state)

    def _handshake(self, result: InitializeResult) -> None:
        if result.protocol_version not in self._versions:
            self._phase = "closed"
            raise McpVersionError(self.server, result.protocol_version, self._versions)
        self.initialize_result = result
        self._phase = "ready"
        self._outbox.append(Outgoing(
            body=_ENCODER.encode(RpcNotification(jsonrpc="2.0", method="notifications/initialized")),
            method="notifications/initialized"))


_NAME_BEARING: Mapping[str, str] = MappingProxyType(
    {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"})

_RESULT_TYPES: Mapping[str, type[Any]] = MappingProxyType({
    "server/discover": DiscoverResult,
    "initialize": InitializeResult,
    "tools/list": ListToolsResult,
    "tools/call": CallToolResult,
})


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
