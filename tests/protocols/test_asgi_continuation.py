"""A run whose host process is killed (SIGKILL) mid-run is taken over, once its lease is out, by
another process on the same run logs (SQLite, Postgres, Redis: every test here but the npm
clients' runs on all three), and finished from its last save: the client's resume
gets the continued run's frames -- the message an uninterrupted run gives -- and what ran before
the save (a tool, a model turn) is not done again. Real processes (uvicorn on 127.0.0.1), a
scripted OpenAI-chat provider on loopback, plain HTTP as a client sends it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from bindloop.contracts import ModelTurnResult, ToolCall, TurnUsage
from harness.fixtures.scripted_server import (
    RecordedRequest,
    ScriptedProviderServer,
    ScriptedReply,
    turn_reply,
)

from ai_sdk_majors import CLIENTS, MAJORS, installed, module_root, node_for, ran_major
from log_stores import LogStore
from tests.worker.test_workerd_protocols import HOLD
from tests.worker.test_workerd_protocols import policy as worker_policy

ROOT = Path(__file__).resolve().parents[2]
HOST = Path(__file__).with_name("continued_host.py")
LEASE_MS = 800
USAGE = TurnUsage(input_tokens=3, output_tokens=3)


def _last(request: RecordedRequest) -> dict[str, Any]:
    messages: list[dict[str, Any]] = msgspec.json.decode(request.body)["messages"]
    return messages[-1]


def respond(request: RecordedRequest) -> ScriptedReply:
    """The provider: a user asking to count gets a ``word_count`` call; a user asking to delete a
    ``delete_note`` call; a tool's result gets a long answer, streamed slowly (a process can be
    killed while it streams)."""
    last = _last(request)
    if last["role"] == "tool":
        text = ("The tool answered " + str(last["content"]) + ", and here is a long answer "
                "that takes a while to stream, word after word, to the end.")
        return turn_reply("openai_chat", ModelTurnResult(text=text, finish_reason="stop",
                                                         usage=USAGE),
                          stream=True, delay_s=0.15)
    words = str(last["content"]).split()
    if words[:1] == ["delete"]:
        call = ToolCall(id="call-del", name="delete_note",
                        arguments=msgspec.json.encode({"title": words[1]}).decode())
    else:
        call = ToolCall(id="call-count", name="word_count",
                        arguments=msgspec.json.encode({"text": " ".join(words[1:])}).decode())
    return turn_reply("openai_chat", ModelTurnResult(text="On it.", tool_calls=(call,),
                                                     finish_reason="tool_calls", usage=USAGE),
                      stream=True)


class Host:
    """One host process (``continued_host.py``) on ``port``."""

    def __init__(self, tmp: Path, provider: str, *extra: str,
                 store: LogStore | None = None) -> None:
        port_file = tmp / f"port-{uuid.uuid4().hex}"
        self.proc = subprocess.Popen(
            [sys.executable, str(HOST), str(port_file), str(tmp / "runs.db"), provider,
             str(tmp / "ran.txt"), "--lease-ms", str(LEASE_MS), *extra,
             *(store.args() if store is not None else ())],
            cwd=ROOT, env={"PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "PATH": "/usr/bin:/bin"})
        deadline = time.monotonic() + 20
        while not port_file.exists():  # written once the host listens
            assert self.proc.poll() is None, "the host process exited"
            assert time.monotonic() < deadline, "the host did not start"
            time.sleep(0.05)
        self.port = int(port_file.read_text())
        self.base = f"http://127.0.0.1:{self.port}"
        while True:
            try:
                httpx.get(f"{self.base}/nothing", timeout=1)
                return
            except httpx.TransportError:
                assert self.proc.poll() is None, "the host process exited"
                assert time.monotonic() < deadline, "the host did not start"
                time.sleep(0.05)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()  # SIGKILL: no shutdown, no lease renewal, ever
        self.proc.wait()


@pytest.fixture
def provider() -> Iterator[ScriptedProviderServer]:
    with ScriptedProviderServer() as server:
        server.set_responder("openai", respond)
        yield server


@pytest.fixture
def hosts(tmp_path: Path, provider: ScriptedProviderServer) -> Iterator[list[Host]]:
    started: list[Host] = []
    yield started
    for host in started:
        host.kill()


def _events(text: str) -> list[tuple[str | None, bytes]]:
    """The SSE events of a response body: (id, data)."""
    out = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "data" in fields:
            out.append((fields.get("id"), fields["data"].encode()))
    return out


def _message(events: list[tuple[str | None, bytes]]) -> list[Any]:
    """The payloads, the run's own message id replaced (each run mints one)."""
    datas = [d for _, d in events]
    start = msgspec.json.decode(datas[0])
    mid = start.get("messageId", "")
    return [d.decode().replace(mid, "MSG") if mid else d.decode() for d in datas]


