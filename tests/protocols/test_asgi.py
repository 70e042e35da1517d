"""The ASGI protocol host under a real uvicorn over loopback HTTP: SSE ids on every event,
resumption by Last-Event-ID, a disconnect that does not cancel the run, stop, refusals."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from hypothesis import given, strategies as st

from bindloop.hosts.asgi.chat import ChatApp
from bindloop.hosts.chat.run import ChatInput, Emit
from bindloop.hosts.asgi.run_logs import SqliteRunLogs
from bindloop.stores import MemoryRunLogs, RunBusyError
from examples.demos.ui_demo import build_demo_app
from log_stores import LogStore
from bindloop.completion import TextEvent

CHAT = {"id": "c1", "trigger": "submit-message", "messages": [
    {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "count one two three"}]}]}


def _frames(text: str) -> list[tuple[int | None, str]]:
    out = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        ident = None
        data = ""
        for line in block.split("\n"):
            if line.startswith("id: "):
                ident = int(line[4:].rpartition(":")[2])  # "<run>:<offset>"
            elif line.startswith("data: "):
                data += line[6:]
        out.append((ident, data))
    return out


def _ids(text: str) -> list[str]:
    """The raw ``id:`` values of a stream, in order."""
    return [line[4:] for line in text.split("\n") if line.startswith("id: ")]


def _post(base: str, path: str, body: Any) -> httpx.Response:
    return httpx.post(base + path, json=body, timeout=30)


def test_every_event_carries_its_offset_and_the_stream_ends_with_done(served: Any) -> None:
    with served(build_demo_app(delay_s=0)) as base:
        r = _post(base, "/api/chat", CHAT)
    assert r.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert r.headers["content-type"] == "text/event-stream"
    frames = _frames(r.text)
    assert frames[-1] == (None, "[DONE]")
    assert [i for i, _ in frames[:-1]] == list(range(len(frames) - 1))
    assert msgspec.json.decode(frames[-2][1])["type"] == "finish"


@pytest.mark.parametrize("store", ["memory", "sqlite"])
def test_a_dropped_client_resumes_from_last_event_id_and_the_run_was_not_cancelled(
        served: Any, tmp_path: Path, store: str) -> None:
    logs = SqliteRunLogs(tmp_path / "r.db") if store == "sqlite" else MemoryRunLogs()
    app = build_demo_app(delay_s=0.02, logs=logs)
    with served(app) as base:
        whole = _frames(_post(base, "/api/chat", {**CHAT, "id": "whole"}).text)
        seen: list[tuple[int | None, str]] = []
        with httpx.stream("POST", base + "/api/chat", json={**CHAT, "id": "cut"},
                          timeout=30) as r:
            buffer = ""
            for text in r.iter_text():
                buffer += text
                if buffer.count("\n\n") >= 4:
                    break
        seen = _frames(buffer[:buffer.rindex("\n\n") + 2])
        time.sleep(1.0)  # the run finishes meanwhile, with nobody reading
        last = _ids(buffer[:buffer.rindex("\n\n") + 2])[-1]
        rest = httpx.get(f"{base}/api/chat/cut/stream", headers={"last-event-id": last},
                         timeout=30)
        assert rest.status_code == 200
        # with nothing running and no Last-Event-ID, the AI SDK's reconnect gets 204
        assert httpx.get(f"{base}/api/chat/cut/stream", timeout=30).status_code == 204
    joined = seen + _frames(rest.text)
    assert [i for i, _ in joined[:-1]] == list(range(len(joined) - 1))

    def shape(frames: list[tuple[int | None, str]]) -> list[Any]:
        first = msgspec.json.decode(frames[0][1])["messageId"]
        return [d.replace(first, "MSG") for _, d in frames]

    assert shape(joined) == shape(whole)
    record = logs.latest("cut", "ui")
    assert record is not None and record.status == "finished"


def test_stop_ends_the_running_response_with_abort(served: Any) -> None:
    # 0.3 s per event: the stop comes while the run streams, even on a loaded machine (it ends
    # the run, so the pace costs nothing)
    with served(build_demo_app(delay_s=0.3)) as base:
        with httpx.stream("POST", base + "/api/chat", json=CHAT, timeout=30) as r:
            it = r.iter_text()
            text = next(it)
            stop = httpx.post(f"{base}/api/chat/c1/stop", timeout=30)
            assert stop.status_code == 200
            text += "".join(it)
        assert httpx.post(f"{base}/api/chat/c1/stop", timeout=30).status_code == 409
    payloads = [d for _, d in _frames(text)]
    assert payloads[-1] == "[DONE]"
    assert msgspec.json.decode(payloads[-2]) == {"type": "abort", "reason": "stopped"}


def test_requests_are_refused_with_a_code(served: Any) -> None:
    app = build_demo_app(delay_s=0.5)  # the held run still streams when the second comes
    app._max_body = 4096
    with served(app) as base:
        assert httpx.post(base + "/api/chat", content=b"x" * 5000,
                          timeout=30).status_code == 413
        deep = httpx.post(base + "/api/chat", content=b"[" * 3000 + b"]" * 1000, timeout=30)
        assert deep.status_code == 400 and deep.json()["error"] == "body_too_deep"
        shape = httpx.post(base + "/api/chat", json={"id": "c", "messages": 3}, timeout=30)
        assert shape.status_code == 400 and shape.json()["error"] == "invalid_request"
        assert httpx.get(base + "/nope", timeout=30).status_code == 404
        bad = httpx.post(base + "/ag-ui", json={"threadId": "t"}, timeout=30)
        assert bad.status_code == 400
        with httpx.stream("POST", base + "/api/chat", json=CHAT, timeout=30) as first:
            next(first.iter_text())
            busy = _post(base, "/api/chat", CHAT)
            assert busy.status_code == 409 and busy.json()["error"] == "chat_busy"


def test_a_failing_run_tells_the_client_a_category_and_a_ref_and_logs_the_detail(
        served: Any, caplog: pytest.LogCaptureFixture) -> None:
    """The client reads a short category and the run id to quote, never the exception's message
    (it can name an internal URL); the host's log has the detail under that id."""
    from bindloop.routing import AttemptError

    async def runner(chat: ChatInput, emit: Emit) -> Any:
        emit(0, TextEvent(content="partial"))
        await anyio.sleep(0)
        if chat.chat_id == "t":
            raise AttemptError("server_error", status_code=502,
                               message="http://10.0.0.7:8080/v1 answered 502")
        raise RuntimeError("db at postgres://admin@10.0.0.9 is down")

    caplog.set_level("ERROR", logger="bindloop.hosts.asgi.chat")
    with served(ChatApp(runner)) as base:
        ui_text = _post(base, "/api/chat", CHAT).text
        ui = [d for _, d in _frames(ui_text)]
        ag = [d for _, d in _frames(_post(base, "/ag-ui", {
            "threadId": "t", "runId": "r", "messages": []}).text)]
    run = _ids(ui_text)[0].rpartition(":")[0]
    assert msgspec.json.decode(ui[-2]) == {
        "type": "error", "errorText": f"the run failed: internal_error [ref {run}]"}
    assert msgspec.json.decode(ag[-1]) == {
        "type": "RUN_ERROR", "message": "the model call failed: server_error (HTTP 502) [ref r]"}
    seen = "".join(ui + ag)
    assert "Traceback" not in seen and "10.0.0" not in seen
    records = {r.getMessage(): r for r in caplog.records}
    assert set(records) == {f"run {run} of chat 'c1' (ui) failed", "run r of chat 't' (ag-ui) failed"}
    assert all(r.exc_info is not None for r in records.values())

