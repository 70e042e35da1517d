"""bindloop's own store failing inside a tool (a receipt's read, claim or completion) is fatal by
default: the run stops, resumes from its last committed checkpoint, and the receipts make each
effect land exactly once; the model never reads a store error. A host's ``is_fatal_tool_error``
still replaces the default."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop import ModelTurnResult, ToolCall, ToolMessage, ToolResult, UserMessage
from bindloop.contracts import content_text
from bindloop.errors import (
    InfrastructureError,
    ProviderError,
    ToolFailure,
    is_infrastructure_error,
)
from bindloop.lowlevel import is_fatal_raise
from bindloop.run import (
    ReceiptAmbiguous,
    ReceiptExecute,
    ReceiptReplay,
    ReceiptWait,
    ToolCallReceiptKey,
    decide_tool_call_receipt,
    tool_call_args_hash,
)
from bindloop.checkpoints import (
    LoopCheckpoint,
    RestoredLoop,
    create_loop_checkpoint,
    parse_loop_checkpoint,
    run_from_checkpoint,
    serialize_loop_checkpoint,
)
from bindloop.testing import function_model
from bindloop.stores import MemoryToolCallReceiptStore, StoreError
from bindloop.loop import ToolRunner

STEPS = 3
LEASE_MS = 1_000.0
OPERATIONS = ("read", "claim", "complete")


class FaultyReceipts(MemoryToolCallReceiptStore):
    """The reference store on a manual clock, failing chosen operations with a ``StoreError``:
    ``before`` the write (nothing landed) or ``after`` it (it landed; the answer was lost).
    ``complete`` applies the effect in the receipt's own transaction (``complete_with``)."""

    def __init__(self, faults: dict[int, tuple[str, str]]) -> None:
        self.clock = [0.0]
        super().__init__(now=lambda: self.clock[0])
        self.faults = faults  # operation number -> (operation, when)
        self.operations = 0
        self.ledger: list[tuple[int, int]] = []

    def _fault(self, operation: str) -> str | None:
        self.operations += 1
        fault = self.faults.get(self.operations)
        return fault[1] if fault is not None and fault[0] == operation else None

    async def read(self, key: ToolCallReceiptKey) -> Any:
        if self._fault("read") is not None:
            raise StoreError("memory", "read", "connection reset")
        return await super().read(key)

    async def claim(self, key: ToolCallReceiptKey, attempt: int, lease_ms: float) -> bool:
        when = self._fault("claim")
        if when == "before":
            raise StoreError("memory", "claim", "connection reset")
        landed = await super().claim(key, attempt, lease_ms)
        if when == "after":
            raise StoreError("memory", "claim", "connection lost after the statement was sent")
        return landed

    async def complete_charge(self, key: ToolCallReceiptKey, attempt: int, result: str,
                              step: int, session: int) -> bool:
        when = self._fault("complete")
        if when == "before":
            raise StoreError("memory", "complete", "connection reset")
        landed = await super().complete(key, attempt, result)
        if landed:
            self.ledger.append((session, step))  # the same transaction as the receipt
        if when == "after":
            raise StoreError("memory", "complete", "connection lost after the commit was sent")
        return landed


def charging_tool(store: FaultyReceipts) -> Any:
    async def charge(call: ToolCall) -> ToolResult:
        args = json.loads(call.arguments)
        key = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name=call.name,
                                 args_hash=tool_call_args_hash(args))
        while True:
            decision = decide_tool_call_receipt(state=await store.read(key), effect="resumable",
                                                now=store.now)
            if isinstance(decision, ReceiptReplay):
                return ToolResult(content=str(decision.result))
            if isinstance(decision, ReceiptWait):  # a lost claim's lease: wait it out
                store.clock[0] = decision.lease_expires_at_ms
                continue
            assert not isinstance(decision, ReceiptAmbiguous)
            assert isinstance(decision, ReceiptExecute)
            if not await store.claim(key, decision.attempt, LEASE_MS):
                continue
            result = f"charged step {args['step']}"
            if await store.complete_charge(key, decision.attempt, result, args["step"], 0):
                return ToolResult(content=result)

    return charge