def _post_until_killed(base: str, body: dict[str, Any], got: list[str]) -> None:
    """POST ``body`` and keep what arrives until the connection dies."""
    try:
        with httpx.stream("POST", f"{base}/api/chat", json=body, timeout=30) as response:
            for line in response.iter_lines():
                got.append(line)
    except httpx.TransportError:
        pass


CHAT = {"id": "c1", "trigger": "submit-message", "messages": [
    {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "count one two three"}]}]}


def _turns_after_tool(provider: ScriptedProviderServer) -> int:
    return sum(1 for r in provider.requests if _last(r)["role"] == "tool")


def test_a_killed_hosts_run_is_continued_by_another_process_from_its_last_save(
        tmp_path: Path, provider: ScriptedProviderServer, hosts: list[Host],
        log_store: LogStore) -> None:
    url = provider.base_url("openai")
    a = Host(tmp_path, url, store=log_store)
    hosts.append(a)
    got: list[str] = []
    client = threading.Thread(target=_post_until_killed, args=(a.base, CHAT, got))
    client.start()
    deadline = time.monotonic() + 20
    while _turns_after_tool(provider) == 0:  # the tool ran and the round was saved
        assert time.monotonic() < deadline, "the run never reached its second turn"
        time.sleep(0.01)
    time.sleep(0.4)  # a few words of the answer are out
    a.kill()
    client.join(10)
    seen = _events("\n".join(got) + "\n\n")
    assert seen and not any(d == b"[DONE]" for _, d in seen), "the run was not cut mid-stream"
    dead_run = str(seen[0][0]).rsplit(":", 1)[0]

    b = Host(tmp_path, url, store=log_store)  # a process started on the same store (a restart)
    hosts.append(b)
    # Resumed at once, the dead run's lease maybe not out yet: what it logged after its save
    # is held back until its continuation goes on from there.
    resumed = httpx.get(f"{b.base}/api/chat/c1/stream", timeout=30)  # useChat's resume
    assert resumed.status_code == 200
    events = _events(resumed.text)
    assert events[-1][1] == b"[DONE]"
    # Offset after offset: the dead run's frames up to its save (when the resume came while it
    # was lost), then its continuation's, a run of its own: one stream, the whole message.
    ids = [str(i).rsplit(":", 1) for i, _ in events[:-1]]
    assert [int(n) for _, n in ids] == list(range(len(events) - 1))
    runs = list(dict.fromkeys(r for r, _ in ids))
    assert runs[-1] != dead_run and runs[:-1] in ([], [dead_run])
    assert (tmp_path / "ran.txt").read_text().splitlines() == ['word_count {"text":"one two three"}']
    assert len(provider.requests) == 3  # the tool round once, the answer twice (cut, then again)
    assert _turns_after_tool(provider) == 2

    whole = httpx.post(f"{b.base}/api/chat", json={**CHAT, "id": "c2"}, timeout=30)
    assert _message(events) == _message(_events(whole.text))

    # The run the client saw, named by its last event: up to the save the continuation repeats,
    # the rest comes from it; past the save (frames the continuation did not repeat) it is gone.
    saved = next(n for n, (_, d) in enumerate(seen)
                 if d.startswith(b'{"type":"tool-output-available"'))  # the round's last frame
    after = httpx.get(f"{b.base}/api/chat/c1/stream", timeout=30,
                      headers={"last-event-id": f"{dead_run}:{saved}"})
    assert after.status_code == 200, (after.status_code, saved, after.text)
    assert _events(after.text) == events[saved + 1:]
    gone = httpx.get(f"{b.base}/api/chat/c1/stream", timeout=30,
                     headers={"last-event-id": str(seen[-1][0])})
    assert gone.status_code == 204


