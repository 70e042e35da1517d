"""The Worker template's frontend routes (``POST /api/chat``, ``POST /ag-ui``, their ``GET
.../stream`` and ``POST .../stop``; worker/src/frontends.py) in real workerd, driven by the real
npm clients (clients/worker.mjs: ``ai@6``'s
``DefaultChatTransport`` + ``readUIMessageStream`` and ``@ag-ui/client``'s ``HttpAgent``) against a
scripted OpenAI-chat provider on 127.0.0.1. Runs under ``make test-worker``, which also needs
``make clients-node`` (the npm clients)."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from bindloop.hosts.scripted_server import (
    RecordedRequest,
    ScriptedProviderServer,
    ScriptedReply,
    error_reply,
    turn_reply,
)
from bindloop.contracts import TurnUsage
from bindloop.testing import final_answer, tool_call, tool_call_turn

REPO = Path(__file__).resolve().parents[2]
CLIENTS = REPO / "clients"
sys.path.insert(0, str(REPO / "worker" / "tools"))
from workerd_harness import Workerd, stage  # noqa: E402


def policy(request: RecordedRequest) -> ScriptedReply:
    body = msgspec.json.decode(request.body)
    last = body["messages"][-1]
    said = [m.get("content") for m in body["messages"] if m["role"] == "user"][-1]
    delay = 0.001
    if said.startswith("slow "):  # the same answers, paced: a client can act mid-stream
        said, delay = said[5:], 0.15
    if said == "break":
        return error_reply(400, b'{"error":{"message":"bad request from http://10.0.0.7/v1"}}')
    if last["role"] == "tool" and said.startswith("count"):
        turn = final_answer(f"Counted {last['content']} words.",
                            usage=TurnUsage(input_tokens=12, output_tokens=3))
    elif last["role"] == "tool":
        turn = final_answer(f"Nice to meet you, {last['content']}.")
    elif said.startswith("count"):
        text = " ".join(said.split()[1:])
        turn = tool_call_turn([tool_call("word_count", {"text": text}, id=f"wc-{len(text)}")])
    elif said.startswith("ask"):
        turn = tool_call_turn([tool_call("ask_user", {"question": "What is your name?"},
                                         id="ask-1")])
    else:
        turn = final_answer(f"You said: {said}")
    return turn_reply("openai_chat", turn, stream=True, model=body["model"], delay_s=delay)


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Workerd, ScriptedProviderServer]]:
    if not (CLIENTS / "node_modules" / "ai").is_dir():
        pytest.fail("the npm clients are not installed: run `make clients-node`")
    tmp = tmp_path_factory.mktemp("frontends")
    server = ScriptedProviderServer().start()
    server.set_responder("p", policy)
    config = stage(tmp / "stage", storage_dir=tmp / "do", with_conformance=False, bindings={
        "PROVIDER_BASE_URL": server.base_url("p"), "PROVIDER_WIRE": "openai_chat",
        "PROVIDER_MODEL": "gpt-test", "PROVIDER_API_KEY": "sk-test-secret",
        "MAX_ITERATIONS": "6", "SYSTEM_PROMPT": "Be brief."})
    workerd = Workerd(config).start()
    try:
        yield workerd, server
    finally:
        workerd.stop()
        server.stop()


def test_the_real_clients_talk_to_the_worker(worker: tuple[Workerd, ScriptedProviderServer]) -> None:
    workerd, server = worker
    proc = subprocess.run(["node", str(CLIENTS / "worker.mjs"), workerd.base_url],
                          capture_output=True, text=True, timeout=300, cwd=CLIENTS)
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\n{workerd.log_path.read_text()[-3000:]}"
    # The Worker's system prompt opened each conversation; the key stayed a header.
    sent = msgspec.json.decode(server.requests[-1].body)["messages"]
    assert sent[0] == {"role": "system", "content": "Be brief."}
    assert b"sk-test-secret" not in proc.stdout.encode()


def test_a_deep_body_is_a_400_and_the_isolate_lives_on(
        worker: tuple[Workerd, ScriptedProviderServer]) -> None:
    workerd, _ = worker
    for path in ("/api/chat", "/ag-ui"):
        conn = http.client.HTTPConnection("127.0.0.1", workerd.port, timeout=60)
        conn.request("POST", path, body=b'{"id":"c","messages":' + b"[" * 10_000 + b"]" * 10_000
                     + b"}", headers={"content-type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 400 and json.loads(resp.read())["error"] == "body_too_deep"
        conn.close()
    conn = http.client.HTTPConnection("127.0.0.1", workerd.port, timeout=60)
    conn.request("POST", "/api/chat", body=json.dumps({"id": "c", "messages": 3}),
                 headers={"content-type": "application/json"})
    resp = conn.getresponse()
    answer = json.loads(resp.read())
    assert resp.status == 400 and answer["error"] == "invalid_request"
    assert answer["field"] == "messages"


def test_a_provider_failure_is_the_protocols_error_without_a_url(
        worker: tuple[Workerd, ScriptedProviderServer]) -> None:
    workerd, _ = worker
    conn = http.client.HTTPConnection("127.0.0.1", workerd.port, timeout=60)
    conn.request("POST", "/api/chat", body=json.dumps({"id": "c-err", "messages": [
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "break"}]}]}),
        headers={"content-type": "application/json"})
    resp = conn.getresponse()
    text = resp.read().decode()
    conn.close()
    assert resp.status == 200 and resp.getheader("x-vercel-ai-ui-message-stream") == "v1"
    chunks = [json.loads(line[6:]) for line in text.splitlines()
              if line.startswith("data: {")]
    error = chunks[-1]
    assert error["type"] == "error" and "model call failed" in error["errorText"]
    assert "http" not in text and "10.0.0.7" not in text and "127.0.0.1" not in text
    assert text.rstrip().endswith("data: [DONE]")
