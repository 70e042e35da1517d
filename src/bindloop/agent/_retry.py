"""``create_retry_middleware``: retry one provider's transient failures before the first output
byte."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeAlias

import anyio

from ..completion import ReasoningEvent, StreamEvent, TextEvent, ToolCallEvent
from ..contracts import Message
from ..errors import UsageError
from ..wire import RetryPolicy
from ._middleware import ModelMiddleware, WrappedModel
from ._model import AgentModel, ModelStreamOptions

__all__ = ("create_retry_middleware",)

Sleep: TypeAlias = Callable[[float], Awaitable[None]]


class _Retrying(WrappedModel):
    __slots__ = ("_policy", "_random", "_sleep")

    def __init__(self, inner: AgentModel, policy: RetryPolicy, random: Callable[[], float],
                 sleep: Sleep) -> None:
        super().__init__(inner)
        self._policy = policy
        self._random = random
        self._sleep = sleep

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
                delay = None if produced else self._policy.delay_ms(attempt, exc, self._random)
                if delay is None:
                    raise
            await self._sleep(delay / 1000.0)


def create_retry_middleware(*, max_attempts: int = 3, backoff_ms: float = 500.0,
                            max_delay_ms: float = 30_000.0,
                            random: Callable[[], float] = lambda: 1.0,
                            sleep: Sleep = anyio.sleep) -> ModelMiddleware:
    """A model middleware retrying one provider's transient failures
    (:func:`bindloop.wire.is_retryable`) up to ``max_attempts`` calls in all, only while no output
    has been streamed, by :class:`bindloop.wire.RetryPolicy`: the provider's Retry-After when it
    sent one (one longer than ``max_delay_ms`` is not waited on: the error is raised), else
    ``backoff_ms * 2**(n-1)`` (at most ``max_delay_ms``) with equal jitter from ``random()`` in
    [0, 1) — the default ``1.0`` is deterministic; pass ``random.Random().random`` from the host
    for real jitter. ``sleep`` takes seconds (``anyio.sleep``). A :class:`~bindloop.wire.ModelAdapter`
    retries this way on its own (its ``retry=``); this middleware is for any other model. Fallback
    to *another* provider is routing's job (``RoutedModel``), not this one's."""
    try:
        policy = RetryPolicy(max_attempts=max_attempts, backoff_ms=backoff_ms,
                             max_delay_ms=max_delay_ms)
    except UsageError as exc:
        raise UsageError(f"create_retry_middleware(): {exc}") from None
    return ModelMiddleware(name="retry",
                           wrap=lambda inner: _Retrying(inner, policy, random, sleep))
