"""The Worker template as an A2A 1.0 agent (bindloop.hosts.workers.a2a_route) in real workerd, against a
scripted OpenAI-chat provider on 127.0.0.1: the official ``@a2a-js/sdk`` client
(harness/clients/a2a/a2a_js.mjs: card, a streamed task read back, a context continued, an approval as
``input-required`` answered) and the official ``a2a-sdk`` Python client (a streamed task, a
question answered, cancel as the run's stop); the task is the context's Session object's run
(checkpointed there); and the refusals: bodies bounded with and without ``Content-Length``,
typed JSON-RPC errors that carry nothing internal, the identity hook (``API_TOKEN``)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
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
CLIENT = REPO / "harness" / "clients" / "a2a"
sys.path.insert(0, str(REPO / "worker" / "tools"))
from workerd_harness import Workerd, stage  # noqa: E402

HEADERS = {"A2A-Version": "1.0"}
TOKENS = "tok-alice,tok-bob"
HOLD = threading.Event()
"""While set, a ``hold`` message's model call hangs (no answer) until the run is stopped."""


def policy(request: RecordedRequest) -> ScriptedReply:
    body = msgspec.json.decode(request.body)
    last = body["messages"][-1]
    said = [m.get("content") for m in body["messages"] if m["role"] == "user"][-1]
    if said == "hold" and HOLD.is_set():
        return ScriptedReply(stall_before_headers=True)
    if said == "break":
        return error_reply(400, b'{"error":{"message":"bad request from http://10.0.0.7/v1"}}')
    if said == "hi":
        turn = final_answer("Hello from bindloop.")
    elif said == "again":
        turn = final_answer("Again.")
    elif said == "delete groceries" and last["role"] == "user":
        turn = tool_call_turn([tool_call("word_count", {"text": "groceries"}, id="c1")])
    elif said == "delete groceries":
        turn = final_answer("Deleted.")
    elif said == "ask" and last["role"] == "user":
        turn = tool_call_turn([tool_call("ask_user", {"question": "What is your name?"},
                                         id="ask-1")])
    elif said == "ask":
        turn = final_answer(f"Nice to meet you, {last['content']}.")
    else:
        turn = final_answer(f"You said: {said}")
    return turn_reply("openai_chat", turn, stream=True, model=body["model"], delay_s=0.001)


def _start(tmp: Path, server: ScriptedProviderServer, **extra: str) -> Workerd:
    bindings = {"OPENAI_BASE_URL": server.base_url("p"), "OPENAI_API_KEY": "sk-test-secret",
                "MAX_ITERATIONS": "6", "APPROVAL_TOOLS": "word_count", "RUN_LEASE_MS": "3000",
                **extra}
    config = stage(tmp / "stage", storage_dir=tmp / "do", with_conformance=False,
                   bindings=bindings)
    return Workerd(config).start()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workerd]:
    server = ScriptedProviderServer().start()
    server.set_responder("p", policy)
    workerd = _start(tmp_path_factory.mktemp("a2a"), server)
    try:
        yield workerd
    finally:
        workerd.stop()
        server.stop()


def _rpc(base: str, method: str, params: dict[str, Any], *,
         headers: dict[str, str] | None = None) -> dict[str, Any]:
    r = httpx.post(base + "/a2a", json={"jsonrpc": "2.0", "id": 7, "method": method,
                                        "params": params},
                   headers={**HEADERS, **(headers or {})}, timeout=60)
    assert r.status_code == 200, r.text
    answer: dict[str, Any] = r.json()
    return answer


def _message(text: str, **extra: Any) -> dict[str, Any]:
    return {"message": {"messageId": f"m-{time.monotonic_ns()}", "role": "ROLE_USER",
                        "parts": [{"text": text}], **extra}}


def test_the_a2a_js_sdk_client_against_the_worker(served: Workerd) -> None:
    if shutil.which("node") is None or not (CLIENT / "node_modules" / "@a2a-js" / "sdk").is_dir():
        pytest.fail("@a2a-js/sdk is not installed: cd harness/clients/a2a && npm ci")
    workerd = served
    base = workerd.base_url
    proc = subprocess.run(["node", str(CLIENT / "a2a_js.mjs"), base], capture_output=True,
                          text=True, timeout=300, cwd=CLIENT)
    assert proc.returncode == 0, proc.stderr + workerd.log_text()[-3000:]
    out = json.loads(proc.stdout)
    # TaskState: 1 submitted, 2 working, 3 completed, 6 input-required (the SDK's enum numbers)
    assert out["streamCases"][0] == "task" and out["streamCases"][-1] == "statusUpdate"
    assert "artifactUpdate" in out["streamCases"]
    assert out["streamStates"] == [1, 2, 3]
    assert out["task"] == {"state": 3, "text": "Hello from bindloop."}
    assert out["second"] == {"kind": "task", "state": 3, "sameContext": True, "text": "Again."}
    assert out["asked"] == {"state": 6, "data": [{
        "kind": "approval", "id": "approval-c1", "toolCallId": "c1", "toolName": "word_count",
        "arguments": {"text": "groceries"}}]}
    assert out["approved"] == {"state": 3, "text": "Deleted."}
    assert out["missing"] == "JsonRpcTaskNotFoundError"
    assert out["ended"] == "JsonRpcTaskNotCancelableError"


