"""The errors of the protocol package: a request decoder's refusal, and an A2A JSON-RPC error."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ..errors import ProviderError, UsageError

__all__ = ("A2aRpcError", "ProtocolRequestError")


class ProtocolRequestError(UsageError):
    """A request body that is JSON within bounds but not the protocol's shape. ``field`` is the
    path of the offending value (``messages[2].parts[0].text``); the message names the problem,
    never the value. A host answers it with HTTP 400."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field


_REASONS: Mapping[int, str] = MappingProxyType({
    -32001: "TASK_NOT_FOUND", -32002: "TASK_NOT_CANCELABLE",
    -32003: "PUSH_NOTIFICATION_NOT_SUPPORTED", -32004: "UNSUPPORTED_OPERATION",
    -32005: "CONTENT_TYPE_NOT_SUPPORTED", -32006: "INVALID_AGENT_RESPONSE",
    -32007: "EXTENDED_AGENT_CARD_NOT_CONFIGURED", -32008: "EXTENSION_SUPPORT_REQUIRED",
    -32009: "VERSION_NOT_SUPPORTED",
})


class A2aRpcError(ProviderError):
    """A JSON-RPC error: ``code`` (:class:`A2aErrorCode`) and a ``message`` the peer may read --
    never an exception's text or a value from the request. On the client side it is what the
    agent answered."""

    def __init__(self, code: int, message: str, *, request_id: str | int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.request_id = request_id

    @property
    def reason(self) -> str | None:
        """The A2A error's reason (``TASK_NOT_FOUND``...), ``None`` for JSON-RPC's own codes."""
        return _REASONS.get(self.code)
