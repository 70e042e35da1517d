"""bindloop.hosts.stores.sqlite on a real SQLite file: the receipt fence (same answers as the
reference in-memory store, op for op), leases on the store's clock, effects in the fencing
transaction, the single-writer checkpoint fence, and writers in other processes."""

from __future__ import annotations

import multiprocessing
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindloop.contracts import ModelTurnResult, ToolCall, ToolResult, UserMessage
from bindloop.errors import UsageError
from bindloop.hosts.stores.sqlite import SqliteStore
from bindloop.stores import CheckpointConflictError
from bindloop.run import (
    ReceiptCompleted,
    ReceiptFailed,
    ReceiptRunning,
    ToolCallReceiptKey,
)
from bindloop.stores import MemoryToolCallReceiptStore, ToolCallReceiptStore
from bindloop.checkpoints import (
    CheckpointFormatError,
    RestoredLoop,
    create_loop_checkpoint,
    run_from_checkpoint,
)
from bindloop.testing import (
    final_answer,
    scripted_model,
    stepping_clock,
    tool_call,
    tool_call_turn,
)
from bindloop.loop import ToolRunner

KEY = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="send_email", args_hash="h")


def test_store_is_a_receipt_store_and_honours_the_fence(tmp_path: Path) -> None:
    clock = [0.0]
    store = SqliteStore(tmp_path / "s.db", now=lambda: clock[0])
    _: ToolCallReceiptStore = store

    async def main() -> None:
        assert await store.read(KEY) is None
        assert not await store.claim(KEY, 2, 100)
        assert await store.claim(KEY, 1, 100)
        assert await store.read(KEY) == ReceiptRunning(attempt=1, lease_expires_at_ms=100.0)
        assert not await store.claim(KEY, 2, 100)        # live lease
        clock[0] = 100
        assert await store.claim(KEY, 2, 100)            # expired: reclaimed
        assert not await store.complete(KEY, 1, "late")  # the old attempt is fenced out
        assert await store.renew(KEY, 2, 500) and not await store.renew(KEY, 1, 500)
        assert await store.fail(KEY, 2, "boom")
        assert await store.read(KEY) == ReceiptFailed(attempt=2, error="boom")
        assert await store.claim(KEY, 3, 100)
        assert await store.complete(KEY, 3, {"id": 7})
        assert not await store.claim(KEY, 4, 100)        # completed receipts are never reclaimed
        assert await store.read(KEY) == ReceiptCompleted(attempt=3, result={"id": 7})
        assert store.fenced_writes == 5
        with pytest.raises(UsageError):
            await store.claim(KEY, 0, 100)
        with pytest.raises(UsageError):
            await store.claim(KEY, 1, 0)
        with pytest.raises(UsageError):
            await store.renew(KEY, 3, float("nan"))

    anyio.run(main)
    store.close()
    with SqliteStore(tmp_path / "s.db") as again:  # durable: a new connection reads the same row
        assert again.read_sync(KEY) == ReceiptCompleted(attempt=3, result={"id": 7})
        mode = again.connection.execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"


OPS = st.lists(st.tuples(
    st.sampled_from(["read", "claim", "complete", "fail", "renew", "tick"]),
    st.sampled_from(["a", "b"]), st.integers(1, 4), st.sampled_from([10.0, 50.0, 200.0])),
    max_size=40)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(OPS)
def test_same_answers_as_the_reference_store(tmp_path: Path, ops: list[tuple[str, str, int, float]]
                                             ) -> None:
    clock = [0.0]
    ref = MemoryToolCallReceiptStore(now=lambda: clock[0])
    path = tmp_path / f"diff-{len(list(tmp_path.iterdir()))}.db"
    real = SqliteStore(path, now=lambda: clock[0])

    async def main() -> None:
        for op, name, attempt, ms in ops:
            key = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name=name, args_hash="h")
            if op == "tick":
                clock[0] += ms
                continue
            if op == "read":
                assert await real.read(key) == await ref.read(key)
            elif op == "claim":
                assert await real.claim(key, attempt, ms) == await ref.claim(key, attempt, ms)
            elif op == "complete":
                assert (await real.complete(key, attempt, [name, attempt])
                        == await ref.complete(key, attempt, [name, attempt]))
            elif op == "fail":
                assert await real.fail(key, attempt, name) == await ref.fail(key, attempt, name)
            else:
                assert await real.renew(key, attempt, ms) == await ref.renew(key, attempt, ms)
        assert real.fenced_writes == ref.fenced_writes

    try:
        anyio.run(main)
    finally:
        real.close()


