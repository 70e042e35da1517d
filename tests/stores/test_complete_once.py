"""``complete_once`` on the memory reference and on SqliteStore: a call no attempt has touched yet
is recorded completed by attempt 1, with its effect, in one atomic write; any existing receipt is
answered instead and nothing is written. (The store kit compares every store that has it with the
reference; these are the effect's guarantees, which the kit cannot see.)"""

from __future__ import annotations

import sqlite3
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from bindloop.hosts.stores.sqlite import SqliteStore
from bindloop.run import ReceiptCompleted, ReceiptFailed, ReceiptRunning, ToolCallReceiptKey
from bindloop.stores import MemoryToolCallReceiptStore

KEY = ToolCallReceiptKey(tenant_id="t", run_id="r", tool_name="send", args_hash="h")


class Boom(Exception):
    pass


class Backend:
    """A store with complete_once and an effect that records ``tag`` where the store keeps it: a
    list for the memory reference, a row of the host's ``ledger`` table for SQLite."""

    def __init__(self, kind: str, path: Path) -> None:
        self.kind = kind
        self.clock = [1_000.0]
        self.tags: list[str] = []
        self.store: Any
        if kind == "memory":
            self.store = MemoryToolCallReceiptStore(now=lambda: self.clock[0])
        else:
            self.store = SqliteStore(path, now=lambda: self.clock[0])
            self.store.connection.execute("CREATE TABLE ledger (tag TEXT NOT NULL)")

    def effect(self, tag: str, *, then_raise: bool = False) -> Callable[..., None]:
        if self.kind == "memory":

            def in_memory() -> None:
                self.tags.append(tag)
                if then_raise:
                    raise Boom(tag)

            return in_memory

        def in_sqlite(db: sqlite3.Connection) -> None:
            db.execute("INSERT INTO ledger VALUES (?)", (tag,))
            if then_raise:
                raise Boom(tag)

        return in_sqlite

    def landed(self) -> list[str]:
        if self.kind == "memory":
            return list(self.tags)
        return [
            r[0] for r in self.store.connection.execute("SELECT tag FROM ledger ORDER BY rowid")
        ]

    def close(self) -> None:
        if self.kind == "sqlite":
            self.store.close()


