"""What the ASGI host keeps of a chat goes: its owner deletes it with all its storage
(``DELETE /api/chat/{id}``, ``DELETE /ag-ui/{threadId}``; another identity cannot), and ended
runs expire by age, count and bytes in every log store, a running one never. Real HTTP (uvicorn
on 127.0.0.1), a real SQLite file, real Postgres and Redis servers."""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindloop.completion import TextEvent
from bindloop.hosts.asgi.chat import ChatApp
from bindloop.hosts.chat.run import ChatInput, Emit
from bindloop.hosts.chat.access import ChatRefused, ChatRequest, scoped_chat_id
from bindloop.stores import RunBusyError
from log_stores import STORES, LogStore

CHAT = {"id": "c1", "trigger": "submit-message", "messages": [
    {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}]}
AG_UI = {"threadId": "t1", "runId": "r1", "messages": [
    {"id": "u1", "role": "user", "content": "hello"}], "tools": [], "context": [],
    "state": {"big": "x" * 50_000}, "forwardedProps": {}}


async def bearer(request: ChatRequest) -> str:
    token = request.header("authorization") or ""
    if token not in ("Bearer alice", "Bearer bob"):
        raise ChatRefused("a bearer token is needed")
    return token[7:]


def _as(who: str) -> dict[str, str]:
    return {"authorization": f"Bearer {who}"}


class Gated:
    """A runner that says one word, then waits while ``hold`` is set."""

    def __init__(self) -> None:
        self.hold = threading.Event()

    async def __call__(self, chat: ChatInput, emit: Emit) -> Any:
        emit(0, TextEvent(content="hi"))
        while self.hold.is_set():
            await anyio.sleep(0.01)


def _rows(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return {t: int(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])
                for t in ("protocol_runs", "protocol_run_events", "protocol_run_saves")}


@pytest.mark.parametrize("log_store", ["memory", *STORES], indirect=True)
def test_the_owner_deletes_a_chat_with_its_storage_and_no_one_else_can(
        served: Any, log_store: LogStore) -> None:
    logs = log_store.logs()
    watch = log_store.watcher(logs)
    runner = Gated()
    with served(ChatApp(runner, logs=logs, authorize=bearer)) as base:
        for _ in range(2):  # two runs of the chat, both ended
            assert httpx.post(f"{base}/api/chat", json=CHAT, headers=_as("alice"),
                              timeout=30).status_code == 200
        assert httpx.post(f"{base}/ag-ui", json=AG_UI, headers=_as("alice"),
                          timeout=30).status_code == 200
        assert httpx.post(f"{base}/api/chat", json=CHAT, headers=_as("bob"),
                          timeout=30).status_code == 200
        alice, bob = scoped_chat_id("alice", "c1"), scoped_chat_id("bob", "c1")
        assert watch.latest(alice, "ui") is not None

        # bob's DELETE of the same id names his own chat; he cannot reach alice's
        assert httpx.delete(f"{base}/api/chat/c1", timeout=30).status_code == 401
        assert httpx.delete(f"{base}/ag-ui/t1", headers=_as("bob"), timeout=30).status_code == 404
        assert watch.latest(scoped_chat_id("alice", "t1"), "ag-ui") is not None

        # while a run of the chat goes on: 409, nothing deleted
        runner.hold.set()
        with httpx.stream("POST", f"{base}/api/chat", json=CHAT, headers=_as("alice"),
                          timeout=30) as live:
            chunks = live.iter_text()
            next(chunks)
            busy = httpx.delete(f"{base}/api/chat/c1", headers=_as("alice"), timeout=30)
            assert busy.status_code == 409 and busy.json()["error"] == "chat_busy"
            runner.hold.clear()
            list(chunks)
        assert httpx.delete(f"{base}/api/chat/c1", headers=_as("alice"),
                            timeout=30).status_code == 204
        assert watch.latest(alice, "ui") is None
        assert httpx.get(f"{base}/api/chat/c1/stream", headers=_as("alice"),
                         timeout=30).status_code == 204
        gone = httpx.delete(f"{base}/api/chat/c1", headers=_as("alice"), timeout=30)
        assert gone.status_code == 404 and gone.json()["error"] == "unknown_chat"
        assert watch.latest(bob, "ui") is not None  # bob's chat of the same id stays
        assert httpx.delete(f"{base}/ag-ui/t1", headers=_as("alice"),
                            timeout=30).status_code == 204
        assert watch.latest(scoped_chat_id("alice", "t1"), "ag-ui") is None
    if log_store.kind == "sqlite":
        db = Path(log_store.where) / f"{log_store.namespace}.db"
        rows = _rows(db)
        assert rows["protocol_runs"] == 1 and rows["protocol_run_saves"] == 0
        with sqlite3.connect(db) as conn:
            owners = {r[0] for r in conn.execute(
                "SELECT DISTINCT r.chat_id FROM protocol_run_events e JOIN protocol_runs r "
                "USING (run_id)")}
        assert owners == {bob}


