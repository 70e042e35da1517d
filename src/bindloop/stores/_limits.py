"""The limit store port of the agent's rate limits (``bindloop.agent.limits.create_limit_middleware``):
sliding windows and concurrency slots, and its in-memory version."""

from __future__ import annotations

from collections import deque
from typing import Protocol

from ..clock import Clock, monotonic_ms
from ..errors import UsageError
from ..run import window_wait

__all__ = ("LimitStore", "MemoryLimitStore")


class LimitStore(Protocol):
    """Where limit state lives (in memory for one process; a shared store for several).

    ``admit(key, window_ms, limit, amount, now)`` records ``amount`` and returns ``0`` when the
    window has room for it (``amount=0`` asks whether it holds fewer than ``limit``), else the
    milliseconds until it will, recording nothing. ``charge`` records ``amount`` unconditionally.
    ``enter(key, limit)`` takes a concurrency slot (``False`` when all are taken); ``leave``
    returns one.

    **Slot leases.** A slot taken by a process that is then killed is never returned by
    ``leave``. A store shared between processes therefore leases each slot to the store handle
    that took it (``slot_lease_ms`` on the stores bindloop ships): the slot lapses unless the
    handle renews it, and a lapsed slot counts for nobody. Such a store has ``renew_slots()``,
    the holder's heartbeat: it renews every slot the handle holds (a lapsed one stays lapsed, and
    ``leave`` of a lapsed slot frees nothing of anyone else's).
    ``bindloop.agent.limits.create_limit_middleware`` calls it while a call holds slots (see
    ``bindloop.agent.limits.ConcurrencyRule``'s ``renew_ms``); keep the lease
    several times longer than that."""

    async def admit(self, key: str, window_ms: float, limit: int, amount: int,
                    now: float) -> float: ...

    async def charge(self, key: str, window_ms: float, amount: int, now: float) -> None: ...

    async def enter(self, key: str, limit: int) -> bool: ...

    async def leave(self, key: str) -> None: ...


class _Slots:
    """Slot leases shared by the handles of one :class:`MemoryLimitStore`: per key, slot id to
    expiry (ms on the holder's clock)."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[int, float]] = {}
        self.next_id = 0


class MemoryLimitStore:
    """A :class:`LimitStore` in this process's memory: sliding windows of ``(time, amount)``
    per key. One instance per limiter group (share it between models that share a quota).

    ``slot_lease_ms`` (``None``: slots never lapse) leases each slot on the clock ``now``;
    :meth:`handle` opens another holder on the same windows and slots (what a second process's
    handle on a shared store is), so a holder that stops renewing can be tested in one process."""

    def __init__(self, *, now: Clock = monotonic_ms, slot_lease_ms: float | None = None) -> None:
        if slot_lease_ms is not None and not (isinstance(slot_lease_ms, (int, float))
                                              and slot_lease_ms > 0):
            raise UsageError(f"slot_lease_ms must be positive or None, got {slot_lease_ms!r}")
        self._windows: dict[str, deque[tuple[float, int]]] = {}
        self._slots = _Slots()
        self._held: dict[str, list[int]] = {}
        self._now = now
        self._lease = slot_lease_ms

    def handle(self, *, now: Clock | None = None,
               slot_lease_ms: float | None = None) -> MemoryLimitStore:
        """Another holder on this store's windows and slots, with its own clock and lease
        (default: this one's)."""
        other = MemoryLimitStore(now=now or self._now,
                                   slot_lease_ms=self._lease if slot_lease_ms is None
                                   else slot_lease_ms)
        other._windows, other._slots = self._windows, self._slots
        return other

    def _expiry(self) -> float:
        return float("inf") if self._lease is None else self._now() + self._lease

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
        leases = self._slots.leases.setdefault(key, {})
        now = self._now()
        for slot in [s for s, until in leases.items() if until <= now]:
            del leases[slot]  # lapsed: its holder stopped renewing
        if len(leases) >= limit:
            return False
        slot = self._slots.next_id = self._slots.next_id + 1
        leases[slot] = self._expiry()
        self._held.setdefault(key, []).append(slot)
        return True

    async def leave(self, key: str) -> None:
        held = self._held.get(key)
        if held:
            self._slots.leases.get(key, {}).pop(held.pop(), None)

    async def renew_slots(self) -> None:
        """Renew every slot this handle holds and that has not lapsed."""
        now, until = self._now(), self._expiry()
        for key, held in self._held.items():
            leases = self._slots.leases.get(key, {})
            for slot in held:
                if leases.get(slot, now) > now:
                    leases[slot] = until