@pytest.fixture(params=["memory", "sqlite"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    b = Backend(request.param, tmp_path / "once.db")
    try:
        yield b
    finally:
        b.close()


def _run(fn: Callable[[], Any]) -> Any:
    async def main() -> Any:
        return await fn()

    return anyio.run(main)


def test_a_fresh_call_is_recorded_completed_by_attempt_1_with_its_effect(backend: Backend) -> None:
    store = backend.store
    assert _run(lambda: store.complete_once(KEY, {"id": 7}, backend.effect("first"))) is None
    done = ReceiptCompleted(attempt=1, result={"id": 7})
    assert _run(lambda: store.read(KEY)) == done
    assert backend.landed() == ["first"]
    # A second call is answered the completion; its effect does not run, its result is not kept.
    assert _run(lambda: store.complete_once(KEY, {"id": 8}, backend.effect("second"))) == done
    assert _run(lambda: store.read(KEY)) == done
    assert backend.landed() == ["first"]
    assert store.fenced_writes == 0  # answering a receipt is not a fenced write


def test_a_claimed_call_is_answered_running_even_past_its_lease(backend: Backend) -> None:
    store = backend.store
    assert _run(lambda: store.claim(KEY, 1, 100.0))
    running = ReceiptRunning(attempt=1, lease_expires_at_ms=1_100.0)
    assert _run(lambda: store.complete_once(KEY, "x", backend.effect("once"))) == running
    backend.clock[0] += 10_000.0  # expired: reclaiming is the claim protocol's business
    assert _run(lambda: store.complete_once(KEY, "x", backend.effect("once"))) == running
    assert _run(lambda: store.read(KEY)) == running
    assert backend.landed() == []
    assert _run(lambda: store.complete(KEY, 1, "owner"))  # the owner is not disturbed


def test_a_failed_call_is_answered_failed_and_the_next_attempt_claims(backend: Backend) -> None:
    store = backend.store
    assert _run(lambda: store.claim(KEY, 1, 100.0))
    assert _run(lambda: store.fail(KEY, 1, "boom"))
    failed = ReceiptFailed(attempt=1, error="boom")
    assert _run(lambda: store.complete_once(KEY, "x", backend.effect("once"))) == failed
    assert _run(lambda: store.read(KEY)) == failed
    assert backend.landed() == []
    assert _run(lambda: store.claim(KEY, 2, 100.0))


def test_an_effect_that_raises_writes_nothing_and_propagates(backend: Backend) -> None:
    store = backend.store
    with pytest.raises(Boom, match="broken"):
        _run(lambda: store.complete_once(KEY, "x", backend.effect("broken", then_raise=True)))
    assert _run(lambda: store.read(KEY)) is None
    if backend.kind == "sqlite":
        assert backend.landed() == []  # the effect's own write was rolled back with it
    assert _run(lambda: store.complete_once(KEY, "y", backend.effect("again"))) is None
    assert _run(lambda: store.read(KEY)) == ReceiptCompleted(attempt=1, result="y")


def test_without_an_effect_it_still_records_the_call(backend: Backend) -> None:
    store = backend.store
    assert _run(lambda: store.complete_once(KEY, None)) is None
    assert _run(lambda: store.read(KEY)) == ReceiptCompleted(attempt=1, result=None)


def test_a_deleted_run_starts_over(backend: Backend) -> None:
    store = backend.store
    assert _run(lambda: store.complete_once(KEY, 1, backend.effect("a"))) is None
    assert _run(lambda: store.delete_run(KEY.tenant_id, KEY.run_id)) == 1
    assert _run(lambda: store.complete_once(KEY, 2, backend.effect("b"))) is None
    assert _run(lambda: store.read(KEY)) == ReceiptCompleted(attempt=1, result=2)
    assert backend.landed() == ["a", "b"]


# ---- SQLite: one transaction, shared by every connection on the file ---------------------------


def test_sqlite_receipt_and_effect_land_together_for_another_connection(tmp_path: Path) -> None:
    path = tmp_path / "once.db"
    with SqliteStore(path) as writer, SqliteStore(path) as reader:
        writer.connection.execute("CREATE TABLE ledger (tag TEXT NOT NULL)")
        seen: list[Any] = []

        def effect(db: sqlite3.Connection) -> None:
            db.execute("INSERT INTO ledger VALUES ('sent')")
            # Inside the transaction: another connection sees neither the receipt nor the row.
            seen.append(
                (
                    reader.read_sync(KEY),
                    reader.connection.execute("SELECT count(*) FROM ledger").fetchone()[0],
                )
            )

        assert writer.complete_once_sync(KEY, {"ok": True}, effect) is None
        assert seen == [(None, 0)]
        assert reader.read_sync(KEY) == ReceiptCompleted(attempt=1, result={"ok": True})
        assert reader.connection.execute("SELECT tag FROM ledger").fetchall() == [("sent",)]


def test_sqlite_a_result_that_is_not_json_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    with SqliteStore(tmp_path / "once.db") as store:
        ran: list[sqlite3.Connection] = []
        with pytest.raises(TypeError):
            store.complete_once_sync(KEY, object(), ran.append)
        assert ran == [] and store.read_sync(KEY) is None
        assert not store.connection.in_transaction


def test_sqlite_store_objects_on_one_file_race_to_one_winner(tmp_path: Path) -> None:
    """Several store objects (each its own connection, in its own thread: SQLite's file locks
    between them are the ones between processes) record the same fresh call at once."""
    path = tmp_path / "once.db"
    with SqliteStore(path) as setup:
        setup.connection.execute("CREATE TABLE ledger (who INTEGER NOT NULL)")
    count = 6
    barrier = threading.Barrier(count, timeout=60)
    results: dict[int, Any] = {}
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        def pay(db: sqlite3.Connection) -> None:
            db.execute("INSERT INTO ledger VALUES (?)", (i,))

        try:
            with SqliteStore(path) as store:
                barrier.wait()
                results[i] = store.complete_once_sync(KEY, i, pay)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads), errors
    winners = [i for i, found in results.items() if found is None]
    assert len(winners) == 1, results
    done = ReceiptCompleted(attempt=1, result=winners[0])
    assert all(found == done for i, found in results.items() if i != winners[0]), results
    with SqliteStore(path) as check:
        assert check.read_sync(KEY) == done
        assert check.connection.execute("SELECT who FROM ledger").fetchall() == [(winners[0],)]


# ---- properties ---------------------------------------------------------------------------------

_OPS = st.lists(
    st.tuples(
        st.sampled_from(["claim", "complete", "fail", "complete_once", "delete_run", "tick"]),
        st.integers(0, 1),  # which key
        st.integers(1, 3),  # attempt
        st.sampled_from([10.0, 50.0, 200.0]),  # lease / tick
    ),
    max_size=60,
)


def _key(which: int) -> ToolCallReceiptKey:
    return msgspec.structs.replace(KEY, args_hash=f"h{which}")


@settings(max_examples=300, deadline=None)
@given(_OPS)
def test_memory_at_most_one_completion_per_receipt_lifetime(ops: list[Any]) -> None:
    """Any interleaving of claim / complete / fail / complete_once / delete_run: per key and
    lifetime (until its run is deleted) at most one of {a complete that landed, a complete_once
    answered None}; complete_once never changes an existing receipt and runs its effect exactly
    when it writes."""
    clock = [0.0]
    store = MemoryToolCallReceiptStore(now=lambda: clock[0])
    completions = {0: 0, 1: 0}
    effects: list[int] = []

    async def main() -> None:
        for op, which, attempt, ms in ops:
            key = _key(which)
            before = await store.read(key)
            if op == "tick":
                clock[0] += ms
            elif op == "claim":
                await store.claim(key, attempt, ms)
            elif op == "complete":
                completions[which] += await store.complete(key, attempt, attempt)
            elif op == "fail":
                await store.fail(key, attempt, "e")
            elif op == "delete_run":
                await store.delete_run(KEY.tenant_id, KEY.run_id)
                completions.update({0: 0, 1: 0})
            else:
                runs = len(effects)
                found = await store.complete_once(key, "once", lambda: effects.append(which))
                assert found == before
                if before is None:
                    completions[which] += 1
                    assert effects[runs:] == [which]
                    assert await store.read(key) == ReceiptCompleted(attempt=1, result="once")
                else:
                    assert effects[runs:] == []
                    assert await store.read(key) == before
            assert completions[which] <= 1, (op, which, attempt)

    anyio.run(main)


@settings(max_examples=60, deadline=None)
@given(_OPS)
def test_sqlite_answers_complete_once_as_the_reference_does(ops: list[Any]) -> None:
    clock = [0.0]
    ref = MemoryToolCallReceiptStore(now=lambda: clock[0])
    with (
        tempfile.TemporaryDirectory() as tmp,
        SqliteStore(Path(tmp) / "once.db", now=lambda: clock[0]) as store,
    ):

        async def main() -> None:
            for op, which, attempt, ms in ops:
                key, step = _key(which), (op, which, attempt, ms)
                if op == "tick":
                    clock[0] += ms
                elif op == "claim":
                    assert await store.claim(key, attempt, ms) == await ref.claim(key, attempt, ms)
                elif op == "complete":
                    assert await store.complete(key, attempt, [attempt]) == await ref.complete(
                        key, attempt, [attempt]
                    ), step
                elif op == "fail":
                    assert await store.fail(key, attempt, "e") == await ref.fail(key, attempt, "e")
                elif op == "delete_run":
                    assert await store.delete_run(
                        KEY.tenant_id, KEY.run_id
                    ) == await ref.delete_run(KEY.tenant_id, KEY.run_id), step
                else:
                    assert await store.complete_once(key, {"w": which}) == await ref.complete_once(
                        key, {"w": which}
                    ), step
                assert await store.read(key) == await ref.read(key), step

        anyio.run(main)