def test_a_chat_cannot_be_deleted_while_another_process_runs_it(log_store: LogStore) -> None:
    logs = log_store.logs()
    logs.begin("r1", "c", "ui", now_ms=1000, lease_until_ms=5000)
    logs.append("r1", b"{}")
    with pytest.raises(RunBusyError):
        log_store.logs().delete_chat("c", "ui", now_ms=2000)
    assert logs.record("r1") is not None
    # its process died (the lease ran out): the owner may delete it
    assert log_store.logs().delete_chat("c", "ui", now_ms=6000) is True
    assert logs.record("r1") is None and logs.read("r1", None) == []


def test_shared_logs_drop_the_oldest_ended_runs_past_their_byte_bound(
        log_store: LogStore) -> None:
    logs = log_store.logs(max_bytes=2500)
    for n in range(5):  # each run logs 1,000 bytes and ends; the fifth still runs
        logs.begin(f"r{n}", f"c{n}", "ui", now_ms=n, lease_until_ms=10**12)
        logs.claim(f"r{n}", b"request")
        logs.append(f"r{n}", b"x" * 1000)
        if n < 4:
            logs.end(f"r{n}", "finished")
    logs.begin("r5", "c5", "ui", now_ms=5, lease_until_ms=10**12)  # the prune runs here
    kept = [n for n in range(6) if logs.record(f"r{n}") is not None]
    assert kept == [2, 3, 4, 5]  # 2,000 bytes ended kept; the running r4 never counted
    assert [n for n in range(6) if getattr(logs.record(f"r{n}"), "claimed", False)] == [4]
    assert logs.read("r0", None) == []  # the running r4's claim is all that is kept of claims


_OPS = st.lists(st.tuples(st.sampled_from(["begin", "append", "end", "delete"]),
                          st.integers(0, 3), st.integers(1, 900)), max_size=40)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=_OPS)
def test_shared_logs_never_drop_a_running_run_and_delete_only_the_chat_named(
        log_store: LogStore, ops: Any) -> None:
    """Any sequence of runs begun, frames appended, runs ended and chats deleted, in each store
    (a fresh namespace per example): after each begin the ended runs' frames are within
    ``max_bytes`` and every running run is still there; a delete takes every run of its chat and
    nothing of another."""
    logs = log_store.fresh().logs(max_bytes=2000)
    running: dict[int, str] = {}  # chat -> its running run
    runs: dict[str, int] = {}  # every run begun -> its chat
    clock = [0.0]
    for op, chat, size in ops:
        clock[0] += 1
        if op == "begin" and chat not in running:
            run = f"r{len(runs)}"
            logs.begin(run, f"c{chat}", "ui", now_ms=clock[0], lease_until_ms=10**12)
            running[chat], runs[run] = run, chat
            kept = [r for r in runs if logs.record(r) is not None]
            ended = [r for r in kept if r not in running.values()]
            assert sum(len(p) for r in ended for _, p in logs.read(r, None)) <= 2000
            assert set(running.values()) <= set(kept)
        elif op == "append" and chat in running:
            logs.append(running[chat], b"x" * size)
        elif op == "end" and chat in running:
            logs.end(running.pop(chat), "finished")
        elif op == "delete":
            if chat in running:
                with pytest.raises(RunBusyError):
                    logs.delete_chat(f"c{chat}", "ui", now_ms=clock[0])
                continue
            before = {r for r in runs if logs.record(r) is not None}
            logs.delete_chat(f"c{chat}", "ui", now_ms=clock[0])
            after = {r for r in runs if logs.record(r) is not None}
            assert before - after == {r for r in before if runs[r] == chat}
    logs.close()


