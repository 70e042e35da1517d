"""The error a protocol request decoder raises."""

from __future__ import annotations

from ..errors import UsageError

__all__ = ("ProtocolRequestError",)


class ProtocolRequestError(UsageError):
    """A request body that is JSON within bounds but not the protocol's shape. ``field`` is the
    path of the offending value (``messages[2].parts[0].text``); the message names the problem,
    never the value. A host answers it with HTTP 400."""

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.field = field
