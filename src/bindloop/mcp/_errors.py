"""The MCP client's exception types.

Everything a server or its connection does wrong is an :class:`McpError`, a
:class:`~bindloop.errors.ProviderError`: something outside the process failed, and the message names
the server (``server``) so a host running several can tell them apart. No message ever carries a
request header, so a bearer token cannot leak through one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ProviderError, ToolFailure, UsageError

from ._elicit import ElicitationRequest, url_elicitations

if TYPE_CHECKING:
    from ._deferred import PendingMcpInput

__all__ = (
    "ElicitationContentError",
    "ElicitationNotPendingError",
    "McpAuthorizationError",
    "McpConnectionError",
    "McpError",
    "McpHttpError",
    "McpInputPending",
    "McpProtocolError",
    "McpRequestRefused",
    "McpRpcError",
    "McpSessionExpiredError",
    "McpTimeoutError",
    "McpUrlElicitationRequired",
    "McpVersionError",
    "rpc_error",
)


class McpError(ProviderError):
    """An MCP server or its connection failed. ``server`` is the name the host gave the server."""

    def __init__(self, server: str, message: str) -> None:
        super().__init__(f"MCP server {server!r}: {message}")
        self.server = server
        self.detail = message


class McpProtocolError(McpError):
    """The server's answer is not MCP: not JSON-RPC 2.0, a body that is neither JSON nor an event
    stream (an HTML page, say), a response to a request never sent, or a result of the wrong shape."""


class McpVersionError(McpProtocolError):
    """Version negotiation failed: the server answered with a protocol revision this client does not
    speak. ``offered`` is what the server chose, ``supported`` what this client knows."""

    def __init__(self, server: str, offered: str, supported: tuple[str, ...]) -> None:
        super().__init__(server, f"speaks MCP protocol revision {offered!r}; this client knows "
                                 f"{', '.join(supported)}")
        self.offered = offered
        self.supported = supported


class McpRpcError(McpError):
    """The server answered a request with a JSON-RPC error object (``code``, ``rpc_message``,
    optional ``data``)."""

    def __init__(self, server: str, method: str, code: int, message: str,
                 data: object = None) -> None:
        super().__init__(server, f"{method} failed with JSON-RPC error {code}: {message}")
        self.method = method
        self.code = code
        self.rpc_message = message
        self.data = data


class McpUrlElicitationRequired(McpRpcError):
    """JSON-RPC error -32042 (2025-11-25): the server needs the user to complete the URL-mode
    ``elicitations`` first (each an :class:`~bindloop.mcp.server_requests.ElicitationRequest` with ``mode="url"``,
    ``url`` and ``elicitation_id``); the request may be sent again once they are done. A client
    with a URL-elicitation port handles this itself for ``call_tool`` (see docs/mcp.md)."""

    def __init__(self, server: str, method: str, code: int, message: str,
                 data: object = None) -> None:
        super().__init__(server, method, code, message, data)
        self.elicitations: tuple[ElicitationRequest, ...] = url_elicitations(data)


URL_ELICITATION_REQUIRED = -32042


def rpc_error(server: str, method: str, code: int, message: str,
              data: object = None) -> McpRpcError:
    """The typed error for a JSON-RPC error answer (-32042 is :class:`McpUrlElicitationRequired`)."""
    kind = McpUrlElicitationRequired if code == URL_ELICITATION_REQUIRED else McpRpcError
    return kind(server, method, code, message, data)


class McpHttpError(McpError):
    """An HTTP status the streamable HTTP binding cannot use (``status``); ``body`` is a bounded,
    decoded, redacted excerpt of what came back; ``www_authenticate`` the challenge of a 401 or
    403 (``WWW-Authenticate``, as sent), ``None`` when there was none."""

    def __init__(self, server: str, status: int, body: str, *, what: str = "request",
                 www_authenticate: str | None = None) -> None:
        excerpt = f": {body}" if body else ""
        super().__init__(server, f"{what} answered HTTP {status}{excerpt}")
        self.status = status
        self.body = body
        self.www_authenticate = www_authenticate


class McpSessionExpiredError(McpHttpError):
    """HTTP 404 for a request carrying ``Mcp-Session-Id``: the server ended the session. Reconnect
    (a fresh ``initialize``) to go on."""


class McpConnectionError(McpError):
    """The connection failed: the server could not be reached, or a reply stream ended before the
    response arrived and could not be resumed."""


class McpTimeoutError(McpError):
    """A request got no response within its timeout; a ``notifications/cancelled`` was sent for it."""

    def __init__(self, server: str, method: str, timeout_ms: float) -> None:
        super().__init__(server, f"{method} got no response within {timeout_ms:g} ms")
        self.method = method
        self.timeout_ms = timeout_ms


class McpAuthorizationError(McpError):
    """Authorization failed at a named step (discovery, registration, the authorization
    redirect, the token endpoint); nothing was sent to the MCP server with a bad token."""


class McpRequestRefused(ToolFailure):
    """Raise from a handler to answer the server's request with a JSON-RPC error (``code``,
    ``message``) instead of a result: a refusal on purpose, like a tool's
    :class:`~bindloop.errors.ToolFailure`, whose message the other side reads (here the server,
    after redaction)."""

    def __init__(self, message: str, code: int = -1) -> None:
        # -1 by default: what the SDKs answer when the user (here: the host's policy) declines.
        super().__init__(message, kind="refused")
        self.code = code


class ElicitationNotPendingError(UsageError):
    """The elicitation named is not waiting (answered already, timed out, or its call ended)."""


class ElicitationContentError(UsageError):
    """``accept(content)`` with content the requested schema refuses; ``pointer`` names where
    (a JSON Pointer, ``/`` for the whole object) and ``reason`` why. The elicitation stays
    pending: answer it again."""

    def __init__(self, elicitation: str, pointer: str, reason: str) -> None:
        super().__init__(f"elicitation {elicitation!r}: the content breaks the requested "
                         f"schema at {pointer}: {reason}")
        self.pointer = pointer
        self.reason = reason


class McpInputPending(McpError):
    """A 2026-07-28 call needs the user's input and the elicitation port keeps it for later
    (``PendingElicitations(durable=True)``): nothing was answered and nothing is open on the
    server. ``pending`` is what to keep; an MCP tool of the loop turns this into a suspend."""

    def __init__(self, pending: PendingMcpInput) -> None:
        super().__init__(pending.server, f"tools/call {pending.tool!r} waits for the user's input")
        self.pending = pending
