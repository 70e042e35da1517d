"""Same-provider retries, in one place: which failure of a model call is which routing category,
how long to wait before calling the same provider again, which output rules a retry out, and the
retry loop itself.

:func:`failure_category` is the mapping routing's attempts use too
(:func:`~bindloop.wire.attempt_error_from`); whether a category is worth another call to the *same*
provider is the ``same_provider_retry`` column of routing's one disposition table
(:data:`~bindloop.routing.failures.FAILURE_DISPOSITIONS`); :class:`RetryPolicy` is the bound and the backoff,
read by :class:`~bindloop.wire.ModelAdapter` (on by default) and by
``bindloop.agent.middleware.create_retry_middleware``; :func:`is_content_event` is the output after which no
call is made again (nor a route fallen back from); :func:`retry_attempts` is the loop both run their
calls under. Nothing here reads a clock or draws random numbers: the caller passes ``random`` and
``sleep``.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterator

import msgspec

from ..completion import (
    ReasoningEvent,
    StreamEvent,
    TextEvent,
    ToolCallDeltaError,
    ToolCallEvent,
)
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

__all__ = ("RetryAttempt", "RetryPolicy", "failure_category", "is_content_event", "is_retryable",
           "retry_attempts")


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


def is_content_event(event: StreamEvent) -> bool:
    """Output a consumer folds into the turn and cannot be made to forget (non-empty text,
    reasoning, a tool-call delta): after it a retry would splice two answers, and a failed attempt
    that sent it cannot be taken back. The one test for retries and for a route's fallback."""
    return (isinstance(event, TextEvent) and bool(event.content)) or isinstance(
        event, (ReasoningEvent, ToolCallEvent))


class RetryAttempt:
    """One call of :func:`retry_attempts`: ``async with attempt:`` around the call, and
    ``attempt.produced = True`` once a :func:`is_content_event` reached a consumer. Leaving the
    block with an exception asks the one retry rule -- never after ``produced`` (another call would
    splice two answers), never for a cancellation or an exit, never without a policy; else the
    policy's :meth:`~RetryPolicy.delay_ms` for this error -- and either lets the error through or
    sleeps the delay and swallows it, so the loop calls again. Leaving it without one sets
    ``done`` and ends the loop."""

    __slots__ = ("_number", "_policy", "_random", "_sleep", "done", "produced")

    def __init__(self, policy: RetryPolicy | None, number: int, random: Callable[[], float],
                 sleep: Callable[[float], Awaitable[None]]) -> None:
        self._policy = policy
        self._number = number
        self._random = random
        self._sleep = sleep
        self.produced = False
        self.done = False

    async def __aenter__(self) -> RetryAttempt:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        _tb: object) -> bool:
        if error is None:
            self.done = True
            return False
        policy = self._policy
        if not isinstance(error, Exception) or self.produced or policy is None:
            return False  # cancellation, an exit, or output already shown: never retried
        delay = policy.delay_ms(self._number, error, self._random)
        if delay is None:
            return False
        await self._sleep(delay / 1000.0)
        return True


def retry_attempts(policy: RetryPolicy | None, *, random: Callable[[], float],
                   sleep: Callable[[float], Awaitable[None]]) -> Iterator[RetryAttempt]:
    """The one retry loop: a fresh :class:`RetryAttempt` per call (numbered from 1) until one ends
    without an error or lets its error through. ``policy`` ``None`` is one call. ``random()`` in
    [0, 1) draws the jitter; ``sleep(seconds)`` waits. A plain iterator, so a coroutine and an
    async generator run their calls under it alike::

        for attempt in retry_attempts(policy, random=random.random, sleep=anyio.sleep):
            async with attempt:
                return await call()
    """
    number = 0
    while True:
        number += 1
        attempt = RetryAttempt(policy, number, random, sleep)
        yield attempt
        if attempt.done:
            return
