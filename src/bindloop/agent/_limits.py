"""Rate limits for models: ``create_limit_middleware(rules, store=)`` over a
:class:`~bindloop.stores.LimitStore`, and
``create_simple_limit_middleware(rpm=, tpm=, concurrency=)``.

A rule either waits until the call fits (through the injected ``sleep``) or raises
:class:`~bindloop.agent.limits.RateLimitExceededError`; a waiting rule with ``max_wait_ms`` raises when
the wait would be longer. Time comes from the injected ``clock`` (milliseconds).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Literal, TypeAlias

import anyio
import msgspec

from ..clock import Clock, monotonic_ms
from ..completion import FinishEvent, StreamEvent, UsageEvent
from ..contracts import Message, ModelTurnResult, TurnUsage
from ..errors import UsageError
from ..stores import LimitStore, MemoryLimitStore
from ._errors import RateLimitExceededError
from ._middleware import ModelMiddleware, WrappedModel
from ..model import Model, ModelRequest

__all__ = (
    "ConcurrencyRule",
    "LimitRule",
    "RateRule",
    "create_limit_middleware",
    "create_simple_limit_middleware",
)

Sleep: TypeAlias = Callable[[float], Awaitable[None]]
"""Sleeps for seconds (``anyio.sleep`` by default)."""


class RateRule(msgspec.Struct, frozen=True, kw_only=True):
    """At most ``limit`` units per sliding ``window_ms``: ``unit="requests"`` counts calls,
    ``"tokens"`` counts input + output tokens (charged when the call ends, so a call is admitted
    while the window holds fewer than ``limit``)."""

    name: str
    limit: int
    window_ms: float = 60_000.0
    unit: Literal["requests", "tokens"] = "requests"
    on_limit: Literal["wait", "raise"] = "wait"
    max_wait_ms: float | None = None


class ConcurrencyRule(msgspec.Struct, frozen=True, kw_only=True):
    """At most ``limit`` calls in flight at once. While a call holds its slot and its stream
    delivers events, the slot's lease is renewed at most every ``renew_ms`` (on stores that lease
    slots, see :class:`~bindloop.stores.LimitStore`); a stream silent for a whole lease loses its
    slot."""

    name: str
    limit: int
    on_limit: Literal["wait", "raise"] = "wait"
    max_wait_ms: float | None = None
    poll_ms: float = 25.0
    renew_ms: float = 10_000.0


LimitRule: TypeAlias = RateRule | ConcurrencyRule


def _check_rules(rules: Sequence[object]) -> tuple[LimitRule, ...]:
    out = tuple(rules)
    if not out:
        raise UsageError("create_limit_middleware() needs at least one rule")
    for r in out:
        if not isinstance(r, (RateRule, ConcurrencyRule)):
            raise UsageError(
                f"create_limit_middleware(): {r!r} is not a RateRule or ConcurrencyRule")
        if isinstance(r.limit, bool) or not isinstance(r.limit, int) or r.limit < 1:
            raise UsageError(f"limit rule {r.name!r}: limit must be a positive int, got "
                             f"{r.limit!r}")
        if isinstance(r, RateRule) and not r.window_ms > 0:
            raise UsageError(f"limit rule {r.name!r}: window_ms must be positive")
        if isinstance(r, ConcurrencyRule) and not r.renew_ms > 0:
            raise UsageError(f"limit rule {r.name!r}: renew_ms must be positive")
    return out  # type: ignore[return-value]


class _Limited(WrappedModel):
    __slots__ = ("_clock", "_key", "_rules", "_sleep", "_store")

    def __init__(self, inner: Model, rules: tuple[LimitRule, ...], store: LimitStore,
                 key: str, clock: Clock, sleep: Sleep) -> None:
        super().__init__(inner)
        self._rules = rules
        self._store = store
        self._key = key
        self._clock = clock
        self._sleep = sleep

    async def _wait_or_raise(self, rule: LimitRule, wait_ms: float, waited: float) -> float:
        if rule.on_limit == "raise" or (rule.max_wait_ms is not None
                                        and waited + wait_ms > rule.max_wait_ms):
            raise RateLimitExceededError(
                f"model {self.id!r}: rate-limit rule {rule.name!r} ({rule.limit}"
                f"{'' if isinstance(rule, ConcurrencyRule) else ' ' + rule.unit + ' per '}"
                f"{'' if isinstance(rule, ConcurrencyRule) else str(rule.window_ms) + ' ms'}"
                f"{' in flight' if isinstance(rule, ConcurrencyRule) else ''}) refused the call; "
                f"retry in {wait_ms:.0f} ms", rule=rule.name, retry_after_ms=wait_ms)
        await self._sleep(wait_ms / 1000.0)
        return waited + wait_ms

    async def _admit(self) -> list[ConcurrencyRule]:
        entered: list[ConcurrencyRule] = []
        try:
            for rule in self._rules:
                key = f"{self._key}:{rule.name}"
                waited = 0.0
                if isinstance(rule, ConcurrencyRule):
                    while not await self._store.enter(key, rule.limit):
                        waited = await self._wait_or_raise(rule, rule.poll_ms, waited)
                    entered.append(rule)
                    continue
                amount = 1 if rule.unit == "requests" else 0
                while (wait := await self._store.admit(key, rule.window_ms, rule.limit, amount,
                                                       self._clock())) > 0:
                    waited = await self._wait_or_raise(rule, wait, waited)
        except BaseException:
            for rule in entered:
                await self._store.leave(f"{self._key}:{rule.name}")
            raise
        return entered

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        entered = await self._admit()
        usage = TurnUsage()
        renew = getattr(self._store, "renew_slots", None) if entered else None
        every = min((r.renew_ms for r in entered), default=0.0)
        renewed = self._clock()
        try:
            async for event in self._inner.stream(messages, request):
                if renew is not None and self._clock() - renewed >= every:
                    await renew()  # the holder's heartbeat: the slots' leases go on
                    renewed = self._clock()
                if isinstance(event, UsageEvent):
                    usage = event.usage
                elif isinstance(event, FinishEvent) and event.usage is not None:
                    usage = event.usage
                yield event
        finally:
            with anyio.CancelScope(shield=True):
                await self._release(entered, usage)

    async def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                       on_event: Callable[[StreamEvent], None] | None = None,
                       on_reset: Callable[[], None] | None = None) -> ModelTurnResult:
        """The inner model's own fold under the same rules: admitted first, its slots returned
        and its tokens charged when it ends (a failed call: the usage its events reported)."""
        entered = await self._admit()
        seen = [TurnUsage()]

        def sink(event: StreamEvent) -> None:
            if isinstance(event, UsageEvent):
                seen[0] = event.usage
            elif isinstance(event, FinishEvent) and event.usage is not None:
                seen[0] = event.usage
            if on_event is not None:
                on_event(event)

        complete = self._inner.complete
        try:
            turn: ModelTurnResult = await complete(messages, request, sink, on_reset)
            seen[0] = turn.usage
            return turn
        finally:
            with anyio.CancelScope(shield=True):
                await self._release(entered, seen[0])

    async def _release(self, entered: list[ConcurrencyRule], usage: TurnUsage) -> None:
        for slot in entered:
            await self._store.leave(f"{self._key}:{slot.name}")
        tokens = usage.input_tokens + usage.output_tokens
        for rule in self._rules:
            if isinstance(rule, RateRule) and rule.unit == "tokens":
                await self._store.charge(f"{self._key}:{rule.name}", rule.window_ms,
                                         tokens, self._clock())


def create_limit_middleware(rules: Sequence[LimitRule], *, store: LimitStore | None = None,
                            key: str = "model", clock: Clock = monotonic_ms,
                            sleep: Sleep = anyio.sleep) -> ModelMiddleware:
    """A model middleware enforcing ``rules`` (each in order, before the call) in ``store``
    (default: a fresh :class:`~bindloop.stores.MemoryLimitStore`) under ``key`` — share a store and
    key between models that share one quota."""
    checked = _check_rules(rules)
    the_store: LimitStore = store if store is not None else MemoryLimitStore()
    return ModelMiddleware(
        name=f"limit:{key}",
        wrap=lambda inner: _Limited(inner, checked, the_store, key, clock, sleep))


def create_simple_limit_middleware(*, rpm: int | None = None, tpm: int | None = None,
                                   concurrency: int | None = None, key: str = "model",
                                   store: LimitStore | None = None, clock: Clock = monotonic_ms,
                                   sleep: Sleep = anyio.sleep) -> ModelMiddleware:
    """``create_limit_middleware`` for the common case: requests and tokens per minute, calls in
    flight. Every rule waits until the call fits."""
    rules: list[LimitRule] = []
    if rpm is not None:
        rules.append(RateRule(name="rpm", limit=rpm, unit="requests"))
    if tpm is not None:
        rules.append(RateRule(name="tpm", limit=tpm, unit="tokens"))
    if concurrency is not None:
        rules.append(ConcurrencyRule(name="concurrency", limit=concurrency))
    if not rules:
        raise UsageError("create_simple_limit_middleware() needs at least one of rpm=, tpm=, "
                         "concurrency=")
    return create_limit_middleware(rules, store=store, key=key, clock=clock, sleep=sleep)
