"""bindloop as an MCP server, the protocol half: the streamable HTTP transport's decisions for a
toolset — MCP 2025-11-25 with sessions (and the handshake revisions before it), and the stateless
2026-07-28 form, decided per request — with no I/O.

A host hands :meth:`McpServer.post` one POST (its body and the headers that matter) and gets
either an :class:`McpReply` to send as is, or an :class:`McpCall` to run with
:meth:`McpServer.run_call`, which runs the tool the way the tool loop does (the tool's own
argument reader, the loop's rule for what a raise becomes) and hands back the response message;
progress notifications go out through the ``emit`` callback on the way. ``DELETE`` is
:meth:`McpServer.delete`. The ASGI binding is :class:`bindloop.hosts.mcp.server.McpServerApp`.

State: the sessions (``Mcp-Session-Id``) and the calls running in them live in the instance,
bounded by ``max_sessions`` (the least recently used session goes first).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import re
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final

import anyio
import msgspec

from ..clock import Clock, epoch_ms
from ..contracts import (
    JsonBoundsError,
    ToolError,
    ToolOutcome,
    ToolResult,
    ToolSuspend,
    decode_json_bounded,
)
from ..errors import PortContractError, UsageError
from ..tools import Tool
from ..signal import AbortController, AbortSignal
from ._content import call_result_of
from ._protocol import (
    PROTOCOL_VERSIONS,
    Implementation,
    McpToolInfo,
    RequestId,
    RpcErrorObject,
    RpcIncoming,
    RpcNotification,
    RpcResponse,
)

__all__ = ("STATELESS_VERSIONS", "McpCall", "McpReply", "McpServer", "McpToolContext",
           "McpToolInput", "ToolExceptionHook")

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
REQUEST_CANCELLED: Final = -32800
_EXPIRED: Final = object()  # _unseal's answer for a genuine state issued too long ago
_NO_SESSION: Final = -32001  # the official SDKs' code for "session not found"
_BAD_REQUEST: Final = -32000
HEADER_MISMATCH: Final = -32020
MISSING_CLIENT_CAPABILITY: Final = -32021
UNSUPPORTED_PROTOCOL_VERSION: Final = -32022

STATELESS_VERSIONS: Final[tuple[str, ...]] = ("2026-07-28",)
"""The revisions of the stateless form (no ``initialize``, the version in each request's
``_meta``) this server answers."""
_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
_SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
_NAME_BEARING: Final[Mapping[str, str]] = MappingProxyType(
    {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"})
_B64_HEADER = re.compile(r"=\?base64\?(?P<payload>.*)\?=")
INPUT_METHODS: Final[Mapping[str, str]] = MappingProxyType({
    "elicitation/create": "elicitation", "sampling/createMessage": "sampling",
    "roots/list": "roots"})
"""The methods a tool may ask the client for (:meth:`McpToolContext.ask`), each with the client
capability it needs."""
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,100}")
_HEADER_TYPES: Final = ("string", "integer", "boolean")

_MAX_DEPTH = 64
_SESSION_ID = re.compile(r"[\x21-\x7e]{1,256}")
_ENCODER = msgspec.json.Encoder()

ToolExceptionHook = Callable[[str, BaseException], None]
"""``on_tool_exception(tool_name, exc)``: a tool raised (the host logs it; the client reads only
the redacted message, or an internal error for a fatal raise)."""


class McpReply(msgspec.Struct, frozen=True, kw_only=True):
    """An answer to send as is: the HTTP ``status``, a JSON ``body`` (a JSON-RPC message; ``None``
    for no body, e.g. 202 to a notification) and, after ``initialize``, the ``session_id`` to
    send as ``Mcp-Session-Id``."""

    status: int
    body: bytes | None = None
    session_id: str | None = None


class McpCall(msgspec.Struct, frozen=True, kw_only=True):
    """A ``tools/call`` for the host to run with :meth:`McpServer.run_call`. ``progress_token`` is
    the client's (``None``: it asked for no progress, and a JSON reply does); ``session_id`` the
    session it belongs to (``None`` without sessions, and for a ``stateless`` call: one in the
    2026-07-28 form, whose result carries ``resultType``); ``client_capabilities`` what the client
    declared (the request's ``_meta``, or the session's ``initialize``)."""

    request_id: RequestId
    tool: str
    arguments: dict[str, Any] | None
    progress_token: RequestId | None
    session_id: str | None
    identity: str
    stateless: bool = False
    input: McpToolInput | None = None
    client_capabilities: dict[str, Any] = msgspec.field(default_factory=dict)


class McpToolInput(msgspec.Struct, frozen=True, kw_only=True):
    """What a re-issued 2026-07-28 call brings a tool that suspended: ``state``, the tool's own
    :attr:`ToolSuspend.state <bindloop.contracts.ToolSuspend.state>` as it returned it (checked:
    the server sealed it), the user's ``action`` on the question (``accept``, ``decline`` or
    ``cancel``) and, when accepted, the ``reply`` text.

    For a tool that asked its own input requests (:meth:`McpToolContext.ask`), ``action`` is
    ``responded`` and ``responses`` holds the client's answer to each key it asked, as the client
    sent it (an ``ElicitResult``, a ``CreateMessageResult``, a ``ListRootsResult``: JSON objects);
    keys it did not ask are dropped, and a re-issue missing one is asked again before the tool
    runs. A call that brings ``inputResponses`` without a ``requestState`` (the ephemeral flow)
    reaches the tool as ``state=None``, ``action="responded"`` and every response that is an
    object, unchecked: the tool looks for the keys it needs and asks again when one is missing.
    Only a state the server sealed is ever given back as ``state``."""

    state: str | None
    action: str
    reply: str | None = None
    responses: dict[str, dict[str, Any]] = msgspec.field(default_factory=dict)


REPLY_KEY: Final = "reply"
"""The key of the one input a suspended tool's ``input_required`` asks for (a form with one
string field of that name)."""
_MAX_STATE = 256 * 1024


class McpToolContext:
    """The context argument a served tool is called with (the ``ctx`` of ``execute(args, ctx)``).

    ``tool_name``, the JSON-RPC ``request_id``, the ``session_id`` (``None`` without sessions),
    the caller's ``identity`` (what the host's ``authorize`` returned; ``""`` without one) and
    ``signal``, an :class:`~bindloop.signal.AbortSignal` fired when the client cancels the call
    or goes away (the call's task is cancelled as well). ``input`` is an :class:`McpToolInput`
    when this call is the re-issue of one the tool suspended (2026-07-28), else ``None``.

    ``client_capabilities`` is what the client declared (``sampling``, ``elicitation``,
    ``roots``, ...): a read-only mapping.

    :meth:`report_progress` is how a tool reports progress: a tool written for any host calls
    ``getattr(ctx, "report_progress", None)`` and uses it when there is one. :meth:`ask` is how
    it asks the client for input (2026-07-28)."""

    __slots__ = ("_asked", "_emit", "_input", "_input_read", "_last", "_token",
                 "client_capabilities", "identity", "request_id", "session_id", "signal",
                 "tool_name")

    def __init__(self, *, tool_name: str, request_id: RequestId, session_id: str | None,
                 identity: str, signal: AbortSignal, progress_token: RequestId | None,
                 emit: Callable[[bytes], None], input: McpToolInput | None = None,
                 client_capabilities: Mapping[str, Any] | None = None) -> None:
        self.tool_name = tool_name
        self._input = input
        self._input_read = False  # whether the tool looked at ``input`` (see run_call)
        self.client_capabilities: Mapping[str, Any] = MappingProxyType(
            dict(client_capabilities or {}))
        self._asked: tuple[ToolSuspend, dict[str, dict[str, Any]]] | None = None
        self.request_id = request_id
        self.session_id = session_id
        self.identity = identity
        self.signal = signal
        self._token = progress_token
        self._emit: Callable[[bytes], None] | None = emit
        self._last = -math.inf

    def __repr__(self) -> str:
        return f"McpToolContext(tool_name={self.tool_name!r}, request_id={self.request_id!r})"

    @property
    def input(self) -> McpToolInput | None:
        self._input_read = True
        return self._input

    def report_progress(self, progress: float, total: float | None = None,
                        message: str | None = None) -> bool:
        """Send ``notifications/progress`` for this call; ``True`` when it went out. Nothing is
        sent (``False``) when the client asked for no progress, after the call has ended, or for
        a ``progress`` that is not finite or does not increase (the protocol requires each to be
        larger than the last); ``total`` is dropped unless finite."""
        emit = self._emit
        if (emit is None or self._token is None or isinstance(progress, bool)
                or not isinstance(progress, (int, float)) or not math.isfinite(progress)
                or progress <= self._last):
            return False
        self._last = progress
        params: dict[str, Any] = {"progressToken": self._token, "progress": progress}
        if (isinstance(total, (int, float)) and not isinstance(total, bool)
                and math.isfinite(total)):
            params["total"] = total
        if isinstance(message, str):
            params["message"] = message
        emit(_ENCODER.encode(RpcNotification(jsonrpc="2.0", method="notifications/progress",
                                             params=params)))
        return True

    def ask(self, requests: Mapping[str, Mapping[str, Any]], *,
            state: str | None = None) -> ToolSuspend:
        """Ask the client for input and return the suspend the tool returns: the call is answered
        ``input_required`` (Multi Round-Trip Requests, 2026-07-28) with ``requests`` — keys of
        the tool's choosing, each ``{"method": ..., "params": {...}}`` with a method of
        :data:`INPUT_METHODS` (``elicitation/create``, ``sampling/createMessage``,
        ``roots/list``) — and a sealed ``requestState`` carrying ``state``. The client re-issues
        the call with a response for every key; the tool then runs again with ``ctx.input``
        (``action`` ``responded``, the ``responses`` by key, ``state``). A re-issue missing a key
        is asked again without running the tool.

        Only on a server with a ``state_secret``, in the stateless form, and for methods whose
        capability the client declared (read :attr:`client_capabilities` first): a request for
        an undeclared one is answered ``MissingRequiredClientCapabilityError`` (-32021), and
        without a secret or over 2025-11-25 the suspend is an error result saying the call
        cannot be resumed. A malformed request: :class:`~bindloop.errors.UsageError`."""
        if not isinstance(requests, Mapping) or not requests:
            raise UsageError("McpToolContext.ask needs a non-empty mapping of input requests")
        asked: dict[str, dict[str, Any]] = {}
        for key, request in requests.items():
            if not isinstance(key, str) or not 1 <= len(key) <= 100:
                raise UsageError("McpToolContext.ask: each key is a string of 1-100 characters")
            method = request.get("method") if isinstance(request, Mapping) else None
            params = request.get("params", {}) if isinstance(request, Mapping) else None
            if method not in INPUT_METHODS or not isinstance(params, Mapping):
                raise UsageError(f"McpToolContext.ask: {key!r} must be {{'method': one of "
                                 f"{sorted(INPUT_METHODS)}, 'params': {{...}}}}")
            asked[key] = {"method": method, "params": dict(params)}
        if state is not None and not isinstance(state, str):
            raise UsageError("McpToolContext.ask(state=) must be a string or None")
        suspend = ToolSuspend(mode="waiting_for_reply",
                              detail=f"input requested from the client: {', '.join(asked)}",
                              state=state)
        self._asked = (suspend, asked)
        return suspend

    def _close(self) -> None:
        self._emit = None


class _Running:
    __slots__ = ("controller", "scope")

    def __init__(self, scope: anyio.CancelScope, controller: AbortController) -> None:
        self.scope = scope
        self.controller = controller

    def cancel(self, reason: str) -> None:
        self.controller.abort(reason)
        self.scope.cancel()


class _Session:
    __slots__ = ("capabilities", "identity", "running", "version")

    def __init__(self, identity: str, version: str, capabilities: dict[str, Any]) -> None:
        self.identity = identity
        self.version = version
        self.capabilities = capabilities
        self.running: dict[RequestId, _Running] = {}


def _counter() -> Callable[[], str]:
    count = 0

    def next_id() -> str:
        nonlocal count
        count += 1
        return f"session-{count}"

    return next_id


class McpServer:
    """Serves ``tools`` (:class:`~bindloop.tools.Tool` values, the ones an agent equips) over
    MCP's streamable HTTP transport, as decisions: see the module docstring for the flow.

    Parameters
    ----------
    tools
        Served under their own names, each with its ``parameters`` schema as ``inputSchema``.
    name, version, instructions
        What ``initialize`` answers as ``serverInfo`` and ``instructions``.
    sessions
        ``True`` (default): ``initialize`` opens a session (``Mcp-Session-Id``) that every later
        request must carry (400 without it, 404 for one unknown, ended or another identity's).
        ``False``: no session is kept; any request may go to any instance.
    session_ids
        Mints session ids (visible ASCII). The default counts (``session-1``, ...), which is only
        safe behind ``authorize``: a host should pass a secure random source
        (:class:`~bindloop.hosts.mcp.server.McpServerApp` does).
    max_sessions
        Sessions kept; the least recently used one is forgotten when a new one would exceed it.
    max_body
        The largest request body accepted (413 above it).
    format_tool_exception, is_fatal_tool_error
        The tool loop's ports of the same names: what the client reads for a raise (default: the
        exception's type name and a fixed text; a :class:`~bindloop.errors.ToolFailure` keeps its
        message) and which raises are not the tool's to report (answered as a JSON-RPC internal
        error without detail).
    on_tool_exception
        Told of every raise, with the exception (the host's log).
    state_secret
        The key (at least 16 bytes) that seals a suspended tool's state into the
        ``requestState`` of a 2026-07-28 ``input_required`` answer (HMAC-SHA256 over the tool,
        the caller's identity, the arguments and the state): with it, a tool that returns a
        ``waiting_for_reply`` :class:`~bindloop.contracts.ToolSuspend` to a stateless call asks
        the client for the answer (Multi Round-Trip Requests) and gets it back, on any instance
        holding the same key, as ``ctx.input``. Without it (or over 2025-11-25) a suspend is an
        error result saying the call cannot be resumed. The state is signed, not encrypted: the
        client can read it (keep a reference there, not the data).
    state_ttl_ms, clock
        How long a sealed ``requestState`` is honoured after it was issued (default one hour),
        read on ``clock`` (Unix milliseconds; default :func:`~bindloop.clock.epoch_ms`). A
        re-issued call with an older state is refused (``Invalid params``, saying it expired)
        and never reaches the tool: a question answered a day later, or a state replayed long
        after, starts the call again instead.
    required_client_capabilities
        Per tool name, the client capabilities a call needs (e.g. ``{"summarize":
        ("sampling",)}``): a 2026-07-28 call from a client whose ``_meta`` does not declare them
        is refused with ``MissingRequiredClientCapabilityError`` (-32021, HTTP 400, the missing
        ones in ``data.requiredCapabilities``) and never reaches the tool.

    A tool whose parameters carry ``x-mcp-header`` annotations (a property's JSON Schema
    ``"x-mcp-header": "Region"``, e.g. through ``msgspec.Meta(extra_json_schema=...)``) has
    them checked on every 2026-07-28 call: the ``Mcp-Param-Region`` header (plain, or
    ``=?base64?...?=``) must carry the argument's value, and be absent when the argument is;
    otherwise the call is refused with ``HeaderMismatch`` (-32020, HTTP 400). Annotations the
    transport forbids (an empty or non-token name, a duplicate ignoring case, one on a property
    that is not a string, integer or boolean, or one of those or null) are a :class:`~bindloop.errors.UsageError` here.
    """

    def __init__(self, tools: Iterable[Tool[Any, Any]], *, name: str = "bindloop",
                 version: str = "", instructions: str | None = None, sessions: bool = True,
                 session_ids: Callable[[], str] | None = None, max_sessions: int = 1000,
                 max_body: int = 1024 * 1024,
                 format_tool_exception: Callable[[Exception], ToolError] | None = None,
                 is_fatal_tool_error: Callable[[BaseException], bool] | None = None,
                 on_tool_exception: ToolExceptionHook | None = None,
                 state_secret: bytes | None = None, state_ttl_ms: float = 3_600_000,
                 clock: Clock = epoch_ms,
                 required_client_capabilities: Mapping[str, Iterable[str]] | None = None
                 ) -> None:
        if not (isinstance(state_ttl_ms, (int, float)) and math.isfinite(state_ttl_ms)
                and state_ttl_ms > 0):
            raise UsageError("McpServer(state_ttl_ms=) must be a positive number of milliseconds")
        self._state_ttl_ms = state_ttl_ms
        self._clock = clock
        if state_secret is not None and (not isinstance(state_secret, bytes)
                                         or len(state_secret) < 16):
            raise UsageError("McpServer(state_secret=) must be at least 16 bytes")
        self._state_key = state_secret
        served: dict[str, Tool[Any, Any]] = {}
        for tool in tools:
            if not isinstance(tool, Tool):
                raise UsageError(f"McpServer serves bindloop Tools (define_tool); got {tool!r}")
            if tool.name in served:
                raise UsageError(f"McpServer: two tools are named {tool.name!r}")
            served[tool.name] = tool
        if max_sessions < 1 or max_body < 1:
            raise UsageError("McpServer: max_sessions and max_body must be >= 1")
        self.tools: Mapping[str, Tool[Any, Any]] = served
        self.info = Implementation(name=name, version=version)
        self.instructions = instructions
        self.sessions_enabled = sessions
        self.max_body = max_body
        self._max_sessions = max_sessions
        self._session_ids = session_ids if session_ids is not None else _counter()
        self._format = format_tool_exception
        self._is_fatal = is_fatal_tool_error
        self._on_exception = on_tool_exception
        self._sessions: dict[str, _Session] = {}
        listing = [McpToolInfo(name=t.name, description=t.description or None,
                               input_schema=dict(t.parameters)) for t in served.values()]
        self._tools_list: dict[str, Any] = {"tools": msgspec.to_builtins(listing)}
        self._param_headers = {t.name: _param_headers(t.name, t.parameters)
                               for t in served.values()}
        self._required: dict[str, tuple[str, ...]] = {}
        for tool_name, capabilities in (required_client_capabilities or {}).items():
            if tool_name not in served:
                raise UsageError(f"McpServer(required_client_capabilities=) names {tool_name!r}, "
                                 "which is not served")
            names = (capabilities,) if isinstance(capabilities, str) else tuple(capabilities)
            if not names or not all(isinstance(c, str) and c for c in names):
                raise UsageError("McpServer(required_client_capabilities=) maps a tool to "
                                 "capability names")
            self._required[tool_name] = names

    def __repr__(self) -> str:
        return f"McpServer(tools={list(self.tools)!r}, sessions={len(self._sessions)})"

    @property
    def param_header_names(self) -> frozenset[str]:
        """The ``Mcp-Param-*`` headers the served tools' ``x-mcp-header`` annotations name, lower
        case and without the prefix: the ones a host that forwards only known headers must hand
        :meth:`post` (as ``param_headers``)."""
        return frozenset(h.lower() for table in self._param_headers.values()
                         for h in table.values())

    @property
    def session_count(self) -> int:
        """Sessions open now."""
        return len(self._sessions)

    # -- POST -----------------------------------------------------------------------------------

    def post(self, body: bytes, *, session_id: str | None = None,
             protocol_version: str | None = None, identity: str = "",
             method_header: str | None = None, name_header: str | None = None,
             param_headers: Mapping[str, str] | None = None) -> McpReply | McpCall:
        """Decide one POST: ``body`` as received, the ``Mcp-Session-Id``,
        ``MCP-Protocol-Version``, ``Mcp-Method`` and ``Mcp-Name`` headers (``None`` when absent),
        the ``Mcp-Param-*`` headers (``param_headers``: the name after ``Mcp-Param-``, lower
        case, to the value) and the caller's ``identity``. Never raises for anything a client
        sends.

        The era is decided per request, by what the client speaks: a request whose
        ``params._meta`` names ``io.modelcontextprotocol/protocolVersion`` (and is not
        ``initialize``) is the stateless 2026-07-28 form — no session, headers that must agree
        with the body, ``server/discover`` — and everything else the 2025-11-25 session form."""
        try:
            value = decode_json_bounded(body, max_bytes=self.max_body, max_depth=_MAX_DEPTH)
        except JsonBoundsError as exc:
            if exc.reason == "too_large":
                return _error(413, None, INVALID_REQUEST, "the request body is too large")
            return _error(400, None, PARSE_ERROR, "Parse error: the body is not JSON"
                          if exc.reason == "malformed" else "Parse error: the body nests too deep")
        if isinstance(value, list):
            return _error(400, None, INVALID_REQUEST,
                          "Invalid Request: JSON-RPC batches are not accepted")
        if not isinstance(value, dict):
            return _error(400, None, INVALID_REQUEST, "Invalid Request: not a JSON-RPC message")
        try:
            message = msgspec.convert(value, RpcIncoming)
        except msgspec.ValidationError:
            return _error(400, _id_of(value), INVALID_REQUEST,
                          "Invalid Request: not a JSON-RPC 2.0 message")
        if message.jsonrpc != "2.0":
            return _error(400, message.id, INVALID_REQUEST, "Invalid Request: jsonrpc must be 2.0")
        if message.method is not None and isinstance(message.params, dict) \
                and isinstance(message.params.get("_meta"), dict) \
                and _VERSION_KEY in message.params["_meta"] \
                and (message.method != "initialize" or "protocolVersion" not in message.params):
            # An initialize without a protocolVersion is no handshake: in the stateless form
            # it is a removed method (404).
            return self._stateless(message, protocol_version, method_header, name_header,
                                   param_headers or {}, identity)
        if protocol_version in STATELESS_VERSIONS and message.method not in (None, "initialize"):
            # A 2026-07-28 request (by its header) without the version in its _meta.
            return _error(400, message.id, INVALID_PARAMS,
                          f"Invalid params: _meta needs {_VERSION_KEY!r}")
        if protocol_version is not None and protocol_version not in PROTOCOL_VERSIONS:
            return _error(400, message.id, _BAD_REQUEST,
                          "Bad Request: unsupported MCP-Protocol-Version "
                          f"(this server speaks {', '.join(PROTOCOL_VERSIONS)})")
        if message.method is None:
            if message.id is None or (message.result is msgspec.UNSET and message.error is None):
                return _error(400, message.id, INVALID_REQUEST,
                              "Invalid Request: neither a request, a notification nor a response")
            return McpReply(status=202)  # a response: this server sends no requests to answer
        if message.method == "initialize" and message.id is not None:
            return self._initialize(message.id, message.params, identity)
        session: _Session | None = None
        if self.sessions_enabled:
            if session_id is None:
                return _error(400, message.id, _BAD_REQUEST,
                              "Bad Request: the Mcp-Session-Id header is required")
            session = self._session(session_id, identity)
            if session is None:
                return _error(404, message.id, _NO_SESSION, "Session not found")
        if message.id is None:
            self._notification(message.method, message.params, session)
            return McpReply(status=202)
        return self._request(message.id, message.method, message.params,
                             session_id if session is not None else None, identity,
                             session.capabilities if session is not None else {})

    def _initialize(self, request_id: RequestId, params: dict[str, Any] | None,
                    identity: str) -> McpReply:
        asked = (params or {}).get("protocolVersion")
        if not isinstance(asked, str):
            return _error(200, request_id, INVALID_PARAMS,
                          "Invalid params: initialize needs a protocolVersion string")
        version = asked if asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        result: dict[str, Any] = {
            "protocolVersion": version, "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": self.info.name, "version": self.info.version}}
        if self.instructions is not None:
            result["instructions"] = self.instructions
        session_id: str | None = None
        if self.sessions_enabled:
            session_id = self._session_ids()
            if not isinstance(session_id, str) or not _SESSION_ID.fullmatch(session_id) \
                    or session_id in self._sessions:
                raise PortContractError("McpServer(session_ids=) must mint new ids of 1-256 "
                                        f"visible ASCII characters; it gave {session_id!r}")
            while len(self._sessions) >= self._max_sessions:
                oldest = next(iter(self._sessions))
                self._end(oldest)
            capabilities = (params or {}).get("capabilities")
            self._sessions[session_id] = _Session(
                identity, version, capabilities if isinstance(capabilities, dict) else {})
        return McpReply(status=200, body=_result(request_id, result), session_id=session_id)

    def _session(self, session_id: str, identity: str) -> _Session | None:
        session = self._sessions.get(session_id)
        if session is None or session.identity != identity:
            return None  # another identity's session is as unknown as an ended one
        # Most recently used last: eviction takes the first.
        del self._sessions[session_id]
        self._sessions[session_id] = session
        return session

    def _notification(self, method: str, params: dict[str, Any] | None,
                      session: _Session | None) -> None:
        if method != "notifications/cancelled" or session is None or params is None:
            return
        target = params.get("requestId")
        if isinstance(target, (int, str)) and not isinstance(target, bool):
            running = session.running.get(target)
            if running is not None:
                reason = params.get("reason")
                running.cancel(reason if isinstance(reason, str) else "cancelled by the client")

    def _request(self, request_id: RequestId, method: str, params: dict[str, Any] | None,
                 session_id: str | None, identity: str,
                 capabilities: dict[str, Any]) -> McpReply | McpCall:
        if method == "ping":
            return McpReply(status=200, body=_result(request_id, {}))
        if method == "tools/list":
            return McpReply(status=200, body=_result(request_id, self._tools_list))
        if method == "initialize":  # a notification named initialize
            return McpReply(status=202)
        if method != "tools/call":
            return _error(200, request_id, METHOD_NOT_FOUND, f"Method not found: {method}"[:200])
        return self._call(request_id, params, session_id, identity, capabilities,
                          stateless=False)

    def _call(self, request_id: RequestId, params: dict[str, Any] | None,
              session_id: str | None, identity: str, capabilities: dict[str, Any], *,
              stateless: bool) -> McpReply | McpCall:
        params = params or {}
        name = params.get("name")
        arguments = params.get("arguments")
        if not isinstance(name, str):
            return _error(200, request_id, INVALID_PARAMS, "Invalid params: tools/call needs a "
                                                           "tool name")
        if arguments is not None and not isinstance(arguments, dict):
            return _error(200, request_id, INVALID_PARAMS,
                          "Invalid params: arguments must be an object")
        if name not in self.tools:
            return _error(200, request_id, INVALID_PARAMS, f"Unknown tool: {name}"[:200])
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if isinstance(token, bool) or not isinstance(token, (int, str)):
            token = None
        given: McpToolInput | None = None
        if stateless and "requestState" not in params \
                and isinstance(params.get("inputResponses"), dict):
            # Responses without a requestState (SEP-2322's ephemeral flow): the client's answers
            # are its own either way; only a sealed state is ever given back as ``state``.
            given = McpToolInput(state=None, action="responded", responses={
                key: value for key, value in params["inputResponses"].items()
                if isinstance(key, str) and isinstance(value, dict)})
        elif stateless and "requestState" in params:
            opened = self._unseal(name, identity, arguments, params.get("requestState"))
            if opened is None:
                return _error(200, request_id, INVALID_PARAMS,
                              "Invalid params: the requestState is not one this server issued "
                              "for this call")
            if opened is _EXPIRED:
                return _error(200, request_id, INVALID_PARAMS,
                              "Invalid params: the requestState has expired; call the tool again")
            assert isinstance(opened, tuple)
            state, question = opened
            given = _answer(state, question, params.get("inputResponses"))
            if given is None:
                # The state is ours but the answer is missing or malformed: ask again (SEP-2322).
                return McpReply(status=200, body=_result(request_id, self._asking(
                    name, identity, arguments, state, question)))
        return McpCall(request_id=request_id, tool=name, arguments=arguments,
                       progress_token=token, session_id=session_id, identity=identity,
                       stateless=stateless, input=given, client_capabilities=capabilities)

    # -- Multi Round-Trip Requests (2026-07-28) ---------------------------------------------------

    def _seal_body(self, tool: str, identity: str, arguments: dict[str, Any] | None,
                   state: str | None, question: str | dict[str, Any], expires: int) -> bytes:
        return _CANONICAL.encode({"a": arguments or {}, "e": expires, "i": identity,
                                  "q": question, "s": state, "t": tool})

    def _seal(self, tool: str, identity: str, arguments: dict[str, Any] | None,
              state: str | None, question: str | dict[str, Any]) -> str:
        assert self._state_key is not None
        expires = int(self._clock() + self._state_ttl_ms)
        body = self._seal_body(tool, identity, arguments, state, question, expires)
        mac = hmac.new(self._state_key, body, hashlib.sha256).digest()
        payload = _CANONICAL.encode({"e": expires, "q": question, "s": state})
        return (base64.urlsafe_b64encode(payload).decode().rstrip("=") + "."
                + base64.urlsafe_b64encode(mac).decode().rstrip("="))

    def _unseal(self, tool: str, identity: str, arguments: dict[str, Any] | None,
                sealed: object) -> tuple[str | None, str | dict[str, Any]] | object | None:
        """The tool's state and the question (the default form's text, or the input requests
        the tool asked) of a re-issued call's ``requestState``; ``None``
        when it is not one this server sealed for this tool, identity and arguments; ``_EXPIRED``
        when it is, but was issued more than ``state_ttl_ms`` ago."""
        if self._state_key is None or not isinstance(sealed, str) or len(sealed) > _MAX_STATE:
            return None
        payload_b64, _, mac_b64 = sealed.partition(".")
        try:
            payload = msgspec.json.decode(_b64(payload_b64))
            mac = _b64(mac_b64)
        except (binascii.Error, ValueError, msgspec.DecodeError):
            return None
        if not isinstance(payload, dict):
            return None
        state, question, expires = payload.get("s"), payload.get("q"), payload.get("e")
        if ((state is not None and not isinstance(state, str))
                or not isinstance(question, (str, dict))
                or isinstance(expires, bool) or not isinstance(expires, int)):
            return None
        expected = hmac.new(self._state_key,
                            self._seal_body(tool, identity, arguments, state, question, expires),
                            hashlib.sha256).digest()
        if not hmac.compare_digest(mac, expected):
            return None
        if self._clock() > expires:
            return _EXPIRED
        return state, question

    def _asking(self, tool: str, identity: str, arguments: dict[str, Any] | None,
                state: str | None, question: str | dict[str, Any]) -> dict[str, Any]:
        requests = question if isinstance(question, dict) else {
            REPLY_KEY: {"method": "elicitation/create", "params": {
                "mode": "form", "message": question, "requestedSchema": {
                    "type": "object", "properties": {REPLY_KEY: {
                        "type": "string", "title": "Your answer"}},
                    "required": [REPLY_KEY]}}}}
        return {
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": self._seal(tool, identity, arguments, state, question),
            "_meta": {_SERVER_INFO_KEY: {"name": self.info.name, "version": self.info.version}}}

    def _input_required(self, call: McpCall, suspend: ToolSuspend) -> dict[str, Any]:
        question = (suspend.detail or f"The tool {call.tool!r} needs your answer.")[:4000]
        return self._asking(call.tool, call.identity, call.arguments, suspend.state, question)

    # -- the stateless form (2026-07-28) ----------------------------------------------------------

    def _stateless(self, message: RpcIncoming, version_header: str | None,
                   method_header: str | None, name_header: str | None,
                   param_headers: Mapping[str, str], identity: str) -> McpReply | McpCall:
        method = message.method
        params = message.params
        assert method is not None and params is not None
        meta = params["_meta"]
        request_id = message.id
        if _CAPABILITIES_KEY not in meta:
            return _error(400, request_id, INVALID_PARAMS,
                          f"Invalid params: _meta needs {_CAPABILITIES_KEY!r}")
        version = meta[_VERSION_KEY]
        name_key = _NAME_BEARING.get(method)
        named = params.get(name_key) if name_key is not None else None
        if version_header is None or version_header != version:
            return _error(400, request_id, HEADER_MISMATCH,
                          "the MCP-Protocol-Version header does not match the request's _meta")
        if method_header != method:
            return _error(400, request_id, HEADER_MISMATCH,
                          "the Mcp-Method header does not match the request's method")
        if named is not None and _header_value(name_header) != named:
            return _error(400, request_id, HEADER_MISMATCH,
                          f"the Mcp-Name header does not match the request's {name_key}")
        if version not in STATELESS_VERSIONS:
            return McpReply(status=400, body=_error_message(
                request_id, UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version",
                {"supported": list(STATELESS_VERSIONS), "requested": str(version)[:100]}))
        if request_id is None:
            return McpReply(status=202)  # a notification: nothing in this form needs one
        if method == "server/discover":
            return McpReply(status=200, body=_result(request_id, self._stamped({
                "supportedVersions": [*STATELESS_VERSIONS, *PROTOCOL_VERSIONS],
                "capabilities": {"tools": {}},
                **({"instructions": self.instructions} if self.instructions is not None else {}),
                "ttlMs": 0, "cacheScope": "private"})))
        if method == "tools/list":
            return McpReply(status=200, body=_result(request_id, self._stamped({
                **self._tools_list, "ttlMs": 0, "cacheScope": "private"})))
        if method == "tools/call":
            caps = meta.get(_CAPABILITIES_KEY)
            capabilities = caps if isinstance(caps, dict) else {}
            arguments = params.get("arguments")
            if isinstance(named, str) and named in self.tools:
                mismatch = _param_mismatch(self._param_headers[named], arguments, param_headers)
                if mismatch is not None:
                    return _error(400, request_id, HEADER_MISMATCH, mismatch)
                missing = [c for c in self._required.get(named, ())
                           if not isinstance(capabilities.get(c), dict)]
                if missing:
                    return _missing_capabilities(400, request_id, missing)
            return self._call(request_id, params, None, identity, capabilities, stateless=True)
        return _error(404, request_id, METHOD_NOT_FOUND, f"Method not found: {method}"[:200])

    def _stamped(self, result: dict[str, Any]) -> dict[str, Any]:
        """A stateless-form result: ``resultType`` and the server's identity in ``_meta``."""
        result["resultType"] = "complete"
        result["_meta"] = {_SERVER_INFO_KEY: {"name": self.info.name,
                                              "version": self.info.version}}
        return result

    # -- running a call ---------------------------------------------------------------------------

    async def run_call(self, call: McpCall, emit: Callable[[bytes], None]) -> bytes:
        """Run ``call``'s tool and return its JSON-RPC response message. ``emit(message)`` is
        called (synchronously) with each progress notification while it runs.

        The tool runs as the loop runs it (:meth:`~bindloop.tools.Tool.execute`: its argument
        reader, so bad arguments are a ``validation`` error the client can correct). What it
        returns or raises becomes a ``CallToolResult``, an error one (``isError``) with the text
        the model would read for a :class:`~bindloop.contracts.ToolError` or a non-fatal raise; a
        fatal raise, or a broken port, is a JSON-RPC internal error with no detail. Cancelled
        (``notifications/cancelled``, or the host cancelling on disconnect): error -32800."""
        tool = self.tools[call.tool]
        controller = AbortController()
        ctx = McpToolContext(tool_name=call.tool, request_id=call.request_id,
                             session_id=call.session_id, identity=call.identity,
                             signal=controller.signal, progress_token=call.progress_token,
                             emit=emit, input=call.input,
                             client_capabilities=call.client_capabilities)
        session = self._sessions.get(call.session_id) if call.session_id is not None else None
        outcome: ToolOutcome | None = None
        failed = False
        with anyio.CancelScope() as scope:
            if session is not None:
                session.running[call.request_id] = _Running(scope, controller)
            try:
                outcome = await tool.execute(call.arguments, ctx)
            except anyio.get_cancelled_exc_class():
                # Cancelled from outside too (the host, when the client went away): the tool's
                # signal says so, for whatever it started that anyio does not cancel.
                controller.abort("the call was cancelled")
                raise
            except Exception as exc:  # noqa: BLE001 - every raise is answered; the host hears it
                outcome, failed = self._raised(call.tool, exc)
            finally:
                ctx._close()
                if session is not None:
                    session.running.pop(call.request_id, None)
        if scope.cancelled_caught or (outcome is None and (not failed
                                                          or controller.signal.aborted)):
            return _error_message(call.request_id, REQUEST_CANCELLED, "Request cancelled")
        if outcome is None:
            return _error_message(call.request_id, INTERNAL_ERROR, "Internal error")
        asking = call.stateless and self._state_key is not None
        if ctx._asked is not None and outcome is ctx._asked[0] and asking:
            requests = ctx._asked[1]
            missing = sorted({INPUT_METHODS[r["method"]] for r in requests.values()}
                             - {c for c, v in call.client_capabilities.items()
                                if isinstance(v, dict)})
            if missing:
                return _error_message(call.request_id, MISSING_CLIENT_CAPABILITY,
                                      "Missing required client capability",
                                      {"requiredCapabilities": {c: {} for c in missing}})
            return _result(call.request_id, self._asking(
                call.tool, call.identity, call.arguments, outcome.state, requests))
        if isinstance(outcome, ToolSuspend) and outcome.mode == "waiting_for_reply" \
                and call.input is not None and call.input.action != "responded" \
                and not ctx._input_read and ctx._asked is None:
            # The tool suspended again without looking at the user's answer (a plain function
            # has no ``ctx``): the suspend's own contract holds -- the answer is the call's
            # result -- instead of asking the same question forever.
            outcome = _answered(call.input)
        if isinstance(outcome, ToolSuspend) and outcome.mode == "waiting_for_reply" \
                and asking and isinstance(call.client_capabilities.get("elicitation"), dict):
            return _result(call.request_id, self._input_required(call, outcome))
        result = msgspec.to_builtins(call_result_of(outcome, call.tool))
        return _result(call.request_id, self._stamped(result) if call.stateless else result)

    def _raised(self, tool: str, exc: Exception) -> tuple[ToolOutcome | None, bool]:
        # The loop's one rule for what a raise becomes, imported here: a client of bindloop.mcp
        # (most importers) does not pay for the loop at import.
        from ..lowlevel import is_fatal_raise, tool_exception_error

        if self._on_exception is not None:
            self._on_exception(tool, exc)
        if isinstance(exc, PortContractError) or is_fatal_raise(exc, self._is_fatal):
            return None, True
        try:
            return tool_exception_error(exc, self._format), False
        except PortContractError:
            return None, True

    # -- DELETE and ends --------------------------------------------------------------------------

    def delete(self, session_id: str | None, *, identity: str = "") -> McpReply:
        """``DELETE`` with ``Mcp-Session-Id``: the session ends (its running calls are cancelled);
        405 without sessions, 400 without the header, 404 for an unknown one."""
        if not self.sessions_enabled:
            return _error(405, None, _BAD_REQUEST, "Method not allowed: this server keeps no "
                                                   "sessions")
        if session_id is None:
            return _error(400, None, _BAD_REQUEST,
                          "Bad Request: the Mcp-Session-Id header is required")
        if self._session(session_id, identity) is None:
            return _error(404, None, _NO_SESSION, "Session not found")
        self._end(session_id)
        return McpReply(status=200)

    def _end(self, session_id: str) -> None:
        session = self._sessions.pop(session_id)
        for running in list(session.running.values()):
            running.cancel("the session ended")

    def close(self) -> None:
        """End every session (cancelling their running calls)."""
        for session_id in list(self._sessions):
            self._end(session_id)


_CANONICAL = msgspec.json.Encoder(order="sorted")


def _answer(state: str | None, question: str | dict[str, Any],
            responses: object) -> McpToolInput | None:
    """The user's answer among a re-issued call's ``inputResponses`` (``None``: none usable):
    for input requests the tool asked, a JSON object for each of their keys (others dropped)."""
    if isinstance(question, dict):
        if not isinstance(responses, dict):
            return None
        kept = {key: value for key in question
                if isinstance(value := responses.get(key), dict)}
        if len(kept) != len(question):
            return None
        return McpToolInput(state=state, action="responded", responses=kept)
    answer = responses.get(REPLY_KEY) if isinstance(responses, dict) else None
    action = answer.get("action") if isinstance(answer, dict) else None
    if action not in ("accept", "decline", "cancel"):
        return None
    content = answer.get("content") if isinstance(answer, dict) else None
    reply = content.get(REPLY_KEY) if isinstance(content, dict) else None
    if action == "accept" and not isinstance(reply, str):
        return None
    return McpToolInput(state=state, action=action, reply=reply if action == "accept" else None)


def _answered(given: McpToolInput) -> ToolOutcome:
    """The user's answer to a plain question as the call's result: the reply text when accepted,
    an error result the model can read when declined or cancelled."""
    if given.action == "accept" and given.reply is not None:
        return ToolResult(content=given.reply)
    if given.action == "decline":
        return ToolError(error="The user declined to answer.", kind="denied")
    return ToolError(error="The user cancelled the question.", kind="cancelled")


def _b64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _id_of(value: Mapping[str, Any]) -> RequestId | None:
    ident = value.get("id")
    return ident if isinstance(ident, (int, str)) and not isinstance(ident, bool) else None


def _result(request_id: RequestId, result: dict[str, Any]) -> bytes:
    return _ENCODER.encode(RpcResponse(jsonrpc="2.0", id=request_id, result=result))


def _error_message(request_id: RequestId | None, code: int, message: str,
                   data: Any = None) -> bytes:
    # JSON-RPC wants "id": null on an error for a request whose id could not be read; RpcResponse
    # needs an id, so this one envelope is built by hand.
    return _ENCODER.encode({"jsonrpc": "2.0", "id": request_id,
                            "error": RpcErrorObject(code=code, message=message, data=data)})


def _header_value(value: str | None) -> str | None:
    """An ``Mcp-Name`` header's value: as sent, or the UTF-8 of its ``=?base64?...?=`` form
    (``None`` for a malformed one, which then matches nothing)."""
    if value is None:
        return None
    match = _B64_HEADER.fullmatch(value)
    if match is None:
        return value
    try:
        return base64.b64decode(match["payload"], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _param_headers(tool: str, schema: Mapping[str, Any]) -> dict[str, str]:
    """A tool's ``x-mcp-header`` annotations: argument name to header name (after
    ``Mcp-Param-``); :class:`~bindloop.errors.UsageError` for one the transport forbids."""
    properties = schema.get("properties")
    found: dict[str, str] = {}
    if not isinstance(properties, Mapping):
        return found
    for argument, prop in properties.items():
        if not isinstance(prop, Mapping) or "x-mcp-header" not in prop:
            continue
        header = prop["x-mcp-header"]
        if not isinstance(header, str) or not _HEADER_NAME.fullmatch(header):
            raise UsageError(f"McpServer: tool {tool!r} argument {argument!r} has an x-mcp-header "
                             "that is not a header name (1-100 token characters)")
        if _header_type(prop) is None:
            raise UsageError(f"McpServer: tool {tool!r} argument {argument!r}: x-mcp-header is "
                             "only for string, integer and boolean arguments")
        if header.lower() in (h.lower() for h in found.values()):
            raise UsageError(f"McpServer: tool {tool!r} names x-mcp-header {header!r} twice")
        found[argument] = header
    return found


def _header_type(prop: Mapping[str, Any]) -> str | None:
    """The primitive type of an ``x-mcp-header`` property: its ``type``, or the one primitive of
    a ``T | None`` (``anyOf`` or a type list with ``null``); ``None`` for any other."""
    kinds = prop.get("type")
    if kinds is None and isinstance(prop.get("anyOf"), list):
        kinds = [branch.get("type") if isinstance(branch, Mapping) else None
                 for branch in prop["anyOf"]]
    if isinstance(kinds, str):
        kinds = [kinds]
    if not isinstance(kinds, list):
        return None
    primitive = [k for k in kinds if k != "null"]
    return primitive[0] if len(primitive) == 1 and primitive[0] in _HEADER_TYPES else None


def _param_mismatch(annotated: Mapping[str, str], arguments: object,
                    headers: Mapping[str, str]) -> str | None:
    """Why a call's ``Mcp-Param-*`` headers disagree with its annotated arguments, or ``None``."""
    given = arguments if isinstance(arguments, dict) else {}
    for argument, header in annotated.items():
        value = given.get(argument)
        sent = headers.get(header.lower())
        if value is None:
            if sent is not None:
                return f"the Mcp-Param-{header} header is sent without its argument"
            continue
        if sent is None:
            return f"the Mcp-Param-{header} header is missing"
        expected = ("true" if value else "false") if isinstance(value, bool) else str(value)
        if _header_value(sent.strip(" \t")) != expected:
            return f"the Mcp-Param-{header} header does not match the argument"
    return None


def _missing_capabilities(status: int, request_id: RequestId, missing: Iterable[str]) -> McpReply:
    return McpReply(status=status, body=_error_message(
        request_id, MISSING_CLIENT_CAPABILITY, "Missing required client capability",
        {"requiredCapabilities": {c: {} for c in missing}}))


def _error(status: int, request_id: RequestId | None, code: int, message: str) -> McpReply:
    return McpReply(status=status, body=_error_message(request_id, code, message))