def test_a_run_lost_before_its_first_save_runs_its_request_again(
        tmp_path: Path, provider: ScriptedProviderServer, hosts: list[Host],
        log_store: LogStore) -> None:
    """No boundary settled before the process died: the continuation starts the request over
    (the same message id: the stream a reconnecting client folds is one message)."""
    url = provider.base_url("openai")
    provider.set_responder("openai", lambda r: turn_reply(
        "openai_chat", ModelTurnResult(text="A slow answer with many words in it, one by one.",
                                       finish_reason="stop", usage=USAGE),
        stream=True, delay_s=0.2))
    a = Host(tmp_path, url, store=log_store)
    hosts.append(a)
    got: list[str] = []
    body = {**CHAT, "messages": [{"id": "u1", "role": "user",
                                  "parts": [{"type": "text", "text": "hello"}]}]}
    client = threading.Thread(target=_post_until_killed, args=(a.base, body, got))
    client.start()
    deadline = time.monotonic() + 20
    while not any('"text-delta"' in line for line in got):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    a.kill()
    client.join(10)
    b = Host(tmp_path, url, store=log_store)
    hosts.append(b)
    resumed = httpx.get(f"{b.base}/api/chat/c1/stream", timeout=30)
    events = _events(resumed.text)
    assert events[-1][1] == b"[DONE]"
    whole = httpx.post(f"{b.base}/api/chat", json={**body, "id": "c2"}, timeout=30)
    assert _message(events) == _message(_events(whole.text))
    first = msgspec.json.decode(_events("\n".join(got) + "\n\n")[0][1])
    assert msgspec.json.decode(events[0][1]) == first  # the message the client began to fold


DELETE = {"id": "d1", "trigger": "submit-message", "messages": [
    {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "delete groceries"}]}]}


def _approved(chat_id: str, asked: list[tuple[str | None, bytes]]) -> dict[str, Any]:
    """The client's next request: the approval of the call the run asked about."""
    chunks = [msgspec.json.decode(d) for _, d in asked if d != b"[DONE]"]
    request = next(c for c in chunks if c["type"] == "tool-approval-request")
    message_id = next(c for c in chunks if c["type"] == "start")["messageId"]
    return {"id": chat_id, "trigger": "submit-message", "messages": [
        *DELETE["messages"],
        {"id": message_id, "role": "assistant", "parts": [
            {"type": "text", "text": "On it."},
            {"type": "tool-delete_note", "toolCallId": request["toolCallId"],
             "state": "approval-responded", "input": {"title": "groceries"},
             "approval": {"id": request["approvalId"], "approved": True}}]}]}


def _answered(provider: ScriptedProviderServer) -> list[str]:
    """What the model read as each tool result it was sent."""
    return [str(_last(r)["content"]) for r in provider.requests if _last(r)["role"] == "tool"]


