"""``with_retry``: retry one provider's transient failures before the first output byte."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeAlias

import anyio

from ..completion import ReasoningEvent, StreamEvent, StreamStalledError, TextEvent, \
    ToolCallEvent
from ..contracts import Message
from ..errors import UsageError
from ..routing import FAILURE_DISPOSITIONS
from ..wire import IncompleteStreamError, ProviderHttpError, TransportError
from ._middleware import ModelMiddleware, WrappedModel
from ._model import AgentModel, ModelStreamOptions

__all__ = ("is_retryable", "with_retry")

Sleep: TypeAlias = Callable[[float], Awaitable[None]]


def _category(error: BaseException) -> str | None:
    """The routing category of a failure the wire reports (the wire classifies HTTP errors; a
    stall, a transport failure and a truncated stream have one category each)."""
    if isinstance(error, ProviderHttpError):
        return error.category
    if isinstance(error, StreamStalledError):
        return "stream_stall"
    if isinstance(error, TransportError):
        return error.kind  # "connection" or "timeout"
    if isinstance(error, IncompleteStreamError):
        return "connection"
    return None


def is_retryable(error: BaseException) -> bool:
    """Whether ``error`` is worth another try on the same provider: its category's
    ``same_provider_retry`` in routing's one disposition table
    (:data:`~bindloop.routing.FAILURE_DISPOSITIONS`) — 429, 5xx / overloaded, a transport timeout
    or dropped connection, a stalled or truncated stream."""
    category = _category(error)
    disposition = None if category is None else FAILURE_DISPOSITIONS.get(category)
    return disposition is not None and disposition.same_provider_retry


class _Retrying(WrappedModel):
    __slots__ = ("_backoff", "_max", "_max_delay", "_random", "_sleep")

    def __init__(self, inner: AgentModel, max_attempts: int, backoff_ms: float,
                 max_delay_ms: float, random: Callable[[], float], sleep: Sleep) -> None:
        super().__init__(inner)
        self._max = max_attempts
        self._backoff = backoff_ms
        self._max_delay = max_delay_ms
        self._random = random
        self._sleep = sleep

    def delay_ms(self, attempt: int, error: BaseException) -> float:
        """The wait before attempt ``attempt + 1``: the provider's Retry-After when it sent one,
        else exponential backoff with jitter; either way at most ``max_delay_ms``."""
        hinted = getattr(error, "retry_after_ms", None)
        if isinstance(hinted, (int, float)) and not isinstance(hinted, bool) and hinted >= 0:
            return float(min(hinted, self._max_delay))
        base = min(self._backoff * 2 ** (attempt - 1), self._max_delay)
        # "Equal jitter": half fixed, half random, so retries spread without collapsing to zero.
        return float(base / 2 + base / 2 * self._random())

    async def stream(self, messages: Sequence[Message],
                     options: ModelStreamOptions) -> AsyncIterator[StreamEvent]:
        attempt = 0
        while True:
            attempt += 1
            produced = False
            try:
                async for event in self._inner.stream(messages, options):
                    if not produced and isinstance(event, (TextEvent, ToolCallEvent,
                                                           ReasoningEvent)):
                        produced = True
                    yield event
                return
            except Exception as exc:
                # After the first output byte the consumer has seen part of an answer: a retry
                # would splice two answers together, so the error is the caller's to handle.
                if produced or attempt >= self._max or not is_retryable(exc):
                    raise
                delay = self.delay_ms(attempt, exc)
            await self._sleep(delay / 1000.0)


def with_retry(*, max_attempts: int = 3, backoff_ms: float = 500.0,
               max_delay_ms: float = 30_000.0, random: Callable[[], float] = lambda: 1.0,
               sleep: Sleep = anyio.sleep) -> ModelMiddleware:
    """A model middleware retrying one provider's transient failures (:func:`is_retryable`) up to
    ``max_attempts`` calls in all, only while no output has been streamed. It honours a
    Retry-After (``retry_after_ms``, clamped to ``max_delay_ms``) and otherwise waits
    ``backoff_ms * 2**(n-1)`` (clamped) with equal jitter from ``random()`` in [0, 1) — the default
    ``1.0`` is deterministic (no jitter); pass ``random.Random().random`` from the host for real
    jitter. ``sleep`` takes seconds (``anyio.sleep``). Fallback to *another* provider is routing's
    job (``RoutedModel``), not this one's."""
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise UsageError(f"with_retry(max_attempts=...) must be a positive int, got "
                         f"{max_attempts!r}")
    if not backoff_ms >= 0 or not max_delay_ms >= 0:
        raise UsageError("with_retry(): backoff_ms and max_delay_ms must be non-negative")
    return ModelMiddleware(
        name="retry",
        wrap=lambda inner: _Retrying(inner, max_attempts, backoff_ms, max_delay_ms, random, sleep))
