"""The MCP messages this client speaks, as msgspec Structs (JSON-RPC 2.0 envelopes and the results
of ``initialize``, ``tools/list`` and ``tools/call``). Python names are snake_case; the wire's
camelCase comes from ``rename="camel"``."""

from __future__ import annotations

from typing import Any, Final, TypeAlias

import msgspec

__all__ = (
    "MODERN_VERSIONS",
    "PROTOCOL_VERSIONS",
    "CallToolResult",
    "DiscoverResult",
    "Implementation",
    "InitializeResult",
    "ListToolsResult",
    "McpToolInfo",
    "RequestId",
    "RpcErrorObject",
    "RpcIncoming",
    "RpcNotification",
    "RpcRequest",
    "RpcResponse",
    "SkippedMcpTool",
)

PROTOCOL_VERSIONS: Final[tuple[str, ...]] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
"""The handshake revisions this client negotiates, preferred first: every revision the official SDK
reaches through ``initialize``; the server side (:class:`~bindloop.mcp.server.McpServer`) answers the
same ones. The stateless revisions are :data:`MODERN_VERSIONS`."""

MODERN_VERSIONS: Final[tuple[str, ...]] = ("2026-07-28",)
"""The stateless revisions this client speaks, preferred first: no ``initialize``; the version,
client info and capabilities travel in every request's ``_meta``. The client tries them first
(``server/discover``) and falls back to :data:`PROTOCOL_VERSIONS` for a server that does not
answer in this form."""

META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"

RequestId: TypeAlias = int | str


class RpcRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A JSON-RPC request this client sends."""

    jsonrpc: str  # no default: omit_defaults would drop it, and it is required on the wire
    id: RequestId
    method: str
    params: dict[str, Any] | None = None


class RpcNotification(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A JSON-RPC notification (no id, no answer)."""

    jsonrpc: str
    method: str
    params: dict[str, Any] | None = None


class RpcErrorObject(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    code: int
    message: str
    data: Any = None


class RpcResponse(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A JSON-RPC response this client sends (its answer to a server's request, e.g. ``ping``)."""

    jsonrpc: str
    id: RequestId
    result: dict[str, Any] | None = None
    error: RpcErrorObject | None = None


class RpcIncoming(msgspec.Struct, frozen=True, kw_only=True):
    """Any JSON-RPC message from the server, before it is classified: a request (``method`` and
    ``id``), a notification (``method`` only) or a response (``id`` with ``result`` or ``error``)."""

    jsonrpc: str | None = None
    id: RequestId | None = None
    method: str | None = None
    params: dict[str, Any] | None = None
    result: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET
    error: RpcErrorObject | None = None


class Implementation(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """``clientInfo`` / ``serverInfo``."""

    name: str
    version: str = ""
    title: str | None = None


class InitializeResult(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    protocol_version: str
    server_info: Implementation
    capabilities: dict[str, Any] = msgspec.field(default_factory=dict)
    instructions: str | None = None


class McpToolInfo(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    """One entry of ``tools/list``. ``input_schema`` is the server's JSON Schema, untouched. (The
    server side encodes it too: fields left ``None`` are omitted, as the schema's optional ones.)"""

    name: str
    input_schema: dict[str, Any]
    description: str | None = None
    title: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None


class ListToolsResult(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One page of ``tools/list``: entries stay raw so one malformed tool skips alone. A
    2026-07-28 server adds cache hints: ``ttl_ms`` (how long the list may be reused; 0 = stale at
    once) and ``cache_scope`` (``"private"``: only under the same credentials)."""

    tools: list[Any]
    next_cursor: str | None = None
    ttl_ms: float | None = None
    cache_scope: str | None = None


class DiscoverResult(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A ``server/discover`` answer (2026-07-28): the revisions the server speaks, its
    capabilities and instructions, cache hints, and ``_meta`` (the server's identity)."""

    supported_versions: list[str]
    capabilities: dict[str, Any] = msgspec.field(default_factory=dict)
    instructions: str | None = None
    ttl_ms: float | None = None
    cache_scope: str | None = None
    meta: dict[str, Any] = msgspec.field(default_factory=dict, name="_meta")


class CallToolResult(msgspec.Struct, frozen=True, kw_only=True, rename="camel",
                     omit_defaults=True):
    """A ``tools/call`` result. ``content`` blocks stay raw (see :func:`map_call_result`), so an
    unknown block type is reported rather than failing the call; ``structured_content`` is kept.
    (The server side encodes it too: no ``structuredContent`` and ``isError`` false are omitted.)"""

    content: list[Any] = msgspec.field(default_factory=list)
    structured_content: Any = None
    is_error: bool = False


class SkippedMcpTool(msgspec.Struct, frozen=True, kw_only=True):
    """A tool the server listed that is not offered to the model, and why (a malformed entry, a
    schema the sanitizer refuses, a name that cannot be namespaced, a name filtered out)."""

    server: str
    name: str
    reason: str
