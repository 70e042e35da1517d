"""The Worker template (worker/src) in real workerd, against the scripted provider server.

One workerd serves the module (Python boots once); the last test stops it and starts a second
workerd on the same Durable Object storage directory to finish a session the first one suspended.
The primary provider speaks the Anthropic wire and, unless a test queues something else, answers
503; the fallback speaks OpenAI Chat Completions and decides its turns from the transcript it is sent.
"""

from __future__ import annotations

import dataclasses
import http.client
import json
import subprocess
import sys
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
from bindloop.textstream import TurnStreamReducer
from bindloop.testing import final_answer, tool_call, tool_call_turn

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "worker" / "tools"))
from workerd_harness import Workerd, stage  # noqa: E402

VARS_ENTRY = Path(__file__).resolve().parent / "vars_entry.py"

UNAVAILABLE = b'{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}'
QUESTION = "What is your name?"


COUNT_ONCE = "count once, then fail"
FAIL_AFTER_ROUND = [0]
"""How many of the next model calls after a ``COUNT_ONCE`` round fail (the provider goes down)."""


ASK_THEN_COUNT = "ask my name, then count it"
COUNT_THEN_STALL = "count, then stall"
STALL = [False]
"""While set, the model call after a ``COUNT_THEN_STALL`` round hangs before its headers."""
STALLED_FIRST = "stall before the first token"


def fallback_policy(request: RecordedRequest) -> ScriptedReply:
    body = msgspec.json.decode(request.body)
    last = body["messages"][-1]
    said = {m.get("content") for m in body["messages"] if m["role"] == "user"}
    if STALLED_FIRST in said:
        return ScriptedReply(stall_before_headers=True)
    if ASK_THEN_COUNT in said:
        if last["role"] == "user":
            turn = tool_call_turn([tool_call("ask_user", {"question": QUESTION}, id="ask2")])
        elif last["tool_call_id"] == "ask2":
            turn = tool_call_turn([tool_call("word_count", {"text": last["content"]}, id="wc2")])
        else:
            turn = final_answer(f"Your name has {last['content']} words.")
        return turn_reply("openai_chat", turn, stream=True, model=body["model"], delay_s=0.001)
    if any(str(m).startswith(COUNT_THEN_STALL) for m in said):
        if last["role"] == "user":
            turn = tool_call_turn([tool_call("word_count", {"text": "x y z"}, id="st1")])
        elif STALL[0]:
            return ScriptedReply(stall_before_headers=True)
        else:
            turn = final_answer(f"Counted {last['content']} words after all.")
        return turn_reply("openai_chat", turn, stream=True, model=body["model"], delay_s=0.001)
    counting_once = any(m["role"] == "user" and m.get("content") == COUNT_ONCE
                        for m in body["messages"])
    if counting_once:
        if last["role"] != "tool":
            turn = tool_call_turn([tool_call("word_count", {"text": "a b c"}, id="once1")])
        elif FAIL_AFTER_ROUND[0] > 0:
            FAIL_AFTER_ROUND[0] -= 1
            # Some of the answer's text streams, then the connection drops.
            partial = turn_reply("openai_chat", final_answer("Counted three, or was it"),
                                 stream=True, model=body["model"])
            return ScriptedReply(headers=partial.headers, chunks=partial.chunks, drop_after=2)
        else:
            turn = final_answer(f"Counted {last['content']} words.")
    elif "keep counting" in str(last.get("content")) or (
            last["role"] == "tool" and str(last.get("content")).isdigit()):
        n = sum(m["role"] == "tool" for m in body["messages"])
        turn = tool_call_turn([tool_call("word_count", {"text": "one two"}, id=f"count{n}")])
    elif last["role"] == "tool":
        turn = final_answer(f"Nice to meet you, {last['content']}.")
    elif "ask me" in str(last.get("content")):
        turn = tool_call_turn([tool_call("ask_user", {"question": QUESTION}, id="ask1")],
                              text="Let me ask.")
    else:
        turn = final_answer(f"You said: {last.get('content')}")
    return turn_reply("openai_chat", turn, stream=True, model=body["model"], delay_s=0.001)


