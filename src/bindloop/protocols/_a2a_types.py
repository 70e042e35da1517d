"""A2A 1.0 (Agent2Agent) wire types for the JSON-RPC binding: the ProtoJSON shapes of ``a2a.proto``
(camelCase fields, enum values as their SCREAMING_SNAKE_CASE names), the agent card, the JSON-RPC
envelope and the binding's error codes.

Only what a bindloop server and client exchange is modelled; unknown fields are ignored on decode
(the specification asks for it), and absent optional fields are left out on encode.
"""

from __future__ import annotations

import re
from typing import Any, Literal, TypeAlias, TypeVar

import msgspec

from ..contracts import JsonBoundsError, decode_json_bounded
from ._errors import A2aRpcError

__all__ = (
    "A2A_AGENT_CARD_PATH",
    "A2A_METHODS",
    "A2A_PROTOCOL_VERSION",
    "A2aAgentCapabilities",
    "A2aAgentCard",
    "A2aAgentInterface",
    "A2aAgentProvider",
    "A2aAgentSkill",
    "A2aArtifact",
    "A2aArtifactUpdate",
    "A2aCancelTaskRequest",
    "A2aErrorCode",
    "A2aGetTaskRequest",
    "A2aMessage",
    "A2aPart",
    "A2aRpcCall",
    "A2aSendConfiguration",
    "A2aSendMessageRequest",
    "A2aStatusUpdate",
    "A2aStreamResponse",
    "A2aSubscribeRequest",
    "A2aTask",
    "A2aTaskState",
    "A2aTaskStatus",
    "TERMINAL_STATES",
    "decode_a2a_call",
    "decode_a2a_params",
    "encode_a2a_error",
    "encode_a2a_result",
)

A2A_PROTOCOL_VERSION = "1.0"
"""The protocol version this binding speaks (the ``A2A-Version`` header; ``Major.Minor``)."""

A2A_AGENT_CARD_PATH = "/.well-known/agent-card.json"
"""Where an agent's card is published (the specification's well-known URI)."""

A2A_METHODS = ("SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask",
               "SubscribeToTask", "CreateTaskPushNotificationConfig",
               "GetTaskPushNotificationConfig", "ListTaskPushNotificationConfigs",
               "DeleteTaskPushNotificationConfig", "GetExtendedAgentCard")
"""The JSON-RPC method names of A2A 1.0 (PascalCase, as the gRPC service names them)."""

A2aTaskState: TypeAlias = Literal[
    "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED", "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED", "TASK_STATE_UNSPECIFIED"]

TERMINAL_STATES: frozenset[str] = frozenset({
    "TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"})
"""States a task never leaves: it takes no more messages and cannot be canceled."""