@pytest.mark.parametrize("lost", ["after", "in"])
def test_an_approved_call_is_not_run_again_when_its_process_dies_before_the_save_after_it(
        tmp_path: Path, provider: ScriptedProviderServer, hosts: list[Host], lost: str,
        log_store: LogStore) -> None:
    """The approved ``delete_note`` runs through a receipt. Killed right after its outcome was
    recorded (before the save that follows), the continuation answers the call with the recorded
    outcome; killed while it ran (no outcome), with "may have run". It never runs twice."""
    url = provider.base_url("openai")
    a = Host(tmp_path, url, "--receipts", "--receipt-lease-ms", "500",
             f"--die-{lost}", "delete_note", store=log_store)
    hosts.append(a)
    asked = _events(httpx.post(f"{a.base}/api/chat", json=DELETE, timeout=30).text)
    got: list[str] = []
    _post_until_killed(a.base, _approved("d1", asked), got)  # A dies in or after the call
    a.proc.wait(10)
    assert (tmp_path / "ran.txt").read_text().splitlines() == ['delete_note {"title":"groceries"}']
    assert _answered(provider) == []  # the model never saw an outcome from A

    b = Host(tmp_path, url, "--receipts", "--receipt-lease-ms", "500", store=log_store)
    hosts.append(b)
    resumed = httpx.get(f"{b.base}/api/chat/d1/stream", timeout=30)
    events = _events(resumed.text)
    assert events[-1][1] == b"[DONE]"
    assert (tmp_path / "ran.txt").read_text().splitlines() == ['delete_note {"title":"groceries"}']
    outcome = "deleted 'groceries'" if lost == "after" else (
        '{"error":"this call was running when its process died: it may or may not have taken '
        'effect, and it was not run again","kind":"error"}')
    assert _answered(provider) == [outcome]
    if lost == "after":
        # The stream the client resumes is the one an uninterrupted approval gives.
        asked2 = _events(httpx.post(f"{b.base}/api/chat", json={**DELETE, "id": "d2"},
                                    timeout=30).text)
        whole = httpx.post(f"{b.base}/api/chat", json=_approved("d2", asked2), timeout=30)
        assert _message(events) == _message(_events(whole.text))


@pytest.mark.parametrize("shared", [True, False])
def test_an_approval_asked_by_a_process_that_died_is_taken_by_the_next_once(
        tmp_path: Path, provider: ScriptedProviderServer, hosts: list[Host],
        log_store: LogStore, shared: bool) -> None:
    """The call waiting for approval is recorded in the shared store (``SqlitePendingApprovals``,
    ``PostgresPendingApprovals``, ``RedisPendingApprovals``): the decision, posted to a process
    started after the one that asked died (SIGKILL), runs the call once; the same decision again
    runs nothing. Recorded in the dead process's memory only, the decision is refused."""
    url = provider.base_url("openai")
    flags = ("--shared-approvals",) if shared else ()
    a = Host(tmp_path, url, *flags, store=log_store)
    hosts.append(a)
    asked = _events(httpx.post(f"{a.base}/api/chat", json=DELETE, timeout=30).text)
    a.kill()
    b = Host(tmp_path, url, *flags, store=log_store)
    hosts.append(b)
    decided = _events(httpx.post(f"{b.base}/api/chat", json=_approved("d1", asked),
                                 timeout=30).text)
    chunks = [msgspec.json.decode(d) for _, d in decided if d != b"[DONE]"]
    ran = (tmp_path / "ran.txt").read_text().splitlines() if (tmp_path / "ran.txt").exists() \
        else []
    if not shared:
        assert ran == [] and any(c["type"] == "error" for c in chunks)
        return
    assert ran == ['delete_note {"title":"groceries"}']
    assert {"type": "tool-output-available", "toolCallId": "call-del",
            "output": "deleted 'groceries'"} in chunks
    again = _events(httpx.post(f"{b.base}/api/chat", json=_approved("d1", asked),
                               timeout=30).text)
    assert any(msgspec.json.decode(d)["type"] == "error" for _, d in again if d != b"[DONE]")
    assert (tmp_path / "ran.txt").read_text().splitlines() == ran