class Served:
    """The scripted providers plus a (re)startable workerd on one staged config."""

    def __init__(self, tmp: Path) -> None:
        self.server = ScriptedProviderServer().start()
        self.server.set_responder("primary", lambda _r: error_reply(503, UNAVAILABLE))
        self.server.set_responder("fallback", fallback_policy)
        # The model from the PROVIDER_* / FALLBACK_* vars: the template's entry without its
        # one-line model (tests/worker/vars_entry.py).
        self.config = stage(tmp / "stage", storage_dir=tmp / "do-storage", with_conformance=False,
                            entry=VARS_ENTRY,
                            bindings={
                                "PROVIDER_BASE_URL": self.server.base_url("primary"),
                                "PROVIDER_WIRE": "anthropic",
                                "PROVIDER_MODEL": "claude-test",
                                "PROVIDER_API_KEY": "sk-primary-secret",
                                "FALLBACK_BASE_URL": self.server.base_url("fallback"),
                                "FALLBACK_WIRE": "openai_chat",
                                "FALLBACK_MODEL": "gpt-test",
                                "FALLBACK_API_KEY": "sk-fallback-secret",
                                "MAX_ITERATIONS": "6",
                                # One model call in flight across the Worker, counted in the
                                # RateLimiter Durable Object (create_limit_middleware's LimitStore).
                                "RATE_LIMIT_CONCURRENCY": "1",
                                "SYSTEM_PROMPT": "Be brief.",
                                # Short enough for a test to see them work: keep-alive comments,
                                # the run lease (renewed every 500 ms), a lost run's wait for a
                                # client before the alarm continues it, a stalled model call.
                                "SSE_HEARTBEAT_MS": "300",
                                "RUN_LEASE_MS": "1500",
                                "RUN_CONTINUE_MS": "5000",
                                "STREAM_FIRST_TOKEN_MS": "5000",
                            })
        self.workerd = Workerd(self.config).start()

    def restart(self, *, kill: bool = False) -> None:
        if kill:
            self.workerd.kill()
        else:
            self.workerd.stop()
        self.workerd = Workerd(self.config).start()

    def show(self, session_id: str) -> dict[str, Any]:
        status, _, raw = self.request("GET", f"/v1/sessions/{session_id}")
        assert status == 200, raw
        shown: dict[str, Any] = json.loads(raw)
        return shown

    def close(self) -> None:
        self.workerd.stop()
        self.server.stop()

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, str, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.workerd.port, timeout=120)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.getheader("content-type") or "", resp.read()
        finally:
            conn.close()

    def post(self, path: str, payload: Any) -> tuple[int, str, bytes]:
        raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return self.request("POST", path, raw, {"content-type": "application/json"})

    def events(self, path: str, payload: Any) -> list[tuple[str, dict[str, Any]]]:
        status, ctype, raw = self.post(path, payload)
        assert status == 200, raw
        assert ctype.startswith("text/event-stream")
        return parse_sse(raw)


