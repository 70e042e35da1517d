"""``create_model`` under Pyodide 314 in Node, over JS fetch, against the scripted provider server
on 127.0.0.1: no environment read, FetchTransports, a streamed Gemini turn, and a fallback from a
503 Anthropic-wire primary to an OpenAI-chat-wire secondary keyed from ``env=`` a JS object
(as a Worker's bindings are).

Run by ``make wasm-smoke`` (part of ``make test``), which builds ``harness/wasm/node_modules`` and
``harness/wasm/wheels`` first and sets ``BINDLOOP_REQUIRE_PYODIDE``; a plain pytest run skips it. The
snippet runs through tests/mcp/run_pyodide_mcp.mjs, whose one network path is a fetch restricted
to http://127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bindloop.contracts import ModelTurnResult, TurnUsage
from harness.fixtures.scripted_server import ScriptedProviderServer, error_reply, turn_reply

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "tests" / "mcp" / "run_pyodide_mcp.mjs"
SNIPPET = ROOT / "tests" / "hosts" / "pyodide_create_model.py"
ANSWER = ModelTurnResult(text="hello live", usage=TurnUsage(input_tokens=3, output_tokens=2),
                         finish_reason="stop")


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (ROOT / "harness" / "wasm" / "node_modules" / "pyodide" / "pyodide.mjs").exists():
        return "harness/wasm/node_modules is missing (make wasm-node)"
    if not any((ROOT / "harness" / "wasm" / "wheels").glob("bindloop-*.whl")):
        return "harness/wasm/wheels is missing (make wasm-wheels)"
    return None


@pytest.mark.skipif(not os.environ.get("BINDLOOP_REQUIRE_PYODIDE"),
                    reason="run by `make wasm-smoke`, after the wheels are rebuilt")
def test_create_model_runs_under_pyodide_over_loopback_fetch() -> None:
    missing = _missing()
    if missing is not None:
        pytest.fail(missing)
    with ScriptedProviderServer() as srv:
        srv.enqueue("google", turn_reply("gemini", ANSWER, stream=True))
        srv.enqueue("primary", error_reply(
            503, b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'))
        srv.enqueue("backup", turn_reply("openai_chat", ANSWER, stream=True))
        done = subprocess.run(["node", str(RUNNER), str(SNIPPET),
                               srv.base_url("").rstrip("/")], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-4000:]
        report = json.loads(done.stdout.strip().splitlines()[-1])
        requests = list(srv.requests)
    assert report["ok"] is True
    assert report["texts"] == ["hello live"] and report["single"] == "hello live"
    assert report["routed"] == "hello live" and report["served_by"] == "openai"
    gemini, primary, backup = requests
    assert gemini.path == "/google/v1beta/models/m-1:streamGenerateContent?alt=sse"
    assert ("x-goog-api-key", "k-gemini-wasm") in gemini.headers
    assert primary.path == "/primary/v1/messages"
    assert ("x-api-key", "k-anthropic-wasm") in primary.headers
    assert backup.path == "/backup/chat/completions"
    assert ("authorization", "Bearer k-openai-binding") in backup.headers
    assert json.loads(backup.body)["stream"] is True
    assert not any("sk-in-the-wasm-environment" in v for r in requests for _, v in r.headers)
