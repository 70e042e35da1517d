"""Store factories for the conformance kit, importable by the child processes of its races
(``spawn`` pickles them by reference, so they live in a module, not in a test)."""

from __future__ import annotations

from typing import Any

from bindloop.stores import MemoryLimitStore
from bindloop.stores import MemoryCheckpointStore, MemoryToolCallReceiptStore


class MemoryBackend:
    """One in-memory "backend": every handle is a view on the same three reference stores (the
    size bound is per handle, as a real store's is)."""

    def __init__(self) -> None:
        self.checkpoints = MemoryCheckpointStore()
        self.receipts = MemoryToolCallReceiptStore()
        self.limits = MemoryLimitStore()

    def __call__(self, *, now: Any = None, max_checkpoint_bytes: int | None = None,
                 slot_lease_ms: float | None = None) -> Any:
        return MemoryHandle(self, now, max_checkpoint_bytes, slot_lease_ms)


class MemoryHandle:
    def __init__(self, backend: MemoryBackend, now: Any, max_checkpoint_bytes: int | None,
                 slot_lease_ms: float | None = None) -> None:
        cps = MemoryCheckpointStore(max_checkpoint_bytes=max_checkpoint_bytes)
        cps.rows = backend.checkpoints.rows
        self._cps = cps
        self._receipts = backend.receipts
        if now is not None:
            backend.receipts.now = now
        self._limits = backend.limits
        self.load, self.save, self.delete, self.commit = cps.load, cps.save, cps.delete, cps.commit
        r = backend.receipts
        self.read, self.claim, self.complete, self.fail, self.renew, self.delete_run = (
            r.read, r.claim, r.complete, r.fail, r.renew, r.delete_run)
        self.complete_once = r.complete_once
        lim = backend.limits.handle(now=now, slot_lease_ms=slot_lease_ms)  # its own holder
        self.admit, self.charge, self.enter, self.leave = lim.admit, lim.charge, lim.enter, lim.leave
        self.renew_slots = lim.renew_slots