def parse_sse(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for block in raw.decode().split("\n\n"):
        lines = [line for line in block.splitlines() if not line.startswith(":")]  # comments
        if not lines:
            continue
        fields = dict(line.split(": ", 1) for line in lines)
        out.append((fields["event"], json.loads(fields["data"])))
    return out


JS_RENDER = """
import { TurnStreamReducer } from "./harness/wasm/demo/turn-stream.js";
let input = "";
for await (const chunk of process.stdin) input += chunk;
const reducer = new TurnStreamReducer();
const shown = {};
for (const event of JSON.parse(input)) {
  const outcome = reducer.apply(event);
  if (outcome !== "applied") throw new Error(`${outcome}: ${JSON.stringify(event)}`);
  shown[event.turn_id] = null;
}
for (const id of Object.keys(shown)) shown[id] = reducer.text(id);
process.stdout.write(JSON.stringify(shown));
"""


def rendered_in_js(events: list[tuple[str, dict[str, Any]]]) -> dict[str, str]:
    """The same events through the browser's reducer, harness/wasm/demo/turn-stream.js, in Node."""
    turns = [d for n, d in events if n == "turn"]
    out = subprocess.run(["node", "--input-type=module", "-e", JS_RENDER], cwd=REPO, check=True,
                         input=json.dumps(turns).encode(), capture_output=True, timeout=60)
    return json.loads(out.stdout)


def rendered(events: list[tuple[str, dict[str, Any]]]) -> dict[str, str | None]:
    """What a client shows per turn: the SSE ``turn`` events through bindloop's reducer (the
    Python twin of harness/wasm/demo/turn-stream.js, both held to the same vectors)."""
    reducer = TurnStreamReducer()
    turns: list[str] = []
    for name, data in events:
        if name == "turn":
            assert reducer.apply(data) == "applied", data
            if data["turn_id"] not in turns:
                turns.append(data["turn_id"])
    return {t: reducer.text(t) for t in turns}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    s = Served(tmp_path_factory.mktemp("worker"))
    try:
        yield s
    finally:
        s.close()


def test_chat_falls_back_from_a_503_provider_and_streams_sse(served: Served) -> None:
    before = len(served.server.requests)
    events = served.events("/v1/chat", {"message": "hello"})
    names = [n for n, _ in events]
    assert names[0] == "session" and names[-1] == "done"
    session, done = events[0][1], events[-1][1]
    assert done["status"] == "finished" and done["stop_reason"] == "done"
    assert done["text"] == "You said: hello"
    assert list(rendered(events).values()) == ["You said: hello"]
    # The primary answered 503 first; the fallback's text is the turn's second attempt (epoch 1).
    paths = [r.path.split("/")[1] for r in served.server.requests[before:]]
    assert paths == ["primary", "fallback"]
    assert {d["epoch"] for n, d in events if n == "turn"} == {1}
    # The key reached the provider as a header (from the secret binding), never the client.
    assert ("authorization", "Bearer sk-fallback-secret") in served.server.requests[-1].headers
    assert b"sk-" not in json.dumps(events).encode()
    sent = msgspec.json.decode(served.server.requests[-1].body)["messages"]
    assert sent[0] == {"role": "system", "content": "Be brief."}
    assert sent[1] == {"role": "user", "content": "hello"}
    status, _, raw = served.request("GET", f"/v1/sessions/{session['session_id']}")
    assert status == 200 and json.loads(raw)["revision"] == done["revision"]


OVERLOADED = (b'event: error\ndata: {"type":"error","error":{"type":"overloaded_error",'
              b'"message":"Overloaded"}}\n\n')


def _cut_primary(tail: bytes | None) -> ScriptedReply:
    """The primary streams part of an answer, then fails: an in-stream ``overloaded_error`` (the
    Anthropic wire's 529/503-class signal once the stream has started) or a dropped connection."""
    full = turn_reply("anthropic", final_answer("This answer will be cut off mid-way"),
                      stream=True, model="claude-test")
    head = full.chunks[:4]  # message_start, ping, content_block_start, the first text delta
    if tail is None:
        return ScriptedReply(headers=full.headers, chunks=(*head, b""), drop_after=len(head))
    return ScriptedReply(headers=full.headers, chunks=(*head, tail))


@pytest.mark.parametrize("tail", [OVERLOADED, None], ids=["overloaded", "dropped"])
def test_a_failed_attempt_s_text_is_reset_before_the_fallback_s(served: Served,
                                                                 tail: bytes | None) -> None:
    served.server.enqueue("primary", _cut_primary(tail))
    events = served.events("/v1/chat", {"message": "again"})
    turns = [d for n, d in events if n == "turn"]
    kinds = [(d["kind"], d["epoch"]) for d in turns]
    # The primary's text (epoch 0) reached the client, then a reset, then the fallback's (epoch 1).
    assert kinds[0] == ("text", 0) and turns[0]["text"] == "This answer will "
    assert kinds[1] == ("reset", 1) and turns[1]["reason"] == "attempt_failed"
    assert all(k == ("text", 1) for k in kinds[2:]) and len(kinds) > 2
    assert [d["seq"] for d in turns] == list(range(len(turns)))
    assert list(rendered(events).values()) == ["You said: again"]
    assert list(rendered_in_js(events).values()) == ["You said: again"]
    assert events[-1][0] == "done"


def test_suspend_reply_done_across_requests(served: Served) -> None:
    events = served.events("/v1/chat", {"message": "please ask me something"})
    done = events[-1][1]
    assert done["status"] == "waiting_for_reply" and done["question"] == QUESTION
    sid, rev = done["session_id"], done["revision"]
    events = served.events(f"/v1/sessions/{sid}/reply", {"content": "Ada", "revision": rev})
    final = events[-1]
    assert final[0] == "done" and final[1]["status"] == "finished"
    assert final[1]["text"] == "Nice to meet you, Ada."
    assert final[1]["revision"] > rev


def _error(served: Served, method: str, path: str, body: bytes | None = None) -> tuple[int, dict[str, Any]]:
    status, ctype, raw = served.request(method, path, body, {"content-type": "application/json"})
    assert ctype.startswith("application/json"), raw
    return status, json.loads(raw)


def test_bad_input_gets_4xx_json_naming_the_problem(served: Served) -> None:
    status, body = _error(served, "POST", "/v1/chat", b"{not json")
    assert (status, body["error"]) == (400, "malformed_json")
    status, body = _error(served, "POST", "/v1/chat", b'{"message": 3}')
    assert (status, body["error"], body["field"]) == (400, "invalid_field", "message")
    status, body = _error(served, "POST", "/v1/chat", json.dumps({"message": "x" * 70_000}).encode())
    assert (status, body["error"]) == (413, "body_too_large")
    status, body = _error(served, "POST", "/v1/sessions/nope/reply", b'{"content": "a", "revision": 0}')
    assert (status, body["error"]) == (404, "unknown_session")
    assert "nope" in body["message"]
    status, body = _error(served, "GET", "/v1/sessions/bad%20id")
    assert (status, body["error"]) == (400, "invalid_session_id")


@pytest.mark.parametrize("depth", [5_000, 20_000])
def test_deeply_nested_bodies_are_a_400_and_the_isolate_lives_on(served: Served, depth: int) -> None:
    """D1: 10-40 KB of brackets, well under the 64 KiB limit, once overflowed the JS stack in a
    recursive json.loads and killed workerd with every stream in it."""
    assert served.workerd.proc is not None
    pid = served.workerd.proc.pid
    for path in ("/v1/chat", "/v1/sessions/abc/reply", "/v1/sessions/abc/resume"):
        body = ('{"message":' + "[" * depth + "]" * depth + "}").encode()
        assert len(body) < 64 * 1024
        status, answer = _error(served, "POST", path, body)
        assert (status, answer["error"]) == (400, "body_too_deep"), answer
    assert served.workerd.proc is not None and served.workerd.proc.pid == pid
    assert served.workerd.proc.poll() is None  # the process did not die
    events = served.events("/v1/chat", {"message": "still here"})
    assert events[-1][1]["text"] == "You said: still here"


def test_reply_to_a_session_not_waiting_and_a_stale_revision(served: Served) -> None:
    done = served.events("/v1/chat", {"message": "hi"})[-1][1]
    status, body = served.post(f"/v1/sessions/{done['session_id']}/reply",
                               {"content": "a", "revision": done["revision"]})[0::2]
    err = json.loads(body)
    assert (status, err["error"], err["session_status"]) == (409, "not_waiting", "finished")

    waiting = served.events("/v1/chat", {"message": "ask me"})[-1][1]
    status, _, body = served.post(f"/v1/sessions/{waiting['session_id']}/reply",
                                  {"content": "a", "revision": waiting["revision"] - 1})
    err = json.loads(body)
    assert (status, err["error"], err["revision"]) == (409, "stale_revision", waiting["revision"])


def test_provider_failure_mid_stream_is_an_sse_error_and_storage_keeps_its_revision(
        served: Served) -> None:
    waiting = served.events("/v1/chat", {"message": "ask me"})[-1][1]
    sid, rev = waiting["session_id"], waiting["revision"]
    # Both providers fail this turn: the primary with 503, the fallback mid-stream.
    partial = turn_reply("openai_chat", final_answer("Nice to meet you, but"), stream=True)
    served.server.enqueue("fallback", ScriptedReply(headers=partial.headers, chunks=partial.chunks,
                                                    drop_after=2))
    events = served.events(f"/v1/sessions/{sid}/reply", {"content": "Bob", "revision": rev})
    name, data = events[-1]
    assert name == "error", events
    assert data["session_id"] == sid and data["error"] and data["message"]
    assert "sk-" not in json.dumps(data)
    assert "127.0.0.1" not in json.dumps(data) and "http" not in data["message"]  # D6: no URL
    # The reply was stored (rev + 1, ready); nothing after it was: the failed turn left no trace.
    assert data["revision"] == rev + 1
    status, _, raw = served.request("GET", f"/v1/sessions/{sid}")
    shown = json.loads(raw)
    assert (status, shown["revision"], shown["status"]) == (200, rev + 1, "ready")


def test_a_run_that_fails_after_a_round_resumes_from_the_saved_round(served: Served) -> None:
    """The word_count round finishes and is saved; then every provider fails. The session holds
    that round (one revision after the claim, ``ready``); ``/resume`` goes on from it, and the
    model is never asked for the round again (so its tool does not run again)."""
    def asked_for_the_round() -> int:
        return sum(1 for r in served.server.requests if r.path.startswith("/fallback")
                   and msgspec.json.decode(r.body)["messages"][-1].get("content") == COUNT_ONCE)

    before = asked_for_the_round()
    FAIL_AFTER_ROUND[0] = 1
    events = served.events("/v1/chat", {"message": COUNT_ONCE})
    name, data = events[-1]
    assert name == "error", events
    sid, claim = data["session_id"], events[0][1]["revision"]
    assert data["revision"] == claim + 1  # the saved round
    status, _, raw = served.request("GET", f"/v1/sessions/{sid}")
    shown = json.loads(raw)
    assert (status, shown["status"], shown["revision"], shown["iterations"]) == (
        200, "ready", claim + 1, 1)

    status, _, raw = served.post(f"/v1/sessions/{sid}/resume", {"revision": claim})
    assert (status, json.loads(raw)["error"]) == (409, "stale_revision")
    events = served.events(f"/v1/sessions/{sid}/resume", {"revision": claim + 1})
    name, done = events[-1]
    assert (name, done["status"], done["text"]) == ("done", "finished", "Counted 3 words."), events
    assert done["iterations"] == 2 and done["revision"] == claim + 3  # claim, save, resume, done
    assert asked_for_the_round() - before == 1  # the finished round was not run again
    status, _, raw = served.post(f"/v1/sessions/{sid}/resume", {"revision": done["revision"]})
    body = json.loads(raw)
    assert (status, body["error"], body["session_status"]) == (409, "not_resumable", "finished")


def test_suspend_in_one_workerd_process_reply_in_another(served: Served) -> None:
    waiting = served.events("/v1/chat", {"message": "ask me now"})[-1][1]
    assert waiting["status"] == "waiting_for_reply"
    first_pid = served.workerd.proc.pid if served.workerd.proc else None
    served.restart()  # a new process: a new isolate, the same Durable Object storage directory
    assert served.workerd.proc is not None and served.workerd.proc.pid != first_pid
    t0 = time.perf_counter()
    events = served.events(f"/v1/sessions/{waiting['session_id']}/reply",
                           {"content": "Grace", "revision": waiting["revision"]})
    assert time.perf_counter() - t0 < 60
    assert events[-1][0] == "done" and events[-1][1]["text"] == "Nice to meet you, Grace."


def test_two_replies_racing_for_one_revision_have_one_winner(served: Served) -> None:
    from concurrent.futures import ThreadPoolExecutor

    waiting = served.events("/v1/chat", {"message": "ask me twice"})[-1][1]
    path = f"/v1/sessions/{waiting['session_id']}/reply"
    payloads = [{"content": name, "revision": waiting["revision"]} for name in ("Ann", "Ben")]
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda p: served.post(path, p), payloads))
    statuses = sorted(status for status, _, _ in answers)
    assert statuses == [200, 409], answers
    loser = next(json.loads(raw) for status, _, raw in answers if status == 409)
    assert loser["error"] in ("stale_revision", "not_waiting")
    winner = next(parse_sse(raw) for status, _, raw in answers if status == 200)
    assert winner[-1][0] == "done" and winner[-1][1]["status"] == "finished"


