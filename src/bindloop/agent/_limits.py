"""Rate limits for models: ``create_limit_middleware(rules, store=)`` over a
:class:`LimitStore`, and ``create_simple_limit_middleware(rpm=, tpm=, concurrency=)``.

A rule either waits until the call fits (through the injected ``sleep``) or raises
:class:`~bindloop.agent.RateLimitExceededError`; a waiting rule with ``max_wait_ms`` raises when
the wait would be longer. Time comes from the injected ``clock`` (milliseconds).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Literal, Protocol, TypeAlias

import anyio
import msgspec

from ..clock import Clock, monotonic_ms
from ..completion import FinishEvent, StreamEvent, UsageEvent
from ..contracts import Message, ModelTurnResult, TurnUsage
from ..errors import UsageError
from ..run import window_wait
from ._errors import RateLimitExceededError
from ._middleware import ModelMiddleware, WrappedModel
from ._model import AgentModel, ModelStreamOptions

__all__ = (
    "ConcurrencyRule",
    "InMemoryLimitStore",
    "LimitRule",
    "LimitStore",
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
    """At most ``limit`` calls in flight at once."""

    name: str
    limit: int
    on_limit: Literal["wait", "raise"] = "wait"
    max_wait_ms: float | None = None
    poll_ms: float = 25.0


LimitRule: TypeAlias = RateRule | ConcurrencyRule


class LimitStore(Protocol):
    """Where limit state lives (in memory for one process; a shared store for several).

    ``admit(key, window_ms, limit, amount, now)`` records ``amount`` and returns ``0`` when the
    window has room for it (``amount=0`` asks whether it holds fewer than ``limit``), else the
    milliseconds until it will, recording nothing. ``charge`` records ``amount`` unconditionally.
    ``enter(key, limit)`` takes a concurrency slot (``False`` when all are taken); ``leave``
    returns one."""

    async def admit(self, key: str, window_ms: float, limit: int, amount: int,
                    now: float) -> float: ...

    async def charge(self, key: str, window_ms: float, amount: int, now: float) -> None: ...

    async def enter(self, key: str, limit: int) -> bool: ...

    async def leave(self, key: str) -> None: ...


class InMemoryLimitStore:
    """A :class:`LimitStore` for one process: sliding windows of ``(time, amount)`` per key. One
    instance per limiter group (share it between models that share a quota)."""

    def __init__(self) -> None:
        self._windows: dict[str, deque[tuple[float, int]]] = {}
        self._in_flight: dict[str, int] = {}

    def _window(self, key: str, window_ms: float, now: float) -> deque[tuple[float, int]]:
        window = self._windows.setdefault(key, deque())
        while window and window[0][0] <= now - window_ms:
            window.popleft()
        return window

    async def admit(self, key: str, window_ms: float, limit: int, amount: int,
                    now: float) -> float:
        window = self._window(key, window_ms, now)
        wait = window_wait(window, window_ms, limit, amount, now)
        if wait == 0.0 and amount:
            window.append((now, amount))
        return wait

    async def charge(self, key: str, window_ms: float, amount: int, now: float) -> None:
        if amount > 0:
            self._window(key, window_ms, now).append((now, amount))

    async def enter(self, key: str, limit: int) -> bool:
        n = self._in_flight.get(key, 0)
        if n >= limit:
            return False
        self._in_flight[key] = n + 1
        return True

    async def leave(self, key: str) -> None:
        self._in_flight[key] = max(self._in_flight.get(key, 0) - 1, 0)


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
    return out  # type: ignore[return-value]


class _Limited(WrappedModel):
    __slots__ = ("_clock", "_key", "_rules", "_sleep", "_store")

    def __init__(self, inner: AgentModel, rules: tuple[LimitRule, ...], store: LimitStore,
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
                     options: ModelStreamOptions) -> AsyncIterator[StreamEvent]:
        entered = await self._admit()
        usage = TurnUsage()
        try:
            async for event in self._inner.stream(messages, options):
                if isinstance(event, UsageEvent):
                    usage = event.usage
                elif isinstance(event, FinishEvent) and event.usage is not None:
                    usage = event.usage
                yield event
        finally:
            with anyio.CancelScope(shield=True):
                await self._release(entered, usage)

    async def _complete(self, messages: Sequence[Message], options: ModelStreamOptions,
                        on_event: Callable[[StreamEvent], None] | None = None,
                        ) -> ModelTurnResult:
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

        complete = self._inner.complete_turn  # type: ignore[attr-defined]
        try:
            turn: ModelTurnResult = await complete(messages, options, sink)
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
    (default: a fresh :class:`InMemoryLimitStore`) under ``key`` — share a store and key between
    models that share one quota."""
    checked = _check_rules(rules)
    the_store: LimitStore = store if store is not None else InMemoryLimitStore()
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