async def respond(messages: Sequence[Any], request: Any) -> ModelTurnResult:
    """Deterministic in the transcript, so a resumed run is asked the same turn again."""
    done = [m for m in messages if isinstance(m, ToolMessage)]
    if len(done) < STEPS:
        step = len(done)
        return ModelTurnResult(text=f"step {step}", tool_calls=(
            ToolCall(id=f"c{step}", name="charge", arguments=json.dumps({"step": step})),))
    return ModelTurnResult(text="done: " + "; ".join(content_text(m.content) for m in done))


async def run_until_finished(store: FaultyReceipts, **ports: Any) -> tuple[LoopCheckpoint, int]:
    """Run the execution, resuming from the last committed bytes after every raise; returns the
    final checkpoint and how many store errors stopped a run."""
    saved = [serialize_loop_checkpoint(create_loop_checkpoint(
        execution_id="e", max_iterations=STEPS + 2, messages=[UserMessage(content="charge")]))]

    def commit(cp: LoopCheckpoint) -> str:
        saved.append(serialize_loop_checkpoint(cp))
        return "continue"

    stops = 0
    charge = charging_tool(store)
    while True:
        cp = parse_loop_checkpoint(saved[-1])
        if cp.status == "finished":
            return cp, stops
        try:
            await run_from_checkpoint(
                checkpoint=cp, commit=commit,
                restore=lambda c: RestoredLoop(
                    model=function_model(respond),
                    capture_bindings=lambda: c.bindings,
                    runner=ToolRunner(run_tool_call=charge, **ports),
                ))
        except StoreError:
            stops += 1


faults = st.dictionaries(st.integers(1, 24), st.tuples(st.sampled_from(OPERATIONS),
                                                       st.sampled_from(("before", "after"))),
                         max_size=4)


@settings(max_examples=80, deadline=None)
@given(faults=faults)
def test_a_store_error_in_a_tool_stops_the_run_and_the_resumed_run_lands_each_effect_once(
        faults: dict[int, tuple[str, str]]) -> None:
    async def main() -> None:
        reference, _ = await run_until_finished(FaultyReceipts({}))
        store = FaultyReceipts(faults)
        final, stops = await run_until_finished(store)  # default settings: nothing wired
        assert sorted(store.ledger) == [(0, step) for step in range(STEPS)]  # 0 lost, 0 doubled
        assert final.messages == reference.messages  # the model never read a store error
        assert stops <= len(faults)

    anyio.run(main)


def test_a_claim_that_fails_once_is_run_once_after_the_resume() -> None:
    async def main() -> None:
        store = FaultyReceipts({2: ("claim", "before")})  # read, then the first claim fails
        final, stops = await run_until_finished(store)
        assert stops == 1 and store.ledger == [(0, 0), (0, 1), (0, 2)]
        texts = [content_text(m.content) for m in final.messages if isinstance(m, ToolMessage)]
        assert texts == ["charged step 0", "charged step 1", "charged step 2"]

    anyio.run(main)


def test_a_host_predicate_replaces_the_default() -> None:
    """``is_fatal_tool_error`` wired: its answer alone decides (here: never fatal), so the store
    error is a tool error the model reads, and the run finishes without stopping."""
    async def main() -> None:
        store = FaultyReceipts({2: ("claim", "before")})
        final, stops = await run_until_finished(store, is_fatal_tool_error=lambda e: False)
        assert stops == 0
        first = next(m for m in final.messages if isinstance(m, ToolMessage))
        assert "StoreError: the tool failed" in content_text(first.content)
        assert store.ledger == [(0, 1), (0, 2)]  # step 0's effect is lost: the host chose so

    anyio.run(main)


# -- the predicate ---------------------------------------------------------------------------------

def _caused(depth: int, leaf: BaseException) -> BaseException:
    exc = leaf
    for k in range(depth):
        outer = RuntimeError(f"wrapper {k}")
        outer.__cause__ = exc
        exc = outer
    return exc