def test_sqlite_logs_close_runs_a_dead_process_left_running(tmp_path: Path) -> None:
    logs = SqliteRunLogs(tmp_path / "r.db")
    logs.begin("r1", "c1", "ui", now_ms=1000, lease_until_ms=2000)
    assert logs.append("r1", b"{}") == 0 and logs.append("r1", b"[]") == 1
    logs.close()
    again = SqliteRunLogs(tmp_path / "r.db")  # a new process on the same file
    assert again.recover(now_ms=1500) == []  # the lease is live: another process may be on it
    with pytest.raises(RunBusyError):
        again.begin("r2", "c1", "ui", now_ms=1500, lease_until_ms=2500)
    assert again.recover(now_ms=2500) == ["r1"]
    record = again.record("r1")
    assert record is not None and record.status == "interrupted" and record.events == 2
    assert again.read("r1", 0) == [(1, b"[]")]
    assert again.append("r1", b"x") == 2


def test_the_demo_serves_its_page_beside_the_api(served: Any, tmp_path: Path) -> None:
    from examples.demos.ui_demo import _WithPage

    (tmp_path / "index.html").write_text("<div id=root></div>")
    (tmp_path / "app.js").write_text("export {}")
    with served(_WithPage(build_demo_app(delay_s=0), tmp_path)) as base:
        page = httpx.get(base + "/", timeout=30)
        script = httpx.get(base + "/app.js", timeout=30)
        chat = _post(base, "/api/chat", CHAT)  # the lifespan reached the app: runs start
    assert page.headers["content-type"] == "text/html" and page.text == "<div id=root></div>"
    assert script.headers["content-type"] == "text/javascript"
    assert _frames(chat.text)[-1] == (None, "[DONE]")


