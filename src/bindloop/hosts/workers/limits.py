"""The rate-limit state every isolate shares: the ``RateLimiter`` Durable Object, the
``LimitStore`` port over it (:class:`DurableLimitStore`) and the clock every isolate agrees on."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable
from typing import Any

import js  # type: ignore[import-not-found]
from workers import DurableObject  # type: ignore[import-not-found]

from bindloop.hosts.workers.agent import HttpError
from bindloop.stores import LimitStore, MemoryLimitStore

__all__ = ("DurableLimitStore", "LiveRuns", "RateLimiter", "isolate_name", "limit_store",
           "live_runs", "wall_clock_ms")


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
        self._limits = MemoryLimitStore(now=wall_clock_ms)
        self._holders: dict[str, MemoryLimitStore] = {}

    def _holder(self, holder: str, lease_ms: float = 0.0) -> MemoryLimitStore | None:
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


class LiveRuns:
    """The runs going on, counted once across isolates: a concurrency slot per run in the
    ``RateLimiter`` object ``live-runs`` -- under ``runs:<identity>`` for the bound on each
    identity's (``per_identity``), under ``all-runs`` for the bound on all of them together
    (``total``; ``None`` for either: that bound is off) -- leased to this isolate for
    ``slot_lease_ms`` and renewed while the run holds its own lease, so the runs of an isolate
    that died stop counting when the lease ends. A request past either bound is refused before
    it claims anything: 429 ``too_many_runs`` (with ``Retry-After``, as the ASGI host's)."""

    def __init__(self, namespace: Any, per_identity: int | None, *, total: int | None = None,
                 slot_lease_ms: float = 60_000.0) -> None:
        self._store = DurableLimitStore(namespace, "live-runs", slot_lease_ms=slot_lease_ms)
        self._per_identity = per_identity
        self._total = total
        self._lease_ms = slot_lease_ms

    async def enter(self, identity: str) -> tuple[str, ...]:
        """Take the run's slots for ``identity`` (its own first: a caller past its bound takes
        none of everyone's); answers their keys for :meth:`leave`."""
        taken: list[str] = []
        if self._per_identity is not None:
            key = f"runs:{identity}"
            if not await self._store.enter(key, self._per_identity):
                raise HttpError(429, "too_many_runs", f"you have {self._per_identity} chats "
                                "running already; try again when one has finished")
            taken.append(key)
        if self._total is not None:
            if not await self._store.enter("all-runs", self._total):
                await self.leave(tuple(taken))
                raise HttpError(429, "too_many_runs", "the server is running as many chats as "
                                "it takes; try again shortly")
            taken.append("all-runs")
        return tuple(taken)

    async def leave(self, keys: tuple[str, ...]) -> None:
        for key in keys:
            await self._store.leave(key)

    async def hold(self, keys: tuple[str, ...], work: Awaitable[None]) -> None:
        """Run ``work`` (the run the slots ``keys`` were taken for) holding them: renewed every
        third of their lease while the run goes, given back when it ends, however it ends."""
        task = asyncio.ensure_future(work)
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=self._lease_ms / 3000)
                if not task.done():
                    with contextlib.suppress(Exception):  # unreachable: renewed next time
                        await self._store.renew_slots()
            await task
        finally:
            task.cancel()
            with contextlib.suppress(Exception):  # unreachable: the slots' lease ends instead
                await self.leave(keys)


def live_runs(env: Any, per_identity: int | None, total: int | None = None) -> LiveRuns | None:
    """The bounds on live runs -- each identity's (``MAX_LIVE_RUNS``) and all of them together
    (``MAX_LIVE_RUNS_TOTAL``) -- over the ``LIMITS`` binding; ``None`` when both are off."""
    if per_identity is None and total is None:
        return None
    namespace = getattr(env, "LIMITS", None)
    if namespace is None:
        raise HttpError(500, "misconfigured", "MAX_LIVE_RUNS or MAX_LIVE_RUNS_TOTAL is set but "
                        "the Worker has no LIMITS Durable Object binding (class RateLimiter); "
                        "add it in wrangler.jsonc")
    return LiveRuns(namespace, per_identity, total=total)
