"""A Worker directory of its own built on the wheel's ``bindloop.hosts.workers`` (not the
template; tests/worker/app_worker), in real workerd: its tools are plain functions, its
``authorize`` override names the caller, a tool that raises leaves a record in the Worker's log
while the client sees the failure as the protocol's tool error, a provider's 500 is a short
category to the client (with the run's id on the protocol routes) and a record in the log, and
the library's ``/v1`` and ``/api/chat`` routes run its tools, and ``MAX_LIVE_RUNS`` bounds each
caller's runs going at once (429 with ``Retry-After`` past it; another caller unaffected) and
``MAX_LIVE_RUNS_TOTAL`` all callers' runs together (429 before anything is stored), and
``CHAT_TTL_MS`` has the Session object's alarm delete a chat's storage once it has outlived its
last run.
"""

from __future__ import annotations

import http.client
import json
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from harness.fixtures.scripted_server import (
    RecordedRequest,
    ScriptedProviderServer,
    ScriptedReply,
    error_reply,
    turn_reply,
)
from bindloop.testing import final_answer, tool_call, tool_call_turn

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "worker" / "tools"))
from workerd_harness import Workerd, stage  # noqa: E402

APP = Path(__file__).resolve().parent / "app_worker"


def policy(request: RecordedRequest) -> ScriptedReply:
    body = msgspec.json.decode(request.body)
    last = body["messages"][-1]
    said = " ".join(str(m.get("content")) for m in body["messages"] if m["role"] == "user")
    if "slowly" in said:
        return turn_reply("openai_chat", final_answer("one two three four five six seven"),
                          stream=True, model=body["model"], delay_s=0.4)
    if "break" in said:
        return error_reply(500, b'{"error": {"message": "db at http://10.9.8.7:5432 refused"}}')
    if last["role"] == "tool":
        turn = final_answer(f"The tool said: {last['content']}")
    elif "weather" in said:
        turn = tool_call_turn([tool_call("lookup", {"city": "Lisbon"}, id="w1")])
    else:
        turn = tool_call_turn([tool_call("shout", {"text": "hi there"}, id="s1")])
    return turn_reply("openai_chat", turn, stream=True, model=body["model"])


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Workerd, ScriptedProviderServer]]:
    tmp = tmp_path_factory.mktemp("library")
    server = ScriptedProviderServer().start()
    server.set_responder("p", policy)
    config = stage(tmp / "stage", bindings={"PROVIDER_BASE_URL": server.base_url("p")},
                   storage_dir=tmp / "do", with_conformance=False, worker_dir=APP)
    try:
        with Workerd(config) as wd:
            yield wd, server
    finally:
        server.stop()