@pytest.mark.parametrize("major", MAJORS)
def test_the_real_clients_reconnect_across_a_host_killed_mid_run(
        tmp_path: Path, hosts: list[Host], major: int) -> None:
    """The Worker's kill test, against the ASGI host (``harness/clients/worker_kill.mjs``, the
    same script and provider): the AI SDK's ``DefaultChatTransport`` and AG-UI's ``HttpAgent``
    each start a run that makes its tool round and then waits on the provider, and a third (AI
    SDK) waits on its first model call; the host is killed with SIGKILL and another started on
    the same file. Each client reconnects while its run is lost and ends with the message an
    uninterrupted run gives; the round's model call is not made again, the early run's request
    is run again from its start."""
    if not installed(major):
        if os.environ.get("BINDLOOP_REQUIRE_CLIENTS") == "1":
            pytest.fail("the npm clients are not installed: run `make test-clients`")
        pytest.skip("npm clients not installed (make test-clients)")
    with ScriptedProviderServer() as server:
        server.set_responder("v1", worker_policy)

        def calls(role: str, said: bytes = b"hold count these four words") -> int:
            return sum(1 for r in server.requests if said in r.body
                       and msgspec.json.decode(r.body)["messages"][-1]["role"] == role)

        url = server.base_url("v1")
        a = Host(tmp_path, url)
        hosts.append(a)
        HOLD[0] = True
        node = subprocess.Popen(
            [str(node_for(major)), str(CLIENTS / "worker_kill.mjs"), a.base,
             str(module_root(major))], cwd=CLIENTS, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert node.stdout is not None
            ready = node.stdout.readline()
            assert ready == "ready\n", ready + (node.stderr.read() if node.poll() else "")
            deadline = time.monotonic() + 30
            while (calls("tool") < 2 or calls("user", b"hold first") < 1) and (
                    time.monotonic() < deadline):  # every run waits on the provider
                time.sleep(0.05)
            assert (calls("user"), calls("tool"), calls("user", b"hold first")) == (2, 2, 1)
            a.kill()
            b = Host(tmp_path, url)
            hosts.append(b)
            HOLD[0] = False
            out, err = node.communicate(b.base + "\n", timeout=180)
            assert node.returncode == 0, f"{out}\n{err}"
            assert ran_major(out, "version") == major
        finally:
            HOLD[0] = False
            if node.poll() is None:
                node.kill()
                node.wait()
        assert calls("user") == 4 and calls("tool") == 6
        assert calls("user", b"hold first") == 3 and calls("tool", b"hold first") == 2


def test_a_lost_run_that_cannot_be_continued_fails_alone_and_the_app_lives_on(
        served: Any, log_store: LogStore) -> None:
    """A stored request this app cannot read (written by something else): its continuation is
    closed as failed and logged; the app goes on serving."""
    from bindloop.hosts.asgi.chat import ChatApp
    from bindloop.hosts.chat.run import ChatInput, Emit

    async def runner(chat: ChatInput, emit: Emit) -> Any:
        return None

    dead = log_store.logs()
    dead.begin("ghost", "c-ghost", "ui", now_ms=0, lease_until_ms=1)  # its lease ran out long ago
    dead.claim("ghost", b"not a claim")
    logs = log_store.logs()
    with served(ChatApp(runner, logs=logs, lease_ms=300)) as base:
        deadline = time.monotonic() + 10
        # read through another connection, as another process would: it sees committed states
        # only (the app's own connection, read from this thread, can show a write half done)
        while (record := dead.record("ghost")) is not None and record.status == "running":
            assert time.monotonic() < deadline, "the lost run was never taken over"
            time.sleep(0.05)
        assert record is not None and record.status == "continued"
        assert record.continued_by is not None
        # the take-over commits before the continuation is tried, so its failure lands just after
        while (failed := dead.record(record.continued_by)) is not None \
                and failed.status == "running":
            assert time.monotonic() < deadline, "the failed continuation was never closed"
            time.sleep(0.05)
        assert failed is not None and failed.status == "failed"
        assert httpx.post(f"{base}/api/chat", json={**CHAT, "id": "alive"},
                          timeout=30).status_code == 200


def test_a_continuation_whose_replay_differs_is_not_resumed_into(
        served: Any, log_store: LogStore) -> None:
    """The dead run had logged 5 frames by its save, but its saved inputs replay to 1 (as after
    an encoder change): an event id of the dead run gets 204, never the continuation's frames
    under the dead run's offsets; the continuation's own ids resume it."""
    from bindloop.checkpoints import create_loop_checkpoint, serialize_loop_checkpoint
    from bindloop.contracts import UserMessage
    from bindloop.hosts.asgi.chat import ChatApp
    from bindloop.hosts.chat.run import ChatInput, Emit

    async def runner(chat: ChatInput, emit: Emit) -> Any:
        return None

    dead = log_store.logs()
    dead.begin("ghost", "c1", "ui", now_ms=0, lease_until_ms=1)
    body = msgspec.json.encode(CHAT)
    dead.claim("ghost", msgspec.json.encode({"body": body, "minted": "m1", "identity": ""}))
    for n in range(5):
        dead.append("ghost", b'{"type":"text-delta","id":"t","delta":"%d"}' % n)
    checkpoint = create_loop_checkpoint(execution_id="chat-c1", max_iterations=4,
                                        messages=[UserMessage(content="hi")])
    dead.save("ghost", serialize_loop_checkpoint(checkpoint), "", 5)
    logs = log_store.logs()
    with served(ChatApp(runner, logs=logs, lease_ms=300)) as base:
        deadline = time.monotonic() + 10
        # taken over (one write), then unlinked once its replay was found to differ
        # read through another connection (committed states only), as another process would
        while (record := dead.record("ghost")) is None or record.continued_at != 0 or (
                record.status == "running"):
            assert time.monotonic() < deadline, "the lost run was never taken over and unlinked"
            time.sleep(0.05)
        assert record.continued_by and record.status == "continued"
        gone = httpx.get(f"{base}/api/chat/c1/stream", headers={"last-event-id": "ghost:2"},
                         timeout=30)
        assert gone.status_code == 204
        deadline = time.monotonic() + 10
        while (dead.record(record.continued_by) or record).status == "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # the continuation's own ids resume it, to its end
        rest = _events(httpx.get(f"{base}/api/chat/c1/stream", timeout=30,
                                 headers={"last-event-id": f"{record.continued_by}:0"}).text)
        assert rest and rest[-1][1] == b"[DONE]"


def _ghost(logs: Any, lease_until_ms: float, unsaved: list[bytes]) -> None:
    """Run ``ghost`` of chat ``c1`` as another process left it in ``logs``: its request claimed,
    its start frame logged and saved (what its continuation repeats), then ``unsaved``."""
    from bindloop.checkpoints import create_loop_checkpoint, serialize_loop_checkpoint
    from bindloop.contracts import UserMessage

    logs.begin("ghost", "c1", "ui", now_ms=time.time() * 1000, lease_until_ms=lease_until_ms)
    logs.claim("ghost", msgspec.json.encode({"body": msgspec.json.encode(CHAT), "minted": "m1",
                                             "identity": ""}))
    logs.append("ghost", b'{"type":"start","messageId":"msg-m1"}')
    checkpoint = create_loop_checkpoint(execution_id="chat-c1", max_iterations=4,
                                        messages=[UserMessage(content="hi")])
    logs.save("ghost", serialize_loop_checkpoint(checkpoint), "", 1)
    for payload in unsaved:
        logs.append("ghost", payload)


LOST = [b'{"type":"start-step"}', b'{"type":"text-start","id":"t"}',
        b'{"type":"text-delta","id":"t","delta":"lost"}']


def test_a_resume_while_a_dead_runs_lease_still_looks_live_gets_its_continuation(
        served: Any, log_store: LogStore) -> None:
    """A client reconnects right after the run's process died, before its lease ran out: the
    frames the run logged after its save (its continuation will not repeat them) are held back,
    and the stream goes on with the continuation from the save to the run's end -- never ends
    early."""
    from bindloop.hosts.asgi.chat import ChatApp
    from bindloop.hosts.chat.run import ChatInput, Emit

    async def runner(chat: ChatInput, emit: Emit) -> Any:
        return None

    logs = log_store.logs()
    with served(ChatApp(runner, logs=logs, lease_ms=300)) as base:
        # the dead run is left once the app serves: a slow start-up does not eat its lease
        lease_until = time.time() * 1000 + 3000
        _ghost(log_store.logs(), lease_until, LOST)
        assert time.time() * 1000 < lease_until - 1000, "the resume must come while it looks live"
        resumed = httpx.get(f"{base}/api/chat/c1/stream", timeout=30)
    record = logs.record("ghost")
    assert record is not None and record.continued_by is not None
    events = _events(resumed.text)
    assert b"lost" not in resumed.content and events[0] == (
        "ghost:0", b'{"type":"start","messageId":"msg-m1"}')
    assert [i for i, _ in events[1:-1]] == [f"{record.continued_by}:{n}"
                                            for n in range(1, len(events) - 1)]
    assert msgspec.json.decode(events[-2][1])["type"] == "finish" and events[-1][1] == b"[DONE]"


@pytest.mark.parametrize("sign", ["logs", "renews"])
def test_another_processs_live_run_is_followed_past_its_save_once_it_shows_it_is_alive(
        served: Any, log_store: LogStore, sign: str) -> None:
    """The run's process is alive (it logs a frame, or renews its lease, after the resume came):
    the frames after its save are sent while it runs, and the rest as it logs them."""
    from bindloop.hosts.asgi.chat import ChatApp
    from bindloop.hosts.chat.run import ChatInput, Emit

    async def runner(chat: ChatInput, emit: Emit) -> Any:
        return None

    owner = log_store.logs()
    lease_until = time.time() * 1000 + 60_000
    _ghost(owner, lease_until, LOST)
    with served(ChatApp(runner, logs=log_store.logs(), lease_ms=300)) as base:
        lines: list[str] = []

        def follow() -> None:
            with httpx.stream("GET", f"{base}/api/chat/c1/stream", timeout=30) as response:
                for line in response.iter_lines():
                    lines.append(line)

        client = threading.Thread(target=follow)
        client.start()
        deadline = time.monotonic() + 10
        while "id: ghost:0" not in lines:
            assert time.monotonic() < deadline, "the saved frames never came"
            time.sleep(0.02)
        time.sleep(0.3)
        assert not any(line.startswith("id: ghost:1") for line in lines)  # not yet shown alive
        if sign == "logs":
            owner.append("ghost", b'{"type":"text-delta","id":"t","delta":" more"}')
        else:
            owner.renew("ghost", lease_until + 1000)
        while "id: ghost:3" not in lines:
            assert time.monotonic() < deadline, "the frames after the save never came"
            time.sleep(0.02)
        record = owner.record("ghost")
        assert record is not None and record.status == "running"  # sent while it runs
        owner.append("ghost", b'{"type":"finish"}')
        owner.append("ghost", b"[DONE]")
        owner.end("ghost", "finished")
        client.join(10)
    events = _events("\n".join(lines) + "\n\n")
    more = [b'{"type":"text-delta","id":"t","delta":" more"}'] if sign == "logs" else []
    assert [d for _, d in events] == [b'{"type":"start","messageId":"msg-m1"}', *LOST, *more,
                                      b'{"type":"finish"}', b"[DONE]"]
    assert [i for i, _ in events[:-1]] == [f"ghost:{n}" for n in range(len(events) - 1)]