def test_shared_logs_prune_ended_runs_by_age_and_count(log_store: LogStore) -> None:
    logs = log_store.logs(keep=2, max_age_ms=1000)
    logs.begin("alive", "c9", "ui", now_ms=0, lease_until_ms=10**15)
    for n in range(4):
        logs.begin(f"r{n}", f"c{n}", "ui", now_ms=5000 + n, lease_until_ms=10**15)
        logs.append(f"r{n}", b"frame")
        logs.end(f"r{n}", "finished")
    assert logs.record("alive") is not None  # running, and older than the age bound: kept
    # keep=2: each begin keeps the newest two ended runs, so r3's begin dropped r0
    assert [r for r in ("r0", "r1", "r2", "r3") if logs.record(r)] == ["r1", "r2", "r3"]
    logs.begin("late", "c9x", "ui", now_ms=9000, lease_until_ms=10**15)
    assert [r for r in ("r1", "r2", "r3") if logs.record(r)] == []  # past the age bound
    assert logs.read("r3", None) == [] and logs.record("alive") is not None


def test_a_run_is_refused_stopped_and_recovered_across_processes(log_store: LogStore) -> None:
    """Two connections to one store, as two processes: a live lease refuses a second run of the
    chat in the other, a stop asked there reaches the owner at its next renewal, and once the
    lease is out the run is closed as interrupted (its frames kept)."""
    owner, other = log_store.logs(), log_store.logs()
    owner.begin("r1", "c1", "ui", now_ms=1000, lease_until_ms=2000)
    assert owner.append("r1", b"{}") == 0 and owner.append("r1", b"[]") == 1
    with pytest.raises(RunBusyError):
        other.begin("r2", "c1", "ui", now_ms=1500, lease_until_ms=2500)
    assert other.recover(now_ms=1500) == []  # the lease is live: the owner may be on it
    assert owner.renew("r1", 3000) is False
    other.request_stop("r1")
    assert owner.renew("r1", 3000) is True
    assert other.recover(now_ms=3000) == ["r1"]
    record = other.record("r1")
    assert record is not None and record.status == "interrupted" and record.events == 2
    assert other.read("r1", 0) == [(1, b"[]")]
    other.begin("r2", "c1", "ui", now_ms=3500, lease_until_ms=4500)
    latest = owner.latest("c1", "ui")
    assert latest is not None and latest.run_id == "r2"


def test_a_recovered_run_keeps_its_request_until_the_next_begin(log_store: LogStore) -> None:
    """``recover`` closes a lost run as interrupted and keeps what it stored to be continued
    (its request, its last save) until the next ``begin`` prunes it -- in every store alike;
    ``end`` drops it at once."""
    owner, other = log_store.logs(), log_store.logs()
    owner.begin("r1", "c1", "ui", now_ms=1000, lease_until_ms=2000)
    owner.claim("r1", b"request")
    owner.save("r1", b"checkpoint", "fed", 0)
    owner.begin("r2", "c2", "ui", now_ms=1000, lease_until_ms=10**12)
    owner.claim("r2", b"request")
    assert other.recover(now_ms=3000) == ["r1"]
    recovered = other.record("r1")
    assert recovered is not None and (recovered.status, recovered.claimed) == ("interrupted", True)
    assert other.lost(now_ms=3000) == []  # closed: nobody continues it
    owner.end("r2", "finished")
    ended = owner.record("r2")
    assert ended is not None and not ended.claimed
    other.begin("r3", "c3", "ui", now_ms=3500, lease_until_ms=10**12)
    pruned = owner.record("r1")
    assert pruned is not None and pruned.status == "interrupted" and not pruned.claimed


