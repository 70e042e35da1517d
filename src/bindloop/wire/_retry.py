"""Same-provider retries: which failure of a model call is which routing category, and how long to
wait before calling the same provider again.

One home for both. :func:`failure_category` is the mapping routing's attempts use too
(:func:`~bindloop.wire.attempt_error_from`); whether a category is worth another call to the *same*
provider is the ``same_provider_retry`` column of routing's one disposition table
(:data:`~bindloop.routing.failures.FAILURE_DISPOSITIONS`); :class:`RetryPolicy` is the bound and the backoff,
read by :class:`~bindloop.wire.ModelAdapter` (on by default) and by
``bindloop.agent.middleware.create_retry_middleware``. Nothing here sleeps or draws random numbers: the caller
passes ``random`` and does the waiting.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import msgspec

from ..completion import ToolCallDeltaError
from ..errors import PromptTooLongError, UsageError
from ..routing.failures import FAILURE_DISPOSITIONS, FailureCategory, is_cancellation
from ._errors import (
    IncompleteStreamError,
    ProviderHttpError,
    SseError,
    StreamStalledError,
    TransportError,
    WireDecodeError,
)

__all__ = ("RetryPolicy", "failure_category", "is_retryable")


def failure_category(error: BaseException) -> FailureCategory:
    """The routing category of a model call's failure.

    A classified provider error keeps its own; a stalled stream is ``stream_stall``; a transport
    failure ``connection`` or ``timeout`` (its ``kind``); a stream cut short ``connection``; a
    malformed body or chunk ``response_defect``; a cancellation ``cancelled``; a
    :class:`~bindloop.errors.PromptTooLongError` ``context_length``; anything else ``client_error``
    (a bug: never retried, never fallen back on)."""
    if is_cancellation(error):
        return "cancelled"
    if isinstance(error, ProviderHttpError):
        return error.category  # type: ignore[return-value]  # the wire classifies into the taxonomy
    if isinstance(error, StreamStalledError):
        return "stream_stall"
    if isinstance(error, TransportError):
        return "timeout" if error.kind == "timeout" else "connection"
    if isinstance(error, IncompleteStreamError):
        return "connection"
    if isinstance(error, (WireDecodeError, SseError, ToolCallDeltaError)):
        return "response_defect"
    if isinstance(error, PromptTooLongError):
        return "context_length"
    return "client_error"


def is_retryable(error: BaseException) -> bool:
    """Whether ``error`` is worth another call to the same provider: its category's
    ``same_provider_retry`` in :data:`~bindloop.routing.failures.FAILURE_DISPOSITIONS` — a 429, a 5xx or
    overload, a transport timeout or dropped connection, a stalled or truncated stream."""
    disposition = FAILURE_DISPOSITIONS.get(failure_category(error))
    return disposition is not None and disposition.same_provider_retry


def _non_negative(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0:
        raise UsageError(f"RetryPolicy({name}=...) must be a finite number >= 0, got {value!r}")


class RetryPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How often and how patiently one provider is called again after a transient failure.

    ``max_attempts`` counts calls in all (``1``: no retry). Before call ``n + 1`` the caller waits
    the provider's own ``Retry-After`` when it sent one, else ``backoff_ms * 2**(n-1)`` with equal
    jitter (half fixed, half ``random()``); either way at most ``max_delay_ms``. A ``Retry-After``
    longer than ``max_delay_ms`` is not waited on at all: the failure is the caller's at once (a
    route falls back; a plain call fails fast instead of sleeping through a long ban).
    """

    max_attempts: int = 3
    backoff_ms: float = 500.0
    max_delay_ms: float = 30_000.0

    def __post_init__(self) -> None:
        if isinstance(self.max_attempts, bool) or not isinstance(self.max_attempts, int) \
                or self.max_attempts < 1:
            raise UsageError(f"RetryPolicy(max_attempts=...) must be a positive int, got "
                             f"{self.max_attempts!r}")
        _non_negative("backoff_ms", self.backoff_ms)
        _non_negative("max_delay_ms", self.max_delay_ms)

    def delay_ms(self, attempt: int, error: BaseException,
                 random: Callable[[], float] = lambda: 1.0) -> float | None:
        """The wait before calling again after call ``attempt`` (1-based) failed with ``error``,
        or ``None`` when it must not be called again: the attempts are used up, ``error`` is not
        :func:`is_retryable`, or its ``Retry-After`` exceeds ``max_delay_ms``. ``random()`` in
        [0, 1) draws the jitter; the default ``1.0`` is deterministic."""
        if attempt >= self.max_attempts or not is_retryable(error):
            return None
        hinted = getattr(error, "retry_after_ms", None)
        if isinstance(hinted, (int, float)) and not isinstance(hinted, bool) \
                and math.isfinite(hinted) and hinted >= 0:
            return float(hinted) if hinted <= self.max_delay_ms else None
        base = min(self.backoff_ms * 2 ** (attempt - 1), self.max_delay_ms)
        return float(base / 2 + base / 2 * random())
