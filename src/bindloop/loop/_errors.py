"""The loop's own errors: a turn it cannot act on, and the inputs it reports and sets aside."""

from __future__ import annotations

from ..errors import UsageError

__all__ = (
    "DiscardedTurnWithToolCallsError",
    "InputBlockedBySuspendError",
    "InvalidModelTurnError",
    "MissingActivationPortError",
)


class InvalidModelTurnError(UsageError):
    """The model returned a turn the loop cannot act on (a tool call without an id, arguments that
    are not a JSON string, a duplicate id within the turn, ...)."""


class MissingActivationPortError(UsageError):
    """A tool asked the loop to activate plugins or skills while its ``activate`` port is unwired.

    Reported through ``on_tool_call_rejected``; the run continues.
    """

    def __init__(self, kind: str, names: tuple[str, ...]) -> None:
        super().__init__(
            f"a tool requested {kind} activation of {list(names)!r} but the activate port is not wired"
        )
        self.kind = kind
        self.names = names


class DiscardedTurnWithToolCallsError(UsageError):
    """``accept_message=False`` was returned for a turn that requested tools; the discard was refused
    (the results would have no request to pair with) and the turn was kept. Reported, not raised."""


class InputBlockedBySuspendError(UsageError):
    """Input other than the answering tool message was delivered while a suspend is open; it was not
    appended. Reported through ``on_tool_call_rejected`` with the open suspend's tool-call id."""