def _until_running(logs: Any, chat_id: str) -> None:
    """Wait (a generous deadline) until the chat's latest run has logged a frame and runs."""
    deadline = time.monotonic() + 20
    while (latest := logs.latest(chat_id, "ui")) is None or latest.status != "running" or (
            latest.events == 0):
        assert time.monotonic() < deadline, f"chat {chat_id!r} never started running"
        time.sleep(0.01)


def test_two_processes_on_one_shared_store_share_a_chat(served: Any,
                                                        log_store: LogStore) -> None:
    """Two hosts (each its own connection to the store, as two processes would be) on one
    SQLite file, Postgres schema or Redis prefix: a run's lease refuses a second run of the chat
    in the other host, which follows the run's log to a reconnecting client and stops it through
    the store; a run whose host died (its lease ran out) no longer blocks the chat."""
    import threading

    # 0.3 s per event (a run of about 4 s): b's refusal, its follower and its stop all come
    # while a's run still streams, even on a loaded machine
    a = build_demo_app(delay_s=0.3, logs=log_store.logs(), lease_ms=600)
    b = build_demo_app(delay_s=0.3, logs=log_store.logs(), lease_ms=600)
    watch = log_store.logs()
    with served(a) as base_a, served(b) as base_b:
        whole: list[str] = []
        reader = threading.Thread(target=lambda: whole.append(
            _post(base_a, "/api/chat", {**CHAT, "id": "shared"}).text))
        reader.start()
        _until_running(watch, "shared")
        busy = _post(base_b, "/api/chat", {**CHAT, "id": "shared"})
        assert busy.status_code == 409 and busy.json()["error"] == "chat_busy"
        followed = httpx.get(f"{base_b}/api/chat/shared/stream", timeout=30)
        reader.join(30)
        assert followed.status_code == 200
        assert _frames(followed.text) == _frames(whole[0])  # the same ids, the same payloads
        assert httpx.get(f"{base_b}/api/chat/shared/stream", timeout=30).status_code == 204

        stopped: list[str] = []
        reader = threading.Thread(target=lambda: stopped.append(
            _post(base_a, "/api/chat", {**CHAT, "id": "halt"}).text))
        reader.start()
        _until_running(watch, "halt")
        stop = httpx.post(f"{base_b}/api/chat/halt/stop", timeout=30)
        assert stop.status_code == 202
        reader.join(30)
        payloads = [d for _, d in _frames(stopped[0])]
        assert msgspec.json.decode(payloads[-2]) == {"type": "abort", "reason": "stopped"}

    dead = log_store.logs()  # a host that died mid-run: its lease ran out long ago
    long_ago = time.time() * 1000 - 60_000
    dead.begin("ghost", "revived", "ui", now_ms=long_ago, lease_until_ms=long_ago + 1)
    with served(build_demo_app(delay_s=0, logs=log_store.logs())) as base:
        assert httpx.get(f"{base}/api/chat/revived/stream", timeout=30).status_code == 204
        assert _post(base, "/api/chat", {**CHAT, "id": "revived"}).status_code == 200
    record = dead.record("ghost")
    assert record is not None and record.status == "interrupted"