def test_effect_lands_in_the_fencing_transaction_or_not_at_all(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "e.db", now=lambda: 0.0)
    store.connection.execute("CREATE TABLE ledger (note TEXT)")

    def effect(db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO ledger VALUES ('sent')")

    def explode(db: sqlite3.Connection) -> None:
        db.execute("INSERT INTO ledger VALUES ('half')")
        raise RuntimeError("crash inside the effect")

    def ledger() -> list[str]:
        return [r[0] for r in store.connection.execute("SELECT note FROM ledger")]

    assert not store.complete_with(KEY, 1, "x", effect)  # not claimed: the effect never runs
    assert ledger() == []
    assert store.claim_sync(KEY, 1, 100)
    with pytest.raises(RuntimeError):
        store.complete_with(KEY, 1, "x", explode)
    assert ledger() == [] and isinstance(store.read_sync(KEY), ReceiptRunning)  # rolled back
    assert store.complete_with(KEY, 1, "done", effect)
    assert not store.complete_with(KEY, 1, "again", effect)
    assert ledger() == ["sent"]
    assert store.read_sync(KEY) == ReceiptCompleted(attempt=1, result="done")


def test_checkpoint_single_writer_fence(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    first = create_loop_checkpoint(execution_id="x", messages=[UserMessage(content="hi")],
                                   max_iterations=3)
    a, b = SqliteStore(path), SqliteStore(path)
    assert a.load_checkpoint("x") is None
    a.save_checkpoint(first)
    loaded = b.load_checkpoint("x")
    assert loaded == first
    import msgspec
    nxt = msgspec.structs.replace(first, revision=1)
    b.save_checkpoint(nxt)                 # one revision later: lands
    with pytest.raises(CheckpointConflictError) as info:
        a.save_checkpoint(nxt)             # a stale writer repeating revision 1 is refused
    assert (info.value.stored, info.value.revision) == (1, 1)
    with pytest.raises(CheckpointConflictError):
        a.save_checkpoint(msgspec.structs.replace(first, revision=5))
    assert a.load_checkpoint("x") == nxt
    assert a.checkpoint_ids() == ["x"]
    small = SqliteStore(path, max_checkpoint_bytes=50)
    with pytest.raises(CheckpointFormatError, match="max_bytes"):
        small.load_checkpoint("x")
    with pytest.raises(UsageError, match="max_checkpoint_bytes"):
        small.save_checkpoint(msgspec.structs.replace(first, execution_id="y"))
    for s in (a, b, small):
        s.close()


def test_run_from_checkpoint_commits_every_revision(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "r.db")
    start = create_loop_checkpoint(execution_id="run", messages=[UserMessage(content="go")],
                                   max_iterations=5)
    store.save_checkpoint(start)
    seen: list[int] = []

    def commit(cp: Any) -> Any:
        seen.append(cp.revision)
        return store.commit(cp)

    async def tool(call: ToolCall) -> ToolResult:
        return ToolResult(content=f"ok {call.arguments}")

    turns: list[ModelTurnResult] = [tool_call_turn([tool_call("echo", {"n": 1}, id="c1")]),
                                    final_answer("done")]
    result = anyio.run(lambda: run_from_checkpoint(
        checkpoint=start, commit=commit,
        restore=lambda cp: RestoredLoop(
            model=scripted_model(turns),
            now=stepping_clock(),
            capture_bindings=lambda: cp.bindings,
            runner=ToolRunner(run_tool_call=tool),
        )))
    assert result.stop_reason == "done"
    assert seen == [1, 2]
    assert store.load_checkpoint("run") == result.checkpoint
    store.close()


def _race(path: str, who: int, out: Any) -> None:
    store = SqliteStore(path)
    won = store.claim_sync(KEY, 1, 60_000)
    if won:
        store.complete_with(KEY, 1, who)
    out.put((who, won))
    store.close()


def test_writers_in_other_processes_are_fenced(tmp_path: Path) -> None:
    path = str(tmp_path / "race.db")
    SqliteStore(path).close()
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_race, args=(path, i, out)) for i in range(4)]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    winners = [who for who, won in results if won]
    assert len(winners) == 1
    with SqliteStore(path) as store:
        assert store.read_sync(KEY) == ReceiptCompleted(attempt=1, result=winners[0])