def test_a_client_that_hangs_up_mid_stream_does_not_stop_the_session(served: Served) -> None:
    # The fallback streams slowly, so the client is gone long before the turn ends.
    served.server.set_responder(
        "fallback", lambda r: dataclasses.replace(fallback_policy(r), delay_s=0.2))
    try:
        conn = http.client.HTTPConnection("127.0.0.1", served.workerd.port, timeout=60)
        conn.request("POST", "/v1/chat", body=json.dumps({"message": "long answer"}),
                     headers={"content-type": "application/json"})
        resp = conn.getresponse()
        assert resp.readline() == b"id: r0:0\n"  # a new session's first run: claim revision 0
        assert resp.readline() == b"event: session\n"
        session_id = json.loads(resp.readline().decode().removeprefix("data: "))["session_id"]
        conn.close()
        # ctx.waitUntil keeps the run alive: it still settles and commits.
        deadline = time.monotonic() + 30
        while True:
            status, _, raw = served.request("GET", f"/v1/sessions/{session_id}")
            shown = json.loads(raw)
            if shown["status"] != "ready" or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert (status, shown["status"]) == (200, "finished")
    finally:
        served.server.set_responder("fallback", fallback_policy)


def test_two_chats_share_one_concurrency_limit_in_the_rate_limiter_object(served: Served) -> None:
    """RATE_LIMIT_CONCURRENCY=1: the second chat's model call waits in create_limit_middleware (its slot taken
    in the RateLimiter Durable Object) until the first chat's call, slowly streamed, has ended."""
    from concurrent.futures import ThreadPoolExecutor

    arrivals: list[tuple[str, str, float]] = []
    slow: list[float] = []

    def primary(r: RecordedRequest) -> ScriptedReply:
        last = msgspec.json.decode(r.body)["messages"][-1]["content"]
        arrivals.append(("primary", "one" if "limit one" in str(last) else "two", time.monotonic()))
        return error_reply(503, UNAVAILABLE)

    def fallback(r: RecordedRequest) -> ScriptedReply:
        last = msgspec.json.decode(r.body)["messages"][-1]["content"]
        arrivals.append(("fallback", "one" if "limit one" in str(last) else "two", time.monotonic()))
        reply = dataclasses.replace(fallback_policy(r), delay_s=0.15)
        slow.append(reply.delay_s * len(reply.chunks))
        return reply

    served.server.set_responder("primary", primary)
    served.server.set_responder("fallback", fallback)
    try:
        with ThreadPoolExecutor(2) as pool:
            runs = list(pool.map(lambda m: served.events("/v1/chat", {"message": m}),
                                 ["limit one", "limit two"]))
    finally:
        served.server.set_responder("primary", lambda _r: error_reply(503, UNAVAILABLE))
        served.server.set_responder("fallback", fallback_policy)
    assert [run[-1][1]["text"] for run in runs] == ["You said: limit one", "You said: limit two"]
    # Each chat's whole routed call (primary 503, then the fallback's stream) before the other's.
    (first, a_msg, _), (f1, b_msg, t_fb), (second, c_msg, t_next), (f2, d_msg, _) = arrivals
    assert (first, f1, second, f2) == ("primary", "fallback", "primary", "fallback")
    assert a_msg == b_msg and c_msg == d_msg and a_msg != c_msg
    assert t_next - t_fb >= 0.8 * slow[0], (t_next - t_fb, slow)


