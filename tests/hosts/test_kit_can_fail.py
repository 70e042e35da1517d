"""The conformance kit must be able to fail: stores with one defect each are caught."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from bindloop.agent import InMemoryLimitStore
from bindloop.session import LoopCheckpoint, serialize_loop_checkpoint
from bindloop.testing import InMemoryCheckpointStore, InMemoryReceiptStore
from bindloop.testing.store_kit import (
    CheckpointStoreSuite,
    LimitStoreSuite,
    ReceiptStoreSuite,
    StoreHandles,
)

Failed = (AssertionError, pytest.fail.Exception)


class Unfenced(InMemoryCheckpointStore):
    async def save(self, checkpoint: LoopCheckpoint) -> None:  # last writer wins
        self.rows[checkpoint.execution_id] = (checkpoint.revision,
                                              serialize_loop_checkpoint(checkpoint))


class Sticky(InMemoryReceiptStore):
    async def claim(self, key: Any, attempt: int, lease_ms: float) -> bool:
        if key in self.rows and attempt > 1:  # never reclaims an expired lease
            return False
        return await super().claim(key, attempt, lease_ms)


class Racy(InMemoryLimitStore):
    async def admit(self, key: str, window_ms: float, limit: int, amount: int,
                    now: float) -> float:
        asked = await super().admit(key, window_ms, limit, 0, now)  # read ...
        await anyio.sleep(0)                                          # ... yield ...
        if asked == 0 and amount:
            await self.charge(key, window_ms, amount, now)             # ... then write
        return asked


def _run(test: Any, factory: Any) -> None:
    async def main() -> None:
        handles = StoreHandles(factory)
        try:
            await test(handles)
        finally:
            await handles.close()

    anyio.run(main)


@pytest.mark.parametrize("test, factory", [
    (CheckpointStoreSuite().test_checkpoint_next_revision_lands_and_others_conflict,
     lambda **kw: Unfenced(**kw)),
    (CheckpointStoreSuite().test_checkpoint_size_bound_refuses_before_writing,
     lambda **kw: InMemoryCheckpointStore()),  # ignores the bound it is given
    (ReceiptStoreSuite().test_receipt_fence_and_leases, lambda **kw: Sticky(**kw)),
    (LimitStoreSuite().test_limit_admits_are_atomic_under_concurrent_callers,
     lambda store=Racy(): store),
    (LimitStoreSuite().test_limit_slot_of_a_killed_holder_is_reclaimed_after_the_lease,
     lambda base=InMemoryLimitStore(), now=None, slot_lease_ms=None: base.handle(now=now)),
], ids=["unfenced-checkpoints", "unbounded-checkpoints", "sticky-leases", "racy-limits",
        "unleased-slots"])  # unleased: handles whose slots never lapse
def test_a_defective_store_fails_the_kit(test: Any, factory: Any) -> None:
    with pytest.raises(Failed):
        _run(test, factory)


def test_the_reference_passes_the_same_checks() -> None:
    _run(CheckpointStoreSuite().test_checkpoint_next_revision_lands_and_others_conflict,
         lambda **kw: InMemoryCheckpointStore(**kw))
