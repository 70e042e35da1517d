"""The rate-limit state every isolate shares: the ``RateLimiter`` Durable Object, the
``LimitStore`` port over it (:class:`DurableLimitStore`) and the clock every isolate agrees on."""

from __future__ import annotations

import uuid
from typing import Any

import js  # type: ignore[import-not-found]
from workers import DurableObject  # type: ignore[import-not-found]

from bindloop.agent import InMemoryLimitStore, LimitStore

__all__ = ("DurableLimitStore", "RateLimiter", "isolate_name", "limit_store", "wall_clock_ms")


class _Isolate:
    # Named on first use, not at import: a value made at import would be frozen into the memory
    # snapshot and shared by every isolate started from it.
    name = ""


def isolate_name() -> str:
    """This isolate's name as a holder of concurrency slots in the RateLimiter (an isolate that
    dies stops renewing them)."""
    if not _Isolate.name:
        _Isolate.name = uuid.uuid4().hex
    return _Isolate.name


def wall_clock_ms() -> float:
    # Date.now() in workerd advances with I/O, not while Python computes: fine for windows and
    # leases of seconds, and the same clock in every isolate (a monotonic clock is per process).
    return float(js.Date.now())


class RateLimiter(DurableObject):  # type: ignore[misc]  # the SDK is untyped
    """The rate-limit state every isolate shares: one object per limit group (``idFromName``), so
    ``create_limit_middleware``'s windows and in-flight counts are counted once however many
    isolates call the providers. The object serialises its calls, and each method finishes without awaiting, so no
    two requests interleave inside one. State lives in the object's memory (it is evicted only
    after a quiet spell longer than a one-minute window, which has emptied by then; concurrency
    slots of calls that outlive an eviction are forgotten, never double-counted).

    Concurrency slots are leased to the isolate that took them (``holder``, with its
    ``lease_ms``): an isolate that dies holding slots stops renewing them (``renew_slots``) and
    they lapse when the lease ends. A caller naming no holder gets slots that never lapse. One
    small handle per holder is kept for the object's lifetime."""

    def __init__(self, ctx: Any, env: Any) -> None:
        super().__init__(ctx, env)
        self._limits = InMemoryLimitStore(now=wall_clock_ms)
        self._holders: dict[str, InMemoryLimitStore] = {}

    def _holder(self, holder: str, lease_ms: float = 0.0) -> InMemoryLimitStore | None:
        if not holder:
            return self._limits
        handle = self._holders.get(holder)
        if handle is None and lease_ms > 0:
            handle = self._holders[holder] = self._limits.handle(slot_lease_ms=lease_ms)
        return handle

    async def admit(self, key: str, window_ms: float, limit: int, amount: int, now: float) -> float:
        return await self._limits.admit(str(key), float(window_ms), int(limit), int(amount), float(now))

    async def charge(self, key: str, window_ms: float, amount: int, now: float) -> None:
        await self._limits.charge(str(key), float(window_ms), int(amount), float(now))

    async def enter(self, key: str, limit: int, holder: str = "", lease_ms: float = 0.0) -> bool:
        handle = self._holder(str(holder), float(lease_ms))
        return handle is not None and await handle.enter(str(key), int(limit))

    async def leave(self, key: str, holder: str = "") -> None:
        handle = self._holder(str(holder))
        if handle is not None:
            await handle.leave(str(key))

    async def renew_slots(self, holder: str) -> None:
        handle = self._holder(str(holder))
        if handle is not None:
            await handle.renew_slots()


class DurableLimitStore:
    """bindloop's ``LimitStore`` over a :class:`RateLimiter` Durable Object (RPC), for
    ``create_limit_middleware(store=...)``: requests in any isolate share one limit. Pair it with a
    clock every isolate agrees on (:func:`wall_clock_ms`), not a per-process monotonic one. Its
    slots are leased to this isolate (:func:`isolate_name`) for ``slot_lease_ms`` and renewed by
    :meth:`renew_slots`, which the limit middleware calls while a call streams."""

    def __init__(self, namespace: Any, name: str = "providers", *,
                 slot_lease_ms: float = 60_000.0) -> None:
        self._stub = namespace.get(namespace.idFromName(name))
        self._lease = float(slot_lease_ms)

    async def admit(self, key: str, window_ms: float, limit: int, amount: int, now: float) -> float:
        return float(await self._stub.admit(key, window_ms, limit, amount, now))

    async def charge(self, key: str, window_ms: float, amount: int, now: float) -> None:
        await self._stub.charge(key, window_ms, amount, now)

    async def enter(self, key: str, limit: int) -> bool:
        return bool(await self._stub.enter(key, limit, isolate_name(), self._lease))

    async def leave(self, key: str) -> None:
        await self._stub.leave(key, isolate_name())

    async def renew_slots(self) -> None:
        await self._stub.renew_slots(isolate_name())


def limit_store(env: Any) -> LimitStore | None:
    namespace = getattr(env, "LIMITS", None)
    return None if namespace is None else DurableLimitStore(namespace)
