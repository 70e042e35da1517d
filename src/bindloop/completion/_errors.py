"""The completion package's errors: a tool-call delta that cannot merge, a stream that failed."""

from __future__ import annotations

from ..errors import ProviderError

__all__ = (
    "ModelStreamError",
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