def test_many_short_chats_never_drop_a_running_one_and_a_full_log_refuses_with_503(
        served: Any) -> None:
    """More finished chats than the log keeps, posted while chats stream: a running chat keeps
    its log and finishes; with every kept run running, a new chat gets 503, not a dead app."""
    release = threading.Event()

    async def runner(chat: ChatInput, emit: Emit) -> Any:
        emit(0, TextEvent(content="hold"))
        if chat.chat_id.startswith("hold"):
            while not release.is_set():  # held open until the test lets it end
                await anyio.sleep(0.01)
        emit(0, TextEvent(content=" done"))

    with served(ChatApp(runner, logs=MemoryRunLogs(keep=3))) as base:
        with httpx.stream("POST", base + "/api/chat", json={**CHAT, "id": "hold-victim"},
                          timeout=30) as victim:
            chunks = victim.iter_text()
            text = next(chunks)
            for i in range(8):  # each a whole, quick chat: the log passes `keep` several times
                short = _post(base, "/api/chat", {**CHAT, "id": f"short{i}"})
                assert short.status_code == 200 and short.text.endswith("data: [DONE]\n\n")
            with httpx.stream("POST", base + "/api/chat", json={**CHAT, "id": "hold-2"},
                              timeout=30) as second:
                next(second.iter_text())
                with httpx.stream("POST", base + "/api/chat", json={**CHAT, "id": "hold-3"},
                                  timeout=30) as third:
                    next(third.iter_text())
                    full = _post(base, "/api/chat", {**CHAT, "id": "short-refused"})
                    assert full.status_code == 503 and full.json()["error"] == "too_many_runs"
                    release.set()
            text += "".join(chunks)
        after = _post(base, "/api/chat", {**CHAT, "id": "after"})
        assert after.status_code == 200
    payloads = [d for _, d in _frames(text)]
    assert payloads[-1] == "[DONE]"
    assert msgspec.json.decode(payloads[-2])["type"] == "finish"
    assert " done" in "".join(payloads)


@given(st.lists(st.tuples(st.sampled_from(["begin", "end", "append"]), st.integers(0, 300)),
                max_size=60),
       st.integers(1, 5), st.integers(1, 2000), st.integers(1, 500))
def test_memory_logs_keep_every_running_run_and_prune_ended_ones_past_a_bound(
        ops: list[tuple[str, int]], keep: int, max_bytes: int, max_age_ms: int) -> None:
    from bindloop.stores import RunsFullError

    logs = MemoryRunLogs(keep=keep, max_bytes=max_bytes, max_age_ms=max_age_ms)
    running: list[str] = []
    now = 0
    for n, (op, size) in enumerate(ops):
        now += size
        if op == "begin":
            try:
                logs.begin(f"r{n}", f"c{n}", "ui", now_ms=now, lease_until_ms=now + 10)
            except RunsFullError:
                assert len(running) == keep
                continue
            running.append(f"r{n}")
            ended = [r for r in logs._runs.values() if r.status != "running"]
            assert len(logs._runs) <= keep
            assert all(now - r.started_ms <= max_age_ms for r in ended)
            # over the byte bound only with no ended run left to drop (running ones are kept)
            assert logs._bytes <= max_bytes or not ended
        elif op == "end" and running:
            logs.end(running.pop(0), "finished")
        elif op == "append" and running:
            logs.append(running[-1], b"x" * size)
        for run_id in running:
            assert logs.record(run_id) is not None  # a running run's log is always there
        assert logs._bytes == sum(r.size for r in logs._runs.values())


@given(st.lists(st.tuples(st.sampled_from(["begin", "end", "append"]), st.integers(0, 300)),
                max_size=80),
       st.integers(1, 6), st.integers(1, 2000), st.integers(1, 500))
def test_memory_logs_drop_exactly_the_ended_runs_a_bound_needs_oldest_first(
        ops: list[tuple[str, int]], keep: int, max_bytes: int, max_age_ms: int) -> None:
    """Against a model that looks at every kept run at each begin: the logs kept after each
    begin are the same (the pruning stops early, never short)."""
    from bindloop.stores import RunsFullError

    logs = MemoryRunLogs(keep=keep, max_bytes=max_bytes, max_age_ms=max_age_ms)
    model: dict[str, list[Any]] = {}  # run id -> [status, size, started], in begin order
    running: list[str] = []
    now = 0
    for n, (op, size) in enumerate(ops):
        now += size
        if op == "begin":
            for run_id, (status, run_size, started) in list(model.items()):
                total = sum(r[1] for r in model.values())
                if status != "running" and (len(model) >= keep or total > max_bytes
                                            or now - started > max_age_ms):
                    del model[run_id]
            try:
                logs.begin(f"r{n}", f"c{n}", "ui", now_ms=now, lease_until_ms=now + 10)
            except RunsFullError:
                assert len(model) >= keep
                continue
            model[f"r{n}"] = ["running", 0, now]
            running.append(f"r{n}")
            assert list(logs._runs) == list(model)
        elif op == "end" and running:  # any running run, not only the oldest
            run_id = running.pop(size % len(running))
            logs.end(run_id, "finished")
            model[run_id][0] = "finished"
        elif op == "append" and running:
            logs.append(running[-1], b"x" * size)
            model[running[-1]][1] += size


