"""A conformance suite for stores: checkpoints, idempotency receipts, rate limits and MCP tokens.

A store author subclasses the suites for the ports the store serves and provides one fixture,
``store_factory``: a callable that opens a new *handle* on the backend under test — a new
connection to the same database, file or namespace, so two handles see each other's writes —
taking only the keyword options the suite passes:

- ``now``: the store's clock for receipt leases (milliseconds), passed by the lease tests;
- ``max_checkpoint_bytes``: the size bound, passed by the size tests;
- ``slot_lease_ms``: how long a concurrency slot stands without a renewal (with ``now``), passed by
  the slot-lease test.

It may return the store or an awaitable of it. The fixture is function-scoped: give each test a
fresh namespace (a new file, schema or key prefix). Handles are closed after the test through
``aclose()`` or ``close()`` where they have one. Every test depends on the ``anyio_backend``
fixture (asyncio here; override it to add trio), which is how anyio's pytest plugin runs them::

    import functools, pytest
    from bindloop.hosts.stores.processes import run_in_processes
    from bindloop.testing.store_kit import CheckpointStoreSuite, LimitStoreSuite, ReceiptStoreSuite

    class TestMyStore(CheckpointStoreSuite, ReceiptStoreSuite, LimitStoreSuite):
        @pytest.fixture
        def store_factory(self, tmp_path):
            return functools.partial(MyStore, tmp_path / "db")

        @pytest.fixture
        def process_runner(self):
            return run_in_processes

The multi-process tests (several processes write at once; exactly one wins) need a
``process_runner``: ``runner(factory, job, count)`` runs the kit's ``job(store, index)`` in
``count`` fresh processes, each on its own handle from ``factory()``, and returns the results in
index order — the factory must then be picklable. The kit runs no processes itself (it lives inside
the package's no-I/O fence); :func:`bindloop.hosts.stores.processes.run_in_processes` is the
ready-made runner. Without one, those tests are skipped, as for a store that cannot be shared
between processes (the in-memory references).

:class:`TokenStoreSuite` holds an MCP OAuth token store (:class:`bindloop.stores.TokenStore`) to
the same standard; its factory takes no options.

The cases themselves are plain async functions (:data:`CHECKPOINT_CASES`, :data:`RECEIPT_CASES`,
:data:`LIMIT_CASES`, :data:`TOKEN_CASES`, each taking a :class:`StoreHandles`) that need no pytest:
:func:`run_store_cases` runs them where pytest cannot, such as inside workerd against Durable
Object stores, and reports a :class:`CaseResult` per case.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from .._public import publish as _publish
from . import _store_cases as cases, _token_cases as tokens
from ._store_cases import (
    limit_slot_of_a_killed_holder_is_reclaimed_after_the_lease as limit_slot_of_a_killed_holder_is_reclaimed_after_the_lease,
    CHECKPOINT_CASES as CHECKPOINT_CASES,
    LIMIT_CASES as LIMIT_CASES,
    RECEIPT_CASES as RECEIPT_CASES,
    Case as Case,
    CaseResult as CaseResult,
    CaseSkipped,
    ManualClock as ManualClock,
    StoreHandles as StoreHandles,
    checkpoint_at as checkpoint_at,
    race_admit as race_admit,
    race_claim as race_claim,
    race_complete_once as race_complete_once,
    race_enter as race_enter,
    race_first_checkpoint as race_first_checkpoint,
    race_next_checkpoint as race_next_checkpoint,
    raises as raises,
    run_store_cases as run_store_cases,
)
from ._token_cases import TOKEN_CASES as TOKEN_CASES

__all__ = (
    "CHECKPOINT_CASES",
    "LIMIT_CASES",
    "RECEIPT_CASES",
    "Case",
    "CaseResult",
    "CheckpointStoreSuite",
    "LimitStoreSuite",
    "ManualClock",
    "ReceiptStoreSuite",
    "StoreHandles",
    "TOKEN_CASES",
    "TokenStoreSuite",
    "checkpoint_at",
    "limit_slot_of_a_killed_holder_is_reclaimed_after_the_lease",
    "race_admit",
    "race_claim",
    "race_complete_once",
    "race_enter",
    "race_first_checkpoint",
    "race_next_checkpoint",
    "raises",
    "run_store_cases",
)


async def _run(case: Case, stores: StoreHandles) -> None:
    try:
        await case(stores)
    except CaseSkipped as exc:
        pytest.skip(str(exc))


class _Suite:
    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"

    @pytest.fixture
    def process_runner(self) -> Callable[..., Any] | None:
        return None

    @pytest.fixture
    async def stores(self, store_factory: Callable[..., Any],
                     process_runner: Callable[..., Any] | None,
                     anyio_backend: str) -> AsyncIterator[StoreHandles]:
        handles = StoreHandles(store_factory, process_runner)
        try:
            yield handles
        finally:
            await handles.close()


class CheckpointStoreSuite(_Suite):
    """:class:`~bindloop.stores.CheckpointStore`: load, the revision fence, size bounds, delete."""

    async def test_checkpoint_missing_loads_as_none(self, stores: StoreHandles) -> None:
        await _run(cases.checkpoint_missing_loads_as_none, stores)

    async def test_checkpoint_round_trips_through_another_handle(self, stores: StoreHandles) -> None:
        await _run(cases.checkpoint_round_trips_through_another_handle, stores)

    async def test_checkpoint_next_revision_lands_and_others_conflict(self, stores: StoreHandles) -> None:
        await _run(cases.checkpoint_next_revision_lands_and_others_conflict, stores)

    async def test_checkpoint_first_write_lands_once(self, stores: StoreHandles) -> None:
        await _run(cases.checkpoint_first_write_lands_once, stores)

    async def test_checkpoint_executions_are_independent(self, stores: StoreHandles) -> None:
        await _run(cases.checkpoint_executions_are_independent, stores)

    async def test_checkpoint_delete_then_any_revision_lands(self, stores: StoreHandles) -> None:
        await _run(cases.checkpoint_delete_then_any_revision_lands, stores)

    async def test_checkpoint_size_bound_refuses_before_writing(self, stores: StoreHandles) -> None:
        await _run(cases.checkpoint_size_bound_refuses_before_writing, stores)

    async def test_checkpoint_commit_is_a_commit_fn(self, stores: StoreHandles) -> None:
        await _run(cases.checkpoint_commit_is_a_commit_fn, stores)

    async def test_checkpoint_concurrent_writers_one_wins(self, stores: StoreHandles) -> None:
        await _run(cases.checkpoint_concurrent_writers_one_wins, stores)

    async def test_checkpoint_writers_in_processes_one_wins(self, stores: StoreHandles) -> None:
        await _run(cases.checkpoint_writers_in_processes_one_wins, stores)


class ReceiptStoreSuite(_Suite):
    """:class:`~bindloop.stores.ToolCallReceiptStore`: the attempt fence and leases on the store's
    clock, op for op the same answers as :class:`~bindloop.stores.MemoryToolCallReceiptStore`.

    A store that has the optional ``complete_once(key, result)`` (a fresh call recorded completed
    by attempt 1 in one write) is checked on it too — drawn among the ops compared with the
    reference, and raced in one process and across processes; the ``complete_once`` cases are
    skipped, saying so, for a store without it."""

    async def test_receipt_fence_and_leases(self, stores: StoreHandles) -> None:
        await _run(cases.receipt_fence_and_leases, stores)

    async def test_receipt_refuses_bad_attempts_and_leases(self, stores: StoreHandles) -> None:
        await _run(cases.receipt_refuses_bad_attempts_and_leases, stores)

    async def test_receipt_same_answers_as_the_reference(self, stores: StoreHandles) -> None:
        await _run(cases.receipt_same_answers_as_the_reference, stores)

    async def test_receipt_results_round_trip(self, stores: StoreHandles) -> None:
        await _run(cases.receipt_results_round_trip, stores)

    async def test_receipt_keys_do_not_collide(self, stores: StoreHandles) -> None:
        await _run(cases.receipt_keys_do_not_collide, stores)

    async def test_receipt_delete_run_forgets_that_run_only(self, stores: StoreHandles) -> None:
        await _run(cases.receipt_delete_run_forgets_that_run_only, stores)

    async def test_receipt_concurrent_claims_one_wins(self, stores: StoreHandles) -> None:
        await _run(cases.receipt_concurrent_claims_one_wins, stores)

    async def test_receipt_claims_in_processes_one_wins(self, stores: StoreHandles) -> None:
        await _run(cases.receipt_claims_in_processes_one_wins, stores)

    async def test_receipt_complete_once_records_a_fresh_call(self, stores: StoreHandles) -> None:
        await _run(cases.receipt_complete_once_records_a_fresh_call, stores)

    async def test_receipt_concurrent_complete_once_one_wins(self, stores: StoreHandles) -> None:
        await _run(cases.receipt_concurrent_complete_once_one_wins, stores)

    async def test_receipt_complete_once_in_processes_one_wins(self, stores: StoreHandles) -> None:
        await _run(cases.receipt_complete_once_in_processes_one_wins, stores)


class LimitStoreSuite(_Suite):
    """:class:`~bindloop.stores.LimitStore`: sliding windows and concurrency slots, answer for
    answer the same as :class:`~bindloop.stores.MemoryLimitStore`, atomic under concurrent
    callers (in one process and across processes)."""

    async def test_limit_windows_match_the_reference(self, stores: StoreHandles) -> None:
        await _run(cases.limit_windows_match_the_reference, stores)

    async def test_limit_slots(self, stores: StoreHandles) -> None:
        await _run(cases.limit_slots, stores)

    async def test_limit_slot_of_a_killed_holder_is_reclaimed_after_the_lease(
            self, stores: StoreHandles) -> None:
        await _run(cases.limit_slot_of_a_killed_holder_is_reclaimed_after_the_lease, stores)

    async def test_limit_admits_are_atomic_under_concurrent_callers(self, stores: StoreHandles) -> None:
        await _run(cases.limit_admits_are_atomic_under_concurrent_callers, stores)

    async def test_limit_admits_are_atomic_across_processes(self, stores: StoreHandles) -> None:
        await _run(cases.limit_admits_are_atomic_across_processes, stores)

    async def test_with_limit_over_the_store_caps_calls_in_flight(self, stores: StoreHandles) -> None:
        await _run(cases.with_limit_over_the_store_caps_calls_in_flight, stores)


class TokenStoreSuite(_Suite):
    """:class:`~bindloop.stores.TokenStore`: MCP OAuth tokens and the client registration, shared by
    every handle on the store, the latest save winning, never shown in a ``repr``, with an atomic
    compare-and-swap save (:class:`~bindloop.stores.SwapTokenStore`) that keeps two processes
    refreshing at once on one rotation."""

    async def test_token_store_starts_empty(self, stores: StoreHandles) -> None:
        await _run(tokens.token_store_starts_empty, stores)

    async def test_token_store_round_trips_through_another_handle(self, stores: StoreHandles) -> None:
        await _run(tokens.token_store_round_trips_through_another_handle, stores)

    async def test_token_store_keeps_client_and_tokens_apart(self, stores: StoreHandles) -> None:
        await _run(tokens.token_store_keeps_client_and_tokens_apart, stores)

    async def test_token_store_never_shows_a_secret(self, stores: StoreHandles) -> None:
        await _run(tokens.token_store_never_shows_a_secret, stores)

    async def test_token_store_concurrent_saves_store_one_whole(self, stores: StoreHandles) -> None:
        await _run(tokens.token_store_concurrent_saves_store_one_whole, stores)

    async def test_mcp_oauth_uses_the_stored_tokens(self, stores: StoreHandles) -> None:
        await _run(tokens.mcp_oauth_uses_the_stored_tokens, stores)

    async def test_token_store_swap_lands_only_on_the_expected_tokens(
            self, stores: StoreHandles) -> None:
        await _run(tokens.token_store_swap_lands_only_on_the_expected_tokens, stores)

    async def test_token_store_swap_race_has_one_winner(self, stores: StoreHandles) -> None:
        await _run(tokens.token_store_swap_race_has_one_winner, stores)

    async def test_mcp_oauth_refreshes_race_to_one_rotation(self, stores: StoreHandles) -> None:
        await _run(tokens.mcp_oauth_refreshes_race_to_one_rotation, stores)

_publish(__name__, globals(), __all__)