def test_a_run_out_of_turns_is_an_sse_error_and_the_session_takes_a_new_message(
        served: Served) -> None:
    """MAX_ITERATIONS=6 and a model that only ever calls word_count: each of the first five rounds
    is saved as it finishes, then prompt_chat's turn budget ends the run; the last save is stored
    `aborted` one revision later and the session accepts the next message (one turn left)."""
    events = served.events("/v1/chat", {"message": "keep counting"})
    name, data = events[-1]
    assert (name, data.get("error"), data.get("status")) == ("error", "iteration_limit",
                                                              "aborted"), data
    sid = data["session_id"]
    assert data["revision"] == events[0][1]["revision"] + 6  # five saves, then aborted
    status, _, raw = served.request("GET", f"/v1/sessions/{sid}")
    shown = json.loads(raw)
    assert (status, shown["status"], shown["iterations"]) == (200, "aborted", 5)
    again = served.events("/v1/chat", {"message": "hello again", "session_id": sid})
    assert again[-1][0] == "done" and again[-1][1]["text"] == "You said: hello again"


def test_reply_then_a_tool_round_then_the_answer_finishes(served: Served) -> None:
    """D2: the answer after a reply and one more tool round used to end in ``error
    CheckpointFormatError`` (the stored tool-call counters were kept while stats grew)."""
    waiting = served.events("/v1/chat", {"message": ASK_THEN_COUNT})[-1][1]
    assert waiting["status"] == "waiting_for_reply", waiting
    sid = waiting["session_id"]
    events = served.events(f"/v1/sessions/{sid}/reply",
                           {"content": "Ada Lovelace", "revision": waiting["revision"]})
    name, done = events[-1]
    assert (name, done.get("status"), done.get("text")) == (
        "done", "finished", "Your name has 2 words."), events
    shown = served.show(sid)
    assert (shown["status"], shown["revision"], shown["iterations"]) == (
        "finished", done["revision"], 3)
    assert shown["run"]["state"] == "idle" and shown["run"]["last"]["outcome"] == "finished"