class A2aErrorCode:
    """The binding's error codes: JSON-RPC's own and A2A's (``-32001`` .. ``-32009``)."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL_ERROR = -32603
    TASK_NOT_FOUND = -32001
    TASK_NOT_CANCELABLE = -32002
    PUSH_NOTIFICATION_NOT_SUPPORTED = -32003
    UNSUPPORTED_OPERATION = -32004
    CONTENT_TYPE_NOT_SUPPORTED = -32005
    INVALID_AGENT_RESPONSE = -32006
    EXTENDED_AGENT_CARD_NOT_CONFIGURED = -32007
    EXTENSION_SUPPORT_REQUIRED = -32008
    VERSION_NOT_SUPPORTED = -32009


class A2aPart(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    """One part of a message or artifact: exactly one of ``text``, ``raw`` (base64), ``url`` or
    ``data`` (any JSON value, ``null`` included -- hence UNSET when absent)."""

    text: str | None = None
    raw: str | None = None
    url: str | None = None
    data: Any = msgspec.UNSET
    metadata: dict[str, Any] | None = None
    filename: str | None = None
    media_type: str | None = None


class A2aMessage(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    """One message: ``ROLE_USER`` from the client, ``ROLE_AGENT`` from the agent."""

    message_id: str
    role: Literal["ROLE_USER", "ROLE_AGENT", "ROLE_UNSPECIFIED"]
    parts: tuple[A2aPart, ...] = ()
    context_id: str | None = None
    task_id: str | None = None
    metadata: dict[str, Any] | None = None
    extensions: tuple[str, ...] = ()
    reference_task_ids: tuple[str, ...] = ()


class A2aTaskStatus(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    state: A2aTaskState
    message: A2aMessage | None = None
    timestamp: str | None = None


class A2aArtifact(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    artifact_id: str
    parts: tuple[A2aPart, ...] = ()
    name: str | None = None
    description: str | None = None
    metadata: dict[str, Any] | None = None
    extensions: tuple[str, ...] = ()


class A2aTask(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    id: str
    status: A2aTaskStatus
    context_id: str | None = None
    artifacts: tuple[A2aArtifact, ...] = ()
    history: tuple[A2aMessage, ...] = ()
    metadata: dict[str, Any] | None = None


class A2aStatusUpdate(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    """``TaskStatusUpdateEvent``."""

    task_id: str
    context_id: str
    status: A2aTaskStatus
    metadata: dict[str, Any] | None = None


class A2aArtifactUpdate(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    """``TaskArtifactUpdateEvent``: ``append`` adds the parts to the artifact of that id (else it
    replaces it); ``last_chunk`` says no more follows for it."""

    task_id: str
    context_id: str
    artifact: A2aArtifact
    append: bool = False
    last_chunk: bool = False
    metadata: dict[str, Any] | None = None


class A2aStreamResponse(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    """One streamed result: exactly one field is set."""

    task: A2aTask | None = None
    message: A2aMessage | None = None
    status_update: A2aStatusUpdate | None = None
    artifact_update: A2aArtifactUpdate | None = None


class A2aSendConfiguration(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    accepted_output_modes: tuple[str, ...] = ()
    history_length: int | None = None
    return_immediately: bool = False
    task_push_notification_config: Any = msgspec.UNSET


class A2aSendMessageRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    message: A2aMessage
    configuration: A2aSendConfiguration | None = None
    metadata: dict[str, Any] | None = None
    tenant: str | None = None


class A2aGetTaskRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    id: str
    history_length: int | None = None
    tenant: str | None = None


class A2aCancelTaskRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    id: str
    metadata: dict[str, Any] | None = None
    tenant: str | None = None


class A2aSubscribeRequest(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    id: str
    tenant: str | None = None


class A2aAgentInterface(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    """One way to reach the agent: ``protocol_binding`` ``JSONRPC`` (or ``GRPC``,
    ``HTTP+JSON``) at ``url`` for ``protocol_version``."""

    url: str
    protocol_binding: str
    protocol_version: str
    tenant: str | None = None


class A2aAgentCapabilities(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    streaming: bool | None = None
    push_notifications: bool | None = None
    extended_agent_card: bool | None = None


class A2aAgentSkill(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    id: str
    name: str
    description: str
    tags: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    input_modes: tuple[str, ...] = ()
    output_modes: tuple[str, ...] = ()


class A2aAgentProvider(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    organization: str
    url: str


class A2aAgentCard(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True,
         rename="camel"):
    """What an agent publishes at :data:`A2A_AGENT_CARD_PATH`. ``security_schemes`` and
    ``security_requirements`` are carried as their ProtoJSON objects. The lists default to empty
    so a card read from a peer that leaves them out decodes; a card this side publishes fills
    them (empty ones are left out on encode)."""

    name: str
    description: str
    supported_interfaces: tuple[A2aAgentInterface, ...]
    version: str
    capabilities: A2aAgentCapabilities = A2aAgentCapabilities()
    default_input_modes: tuple[str, ...] = ()
    default_output_modes: tuple[str, ...] = ()
    skills: tuple[A2aAgentSkill, ...] = ()
    provider: A2aAgentProvider | None = None
    documentation_url: str | None = None
    icon_url: str | None = None
    security_schemes: dict[str, Any] | None = None
    security_requirements: tuple[dict[str, Any], ...] = ()

    def jsonrpc_url(self) -> str | None:
        """The URL of the card's first JSON-RPC interface for protocol 1.x, or ``None``."""
        for interface in self.supported_interfaces:
            if interface.protocol_binding == "JSONRPC" and \
                    interface.protocol_version.split(".")[0] == "1":
                return interface.url
        return None