def test_sqlite_logs_prune_ended_runs_by_age_and_count_and_upgrade_an_old_file(
        tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "old.db"
    old = sqlite3.connect(db)
    old.executescript("""
        CREATE TABLE protocol_runs (run_id TEXT PRIMARY KEY, chat_id TEXT NOT NULL,
            protocol TEXT NOT NULL, status TEXT NOT NULL, seq INTEGER NOT NULL,
            lease_until_ms REAL NOT NULL DEFAULT 0, stop_requested INTEGER NOT NULL DEFAULT 0);
        INSERT INTO protocol_runs VALUES ('ancient', 'c0', 'ui', 'finished', 1, 0, 0);
        INSERT INTO protocol_runs VALUES ('alive', 'c9', 'ui', 'running', 2, 1e15, 0);""")
    old.commit()
    old.close()
    logs = SqliteRunLogs(db, keep=2, max_age_ms=1000)
    assert logs.record("ancient") is not None  # nothing is pruned before the next begin
    for n in range(4):
        logs.begin(f"r{n}", f"c{n}", "ui", now_ms=5000 + n, lease_until_ms=10**15)
        logs.append(f"r{n}", b"frame")
        logs.end(f"r{n}", "finished")
    assert logs.record("ancient") is None  # started "at 0" in the old file: past the age
    assert logs.record("alive") is not None  # running: never pruned
    # keep=2: each begin keeps the newest two ended runs, so r3's begin dropped r0
    assert [r for r in ("r0", "r1", "r2", "r3") if logs.record(r)] == ["r1", "r2", "r3"]
    logs.begin("late", "c9x", "ui", now_ms=9000, lease_until_ms=10**15)
    assert [r for r in ("r2", "r3") if logs.record(r)] == []  # 4 s old: past the age bound
    assert logs.read("r3", None) == []


def test_a_resume_names_its_run_and_never_gets_another_runs_frames(served: Any) -> None:
    """Event ids are ``<run>:<offset>``: after the chat starts a new run, resuming the first run
    gets that run's remaining frames; an unknown run, another chat's run or a bare offset gets
    204, never the latest run's frames."""
    with served(build_demo_app(delay_s=0)) as base:
        first = _post(base, "/api/chat", {**CHAT, "id": "c"}).text
        second = _post(base, "/api/chat", {**CHAT, "id": "c", "messages": [
            {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "hello there"}]}]}).text
        first_ids, second_ids = _ids(first), _ids(second)
        assert len({i.rpartition(":")[0] for i in first_ids}) == 1
        assert {i.rpartition(":")[0] for i in first_ids}.isdisjoint(
            {i.rpartition(":")[0] for i in second_ids})
        rest = httpx.get(f"{base}/api/chat/c/stream",
                         headers={"last-event-id": first_ids[2]}, timeout=30)
        assert rest.status_code == 200
        assert _frames(rest.text) == _frames(first)[3:]
        other = _post(base, "/api/chat", {**CHAT, "id": "other"}).text
        tail = httpx.get(f"{base}/api/chat/c/stream", headers={"last-event-id": first_ids[-1]},
                         timeout=30)
        assert _frames(tail.text) == [(None, "[DONE]")]  # all but the bare end marker was seen
        for foreign in ("nope:1", "2", _ids(other)[0]):
            gone = httpx.get(f"{base}/api/chat/c/stream", headers={"last-event-id": foreign},
                             timeout=30)
            assert gone.status_code == 204, foreign
        bad = httpx.post(base + "/ag-ui", json={"threadId": "t", "runId": "r\nid: 9",
                                                "messages": []}, timeout=30)
        assert bad.status_code == 400 and bad.json()["error"] == "invalid_request"


@given(st.from_regex(r"[A-Za-z0-9._~-]{1,128}", fullmatch=True), st.integers(0, 10**18 - 1))
def test_run_event_ids_round_trip(run: str, offset: int) -> None:
    from bindloop.protocols import parse_run_event_id, sse_frame

    frame = sse_frame(b"{}", event_id=f"{run}:{offset}")
    header = frame.split(b"\n")[0][4:]
    assert parse_run_event_id(header) == (run, offset)
    assert parse_run_event_id(str(offset)) is None