def test_the_a2a_sdk_python_client_streams_answers_and_cancels(
        served: Workerd) -> None:
    pytest.importorskip("a2a")
    import anyio
    from a2a.client import ClientConfig, create_client
    from a2a.types.a2a_pb2 import (
        CancelTaskRequest,
        GetTaskRequest,
        Message,
        Part,
        Role,
        SendMessageRequest,
        TaskState,
    )

    base = served.base_url

    def message(text: str, **ids: str) -> SendMessageRequest:
        return SendMessageRequest(message=Message(
            message_id=f"py-{time.monotonic_ns()}", role=Role.ROLE_USER,
            parts=[Part(text=text)], **ids))

    def states(events: list[Any]) -> list[str]:
        return [TaskState.Name(e.task.status.state) if e.HasField("task")
                else TaskState.Name(e.status_update.status.state)
                for e in events if e.HasField("task") or e.HasField("status_update")]

    async def main() -> dict[str, Any]:
        http = httpx.AsyncClient(timeout=60)
        client = await create_client(base, ClientConfig(streaming=True, httpx_client=http))
        try:
            out: dict[str, Any] = {}
            events = [e async for e in client.send_message(message("ask"))]
            out["asked"] = states(events)
            task_id = events[0].task.id
            context_id = events[0].task.context_id
            # the answer, sent with only the context's id, continues the task
            events = [e async for e in client.send_message(message("Ada",
                                                                    context_id=context_id))]
            out["answered"] = states(events)
            task = await client.get_task(GetTaskRequest(id=task_id))
            out["task"] = (task.id == task_id, TaskState.Name(task.status.state),
                           "".join(p.text for a in task.artifacts for p in a.parts))
            HOLD.set()
            try:
                stream = client.send_message(message("hold"))
                first = await stream.__anext__()
                held = first.task.id
                await anyio.sleep(1.0)
                canceled = await client.cancel_task(CancelTaskRequest(id=held))
                rest = [e async for e in stream]
            finally:
                HOLD.clear()
            out["canceled"] = TaskState.Name(canceled.status.state)
            out["stream_end"] = states(rest)[-1]
            return out
        finally:
            await client.close()
            await http.aclose()

    out = anyio.run(main)
    assert out["asked"] == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING",
                            "TASK_STATE_INPUT_REQUIRED"]
    assert out["answered"][-1] == "TASK_STATE_COMPLETED"
    assert out["task"] == (True, "TASK_STATE_COMPLETED", "Nice to meet you, Ada.")
    assert out["canceled"] == "TASK_STATE_CANCELED"
    assert out["stream_end"] == "TASK_STATE_CANCELED"


def test_a_task_is_the_contexts_checkpointed_run(served: Workerd) -> None:
    """The context's Session object holds the run's checkpoint: GET /v1/sessions on it is not
    reachable from outside, so the task's own record is read back instead -- after a restart of
    workerd (the Durable Object storage on disk), GetTask still finds the task and the context
    continues its conversation."""
    workerd = served
    base = workerd.base_url
    first = _rpc(base, "SendMessage", _message("remember me"))["result"]["task"]
    assert first["status"]["state"] == "TASK_STATE_COMPLETED"
    workerd.stop()
    workerd.start()
    base = workerd.base_url
    again = _rpc(base, "GetTask", {"id": first["id"]})["result"]
    assert (again["id"], again["status"]["state"]) == (first["id"], "TASK_STATE_COMPLETED")
    assert again["artifacts"][0]["parts"][0]["text"] == "You said: remember me"
    nxt = _rpc(base, "SendMessage", _message("again", contextId=first["contextId"]))
    task = nxt["result"]["task"]
    assert (task["contextId"], task["status"]["state"]) == (first["contextId"],
                                                           "TASK_STATE_COMPLETED")
    assert task["id"] != first["id"]
    # the context's earlier task stays readable, ended
    old = _rpc(base, "GetTask", {"id": first["id"]})["result"]
    assert (old["id"], old["status"]["state"]) == (first["id"], "TASK_STATE_COMPLETED")
    assert _rpc(base, "CancelTask", {"id": first["id"]})["error"]["code"] == -32002