class A2aRpcCall(msgspec.Struct, frozen=True, kw_only=True):
    """A JSON-RPC request as read: ``id`` (a string, an integer or ``None``), ``method`` and the
    ``params`` object (``{}`` when absent)."""

    id: str | int | None
    method: str
    params: dict[str, Any]


MAX_A2A_REQUEST_BYTES = 1024 * 1024
MAX_A2A_REQUEST_DEPTH = 32


def decode_a2a_call(body: bytes | str, *, max_bytes: int = MAX_A2A_REQUEST_BYTES,
                    max_depth: int = MAX_A2A_REQUEST_DEPTH) -> A2aRpcCall:
    """Read a JSON-RPC request body. Raises :class:`A2aRpcError`: ``PARSE_ERROR`` for a body that is
    not JSON (or too large or too deep to read), ``INVALID_REQUEST`` for JSON that is not one
    JSON-RPC 2.0 request object (a batch included)."""
    try:
        raw = decode_json_bounded(body, max_bytes=max_bytes, max_depth=max_depth)
    except JsonBoundsError as exc:
        if exc.reason == "too_large":
            raise A2aRpcError(A2aErrorCode.INVALID_REQUEST, "payload too large") from None
        if exc.reason == "too_deep":
            raise A2aRpcError(A2aErrorCode.INVALID_REQUEST, "payload nested too deep") from None
        raise A2aRpcError(A2aErrorCode.PARSE_ERROR, "invalid JSON payload") from None
    if isinstance(raw, list):
        raise A2aRpcError(A2aErrorCode.INVALID_REQUEST, "batch requests are not supported")
    if not isinstance(raw, dict):
        raise A2aRpcError(A2aErrorCode.INVALID_REQUEST, "the request must be a JSON object")
    return _call(raw)


def _call(raw: dict[str, Any]) -> A2aRpcCall:
    rid = raw.get("id")
    if isinstance(rid, bool) or not (rid is None or isinstance(rid, (str, int))):
        raise A2aRpcError(A2aErrorCode.INVALID_REQUEST, "id must be a string, an integer or null")
    if raw.get("jsonrpc") != "2.0":
        raise _Invalid(rid, "jsonrpc must be exactly '2.0'")
    method = raw.get("method")
    if not isinstance(method, str) or not method:
        raise _Invalid(rid, "method must be a non-empty string")
    params = raw.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise _Invalid(rid, "params must be an object", code=A2aErrorCode.INVALID_PARAMS)
    return A2aRpcCall(id=rid, method=method, params=params)


def _Invalid(rid: str | int | None, message: str,  # noqa: N802
             code: int = A2aErrorCode.INVALID_REQUEST) -> A2aRpcError:
    """An error about a request whose id is known (the answer carries it)."""
    return A2aRpcError(code, message, request_id=rid)


_T = TypeVar("_T")


def decode_a2a_params(params: dict[str, Any], type_: type[_T]) -> _T:
    """``params`` as ``type_`` (one of the request structs), or :class:`A2aRpcError`
    ``INVALID_PARAMS`` naming the offending path (never its value)."""
    try:
        return msgspec.convert(params, type_)
    except msgspec.ValidationError as exc:
        text = str(exc)
        where = text.rsplit(" - at ", 1)
        path = where[1] if len(where) == 2 else "$"
        # msgspec quotes an invalid enum value: the problem is named, the value is not
        problem = _QUOTED.sub("(not one of the allowed values)", where[0].split(" - ")[0])
        raise A2aRpcError(A2aErrorCode.INVALID_PARAMS,
                          f"invalid params at {path}: {problem}") from None


_QUOTED = re.compile(r"'[^']*'")


_ENC = msgspec.json.Encoder()


def encode_a2a_result(rid: str | int | None, result: Any) -> bytes:
    """A JSON-RPC success response."""
    return _ENC.encode({"jsonrpc": "2.0", "id": rid, "result": result})


def encode_a2a_error(rid: str | int | None, error: A2aRpcError) -> bytes:
    """A JSON-RPC error response; an A2A error carries its ``google.rpc.ErrorInfo`` detail."""
    body: dict[str, Any] = {"code": error.code, "message": error.message}
    if error.reason is not None:
        body["data"] = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                         "reason": error.reason, "domain": "a2a-protocol.org"}]
    return _ENC.encode({"jsonrpc": "2.0", "id": rid, "error": body})
