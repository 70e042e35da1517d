"""The receipt store port of idempotent tool calls (:mod:`bindloop.run`'s receipts): the host's
receipt table, fenced on the attempt, and its in-memory reference."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ..clock import Clock, monotonic_ms
from ..errors import UsageError
from ..run import (
    ReceiptCompleted,
    ReceiptFailed,
    ReceiptRunning,
    ReceiptState,
    ToolCallReceiptKey,
)

__all__ = ("MemoryToolCallReceiptStore", "ToolCallReceiptStore")


class ToolCallReceiptStore(Protocol):
    """The host's receipt table. Every write is fenced on the attempt number and returns whether it
    landed (``False``: another attempt owns the receipt now — stop, do not run or record anything).

    ``claim(key, attempt, lease_ms)`` lands only if the stored attempt is ``attempt - 1`` (absent
    counts as 0) and the receipt is absent, failed, or running with an expired lease; it writes
    ``running`` with a lease measured on the store's clock. ``complete`` and ``fail`` land only while
    the receipt is ``running`` at ``attempt``. Put the
    fence in the same transaction as the side effect where the store allows it: fencing only the
    completion leaves a window where two attempts both believe they own the call.
    """

    async def read(self, key: ToolCallReceiptKey) -> ReceiptState | None: ...

    async def claim(self, key: ToolCallReceiptKey, attempt: int, lease_ms: float) -> bool: ...

    async def complete(self, key: ToolCallReceiptKey, attempt: int, result: Any) -> bool: ...

    async def fail(self, key: ToolCallReceiptKey, attempt: int, error: str | None) -> bool: ...

    async def delete_run(self, tenant_id: str, run_id: str) -> int:
        """Forget every receipt of run ``run_id`` of ``tenant_id`` (whatever their state), when
        the run's owner deletes it; answers how many there were. Other runs' receipts stay."""
        ...


def _check(attempt: object, lease_ms: object) -> None:
    # NaN compares False with everything: a NaN lease would never expire, so it is refused.
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise UsageError(f"attempt must be an int >= 1, got {attempt!r}")
    if isinstance(lease_ms, bool) or not isinstance(lease_ms, (int, float)) or not (
            0 < lease_ms < float("inf")):
        raise UsageError(f"lease_ms must be a finite number > 0, got {lease_ms!r}")


class MemoryToolCallReceiptStore:
    """A :class:`ToolCallReceiptStore` in this process's memory, the reference. ``now`` is the
    *store's* clock (leases are measured on it).

    Beyond the protocol it records a fresh call completed in one step (:meth:`complete_once`),
    keeps a fenced per-receipt trail for resumable effects (:meth:`record_step` / :meth:`steps`)
    and counts rejected writes in ``fenced_writes``.
    """

    def __init__(self, *, now: Clock = monotonic_ms) -> None:
        self.now = now
        self.rows: dict[ToolCallReceiptKey, ReceiptState] = {}
        self.trails: dict[ToolCallReceiptKey, dict[str, Any]] = {}
        self.fenced_writes = 0

    async def read(self, key: ToolCallReceiptKey) -> ReceiptState | None:
        return self.rows.get(key)

    async def claim(self, key: ToolCallReceiptKey, attempt: int, lease_ms: float) -> bool:
        _check(attempt, lease_ms)
        row = self.rows.get(key)
        current = 0 if row is None else row.attempt
        claimable = row is None or isinstance(row, ReceiptFailed) or (
            isinstance(row, ReceiptRunning) and self.now() >= row.lease_expires_at_ms
        )
        if not claimable or current != attempt - 1:
            self.fenced_writes += 1
            return False
        self.rows[key] = ReceiptRunning(attempt=attempt, lease_expires_at_ms=self.now() + lease_ms)
        return True

    async def renew(self, key: ToolCallReceiptKey, attempt: int, lease_ms: float) -> bool:
        """Extend a lease the caller still owns (not part of the protocol)."""
        _check(attempt, lease_ms)
        if not self._owns(key, attempt):
            return False
        self.rows[key] = ReceiptRunning(attempt=attempt, lease_expires_at_ms=self.now() + lease_ms)
        return True

    async def complete(self, key: ToolCallReceiptKey, attempt: int, result: Any) -> bool:
        if not self._owns(key, attempt):
            return False
        self.rows[key] = ReceiptCompleted(attempt=attempt, result=result)
        return True

    async def complete_once(self, key: ToolCallReceiptKey, result: Any,
                            effect: Callable[[], None] | None = None) -> ReceiptState | None:
        """Record a call no attempt has touched yet as completed by attempt 1 with ``result``,
        together with ``effect``, in one atomic step (not part of the protocol: an optional
        capability of stores whose effects live in their own database).

        Absent receipt: ``effect`` is called (synchronously, before the row is written, as
        :meth:`record_step` explains), the receipt becomes ``ReceiptCompleted(attempt=1,
        result=result)``, and the answer is ``None``. An exception from ``effect`` propagates and
        nothing is written. Existing receipt (any status): nothing is written, ``effect`` is not
        called, and the answer is the receipt, as :meth:`read` returns it — decide what to do
        with :func:`bindloop.run.decide_tool_call_receipt` (replay, wait, or :meth:`claim` the
        next attempt). Such an answer is not a fenced write (``fenced_writes`` is unchanged)."""
        row = self.rows.get(key)
        if row is not None:
            return row
        if effect is not None:
            effect()
        self.rows[key] = ReceiptCompleted(attempt=1, result=result)
        return None

    async def fail(self, key: ToolCallReceiptKey, attempt: int, error: str | None) -> bool:
        if not self._owns(key, attempt):
            return False
        self.rows[key] = ReceiptFailed(attempt=attempt, error=error)
        return True

    async def delete_run(self, tenant_id: str, run_id: str) -> int:
        gone = [k for k in self.rows if (k.tenant_id, k.run_id) == (tenant_id, run_id)]
        for key in gone:
            del self.rows[key]
            self.trails.pop(key, None)
        return len(gone)

    def record_step(self, key: ToolCallReceiptKey, attempt: int, step: str, value: Any = None) -> bool:
        """Record one sub-operation of a resumable effect, fenced like every write. Synchronous on
        purpose: a simulation applies the sub-operation and this record as one atomic step, the way
        a store that allows it would in one transaction."""
        if not self._owns(key, attempt):
            return False
        self.trails.setdefault(key, {})[step] = value
        return True

    def steps(self, key: ToolCallReceiptKey) -> dict[str, Any]:
        """The sub-operations recorded so far for ``key`` (a copy)."""
        return dict(self.trails.get(key, {}))

    def _owns(self, key: ToolCallReceiptKey, attempt: int) -> bool:
        row = self.rows.get(key)
        if isinstance(row, ReceiptRunning) and row.attempt == attempt:
            return True
        self.fenced_writes += 1
        return False