def _post(wd: Workerd, path: str, body: Any, headers: dict[str, str]) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", wd.port, timeout=120)
    try:
        conn.request("POST", path, body=json.dumps(body),
                     headers={"content-type": "application/json", **headers})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def _ui(chat_id: str, text: str) -> dict[str, Any]:
    return {"id": chat_id, "messages": [
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": text}]}]}


def test_the_authorize_override_names_the_caller(served: tuple[Workerd, ScriptedProviderServer]) -> None:
    wd, _ = served
    status, raw = _post(wd, "/api/chat", _ui("c0", "hello"), {})
    assert (status, json.loads(raw)["error"]) == (401, "unauthorized"), raw


def test_a_raising_tool_is_a_tool_error_to_the_client_and_a_record_in_the_log(
        served: tuple[Workerd, ScriptedProviderServer]) -> None:
    wd, _ = served
    status, raw = _post(wd, "/api/chat", _ui("c1", "the weather?"), {"x-user": "ann"})
    assert status == 200, raw
    parts = [json.loads(line[6:]) for line in raw.decode().splitlines()
             if line.startswith("data: {")]
    kinds = [p["type"] for p in parts]
    assert "tool-input-available" in kinds and "finish" in kinds, kinds
    # The model read the failure (the exception's type, never its message) and answered.
    said = "".join(p.get("delta", "") for p in parts if p["type"] == "text-delta")
    assert "ConnectionError" in said and "Lisbon" not in said, said
    log = wd.log_path.read_text()
    assert "tool lookup (call w1) of agent" in log and "ConnectionError" in log, log[-2000:]


def _get(wd: Workerd, path: str, headers: dict[str, str]) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", wd.port, timeout=120)
    try:
        conn.request("GET", path, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_the_v1_routes_run_the_workers_own_tools_behind_its_authorize(
        served: tuple[Workerd, ScriptedProviderServer]) -> None:
    wd, _ = served
    assert _post(wd, "/v1/chat", {"message": "say hi"}, {})[0] == 401
    status, raw = _post(wd, "/v1/chat", {"message": "say hi"}, {"x-user": "ann"})
    assert status == 200, raw
    blocks = raw.decode().split("\n\n")
    done = [json.loads(b.split("data: ", 1)[1]) for b in blocks if "event: done" in b]
    assert done and done[0]["text"] == "The tool said: HI THERE", raw
    tools = [json.loads(b.split("data: ", 1)[1]) for b in blocks if "event: tool" in b]
    assert [(t["phase"], t["name"]) for t in tools] == [("started", "shout"), ("finished", "shout")]
    sid = done[0]["session_id"]
    assert _get(wd, f"/v1/sessions/{sid}", {"x-user": "ann"})[0] == 200
    # Another identity naming the same session reaches another object: nothing there.
    status, raw = _get(wd, f"/v1/sessions/{sid}", {"x-user": "bob"})
    assert (status, json.loads(raw)["error"]) == (404, "unknown_session"), raw
    for path in (f"/v1/sessions/{sid}/stream",):
        assert _get(wd, path, {"x-user": "bob"})[0] == 404
    status, raw = _post(wd, "/v1/chat", {"message": "say hi", "session_id": sid}, {"x-user": "bob"})
    assert status == 404, raw


def test_a_provider_failure_is_a_category_to_the_client_and_a_record_in_the_log(
        served: tuple[Workerd, ScriptedProviderServer]) -> None:
    wd, _ = served
    status, raw = _post(wd, "/v1/chat", {"message": "break it"}, {"x-user": "ann"})
    assert status == 200, raw
    error = [json.loads(block.split("data: ", 1)[1]) for block in raw.decode().split("\n\n")
             if "event: error" in block][0]
    assert (error["error"], error["category"], error["status"]) == (
        "provider_failed", "server_error", 500), error
    status, raw = _post(wd, "/api/chat", _ui("c2", "break it"), {"x-user": "ann"})
    parts = [json.loads(line[6:]) for line in raw.decode().splitlines()
             if line.startswith("data: {")]
    text = next(p["errorText"] for p in parts if p["type"] == "error")
    assert text.startswith("the model call failed: server_error (HTTP 500) [ref r"), text
    assert "10.9.8.7" not in raw.decode()
    log = wd.log_path.read_text()
    assert f"of session {error['session_id']!r} failed" in log, log[-3000:]
    assert "of chat 'c2' (ui) failed" in log, log[-3000:]


def test_live_runs_per_identity_are_bounded(served: tuple[Workerd, ScriptedProviderServer]) -> None:
    """MAX_LIVE_RUNS=2: with two slow runs of one caller going, a third (either route) is a 429
    with Retry-After and claims nothing; another caller is served; once they end, it is too."""
    wd, server = served
    before = len(server.requests)
    held: list[int] = []

    def slow(chat_id: str) -> None:
        held.append(_post(wd, "/api/chat", _ui(chat_id, "answer slowly"), {"x-user": "cap"})[0])

    threads = [threading.Thread(target=slow, args=(f"slow{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(server.requests) - before < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(server.requests) - before == 2
    conn = http.client.HTTPConnection("127.0.0.1", wd.port, timeout=120)
    conn.request("POST", "/v1/chat", body=json.dumps({"message": "say hi"}),
                 headers={"content-type": "application/json", "x-user": "cap"})
    resp = conn.getresponse()
    body = json.loads(resp.read())
    conn.close()
    assert (resp.status, body["error"], resp.getheader("retry-after")) == (429, "too_many_runs", "1")
    status, raw = _post(wd, "/api/chat", _ui("third", "say hi"), {"x-user": "cap"})
    assert status == 429, raw
    assert _post(wd, "/api/chat", _ui("other", "say hi"), {"x-user": "dan"})[0] == 200
    for t in threads:
        t.join(60)
    assert held == [200, 200]
    deadline = time.monotonic() + 10  # the slots go back as the runs end
    while (status := _post(wd, "/v1/chat", {"message": "say hi"}, {"x-user": "cap"})[0]) == 429:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert status == 200


def test_live_runs_of_all_identities_are_bounded(
        served: tuple[Workerd, ScriptedProviderServer]) -> None:
    """MAX_LIVE_RUNS_TOTAL=3: with three slow runs of three callers going, a fourth caller's
    request (either route) is a 429 ``too_many_runs`` with Retry-After; nothing of it reached the
    provider or was stored (its chat is unknown). Once the runs end, it is served."""
    wd, server = served
    held: dict[str, int] = {}

    def slow(who: str) -> None:
        deadline = time.monotonic() + 30  # a slot of an earlier test's run may still be going back
        while (status := _post(wd, "/api/chat", _ui(f"slow-{who}", "answer slowly"),
                               {"x-user": who})[0]) == 429 and time.monotonic() < deadline:
            time.sleep(0.2)
        held[who] = status

    before = len(server.requests)
    threads = [threading.Thread(target=slow, args=(who,)) for who in ("t1", "t2", "t3")]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(server.requests) - before < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(server.requests) - before == 3
    conn = http.client.HTTPConnection("127.0.0.1", wd.port, timeout=120)
    conn.request("POST", "/api/chat", body=json.dumps(_ui("fourth", "say hi")),
                 headers={"content-type": "application/json", "x-user": "t4"})
    resp = conn.getresponse()
    body = json.loads(resp.read())
    conn.close()
    assert (resp.status, body["error"], resp.getheader("retry-after")) == (429, "too_many_runs", "1")
    status, raw = _post(wd, "/v1/chat", {"message": "say hi"}, {"x-user": "t4"})
    assert (status, json.loads(raw)["error"]) == (429, "too_many_runs"), raw
    assert len(server.requests) - before == 3  # the refused requests called no model
    conn = http.client.HTTPConnection("127.0.0.1", wd.port, timeout=60)
    conn.request("DELETE", "/api/chat/fourth", headers={"x-user": "t4"})
    resp = conn.getresponse()
    assert (resp.status, json.loads(resp.read())["error"]) == (404, "unknown_chat")
    conn.close()
    for t in threads:
        t.join(60)
    assert held == {"t1": 200, "t2": 200, "t3": 200}
    deadline = time.monotonic() + 30  # the slots go back as the runs end
    while (status := _post(wd, "/api/chat", _ui("fourth", "say hi"), {"x-user": "t4"})[0]) == 429:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert status == 200


def test_chats_expire_with_their_storage(tmp_path: Path) -> None:
    server = ScriptedProviderServer().start()
    server.set_responder("p", policy)
    config = stage(tmp_path / "stage", storage_dir=tmp_path / "do", with_conformance=False,
                   worker_dir=APP, bindings={"PROVIDER_BASE_URL": server.base_url("p"),
                                             "CHAT_TTL_MS": "1500"})
    user = {"x-user": "ann"}
    try:
        with Workerd(config) as wd:
            status, raw = _post(wd, "/v1/chat", {"message": "say hi"}, user)
            sid = [json.loads(b.split("data: ", 1)[1]) for b in raw.decode().split("\n\n")
                   if "event: done" in b][0]["session_id"]
            assert _post(wd, "/api/chat", _ui("c-exp", "say hi"), user)[0] == 200
            assert _get(wd, f"/v1/sessions/{sid}", user)[0] == 200
            deadline = time.monotonic() + 30
            while _get(wd, f"/v1/sessions/{sid}", user)[0] == 200:
                assert time.monotonic() < deadline, "the session never expired"
                time.sleep(0.25)
            assert _get(wd, f"/v1/sessions/{sid}", user)[0] == 404
            # The protocol chat's run released its lease before its response ended, after the
            # session's: its expiry has passed 1.5 s (and the alarm's delay) later. A DELETE is
            # the only probe (and it would delete a chat still there): wait well past that, for
            # an alarm a loaded machine runs late.
            time.sleep(5.0)
            conn = http.client.HTTPConnection("127.0.0.1", wd.port, timeout=60)
            conn.request("DELETE", "/api/chat/c-exp", headers=user)
            resp = conn.getresponse()
            assert (resp.status, json.loads(resp.read())["error"]) == (404, "unknown_chat")
            conn.close()
    finally:
        server.stop()