def test_a_resumed_run_streams_under_new_turn_ids(served: Served) -> None:
    """D3: the failed run and its resume each stream under their own turn ids (the run's claim
    revision is in them), so one reducer kept across both renders the resumed answer alone."""
    FAIL_AFTER_ROUND[0] = 1
    failed = served.events("/v1/chat", {"message": COUNT_ONCE})
    assert failed[-1][0] == "error"
    sid, rev = failed[-1][1]["session_id"], failed[-1][1]["revision"]
    resumed = served.events(f"/v1/sessions/{sid}/resume", {"revision": rev})
    assert resumed[-1][0] == "done", resumed
    first_ids = {d["turn_id"] for n, d in failed if n == "turn"}
    second_ids = {d["turn_id"] for n, d in resumed if n == "turn"}
    assert second_ids and not first_ids & second_ids
    assert failed[0][1]["run"] != resumed[0][1]["run"]
    assert all(t.startswith(f"{sid}:{resumed[0][1]['revision']}:") for t in second_ids)
    kept = rendered(failed + resumed)  # one reducer for both runs, as a page keeps it
    assert [kept[t] for t in sorted(second_ids)] == ["Counted 3 words."]
    stale = [kept[t] for t in first_ids if kept[t]]
    assert stale and all(not t.endswith("3 words.") for t in stale)  # the cut attempt, apart


def test_sse_keep_alive_comments_while_the_provider_stalls_and_the_budget_from_vars(
        served: Served) -> None:
    """D6: SSE_HEARTBEAT_MS=300 and STREAM_FIRST_TOKEN_MS=5000: the fallback never sends its
    headers; the stream carries keep-alive comments meanwhile, and the stall budget set in the
    Worker's vars (not the 120 s default) ends the run with an error that names no URL."""
    t0 = time.monotonic()
    status, _, raw = served.post("/v1/chat", {"message": STALLED_FIRST})
    took = time.monotonic() - t0
    assert status == 200
    assert raw.count(b": keep-alive\n\n") >= 8, raw
    name, data = parse_sse(raw)[-1]
    assert name == "error" and data["error"] == "provider_failed", data
    assert data["category"] == "stream_stall" and "http" not in data["message"]
    assert 4.5 < took < 30, took


def _chat_until_killed(served: Served, message: str, box: dict[str, Any]) -> None:
    """POST /v1/chat ``message`` and read its stream until workerd dies (into ``box``)."""
    conn = http.client.HTTPConnection("127.0.0.1", served.workerd.port, timeout=120)
    try:
        conn.request("POST", "/v1/chat", body=json.dumps({"message": message}),
                     headers={"content-type": "application/json"})
        resp = conn.getresponse()
        assert resp.readline() == b"id: r0:0\n"
        assert resp.readline() == b"event: session\n"
        box["sid"] = json.loads(resp.readline().decode().removeprefix("data: "))["session_id"]
        box["rest"] = resp.read()  # ends when workerd dies: no done, no error event
    except (OSError, http.client.HTTPException) as exc:
        box["error"] = exc
    finally:
        conn.close()


