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
    PROTOCOL_VERSIONS,
    CallToolResult,
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
    "McpEvent",
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

_ENCODER = msgspec.json.Encoder()
_METHOD_NOT_FOUND = -32601
_MAX_FORGOTTEN = 4096


class Outgoing(msgspec.Struct, frozen=True, kw_only=True):
    """One message to send: its JSON ``body``, its ``method``, and ``request_id`` when it expects a
    response (``None`` for a notification or an answer to the server)."""

    body: bytes
    method: str
    request_id: RequestId | None = None


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


McpEvent: TypeAlias = (McpResponse | McpRequestFailed | McpProgress | McpToolListChanged
                       | McpServerNotification | McpServerRequest | McpElicitationComplete
                       | McpDiscarded)


class _Pending(msgspec.Struct, frozen=True):
    method: str
    started_ms: float
    raw: bool = False  # the result stays a dict (a task-augmented call answers a task)


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
    """

    __slots__ = ("_capabilities", "_client_info", "_forgotten", "_ids", "_inbound", "_now",
                 "_outbox", "_pending", "_phase", "_serves", "_versions", "initialize_result",
                 "server", "tools_stale")

    def __init__(self, *, server: str, client_info: Implementation | None = None,
                 protocol_versions: tuple[str, ...] = PROTOCOL_VERSIONS,
                 ids: Callable[[], RequestId] | None = None, now: Clock = monotonic_ms,
                 capabilities: Mapping[str, Any] | None = None,
                 serves: frozenset[str] = frozenset()) -> None:
        if not isinstance(server, str) or not server:
            raise UsageError("McpClientSession(server=...) must be a non-empty name")
        if not protocol_versions or not all(isinstance(v, str) and v for v in protocol_versions):
            raise UsageError("protocol_versions must be a non-empty tuple of revision strings")
        self.server = server
        self._client_info = client_info or Implementation(name="bindloop", version="0.1.0")
        self._versions = tuple(protocol_versions)
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
        """The server's ``initialize`` answer once the handshake succeeded."""
        self.tools_stale = False
        """Set by ``notifications/tools/list_changed``; cleared by :meth:`mark_tools_fresh`."""

    def __repr__(self) -> str:
        return f"McpClientSession(server={self.server!r}, phase={self._phase!r})"

    @property
    def phase(self) -> McpPhase:
        return self._phase

    @property
    def protocol_version(self) -> str | None:
        """The negotiated revision (``None`` before the handshake)."""
        return None if self.initialize_result is None else self.initialize_result.protocol_version

    def pending(self) -> tuple[RequestId, ...]:
        """Ids of requests sent and not yet answered, in the order they were sent."""
        return tuple(self._pending)

    # -- requests ---------------------------------------------------------------------------

    def _request(self, method: str, params: dict[str, Any] | None,
                 request_id: RequestId | None = None, *, raw: bool = False) -> Outgoing:
        if request_id is None:
            request_id = self._ids()
        if request_id in self._pending or request_id in self._forgotten:
            raise UsageError(f"the ids port returned {request_id!r} twice; request ids must be unique")
        self._pending[request_id] = _Pending(method, self._now(), raw)
        body = _ENCODER.encode(RpcRequest(jsonrpc="2.0", id=request_id, method=method, params=params))
        return Outgoing(body=body, method=method, request_id=request_id)

    def _require_ready(self, method: str) -> None:
        if self._phase != "ready":
            raise ProtocolError(f"MCP server {self.server!r}: cannot send {method} while the session "
                                f"is {self._phase!r} (initialize first)")

    def initialize(self) -> Outgoing:
        """The ``initialize`` request, offering the preferred revision. Only from phase ``new``."""
        if self._phase != "new":
            raise ProtocolError(f"MCP server {self.server!r}: initialize sent twice")
        self._phase = "initializing"
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
                  progress: bool = False) -> Outgoing:
        """``tools/call``. With ``progress`` the request's own id is its progress token, so the
        server's :class:`McpProgress` events carry it."""
        self._require_ready("tools/call")
        request_id = self._ids()
        params: dict[str, Any] = {"name": name, "arguments": dict(arguments)}
        if progress:
            params["_meta"] = {"progressToken": request_id}
        return self._request("tools/call", params, request_id)

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

    def mark_tools_fresh(self) -> None:
        """The host has listed the tools again."""
        self.tools_stale = False

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

    def _handshake(self, result: InitializeResult) -> None:
        if result.protocol_version not in self._versions:
            self._phase = "closed"
            raise McpVersionError(self.server, result.protocol_version, self._versions)
        self.initialize_result = result
        self._phase = "ready"
        self._outbox.append(Outgoing(
            body=_ENCODER.encode(RpcNotification(jsonrpc="2.0", method="notifications/initialized")),
            method="notifications/initialized"))


_RESULT_TYPES: Mapping[str, type[Any]] = MappingProxyType({
    "initialize": InitializeResult,
    "tools/list": ListToolsResult,
    "tools/call": CallToolResult,
})


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
