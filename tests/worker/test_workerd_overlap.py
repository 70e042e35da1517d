"""Two chats in one workerd run side by side: while one chat's model call hangs at the provider,
another chat's request reaches the provider and gets its whole answer. Nothing in the Worker
template (the Session objects, the isolate, the outbound fetch) serialises requests, so the
Worker's requests per second (bench/protocol_figures.py --rps) are bounded by its CPU, not by
waiting (docs/performance.md). Runs under ``make test-worker``; ``BINDLOOP_WORKER_WHEELS`` names
another wheel directory than ``harness/wasm/wheels-pyc``."""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from bindloop.testing import final_answer
from harness.fixtures.scripted_server import (
    RecordedRequest,
    ScriptedProviderServer,
    ScriptedReply,
    turn_reply,
)

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "worker" / "tools"))
from workerd_harness import WHEELS_DIR, Workerd, stage  # noqa: E402


def policy(request: RecordedRequest) -> ScriptedReply:
    """``hold``: the call hangs (no headers) until the Worker hangs up; else the answer."""
    body = msgspec.json.decode(request.body)
    said = [m.get("content") for m in body["messages"] if m["role"] == "user"][-1]
    if said == "hold":
        return ScriptedReply(stall_before_headers=True)
    return turn_reply("openai_chat", final_answer(f"You said: {said}"), stream=True,
                      model=body["model"])


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Workerd, ScriptedProviderServer]]:
    tmp = tmp_path_factory.mktemp("overlap")
    wheels = Path(os.environ.get("BINDLOOP_WORKER_WHEELS", str(WHEELS_DIR)))
    with ScriptedProviderServer() as server:
        server.set_responder("p", policy)
        config = stage(tmp / "stage", storage_dir=tmp / "do", with_conformance=False,
                       wheels_dir=wheels, bindings={
                           "OPENAI_BASE_URL": server.base_url("p"), "OPENAI_API_KEY": "sk-test"})
        workerd = Workerd(config).start()
        try:
            yield workerd, server
        finally:
            workerd.stop()


def _chat(text: str) -> bytes:
    return json.dumps({"id": uuid.uuid4().hex, "trigger": "submit-message", "messages": [
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": text}]}]}).encode()


def _said(request: RecordedRequest) -> str:
    body = msgspec.json.decode(request.body)
    return str([m.get("content") for m in body["messages"] if m["role"] == "user"][-1])


def _answer(stream: str) -> str:
    """The text of a UI message stream's ``text-delta`` frames."""
    frames = [json.loads(line[6:]) for line in stream.splitlines()
              if line.startswith("data: {")]
    return "".join(f["delta"] for f in frames if f.get("type") == "text-delta")


def test_a_chat_is_answered_while_another_chat_s_model_call_hangs(
        worker: tuple[Workerd, ScriptedProviderServer]) -> None:
    workerd, server = worker
    held = http.client.HTTPConnection("127.0.0.1", workerd.port, timeout=120)
    try:
        held.request("POST", "/api/chat", body=_chat("hold"),
                     headers={"content-type": "application/json"})
        deadline = time.monotonic() + 90
        while not any(_said(r) == "hold" for r in server.requests):
            assert time.monotonic() < deadline, "the held chat never reached the provider"
            time.sleep(0.05)

        other = http.client.HTTPConnection("127.0.0.1", workerd.port, timeout=90)
        other.request("POST", "/api/chat", body=_chat("quick"),
                      headers={"content-type": "application/json"})
        resp = other.getresponse()
        text = resp.read().decode()
        other.close()
        assert resp.status == 200, text
        assert _answer(text) == "You said: quick"
        # The first chat's call was still open at the provider all along: the answer did not
        # wait for it to end.
        assert server.hangups == []
        assert [_said(r) for r in server.requests] == ["hold", "quick"]
    finally:
        held.close()