def test_a_live_run_is_told_from_a_killed_one_then_resumed_or_continued(served: Served) -> None:
    """D4: a run holds a lease it renews. While it is live GET says ``running`` and a resume is
    refused (``run_in_progress``). Two runs are then killed with workerd (SIGKILL) -- A waiting on
    its second model call, B waiting for the one concurrency slot A holds -- and workerd starts
    again on the same storage. Their leases run out unreleased: GET says ``lost``. A resume of A
    is now accepted and streams A from its saved round to the answer (the round is not asked for
    again); B, left alone, is continued by the Session object's alarm once RUN_CONTINUE_MS has
    passed, from its input to the answer."""
    import threading

    def asked_for_the_round() -> int:
        return sum(1 for r in served.server.requests if r.path.startswith("/fallback")
                   and msgspec.json.decode(r.body)["messages"][-1].get("content") == COUNT_THEN_STALL)

    def stalled() -> bool:  # A's model call after its saved round has been sent
        return any(r.path.startswith("/fallback") and b'"role":"tool"' in r.body
                   and f'"{COUNT_THEN_STALL}"'.encode() in r.body for r in served.server.requests)

    def wait_for(what: Any, why: str) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not what():
            time.sleep(0.05)
        assert what(), why

    STALL[0] = True
    before = asked_for_the_round()
    a: dict[str, Any] = {}
    b: dict[str, Any] = {}
    threads = [threading.Thread(target=_chat_until_killed, args=(served, COUNT_THEN_STALL, a),
                                daemon=True)]
    threads[0].start()
    try:
        wait_for(lambda: stalled() and "sid" in a, "run A never reached its second model call")
        threads.append(threading.Thread(target=_chat_until_killed,
                                        args=(served, COUNT_THEN_STALL + " (B)", b), daemon=True))
        threads[1].start()
        wait_for(lambda: "sid" in b, "run B never started")
        a_live, b_live = served.show(a["sid"]), served.show(b["sid"])
        assert (a_live["status"], a_live["iterations"], a_live["run"]["state"]) == (
            "ready", 1, "running"), a_live
        assert (b_live["status"], b_live["iterations"], b_live["run"]["state"]) == (
            "ready", 0, "running"), b_live
        time.sleep(1.2)  # longer than a third of the lease: it was renewed, still running
        assert served.show(a["sid"])["run"]["state"] == "running"
        status, _, raw = served.post(f"/v1/sessions/{a['sid']}/resume",
                                     {"revision": a_live["revision"]})
        refused = json.loads(raw)
        assert (status, refused["error"], refused["run"]) == (409, "run_in_progress",
                                                              a_live["run"]["run_id"])
        STALL[0] = False
        served.restart(kill=True)
        states: dict[str, list[tuple[str, str, str | None]]] = {"A": [], "B": []}
        resumed: list[tuple[str, dict[str, Any]]] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            shown = {k: served.show(box["sid"]) for k, box in (("A", a), ("B", b))}
            for k, v in shown.items():
                states[k].append((v["status"], v["run"]["state"], v["run"].get("run_id")))
            if shown["A"]["run"]["state"] == "lost" and not resumed:
                # Lost, not live: a client may resume it now (before the alarm does).
                resumed = parse_sse(served.post(f"/v1/sessions/{a['sid']}/resume",
                                                {"revision": shown["A"]["revision"]})[2])
            if all(v["status"] == "finished" for v in shown.values()):
                break
            time.sleep(0.1)
        print(f"\n[lease] states after the restart: A {sorted(set(states['A']))}, "
              f"B {sorted(set(states['B']))}")
        assert resumed, f"GET never said A was lost: {states['A']}"
        assert resumed[0][0] == "session" and "continues" not in resumed[0][1]  # the client's run
        assert resumed[-1] == ("done", {**resumed[-1][1], "text": "Counted 3 words after all."})
        for k, live in (("A", a_live), ("B", b_live)):
            final = served.show((a if k == "A" else b)["sid"])
            assert final["status"] == "finished", states[k]
            # Until then GET told the truth at every poll: the killed run's lease running out,
            # the run lost, or a run going on from it -- never an idle "ready" session.
            old = live["run"]["run_id"]
            done_at = next(i for i, st in enumerate(states[k]) if st[0] == "finished")
            for status_, state, run_id in states[k][:done_at]:
                assert status_ == "ready" and state in ("running", "lost"), states[k]
                assert run_id == old or state == "running", states[k]
            assert final["run"]["last"]["outcome"] == "finished"
            assert final["run"]["last"]["run_id"] != old and final["iterations"] == 2
        assert ("ready", "lost", a_live["run"]["run_id"]) in states["A"]
        assert asked_for_the_round() - before == 1  # A's saved round was not run again
        # B's continuation: the alarm's own run, whose log names the lost run.
        status, _, raw = served.request("GET", f"/v1/sessions/{b['sid']}/stream")
        logged = parse_sse_with_ids(raw)
        assert status == 200 and logged[0][1] == "session" and logged[-1][1] == "done"
        assert logged[0][2]["continues"] == b_live["run"]["run_id"]
        assert logged[-1][2]["text"] == "Counted 3 words after all."
    finally:
        STALL[0] = False
        for thread in threads:
            thread.join(timeout=30)
    for box in (a, b):
        assert b"event: done" not in box.get("rest", b"")  # the first clients saw no answer


def parse_sse_with_ids(raw: bytes) -> list[tuple[str, str, dict[str, Any]]]:
    out = []
    for block in raw.decode().split("\n\n"):
        lines = [line for line in block.splitlines() if not line.startswith(":")]
        if lines:
            fields = dict(line.split(": ", 1) for line in lines)
            out.append((fields["id"], fields["event"], json.loads(fields["data"])))
    return out


SLOW_ANSWER = "answer slowly, please"


def _slow(r: RecordedRequest) -> ScriptedReply:
    """The fallback streams the answer to SLOW_ANSWER one chunk a second (other messages as usual)."""
    reply = fallback_policy(r)
    if SLOW_ANSWER.encode() in r.body:
        return dataclasses.replace(reply, delay_s=0.6)
    return reply