@given(st.integers(0, 12), st.booleans())
def test_an_infrastructure_error_is_found_through_causes_and_groups(depth: int,
                                                                    grouped: bool) -> None:
    leaf: BaseException = StoreError("postgres", "claim", "reset")
    if grouped:
        leaf = ExceptionGroup("tool task group", [ValueError("other"), leaf])
    exc = _caused(depth, leaf)
    assert is_infrastructure_error(exc) and is_fatal_raise(exc)
    assert not is_infrastructure_error(_caused(depth, ProviderError("503")))
    assert not is_fatal_raise(_caused(depth, ProviderError("503")))


def test_a_tool_failure_raised_from_a_store_error_is_the_tools_word_to_the_model() -> None:
    failure = ToolFailure("the ledger is busy, try again later")
    failure.__cause__ = StoreError("postgres", "claim", "reset")
    assert not is_infrastructure_error(failure) and not is_fatal_raise(failure)


def test_the_implicit_context_is_not_a_cause() -> None:
    try:
        try:
            raise StoreError("redis", "read", "reset")
        except StoreError:
            raise ValueError("handled, then something else")  # noqa: B904
    except ValueError as exc:
        assert exc.__context__ is not None and not is_infrastructure_error(exc)


def test_a_host_store_error_of_its_own_is_fatal_too() -> None:
    class LedgerDown(InfrastructureError):
        pass

    assert issubclass(StoreError, InfrastructureError)
    assert is_fatal_raise(LedgerDown("ledger"))
    assert not is_fatal_raise(LedgerDown("ledger"), lambda e: False)  # the host's word wins


def test_a_cause_cycle_terminates() -> None:
    a, b = RuntimeError("a"), RuntimeError("b")
    a.__cause__, b.__cause__ = b, a
    assert not is_infrastructure_error(a)


@pytest.mark.parametrize("answer", [1, None, "yes"])
def test_a_predicate_answering_a_non_bool_is_a_contract_break(answer: object) -> None:
    from bindloop.errors import PortContractError

    with pytest.raises(PortContractError, match="is_fatal_tool_error"):
        is_fatal_raise(StoreError("m", "claim", "x"), lambda e: answer)  # type: ignore[arg-type,return-value]


def test_cancellation_stays_fatal_whatever_the_host_predicate_says() -> None:
    from bindloop.errors import RunCancelledError

    assert is_fatal_raise(RunCancelledError("stop"))
    assert is_fatal_raise(RunCancelledError("stop"), lambda e: False)


def test_a_cancelled_tool_stops_the_run_and_the_resume_runs_the_effect_once() -> None:
    """A tool cancelled mid-call (``RunCancelledError``) ends the run like a store error: the
    resumed run asks again and the receipt runs the effect once."""
    from bindloop.errors import RunCancelledError

    async def main() -> None:
        store = FaultyReceipts({})
        inner = charging_tool(store)
        cancelled: list[str] = []

        async def cancel_once(call: ToolCall) -> ToolResult:
            if call.id == "c1" and not cancelled:
                cancelled.append(call.id)
                raise RunCancelledError("the host cancelled the call")
            result: ToolResult = await inner(call)
            return result

        saved = [serialize_loop_checkpoint(create_loop_checkpoint(
            execution_id="e", max_iterations=STEPS + 2, messages=[UserMessage(content="go")]))]

        def commit(cp: LoopCheckpoint) -> str:
            saved.append(serialize_loop_checkpoint(cp))
            return "continue"

        stops = 0
        while (cp := parse_loop_checkpoint(saved[-1])).status != "finished":
            try:
                await run_from_checkpoint(
                    checkpoint=cp, commit=commit,
                    restore=lambda c: RestoredLoop(
                        model=function_model(respond),
                        capture_bindings=lambda: c.bindings,
                        runner=ToolRunner(run_tool_call=cancel_once),
                    ))
            except RunCancelledError:
                stops += 1
        assert stops == 1 and store.ledger == [(0, 0), (0, 1), (0, 2)]

    anyio.run(main)
