"""``create_retry_middleware``: retry one provider's transient failures before the first output
byte."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TypeAlias

import anyio

from ..completion import StreamEvent
from ..contracts import Message, ModelTurnResult
from ..errors import UsageError
from ..model import Model, ModelRequest
from ..wire import ModelAdapter, RetryPolicy, is_content_event, retry_attempts
from ._middleware import ModelMiddleware, WrappedModel

__all__ = ("create_retry_middleware",)

Sleep: TypeAlias = Callable[[float], Awaitable[None]]



class _Retrying(WrappedModel):
    __slots__ = ("_policy", "_random", "_sleep")

    def __init__(self, inner: Model, policy: RetryPolicy, random: Callable[[], float],
                 sleep: Sleep) -> None:
        _refuse_double_retry(inner)
        super().__init__(inner)
        self._policy = policy
        self._random = random
        self._sleep = sleep

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        for attempt in retry_attempts(self._policy, random=self._random, sleep=self._sleep):
            async with attempt:
                async for event in self._inner.stream(messages, request):
                    if not attempt.produced and is_content_event(event):
                        attempt.produced = True
                    yield event
                return

    async def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                       on_event: Callable[[StreamEvent], None] | None = None,
                       on_reset: Callable[[], None] | None = None) -> ModelTurnResult:
        """The inner model's own fold, called again under the same rule as ``stream``: only
        while none of its content events has been handed on."""
        complete = self._inner.complete
        for attempt in retry_attempts(self._policy, random=self._random, sleep=self._sleep):
            async with attempt:
                seen = attempt

                def sink(event: StreamEvent) -> None:
                    if not seen.produced and is_content_event(event):
                        seen.produced = True
                    if on_event is not None:
                        on_event(event)

                turn: ModelTurnResult = await complete(messages, request, sink, on_reset)
                return turn
        raise AssertionError("unreachable: every attempt returns or raises")


def _own_retry(model: object) -> str | None:
    """What retries ``model``'s calls by itself already (through any wrapper), or ``None``.

    A route is not one: it calls each candidate's adapter once per attempt (retrying is its
    fallback's and breaker's decision), and its failure (an ``AttemptError``) is final, never
    retried here."""
    while isinstance(model, WrappedModel):
        model = model._inner
    if isinstance(model, ModelAdapter):
        policy = model.retry
        if policy is not None and policy.max_attempts > 1:
            return (f"its ModelAdapter (retry=RetryPolicy(max_attempts={policy.max_attempts}), "
                    "the default)")
    return None


def _refuse_double_retry(inner: Model) -> None:
    # One retry per call: a ModelAdapter already retries its provider's transient failures, and
    # a second layer around it would multiply the attempts (3 x 3 calls for one failure).
    owner = _own_retry(inner)
    if owner is not None:
        raise UsageError(
            f"create_retry_middleware() over model {inner.id!r}: {owner} already retries its "
            "transient failures, and two retry layers multiply the attempts. Set the policy on "
            "the adapter (ModelAdapter(retry=RetryPolicy(max_attempts=..., backoff_ms=...))), or "
            "pass ModelAdapter(retry=None) to retry in this middleware instead")


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
    for real jitter. ``sleep`` takes seconds (``anyio.sleep``). It wraps ``stream`` and
    ``complete`` (forwarding every other attribute).

    One retry layer per call: a :class:`~bindloop.wire.ModelAdapter` retries this way on its own
    (its ``retry=``, on by default), so wrapping one whose policy allows more than one call
    (directly or under ``WrappedModel`` layers) raises :class:`~bindloop.errors.UsageError` when the
    middleware is applied, naming the fix (set the policy on the adapter, or
    ``ModelAdapter(retry=None)``). A ``RoutedModel`` calls each candidate once per attempt and
    its failure is its final word: wrapping one adds no call. Fallback to *another* provider is
    routing's job, not this one's."""
    try:
        policy = RetryPolicy(max_attempts=max_attempts, backoff_ms=backoff_ms,
                             max_delay_ms=max_delay_ms)
    except UsageError as exc:
        raise UsageError(f"create_retry_middleware(): {exc}") from None
    return ModelMiddleware(name="retry",
                           wrap=lambda inner: _Retrying(inner, policy, random, sleep))