def test_exactly_one_of_many_processes_takes_over_a_lost_run(log_store: LogStore) -> None:
    """Eight connections race to take over one lost run: one gets its claim, last save and the
    encoder inputs saved so far; the others get nothing, and the dead run names the winner."""
    dead = log_store.logs()
    dead.begin("lost", "c1", "ui", now_ms=0, lease_until_ms=100)
    dead.claim("lost", b"the request")
    for n in range(3):
        dead.append("lost", b"frame %d" % n)
    dead.save("lost", b"checkpoint 1", "a", 2)
    dead.save("lost", b"checkpoint 2", "b", 3)
    dead.append("lost", b"after the save")
    racers = [log_store.logs() for _ in range(8)]
    assert [r.run_id for r in racers[0].lost(now_ms=50)] == []  # the lease is live
    assert [r.run_id for r in racers[0].lost(now_ms=200)] == ["lost"]
    won: list[tuple[int, Any]] = []
    start = threading.Barrier(len(racers))

    def race(n: int) -> None:
        start.wait()
        won.append((n, racers[n].take_over("lost", f"new{n}", now_ms=200, lease_until_ms=300)))

    threads = [threading.Thread(target=race, args=(n,)) for n in range(len(racers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    taken = [(n, c) for n, c in won if c is not None]
    assert len(won) == 8 and len(taken) == 1
    winner, continuation = taken[0]
    assert (continuation.previous, continuation.claim, continuation.checkpoint,
            continuation.fed, continuation.offset) == ("lost", b"the request", b"checkpoint 2",
                                                      "ab", 3)
    record = dead.record("lost")
    assert record is not None and record.status == "continued"
    assert (record.continued_by, record.continued_at) == (f"new{winner}", 3)
    new = dead.record(f"new{winner}")
    assert new is not None and new.status == "running" and new.claimed and new.saved == 3
    assert dead.lost(now_ms=250) == []  # the continuation holds its own lease
    dead.unlink("lost")
    unlinked = dead.record("lost")
    assert unlinked is not None and unlinked.continued_at == 0
    dead.end(f"new{winner}", "finished")
    ended = dead.record(f"new{winner}")
    assert ended is not None and not ended.claimed  # what it kept to be continued is gone


def test_a_pending_approval_is_taken_once_across_processes(log_store: LogStore) -> None:
    from bindloop.contracts import ToolCall

    asked = log_store.approvals()
    asked.record("c1", [ToolCall(id="k1", name="delete_note", arguments='{"title":"a"}'),
                        ToolCall(id="k2", name="word_count", arguments="{}")])
    takers = [log_store.approvals() for _ in range(8)]
    got: list[Any] = []
    start = threading.Barrier(len(takers))

    def take(n: int) -> None:
        start.wait()
        got.append(takers[n].take("c1", "k1"))

    threads = [threading.Thread(target=take, args=(n,)) for n in range(len(takers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(got) == 8 and [c for c in got if c is not None] == [
        ToolCall(id="k1", name="delete_note", arguments='{"title":"a"}')]
    assert takers[0].take("c2", "k2") is None  # another chat's id finds nothing
    assert takers[0].take("c1", "k2") == ToolCall(id="k2", name="word_count", arguments="{}")


def test_pending_approvals_keep_the_newest_chats(log_store: LogStore) -> None:
    from bindloop.contracts import ToolCall

    store = log_store.approvals(max_chats=2)
    for chat in ("c1", "c2", "c3"):
        store.record(chat, [ToolCall(id="k", name="t", arguments="{}")])
    store.record("c1", [])  # c1 is not newer for asking nothing: it was dropped already
    assert [c for c in ("c1", "c2", "c3") if store.take(c, "k") is not None] == ["c2", "c3"]


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_shared_logs_go_on_across_a_server_restart(kind: str,
                                                   request: pytest.FixtureRequest) -> None:
    """The server restarts between two calls (its sessions cut): the next call opens a fresh
    connection and lands; the run, its frames and a pending approval are still there."""
    from bindloop.contracts import ToolCall

    server = request.getfixturevalue(f"{kind}_server")
    if server is None:
        pytest.skip("the machine's own server cannot be restarted by a test")
    store = LogStore(kind, server.dsn if kind == "postgres" else server.url,
                     f"t_{uuid.uuid4().hex[:16]}")
    try:
        logs, approvals = store.logs(), store.approvals()
        logs.begin("r1", "c1", "ui", now_ms=0, lease_until_ms=10**15)
        assert logs.append("r1", b"before") == 0
        approvals.record("c1", [ToolCall(id="k", name="t", arguments="{}")])
        server.restart()
        assert logs.append("r1", b"after") == 1
        assert logs.read("r1", None) == [(0, b"before"), (1, b"after")]
        assert approvals.take("c1", "k") == ToolCall(id="k", name="t", arguments="{}")
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_server_that_is_not_there_is_a_store_error_without_the_password(kind: str) -> None:
    from bindloop.hosts.stores.postgres_chat import PostgresRunLogs
    from bindloop.hosts.stores.redis_chat import RedisRunLogs
    from bindloop.stores import StoreError
    from harness.fixtures.store_servers import free_port

    port = free_port()  # nothing listens on it
    logs: Any = (PostgresRunLogs(f"postgresql://u:hunter2@127.0.0.1:{port}/db",
                                 connect_timeout_s=2) if kind == "postgres"
                 else RedisRunLogs(f"redis://u:hunter2@127.0.0.1:{port}/0", socket_timeout_s=2))
    with pytest.raises(StoreError) as failed:
        logs.begin("r1", "c1", "ui", now_ms=0, lease_until_ms=1)
    assert (failed.value.store, failed.value.operation) == (kind, "begin")
    assert "hunter2" not in str(failed.value)
    logs.close()


_STEPS = st.lists(st.tuples(
    st.sampled_from(["begin", "begin", "begin", "append", "append", "claim", "save", "end",
                     "end", "take_over", "recover", "recover", "stop", "delete", "unlink"]),
    st.integers(0, 3), st.integers(0, 3), st.integers(1, 300)), max_size=40)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(steps=_STEPS)
@pytest.mark.parametrize("log_store", ["postgres", "redis"], indirect=True)
def test_shared_logs_answer_as_the_sqlite_logs_do(log_store: LogStore, tmp_path: Path,
                                                   steps: Any) -> None:
    """The same calls -- runs begun on a clock, frames appended, requests claimed and saved,
    runs ended, lost runs taken over or recovered, stops asked, chats deleted, continuations
    unlinked, with small bounds so pruning happens -- on SQLite and on the server store (a fresh
    namespace per example): every call answers the same, and so does every record, log and
    chat's latest run after it (what an ended run kept to be continued included: an ended
    run drops it at once, a recovered one keeps it until the next begin, in every store.)"""
    from bindloop.hosts.asgi.run_logs import SqliteRunLogs

    bounds = {"keep": 3, "max_age_ms": 40, "max_bytes": 1000}
    ref = SqliteRunLogs(tmp_path / f"{uuid.uuid4().hex}.db", **bounds)
    other = log_store.fresh().logs(**bounds)
    runs: list[str] = []
    now = 0.0

    def both(call: str, *args: Any, **kwargs: Any) -> Any:
        answers = []
        for logs in (ref, other):
            try:
                answers.append(getattr(logs, call)(*args, **kwargs))
            except RunBusyError as exc:
                answers.append(("busy", str(exc)))
        assert answers[0] == answers[1], (call, args, answers)
        return answers[0]

    def running(pick: int) -> str | None:
        live = [r for r in runs if (rec := ref.record(r)) is not None and rec.status == "running"]
        return live[pick % len(live)] if live else None

    for op, chat, pick, size in steps:
        now += pick
        run = running(pick)
        if op == "begin":
            runs.append(f"r{len(runs)}")
            both("begin", runs[-1], f"c{chat}", "ui", now_ms=now, lease_until_ms=now + size % 7)
        elif op == "append" and run is not None:
            both("append", run, b"x" * size)
        elif op == "claim" and run is not None:
            both("claim", run, b"request %d" % size)
        elif op == "save" and run is not None and (ref.record(run) or run).claimed:  # type: ignore[union-attr]
            both("save", run, b"checkpoint %d" % size, f"f{size}", ref.record(run).events)  # type: ignore[union-attr]
        elif op == "end" and run is not None:
            both("end", run, ("finished", "failed", "stopped")[pick % 3])
        elif op == "take_over":
            lost = both("lost", now)
            if lost:
                runs.append(f"r{len(runs)}")
                both("take_over", lost[pick % len(lost)].run_id, runs[-1], now_ms=now,
                     lease_until_ms=now + size % 7)
        elif op == "recover":
            assert sorted(ref.recover(now)) == sorted(other.recover(now))
        elif op == "stop" and run is not None:
            both("request_stop", run)
            both("renew", run, now + size % 7)
        elif op == "delete":
            both("delete_chat", f"c{chat}", "ui", now_ms=now)
        elif op == "unlink":
            continued = [r for r in runs if getattr(ref.record(r), "continued_by", None)]
            if continued:
                both("unlink", continued[pick % len(continued)])
        for run_id in runs:
            assert ref.record(run_id) == other.record(run_id), run_id
            assert ref.read(run_id, None) == other.read(run_id, None)
        for c in range(4):
            assert ref.latest(f"c{c}", "ui") == other.latest(f"c{c}", "ui")
    ref.close()


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_store_gone_mid_run_fails_that_run_and_the_app_lives_on(
        served: Any, kind: str, request: pytest.FixtureRequest) -> None:
    """The server stops while a run streams: that run ends (its stream cut), a new chat gets
    503 ``store_unavailable`` (never a 500 from a dead app); once the server is back, new chats
    run, and the run left open is taken over as lost and finished."""
    import signal

    server = request.getfixturevalue(f"{kind}_server")
    if server is None:
        pytest.skip("the machine's own server cannot be stopped by a test")
    store = LogStore(kind, server.dsn if kind == "postgres" else server.url,
                     f"t_{uuid.uuid4().hex[:16]}")
    runner = Gated()
    try:
        logs = store.logs()
        with served(ChatApp(runner, logs=logs, lease_ms=600)) as base:
            runner.hold.set()
            cut: list[BaseException] = []

            def stream() -> None:
                try:
                    with httpx.stream("POST", f"{base}/api/chat", json=CHAT,
                                      timeout=30) as live:
                        for _ in live.iter_text():
                            pass
                except httpx.HTTPError as exc:
                    cut.append(exc)

            client = threading.Thread(target=stream)
            client.start()
            deadline = time.monotonic() + 20
            before = store.logs()  # another connection (committed states), not one per poll
            while (latest := before.latest("c1", "ui")) is None or latest.events == 0:
                assert time.monotonic() < deadline, "the run never started"
                time.sleep(0.02)
            server.stop(signal.SIGINT)
            runner.hold.clear()  # its next frames meet no store
            client.join(30)
            down = httpx.post(f"{base}/api/chat", json={**CHAT, "id": "c2"}, timeout=30)
            assert down.status_code == 503 and down.json()["error"] == "store_unavailable"
            assert down.headers["retry-after"] == "1"
            server.restart()
            back = httpx.post(f"{base}/api/chat", json={**CHAT, "id": "c3"}, timeout=30)
            assert back.status_code == 200 and back.text.rstrip().endswith("data: [DONE]")
            deadline = time.monotonic() + 20
            # read through another connection, as another process would (committed states
            # only: the app's own connection, read from this thread, can show a write half done)
            watch = store.logs()
            while (first := watch.latest("c1", "ui")) is None or first.status == "running":
                assert time.monotonic() < deadline, "the run left open was never closed"
                time.sleep(0.05)
            again = watch.latest("c1", "ui")
            while again is not None and again.continued_by is not None:
                again = watch.record(again.continued_by)
                while again is not None and again.status == "running":
                    assert time.monotonic() < deadline, "the continuation never ended"
                    time.sleep(0.05)
                    again = watch.record(again.run_id)
            assert again is not None and again.status == "finished"
    finally:
        store.close()


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_run_whose_lease_cannot_be_renewed_is_stopped_once_it_is_out(
        served: Any, kind: str, request: pytest.FixtureRequest) -> None:
    """A run that logs nothing while the store is gone cannot renew its lease: once the lease is
    out (another process may take the run over from then) this process stops it -- that run
    only: once the store is back the app serves new chats."""
    import signal

    server = request.getfixturevalue(f"{kind}_server")
    if server is None:
        pytest.skip("the machine's own server cannot be stopped by a test")
    store = LogStore(kind, server.dsn if kind == "postgres" else server.url,
                     f"t_{uuid.uuid4().hex[:16]}")
    quiet, stopped = threading.Event(), threading.Event()

    async def runner(chat: ChatInput, emit: Emit) -> Any:
        emit(0, TextEvent(content="hi"))
        if chat.chat_id != "c1":
            return None
        quiet.set()  # its frames are logged: from here on it only waits
        try:
            await anyio.sleep(60)  # never logs again
        finally:
            stopped.set()

    def post() -> None:
        try:
            httpx.post(f"{base}/api/chat", json=CHAT, timeout=60)
        except httpx.HTTPError:
            pass  # the stream is cut when its run ends without a store

    try:
        with served(ChatApp(runner, logs=store.logs(), lease_ms=600)) as base:
            client = threading.Thread(target=post, daemon=True)
            client.start()
            # the server goes once the run has logged its frames and waits: stopped any
            # earlier, a frame meets no store and the run fails at once (what the test above
            # checks), never waiting out its lease
            assert quiet.wait(20), "the run never started"
            server.stop(signal.SIGINT)
            try:
                assert stopped.wait(20), "the run went on past its lease"
            finally:
                server.restart()
            later = httpx.post(f"{base}/api/chat", json={**CHAT, "id": "c2"}, timeout=30)
            assert later.status_code == 200 and later.text.rstrip().endswith("data: [DONE]")
    finally:
        store.close()


def _approving(call: Any) -> dict[str, Any]:
    """An AI SDK request answering ``call`` (which the model made in turn ``a1``): approved."""
    return {"id": "c1", "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "both x"}]},
        {"id": "a1", "role": "assistant", "parts": [
            {"type": "tool-delete_note", "toolCallId": call.id, "state": "approval-responded",
             "input": {"title": "x"}, "approval": {"id": f"approval-{call.id}",
                                                   "approved": True}}]}]}


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_deleting_a_chat_deletes_its_pending_approvals_and_receipts(
        served: Any, tmp_path: Path, store: str) -> None:
    """``DELETE /api/chat/{id}`` drops the calls the chat waits to have approved (a decision
    sent after is refused and runs nothing) and the chat's tool receipts -- the owner's chat
    only: the same id of another identity, and the same id's AG-UI thread, keep theirs."""
    from bindloop.hosts.chat.agent import agent_runner
    from bindloop.hosts.asgi.approvals import SqlitePendingApprovals
    from bindloop.hosts.stores.sqlite import SqliteStore
    from bindloop.stores import MemoryPendingApprovals, MemoryToolCallReceiptStore
    from tests.hosts.test_asgi_agent_approvals import Scripted, World, delete_call

    db = tmp_path / "chat.db"
    approvals: Any = SqlitePendingApprovals(db) if store == "sqlite" else MemoryPendingApprovals()
    receipts: Any = SqliteStore(db) if store == "sqlite" else MemoryToolCallReceiptStore()
    world = World()

    class App:  # made on the server's thread (a SqliteStore's connection stays on its own)
        app: Any = None

        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if self.app is None:
                runs = SqliteStore(db) if store == "sqlite" else receipts
                self.app = ChatApp(agent_runner(
                    Scripted(), tools=world.tools(), needs_approval=["delete_note"],
                    approvals=approvals, receipts=runs), authorize=bearer)
            await self.app(scope, receive, send)
    both = {"id": "c1", "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "both x"}]}]}
    thread = {"threadId": "c1", "runId": "r1", "messages": [
        {"id": "u1", "role": "user", "content": "both x"}], "tools": [], "context": [],
        "state": None, "forwardedProps": {}}
    key = {who: ChatInput(chat_id=scoped_chat_id(who, "c1"), protocol="ui", transcript=(),
                          identity=who).key for who in ("alice", "bob")}
    with served(App()) as base:
        for who in ("alice", "bob"):
            asked = httpx.post(f"{base}/api/chat", json=both, headers=_as(who), timeout=30)
            assert asked.status_code == 200 and "tool-approval-request" in asked.text
        assert httpx.post(f"{base}/ag-ui", json=thread, headers=_as("alice"),
                          timeout=30).status_code == 200
        assert world.counted == ["a b"] * 3  # word_count ran in each, through its receipt

        async def receipts_of(tenant: str, run: str) -> int:  # counted by deleting them
            return int(await receipts.delete_run(tenant, run))

        assert httpx.delete(f"{base}/api/chat/c1", headers=_as("alice"),
                            timeout=30).status_code == 204
        assert approvals.take(key["alice"], "c-del") is None  # forgotten: nothing to decide
        assert anyio.run(receipts_of, "alice", key["alice"]) == 0  # its receipts are gone
        refused = httpx.post(f"{base}/api/chat", json=_approving(delete_call("x")),
                             headers=_as("alice"), timeout=30)
        assert refused.status_code == 200 and "is not waiting for approval" in refused.text
        assert world.deleted == []  # the decision on the forgotten call ran nothing

        # bob's chat of the same id and alice's AG-UI thread of that id keep theirs
        approved = httpx.post(f"{base}/api/chat", json=_approving(delete_call("x")),
                              headers=_as("bob"), timeout=30)
        assert approved.status_code == 200 and world.deleted == ["x"]
        alice_thread = ChatInput(chat_id=scoped_chat_id("alice", "c1"), protocol="ag-ui",
                                 transcript=(), identity="alice").key
        assert approvals.take(alice_thread, "c-del") is not None
        assert anyio.run(receipts_of, "alice", alice_thread) == 1
        assert anyio.run(receipts_of, "bob", key["bob"]) >= 1
        for status in (204, 404):  # the refused run's log, then nothing of the chat is left
            assert httpx.delete(f"{base}/api/chat/c1", headers=_as("alice"),
                                timeout=30).status_code == status


def test_pending_approvals_forget_a_deleted_chat_in_every_store(log_store: LogStore) -> None:
    from bindloop.contracts import ToolCall

    store, other = log_store.approvals(), log_store.approvals()
    store.record("c1", [ToolCall(id="k1", name="t", arguments="{}"),
                        ToolCall(id="k2", name="t", arguments="{}")])
    store.record("c2", [ToolCall(id="k1", name="t", arguments="{}")])
    assert other.forget("c1") == 2 and other.forget("c1") == 0
    assert store.take("c1", "k1") is None and store.take("c1", "k2") is None
    assert store.take("c2", "k1") == ToolCall(id="k1", name="t", arguments="{}")


def test_a_request_the_store_cannot_keep_still_runs_and_frees_its_slot(
        served: Any, tmp_path: Path) -> None:
    """The store fails the claim of a request (between its begin and its first frame): the run
    goes on -- it could not be continued elsewhere -- and its slot comes back when it ends."""
    from bindloop.hosts.asgi.run_logs import SqliteRunLogs
    from bindloop.stores import StoreError

    class LosingClaims(SqliteRunLogs):
        def claim(self, run_id: str, claim: bytes) -> None:
            raise StoreError("sqlite", "claim", "disk I/O error")

    logs = LosingClaims(tmp_path / "runs.db")
    watch = SqliteRunLogs(tmp_path / "runs.db")
    with served(ChatApp(Gated(), logs=logs, max_runs=1)) as base:
        for chat_id in ("c1", "c2"):  # max_runs=1: the second runs only if the first let go
            done = httpx.post(f"{base}/api/chat", json={**CHAT, "id": chat_id}, timeout=30)
            assert done.status_code == 200 and done.text.rstrip().endswith("data: [DONE]")
            # read through another connection: the app's own one may be mid-write meanwhile
            record = watch.latest(chat_id, "ui")
            assert record is not None and record.status == "finished" and not record.claimed
    watch.close()
    logs.close()


@pytest.mark.parametrize("kind", ["postgres", "redis"])
def test_a_store_written_by_another_layout_is_refused_never_misread(
        kind: str, request: pytest.FixtureRequest) -> None:
    """The run logs and pending approvals record their layout version on first use; a namespace
    holding another version is a ``StoreError`` naming both, at the first call of either."""
    from bindloop.stores import StoreError

    where = request.getfixturevalue("postgres_dsn" if kind == "postgres" else "redis_url")
    store = LogStore(kind, where, f"t_{uuid.uuid4().hex[:16]}")
    try:
        assert store.logs().record("nothing") is None  # creates the layout, version 1
        if kind == "postgres":
            import psycopg

            with psycopg.connect(where, autocommit=True) as conn:
                conn.execute(f"UPDATE {store.namespace}.meta SET value = 99 "
                             "WHERE name = 'chat_schema_version'")
        else:
            import redis

            with redis.Redis.from_url(where) as client:
                client.set(f"{store.namespace}:chat-schema", "99")
        for fresh in (store.logs(), store.approvals()):
            with pytest.raises(StoreError, match=r"layout version .*99.*reads version 1"):
                fresh.take("c1", "call-1") if hasattr(fresh, "take") else fresh.record("x")
    finally:
        store.close()