def _open_chat(served: Served, message: str) -> tuple[http.client.HTTPConnection, Any, list[bytes]]:
    """POST /v1/chat and read up to (and including) the first turn event's block."""
    conn = http.client.HTTPConnection("127.0.0.1", served.workerd.port, timeout=60)
    conn.request("POST", "/v1/chat", body=json.dumps({"message": message}),
                 headers={"content-type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200
    seen: list[bytes] = []
    while True:
        line = resp.readline()
        assert line, b"".join(seen)
        seen.append(line)
        if line == b"\n" and any(x == b"event: turn\n" for x in seen):
            return conn, resp, seen


def test_a_client_that_lost_its_stream_reads_the_run_on_from_its_last_event_id(
        served: Served) -> None:
    """Deliverable 3: every event carries ``id: <run>:<offset>``; the run goes on without its
    client, and GET /stream with Last-Event-ID sends what came after, then the rest live."""
    served.server.set_responder("fallback", _slow)
    try:
        conn, _resp, seen = _open_chat(served, SLOW_ANSWER)
        conn.close()  # the client drops mid-answer
        before = parse_sse_with_ids(b"".join(seen))
        sid = before[0][2]["session_id"]
        last_id = before[-1][0]
        assert [i for i, _, _ in before] == [f"r0:{k}" for k in range(len(before))]
        status, ctype, raw = served.request("GET", f"/v1/sessions/{sid}/stream",
                                            headers={"last-event-id": last_id})
        assert (status, ctype) == (200, "text/event-stream"), raw
        after = parse_sse_with_ids(raw)
        assert after and after[-1][1] == "done", after
        whole = before + after
        assert [i for i, _, _ in whole] == [f"r0:{k}" for k in range(len(whole))]  # no gap, no repeat
        done = whole[-1][2]
        assert done["text"] == f"You said: {SLOW_ANSWER}"
        assert list(rendered([(n, d) for _, n, d in whole]).values()) == [done["text"]]
        # Nothing left after the last event of a finished run: 204. No Last-Event-ID: all of it.
        status, _, raw = served.request("GET", f"/v1/sessions/{sid}/stream",
                                        headers={"last-event-id": whole[-1][0]})
        assert (status, raw) == (204, b"")
        status, _, raw = served.request("GET", f"/v1/sessions/{sid}/stream")
        assert status == 200 and parse_sse_with_ids(raw) == whole
    finally:
        served.server.set_responder("fallback", fallback_policy)


def test_an_explicit_stop_ends_the_run_and_the_session_takes_a_new_message(served: Served) -> None:
    served.server.set_responder("fallback", _slow)
    try:
        conn, resp, seen = _open_chat(served, SLOW_ANSWER)
        sid = parse_sse_with_ids(b"".join(seen))[0][2]["session_id"]
        status, _, raw = served.post(f"/v1/sessions/{sid}/stop", b"")
        assert (status, json.loads(raw)["run"]) == (202, "r0"), raw
        t0 = time.monotonic()
        rest = parse_sse_with_ids(resp.read())
        conn.close()
        assert time.monotonic() - t0 < 10
        name, data = rest[-1][1:]
        assert (name, data["error"], data["status"]) == ("error", "stopped", "aborted"), rest
        assert all(n != "done" for _, n, _ in rest)
        shown = served.show(sid)
        assert (shown["status"], shown["run"]["state"], shown["run"]["last"]["outcome"]) == (
            "aborted", "idle", "stopped")
        status, _, raw = served.post(f"/v1/sessions/{sid}/stop", b"")
        assert (status, json.loads(raw)["error"]) == (409, "not_running")
    finally:
        served.server.set_responder("fallback", fallback_policy)
    again = served.events("/v1/chat", {"message": "after the stop", "session_id": sid})
    assert again[-1][1]["text"] == "You said: after the stop"


def test_nothing_after_the_last_event_id_is_a_204_and_an_unknown_session_a_404(served: Served) -> None:
    done = served.events("/v1/chat", {"message": "hi there"})[-1][1]
    status, _, raw = served.request("GET", f"/v1/sessions/{done['session_id']}/stream",
                                    headers={"last-event-id": "r0:999"})
    assert (status, raw) == (204, b"")
    status, body = _error(served, "GET", "/v1/sessions/nope/stream")
    assert (status, body["error"]) == (404, "unknown_session")


def _raw_chunked(served: Served, path: str, chunks: list[bytes], hold_s: float = 0.0) -> bytes:
    """A POST with ``Transfer-Encoding: chunked`` and no ``Content-Length``; ``hold_s`` > 0 keeps
    the body open (no final chunk) that long while waiting for the answer."""
    import socket

    with socket.create_connection(("127.0.0.1", served.workerd.port), timeout=60) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                     "transfer-encoding: chunked\r\n\r\n".encode())
        for chunk in chunks:
            try:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            except OSError:
                break  # the server answered and closed while we were still sending
        if not hold_s:
            try:
                sock.sendall(b"0\r\n\r\n")
            except OSError:
                pass
        answer = b""
        while b"\r\n\r\n" not in answer:
            got = sock.recv(65536)
            if not got:
                break
            answer += got
        return answer


@pytest.mark.parametrize("path", ["/v1/chat", "/api/chat"])
def test_a_chunked_body_is_bounded_while_it_streams(served: Served, path: str) -> None:
    """No Content-Length: the 413 comes when the body passes 64 KiB, not after reading it all
    (200 MiB were once read whole first); a body that stops arriving gets a 408."""
    started = time.monotonic()
    answer = _raw_chunked(served, path, [b"x" * 65536] * 64)  # 4 MiB offered
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert time.monotonic() - started < 10
    held = _raw_chunked(served, path, [b'{"message": "'], hold_s=30)
    assert held.startswith(b"HTTP/1.1 408"), held[:200]
    events = served.events("/v1/chat", {"message": "still here"})
    assert events[-1][1]["text"] == "You said: still here"
