"""The Worker template's protocol routes bound one run's log (``MAX_LOG_BYTES``) in real workerd:
a provider that streams an answer far longer than the quota has its run stopped once the run's
frames reach it, the stream ends with the protocol's error (``log_full`` and the run's id) on both
``POST /api/chat`` and ``POST /ag-ui``, the Session object's log keeps what was logged (a resume
reads it to the same error), the Worker's log says why, and the chat takes its next message; on
the Worker's own ``/v1/chat`` the same quota ends the run with the ``error`` ``log_full`` and the
session goes on."""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from harness.fixtures.provider_replies import sse_event
from harness.fixtures.scripted_server import (
    RecordedRequest,
    ScriptedProviderServer,
    ScriptedReply,
    turn_reply,
)
from bindloop.testing import final_answer

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "worker" / "tools"))
from workerd_harness import WHEELS_DIR, Workerd, stage  # noqa: E402

QUOTA = 20_000
PIECE = "word " * 100  # 500 characters a chunk
PIECES = 2_000  # a million characters in all: fifty times the quota


def _chunk(model: str, delta: dict[str, Any] | None, finish: str | None = None) -> bytes:
    return sse_event({"id": "chatcmpl-long", "object": "chat.completion.chunk", "created": 0,
                      "model": model, "choices": [] if delta is None else [
                          {"index": 0, "delta": delta, "finish_reason": finish}]})


def policy(request: RecordedRequest) -> ScriptedReply:
    body = msgspec.json.decode(request.body)
    said = [m.get("content") for m in body["messages"] if m["role"] == "user"][-1]
    model = body["model"]
    if "forever" not in str(said):
        return turn_reply("openai_chat", final_answer("fine"), stream=True, model=model)
    chunks = [_chunk(model, {"role": "assistant", "content": ""})]
    chunks += [_chunk(model, {"content": PIECE}) for _ in range(PIECES)]
    chunks += [_chunk(model, {}, finish="stop"), sse_event("[DONE]")]
    return ScriptedReply(headers=(("content-type", "text/event-stream"),), chunks=tuple(chunks),
                         delay_s=0.002)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workerd]:
    tmp = tmp_path_factory.mktemp("log-quota")
    server = ScriptedProviderServer().start()
    server.set_responder("p", policy)
    wheels = Path(os.environ.get("BINDLOOP_WORKER_WHEELS", str(WHEELS_DIR)))
    config = stage(tmp / "stage", storage_dir=tmp / "do", with_conformance=False, bindings={
        "OPENAI_BASE_URL": server.base_url("p"), "OPENAI_API_KEY": "sk-test-secret",
        "MAX_LOG_BYTES": str(QUOTA)}, wheels_dir=wheels)
    try:
        with Workerd(config) as wd:
            yield wd
    finally:
        server.stop()


def _request(wd: Workerd, method: str, path: str, body: Any = None,
             headers: dict[str, str] | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", wd.port, timeout=120)
    try:
        conn.request(method, path, body=None if body is None else json.dumps(body),
                     headers={"content-type": "application/json", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def _events(text: str) -> list[tuple[str | None, str]]:
    """``(id, data)`` of each SSE event (comments -- the heartbeat -- left out)."""
    out = []
    for block in text.split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        ident = next((line[4:] for line in lines if line.startswith("id: ")), None)
        out.append((ident, "".join(line[6:] for line in lines if line.startswith("data: "))))
    return out


def _ui(chat_id: str, text: str) -> dict[str, Any]:
    return {"id": chat_id, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]}


def test_a_ui_run_streaming_past_its_quota_is_stopped_with_log_full(served: Workerd) -> None:
    status, text = _request(served, "POST", "/api/chat", _ui("long", "talk forever"))
    assert status == 200
    events = _events(text)
    assert events[-1] == (None, "[DONE]")
    run = str(events[0][0]).rpartition(":")[0]
    error = json.loads(events[-2][1])
    assert error == {"type": "error", "errorText": f"the run was stopped: log_full [ref {run}]"}
    size = sum(len(data.encode()) for _, data in events[:-1])
    assert QUOTA <= size <= QUOTA + 2 * len(PIECE) + 400  # nowhere near the million

    # The Session object's log kept it: a resume after frame 3 reads the rest, to that error
    # (polled: the log's last batch is flushed after the stream's end).
    deadline = time.monotonic() + 60
    while True:
        status, again = _request(served, "GET", "/api/chat/long/stream",
                                 headers={"last-event-id": f"{run}:3"})
        resumed = _events(again)
        if status == 200 and resumed[-2:] == events[-2:]:
            break
        assert time.monotonic() < deadline, (status, again[-500:])
        time.sleep(0.2)
    assert resumed[0][0] == f"{run}:4" and resumed[:-1] == events[4:-1]

    # The Worker's log says why; the chat takes its next message.
    deadline = time.monotonic() + 30
    while "LogFullError" not in served.log_path.read_text():
        assert time.monotonic() < deadline, served.log_path.read_text()[-3000:]
        time.sleep(0.2)
    assert f"quota is {QUOTA} bytes" in served.log_path.read_text()
    status, text = _request(served, "POST", "/api/chat", _ui("long", "hello"))
    assert status == 200 and '"type":"finish"' in text


def test_an_ag_ui_run_streaming_past_its_quota_ends_with_run_error(served: Workerd) -> None:
    status, text = _request(served, "POST", "/ag-ui", {
        "threadId": "long-t", "runId": "run-long", "messages": [
            {"id": "u1", "role": "user", "content": "talk forever"}], "tools": [],
        "context": [], "state": None, "forwardedProps": None})
    assert status == 200
    events = [json.loads(data) for _, data in _events(text)]
    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1]["type"] == "RUN_ERROR"
    assert events[-1]["message"].startswith("the run was stopped: log_full [ref r")
    assert sum(e["type"] == "TEXT_MESSAGE_START" for e in events) == sum(
        e["type"] == "TEXT_MESSAGE_END" for e in events)
    assert sum(len(d.encode()) for _, d in _events(text)) <= QUOTA + 2 * len(PIECE) + 400


def test_a_v1_run_streaming_past_its_quota_is_stopped_and_its_session_goes_on(
        served: Workerd) -> None:
    """The Worker's own ``/v1/chat``: the run's ``turn`` events stop at the quota, the stream ends
    with the ``error`` ``log_full``, the session keeps its input (``aborted``) and takes a new
    message."""
    status, text = _request(served, "POST", "/v1/chat", {"message": "talk forever"})
    assert status == 200
    blocks = [b for b in text.split("\n\n") if b.strip() and not b.startswith(":")]
    kinds = [next((line[7:] for line in b.split("\n") if line.startswith("event: ")), "")
             for b in blocks]
    datas = [json.loads("".join(line[6:] for line in b.split("\n") if line.startswith("data: ")))
             for b in blocks]
    assert kinds[0] == "session" and kinds[-1] == "error" and "turn" in kinds
    error = datas[-1]
    assert error["error"] == "log_full" and error["status"] == "aborted"
    assert sum(len(b) for b in blocks) <= QUOTA + 2 * len(PIECE) + 2_000
    session = error["session_id"]
    status, shown = _request(served, "GET", f"/v1/sessions/{session}")
    assert status == 200 and json.loads(shown)["status"] == "aborted", shown
    status, again = _request(served, "POST", "/v1/chat",
                             {"message": "hello", "session_id": session})
    assert status == 200 and "event: done" in again, again[-500:]
