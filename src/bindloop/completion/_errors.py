"""The completion package's errors: a tool-call delta that cannot merge, a stream that failed or
stalled."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ProviderError

if TYPE_CHECKING:  # the stall a StreamStalledError carries
    from ._watchdog import StreamStall

__all__ = (
    "ModelStreamError",
    "StreamStalledError",
    "ToolCallDeltaError",
)


class ToolCallDeltaError(ProviderError, ValueError):
    """The provider streamed a tool-call delta that cannot be merged safely: no usable index, an id
    that contradicts the one already seen for the slot, a fragment of the wrong type, or a call that
    ended without an id or a name. Raised rather than guessed, because every guess is a silent merge
    of two calls or a call nobody can answer."""


class ModelStreamError(ProviderError):
    """The stream reported an :class:`ErrorEvent` whose ``error`` was not an exception. (An
    exception is re-raised as it is, so the adapter's classification reaches routing intact.)"""

    def __init__(self, error: object) -> None:
        super().__init__(f"the model stream failed: {error!r}")
        self.error = error


class StreamStalledError(ProviderError):
    """The abort reason the watchdog's signal carries when it tears a stream down. A transport that
    raises its signal's reason raises this; routing can treat it as retriable."""

    def __init__(self, stall: StreamStall) -> None:
        super().__init__(
            f"the model stream stalled: {stall.kind} budget of {stall.budget_ms:g} ms exceeded "
            f"({stall.elapsed_ms:g} ms)"
        )
        self.stall = stall
