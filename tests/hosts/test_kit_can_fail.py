"""The conformance kit must be able to fail: stores with one defect each are caught."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from bindloop.stores import MemoryLimitStore
from bindloop.checkpoints import LoopCheckpoint, serialize_loop_checkpoint
from bindloop.run import ReceiptCompleted
from bindloop.stores import MemoryCheckpointStore, MemoryToolCallReceiptStore
from bindloop.testing.store_kit import (
    CheckpointStoreSuite,
    LimitStoreSuite,
    ReceiptStoreSuite,
    StoreHandles,
    TokenStoreSuite,
)

Failed = (AssertionError, pytest.fail.Exception)


class Unfenced(MemoryCheckpointStore):
    async def save(self, checkpoint: LoopCheckpoint) -> None:  # last writer wins
        self.rows[checkpoint.execution_id] = (checkpoint.revision,
                                              serialize_loop_checkpoint(checkpoint))


class Sticky(MemoryToolCallReceiptStore):
    async def claim(self, key: Any, attempt: int, lease_ms: float) -> bool:
        if key in self.rows and attempt > 1:  # never reclaims an expired lease
            return False
        return await super().claim(key, attempt, lease_ms)


class Prefixed(MemoryToolCallReceiptStore):
    async def delete_run(self, tenant_id: str, run_id: str) -> int:  # a prefix, not the run
        gone = [k for k in self.rows if k.tenant_id == tenant_id and k.run_id.startswith(run_id)]
        for key in gone:
            del self.rows[key]
        return len(gone)


class Overwriting(MemoryToolCallReceiptStore):
    async def complete_once(self, key: Any, result: Any, effect: Any = None) -> Any:
        found = self.rows.get(key)
        if isinstance(found, ReceiptCompleted):
            return found
        self.rows[key] = ReceiptCompleted(attempt=1, result=result)  # over a running/failed one
        return None


class UnatomicOnce(MemoryToolCallReceiptStore):
    async def complete_once(self, key: Any, result: Any, effect: Any = None) -> Any:
        found = self.rows.get(key)                                     # read ...
        await anyio.sleep(0)                                           # ... yield ...
        if found is not None:
            return found
        self.rows[key] = ReceiptCompleted(attempt=1, result=result)  # ... then write
        return None


class Racy(MemoryLimitStore):
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
     lambda **kw: MemoryCheckpointStore()),  # ignores the bound it is given
    (ReceiptStoreSuite().test_receipt_fence_and_leases, lambda **kw: Sticky(**kw)),
    (ReceiptStoreSuite().test_receipt_delete_run_forgets_that_run_only,
     lambda **kw: Prefixed(**kw)),
    (ReceiptStoreSuite().test_receipt_same_answers_as_the_reference,
     lambda **kw: Overwriting(**kw)),
    (ReceiptStoreSuite().test_receipt_complete_once_records_a_fresh_call,
     lambda **kw: Overwriting(**kw)),
    (ReceiptStoreSuite().test_receipt_concurrent_complete_once_one_wins,
     lambda store=UnatomicOnce(), **kw: store),
    (LimitStoreSuite().test_limit_admits_are_atomic_under_concurrent_callers,
     lambda store=Racy(): store),
    (LimitStoreSuite().test_limit_slot_of_a_killed_holder_is_reclaimed_after_the_lease,
     lambda base=MemoryLimitStore(), now=None, slot_lease_ms=None: base.handle(now=now)),
], ids=["unfenced-checkpoints", "unbounded-checkpoints", "sticky-leases", "prefix-deletes",
        "overwriting-once-vs-reference", "overwriting-once", "unatomic-once", "racy-limits",
        "unleased-slots"])  # unleased: handles whose slots never lapse
def test_a_defective_store_fails_the_kit(test: Any, factory: Any) -> None:
    with pytest.raises(Failed):
        _run(test, factory)


def test_the_reference_passes_the_same_checks() -> None:
    _run(CheckpointStoreSuite().test_checkpoint_next_revision_lands_and_others_conflict,
         lambda **kw: MemoryCheckpointStore(**kw))


def test_run_store_cases_reports_each_case_without_pytest() -> None:
    """The runner workerd uses: every case's outcome, a defect named in its failure's detail."""
    from bindloop.testing.store_kit import CHECKPOINT_CASES, run_store_cases

    from .factories import MemoryBackend

    async def main(factory_for: Any) -> dict[str, Any]:
        results = await run_store_cases(CHECKPOINT_CASES, factory_for)
        return {r.name: r for r in results}

    good = anyio.run(main, lambda name: MemoryBackend())
    assert list(good) == list(CHECKPOINT_CASES)
    assert good["checkpoint_writers_in_processes_one_wins"].outcome == "skipped"
    assert {r.outcome for n, r in good.items()
            if n != "checkpoint_writers_in_processes_one_wins"} == {"passed"}
    bad = anyio.run(main, lambda name: lambda **kw: Unfenced(**kw))
    failed = bad["checkpoint_next_revision_lands_and_others_conflict"]
    assert failed.outcome == "failed" and "CheckpointConflictError" in failed.detail


def test_raises_refuses_a_missing_or_different_error() -> None:
    from bindloop.testing.store_kit import raises

    with pytest.raises(AssertionError, match="did not raise ValueError"):
        with raises(ValueError):
            pass
    with pytest.raises(AssertionError, match="does not match"):
        with raises(ValueError, match="^b"):
            raise ValueError("a")
    with raises(ValueError, match="^a") as info:
        raise ValueError("abc")
    assert str(info.value) == "abc"


class Chatty:
    """A token store that shows its tokens in its repr."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client: Any = None

    def __repr__(self) -> str:
        return f"Chatty({self.tokens!r})"

    async def load_tokens(self) -> Any:
        return self.tokens

    async def save_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def load_client(self) -> Any:
        return self.client

    async def save_client(self, client: Any) -> None:
        self.client = client


