"""What the ASGI host keeps of a chat goes: its owner deletes it with all its storage
(``DELETE /api/chat/{id}``, ``DELETE /ag-ui/{threadId}``; another identity cannot), and ended
runs expire by age, count and bytes in both log stores, a running one never. Real HTTP (uvicorn
on 127.0.0.1), a real SQLite file."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.completion import TextEvent
from bindloop.hosts.asgi.chat import (
    ChatApp,
    ChatInput,
    ChatRefused,
    ChatRequest,
    Emit,
    scoped_chat_id,
)
from bindloop.hosts.asgi.run_logs import SqliteRunLogs
from bindloop.stores import MemoryRunLogs, RunBusyError

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


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_the_owner_deletes_a_chat_with_its_storage_and_no_one_else_can(
        served: Any, tmp_path: Path, store: str) -> None:
    db = tmp_path / "runs.db"
    logs = SqliteRunLogs(db) if store == "sqlite" else MemoryRunLogs()
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
        assert logs.latest(alice, "ui") is not None

        # bob's DELETE of the same id names his own chat; he cannot reach alice's
        assert httpx.delete(f"{base}/api/chat/c1", timeout=30).status_code == 401
        assert httpx.delete(f"{base}/ag-ui/t1", headers=_as("bob"), timeout=30).status_code == 404
        assert logs.latest(scoped_chat_id("alice", "t1"), "ag-ui") is not None

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
        assert logs.latest(alice, "ui") is None
        assert httpx.get(f"{base}/api/chat/c1/stream", headers=_as("alice"),
                         timeout=30).status_code == 204
        gone = httpx.delete(f"{base}/api/chat/c1", headers=_as("alice"), timeout=30)
        assert gone.status_code == 404 and gone.json()["error"] == "unknown_chat"
        assert logs.latest(bob, "ui") is not None  # bob's chat of the same id stays
        assert httpx.delete(f"{base}/ag-ui/t1", headers=_as("alice"),
                            timeout=30).status_code == 204
        assert logs.latest(scoped_chat_id("alice", "t1"), "ag-ui") is None
    if store == "sqlite":
        rows = _rows(db)
        assert rows["protocol_runs"] == 1 and rows["protocol_run_saves"] == 0
        with sqlite3.connect(db) as conn:
            owners = {r[0] for r in conn.execute(
                "SELECT DISTINCT r.chat_id FROM protocol_run_events e JOIN protocol_runs r "
                "USING (run_id)")}
        assert owners == {bob}


def test_a_chat_cannot_be_deleted_while_another_process_runs_it(tmp_path: Path) -> None:
    logs = SqliteRunLogs(tmp_path / "runs.db")
    logs.begin("r1", "c", "ui", now_ms=1000, lease_until_ms=5000)
    logs.append("r1", b"{}")
    with pytest.raises(RunBusyError):
        SqliteRunLogs(tmp_path / "runs.db").delete_chat("c", "ui", now_ms=2000)
    assert logs.record("r1") is not None
    # its process died (the lease ran out): the owner may delete it
    assert SqliteRunLogs(tmp_path / "runs.db").delete_chat("c", "ui", now_ms=6000) is True
    assert logs.record("r1") is None and logs.read("r1", None) == []


def test_sqlite_logs_drop_the_oldest_ended_runs_past_their_byte_bound(tmp_path: Path) -> None:
    logs = SqliteRunLogs(tmp_path / "runs.db", max_bytes=2500)
    for n in range(5):  # each run logs 1,000 bytes and ends; the fifth still runs
        logs.begin(f"r{n}", f"c{n}", "ui", now_ms=n, lease_until_ms=10**12)
        logs.claim(f"r{n}", b"request")
        logs.append(f"r{n}", b"x" * 1000)
        if n < 4:
            logs.end(f"r{n}", "finished")
    logs.begin("r5", "c5", "ui", now_ms=5, lease_until_ms=10**12)  # the prune runs here
    kept = [n for n in range(6) if logs.record(f"r{n}") is not None]
    assert kept == [2, 3, 4, 5]  # 2,000 bytes ended kept; the running r4 never counted
    assert _rows(tmp_path / "runs.db")["protocol_run_saves"] == 1  # the running r4's claim
    assert logs.read("r0", None) == []


_OPS = st.lists(st.tuples(st.sampled_from(["begin", "append", "end", "delete"]),
                          st.integers(0, 3), st.integers(1, 900)), max_size=40)


@settings(max_examples=40, deadline=None)
@given(ops=_OPS)
def test_sqlite_logs_never_drop_a_running_run_and_delete_only_the_chat_named(ops: Any) -> None:
    """Any sequence of runs begun, frames appended, runs ended and chats deleted: after each
    begin the ended runs' frames are within ``max_bytes`` and every running run is still there;
    a delete takes every run of its chat and nothing of another."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        logs = SqliteRunLogs(Path(tmp) / "runs.db", max_bytes=2000)
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
    from bindloop.hosts.asgi.agent import agent_runner
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