def test_history_length_shapes_the_answer_not_the_record(served: Workerd) -> None:
    base = served.base_url
    body = {"jsonrpc": "2.0", "id": "s1", "method": "SendStreamingMessage",
            "params": {**_message("short"), "configuration": {"historyLength": 0}}}
    with httpx.stream("POST", base + "/a2a", json=body, headers=HEADERS, timeout=60) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    assert all(e["jsonrpc"] == "2.0" and e["id"] == "s1" for e in events)
    first = events[0]["result"]["task"]
    assert "history" not in first and first["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert events[-1]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    task = _rpc(base, "GetTask", {"id": first["id"]})["result"]
    assert [m["parts"][0]["text"] for m in task["history"]] == ["short"]
    assert _rpc(base, "GetTask", {"id": first["id"], "historyLength": 0})["result"].get(
        "history") is None


def _sse_events(base: str, method: str, params: dict[str, Any], out: list[dict[str, Any]],
                started: threading.Event) -> None:
    body = {"jsonrpc": "2.0", "id": method, "method": method, "params": params}
    try:
        with httpx.stream("POST", base + "/a2a", json=body, headers=HEADERS, timeout=60) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    out.append(json.loads(line[6:]))
                    started.set()
    except httpx.HTTPError:
        out.append({"dropped": True})  # the server went away mid-stream


def _state(event: dict[str, Any]) -> str:
    result = event["result"]
    return str((result.get("task") or result.get("statusUpdate") or {"status": {"state": ""}})[
        "status"]["state"])


def test_a_subscriber_follows_a_running_task_to_its_cancel(served: Workerd) -> None:
    base = served.base_url
    HOLD.set()
    try:
        sent: list[dict[str, Any]] = []
        first = threading.Event()
        sender = threading.Thread(target=_sse_events, args=(
            base, "SendStreamingMessage", _message("hold"), sent, first))
        sender.start()
        assert first.wait(60)
        task_id = sent[0]["result"]["task"]["id"]
        time.sleep(0.5)
        followed: list[dict[str, Any]] = []
        subscribed = threading.Event()
        follower = threading.Thread(target=_sse_events, args=(
            base, "SubscribeToTask", {"id": task_id}, followed, subscribed))
        follower.start()
        assert subscribed.wait(60)
        assert followed[0]["id"] == "SubscribeToTask"
        assert followed[0]["result"]["task"]["id"] == task_id
        canceled = _rpc(base, "CancelTask", {"id": task_id})["result"]
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        sender.join(60)
        follower.join(60)
        assert _state(sent[-1]) == _state(followed[-1]) == "TASK_STATE_CANCELED"
    finally:
        HOLD.clear()
    # an ended task has nothing to follow
    assert _rpc(base, "SubscribeToTask", {"id": task_id})["error"]["code"] == -32004


def test_a_run_lost_with_its_isolate_leaves_its_task_failed(served: Workerd) -> None:
    """workerd killed (SIGKILL) mid-run: the object's alarm does not continue an A2A run, so once
    its lease has run out the task reads FAILED, and its context takes the next message."""
    HOLD.set()
    try:
        sent: list[dict[str, Any]] = []
        first = threading.Event()
        sender = threading.Thread(target=_sse_events, args=(
            served.base_url, "SendStreamingMessage", _message("hold"), sent, first))
        sender.start()
        assert first.wait(60)
        task = sent[0]["result"]["task"]
        time.sleep(1.0)
        served.kill()
        sender.join(60)
    finally:
        HOLD.clear()
    served.start()
    base = served.base_url
    deadline = time.monotonic() + 30
    while True:
        got = _rpc(base, "GetTask", {"id": task["id"]})["result"]
        if got["status"]["state"] != "TASK_STATE_WORKING" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert got["status"]["state"] == "TASK_STATE_FAILED"
    assert got["status"]["message"]["parts"][0]["text"] == \
        "the run was lost; send the message again"
    nxt = _rpc(base, "SendMessage", _message("after", contextId=task["contextId"]))
    assert nxt["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", nxt


def test_return_immediately_answers_before_the_run_ends(served: Workerd) -> None:
    base = served.base_url
    params = {**_message("later"), "configuration": {"returnImmediately": True}}
    task = _rpc(base, "SendMessage", params)["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    deadline = time.monotonic() + 30
    while True:
        got = _rpc(base, "GetTask", {"id": task["id"]})["result"]
        if got["status"]["state"] == "TASK_STATE_COMPLETED" or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert got["status"]["state"] == "TASK_STATE_COMPLETED"
    assert got["artifacts"][0]["parts"][0]["text"] == "You said: later"


def test_a_failed_run_says_its_category_and_nothing_internal(served: Workerd) -> None:
    base = served.base_url
    task = _rpc(base, "SendMessage", _message("break"))["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    said = json.dumps(task)
    assert "10.0.0.7" not in said and "sk-test-secret" not in said and "Traceback" not in said


def _raw(port: int, head: str, chunks: list[bytes], *, chunked: bool) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(head.encode())
        for chunk in chunks:
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk) if chunked else chunk)
            except OSError:
                break  # the server answered and closed while we were still sending
        if chunked:
            try:
                sock.sendall(b"0\r\n\r\n")
            except OSError:
                pass
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            got = sock.recv(65536)
            if not got:
                break
            answer += got
        return answer


def test_bad_input_gets_typed_refusals(served: Workerd) -> None:
    workerd = served
    base = workerd.base_url
    port = workerd.port
    # a body over 64 KiB: with a Content-Length, refused before it is read; chunked, the moment
    # it passes the bound (4 MiB offered)
    declared = _raw(port, "POST /a2a HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                    f"content-length: {4 * 2**20}\r\n\r\n", [b"x" * 65536], chunked=False)
    assert declared.startswith(b"HTTP/1.1 413"), declared[:300]
    started = time.monotonic()
    streamed = _raw(port, "POST /a2a HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                    "transfer-encoding: chunked\r\n\r\n", [b"x" * 65536] * 64, chunked=True)
    assert streamed.startswith(b"HTTP/1.1 413"), streamed[:300]
    assert time.monotonic() - started < 15
    assert b'"code":-32600' in streamed and b"65536" in streamed, streamed[:600]
    # JSON-RPC refusals, each typed
    for body, code in ((b"{not json", -32700), (b"[1, 2]", -32600),
                       (b"[" * 100 + b"]" * 100, -32600),
                       (b'{"jsonrpc":"2.0","id":1,"method":"Nope","params":{}}', -32601),
                       (b'{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}', -32004),
                       (b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"../x"}}',
                        -32001),
                       (b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}', -32602)):
        r = httpx.post(base + "/a2a", content=body, headers=HEADERS, timeout=30)
        assert (r.status_code, r.json()["error"]["code"]) == (200, code), (body[:40], r.text)
        assert "Traceback" not in r.text and "/session/" not in r.text
    r = httpx.post(base + "/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                        "params": {"id": "x.1"}}, timeout=30)
    assert r.json()["error"]["code"] == -32009  # no A2A-Version: 0.3, not this agent's
    file_part = {"message": {"messageId": "f", "role": "ROLE_USER",
                             "parts": [{"url": "https://example.com/x.pdf"}]}}
    assert _rpc(base, "SendMessage", file_part)["error"]["code"] == -32005
    card = httpx.get(base + "/.well-known/agent-card.json", timeout=30).json()
    assert card["supportedInterfaces"] == [{"url": base + "/a2a", "protocolBinding": "JSONRPC",
                                            "protocolVersion": "1.0"}]
    assert card["capabilities"]["streaming"] is True


def test_the_identity_hook_applies(tmp_path: Path) -> None:
    """With ``API_TOKEN`` set, a call without a token is a 401 (a JSON-RPC error), and a task is
    its identity's: another token finds no such task."""
    with ScriptedProviderServer() as server:
        server.set_responder("p", policy)
        workerd = _start(tmp_path, server, API_TOKEN=TOKENS)
        try:
            base = workerd.base_url
            r = httpx.post(base + "/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                                "params": {"id": "x.1"}}, headers=HEADERS)
            assert r.status_code == 401 and r.json()["error"]["code"] == -32600
            alice = {"authorization": "Bearer tok-alice"}
            task = _rpc(base, "SendMessage", _message("mine"), headers=alice)["result"]["task"]
            assert task["status"]["state"] == "TASK_STATE_COMPLETED"
            assert _rpc(base, "GetTask", {"id": task["id"]}, headers=alice)["result"]["id"] == \
                task["id"]
            bob = {"authorization": "Bearer tok-bob"}
            assert _rpc(base, "GetTask", {"id": task["id"]}, headers=bob)["error"]["code"] == \
                -32001
            # bob naming alice's context gets a context of his own
            his = _rpc(base, "SendMessage", _message("his", contextId=task["contextId"]),
                       headers=bob)["result"]["task"]
            assert his["history"][0]["parts"][0]["text"] == "his"
            assert _rpc(base, "GetTask", {"id": task["id"]}, headers=alice)["result"][
                "status"]["state"] == "TASK_STATE_COMPLETED"
        finally:
            workerd.stop()