class OneSlot(Chatty):
    """Forgetting the tokens forgets the registration too."""

    def __repr__(self) -> str:
        return "OneSlot()"

    async def save_tokens(self, tokens: Any) -> None:
        self.tokens = tokens
        if tokens is None:
            self.client = None


class UnfencedSwap(OneSlot):
    """A compare-and-swap that reads, yields, then writes: two holders can both land."""

    async def save_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def swap_tokens(self, tokens: Any, *, expected: Any) -> bool:
        seen = self.tokens
        await anyio.sleep(0)
        if seen != expected:
            return False
        self.tokens = tokens
        return True


class CarelessSwap(UnfencedSwap):
    """A compare-and-swap that compares only the access token."""

    async def swap_tokens(self, tokens: Any, *, expected: Any) -> bool:
        if (self.tokens and self.tokens.access_token) != (expected and expected.access_token):
            return False
        self.tokens = tokens
        return True


@pytest.mark.parametrize("test, store", [
    (TokenStoreSuite().test_token_store_never_shows_a_secret, Chatty()),
    (TokenStoreSuite().test_token_store_keeps_client_and_tokens_apart, OneSlot()),
    (TokenStoreSuite().test_token_store_swap_race_has_one_winner, UnfencedSwap()),
    (TokenStoreSuite().test_mcp_oauth_refreshes_race_to_one_rotation, UnfencedSwap()),
    (TokenStoreSuite().test_token_store_swap_lands_only_on_the_expected_tokens, CarelessSwap()),
    (TokenStoreSuite().test_token_store_swap_lands_only_on_the_expected_tokens, OneSlot()),
], ids=["chatty-tokens", "one-slot", "unfenced-swap", "unfenced-swap-oauth", "careless-swap",
        "no-swap"])
def test_a_defective_token_store_fails_the_kit(test: Any, store: Any) -> None:
    with pytest.raises(Failed):
        _run(test, lambda: store)
