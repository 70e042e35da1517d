"""The six everyday programs in ``examples/``, each run as a user runs it (``python examples/x.py``,
a fresh process, its key and endpoint from the provider's standard variables) against loopback
providers speaking the real wires, and each no longer than the line budget it is held to (the same
program written with pydantic-ai: 15, 20, 10, 24, 19 and 11 lines of code)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bindloop.contracts import ModelTurnResult
from harness.fixtures.scripted_server import (
    RecordedRequest,
    ScriptedProviderServer,
    ScriptedReply,
    error_reply,
    turn_reply,
)
from bindloop.testing import final_answer, tool_call, tool_call_turn

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
SRC = Path(__file__).resolve().parent.parent / "src"

BUDGET = {"typed_output.py": 15, "streaming_tools.py": 20, "fallback.py": 10, "approval.py": 24,
          "chat_endpoint.py": 19, "mcp_agent.py": 11}


def lines_of_code(path: Path) -> int:
    """Lines that are neither blank nor only a comment: how the budget is counted."""
    return sum(1 for line in path.read_text().splitlines()
               if line.strip() and not line.strip().startswith("#"))


def test_every_program_is_within_its_budget() -> None:
    counts = {name: lines_of_code(EXAMPLES / name) for name in BUDGET}
    assert all(counts[name] <= BUDGET[name] for name in BUDGET), counts
    assert sorted(p.name for p in EXAMPLES.glob("*.py") if p.name != "__init__.py") == sorted(BUDGET)


@pytest.fixture
def server() -> Iterator[ScriptedProviderServer]:
    srv = ScriptedProviderServer().start()
    try:
        yield srv
    finally:
        srv.stop()


def _body(request: RecordedRequest) -> dict[str, Any]:
    return json.loads(request.body)


def _reply(turn: ModelTurnResult, request: RecordedRequest, wire: str = "openai_chat") -> ScriptedReply:
    return turn_reply(wire, turn, stream=bool(_body(request).get("stream")),
                      model=_body(request).get("model", "m"))


def _env(server: ScriptedProviderServer, cwd: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update(OPENAI_API_KEY="sk-loopback", OPENAI_BASE_URL=server.base_url("openai"),
               ANTHROPIC_API_KEY="sk-ant-loopback", ANTHROPIC_BASE_URL=server.base_url("anthropic"),
               PYTHONPATH=str(SRC))
    return env


def _run(name: str, *args: str, server: ScriptedProviderServer, cwd: Path,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, str(EXAMPLES / name), *args], cwd=cwd,
                          env=_env(server, cwd), capture_output=True, text=True, timeout=120)
    if check:
        assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_typed_output_with_a_validator_and_a_re_ask(server: ScriptedProviderServer,
                                                    tmp_path: Path) -> None:
    answers = iter(['{"name": "Tokyo", "population": -1}',
                    '{"name": "Tokyo", "population": 37400000}'])
    server.set_responder("openai", lambda r: _reply(final_answer(next(answers)), r))
    out = _run("typed_output.py", server=server, cwd=tmp_path).stdout
    assert out.strip() == "City(name='Tokyo', population=37400000)"
    second = _body(server.requests[1])
    assert second["response_format"]["type"] == "json_schema"
    assert "the population must be positive" in json.dumps(second["messages"])


def test_a_streaming_agent_with_two_tools(server: ScriptedProviderServer, tmp_path: Path) -> None:
    def policy(request: RecordedRequest) -> ScriptedReply:
        last = _body(request)["messages"][-1]
        if last["role"] == "user":
            return _reply(tool_call_turn([tool_call("weather", {"city": "Lisbon"}, id="c1"),
                                          tool_call("local_time", {"city": "Lisbon"}, id="c2")]),
                          request)
        return _reply(final_answer("Lisbon is sunny and 24C; it is 14:05 there."), request)

    server.set_responder("openai", policy)
    out = _run("streaming_tools.py", server=server, cwd=tmp_path).stdout
    assert out == "Lisbon is sunny and 24C; it is 14:05 there."
    first, second = (_body(r) for r in server.requests)
    assert first["stream"] is True and [t["function"]["name"] for t in first["tools"]] == [
        "weather", "local_time"]
    results = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert results == ["Sunny and 24C in Lisbon", "It is 14:05 in Lisbon"]


def test_two_provider_fallback_past_a_503(server: ScriptedProviderServer, tmp_path: Path) -> None:
    server.set_responder("anthropic", lambda r: error_reply(
        503, b'{"type":"error","error":{"type":"overloaded_error","message":"overloaded"}}'))
    server.set_responder("openai", lambda r: _reply(
        final_answer("Air scatters blue light more than red."), r))
    out = _run("fallback.py", server=server, cwd=tmp_path).stdout
    assert out.strip() == "Air scatters blue light more than red."
    assert [r.path.split("/")[1] for r in server.requests][-1] == "openai"
    assert any(r.path.startswith("/anthropic") for r in server.requests)


def test_an_approval_resumed_in_a_new_process_runs_the_tool_once(
        server: ScriptedProviderServer, tmp_path: Path) -> None:
    def policy(request: RecordedRequest) -> ScriptedReply:
        last = _body(request)["messages"][-1]
        if last["role"] == "user":
            return _reply(tool_call_turn([tool_call("delete_file", {"path": "/tmp/report.txt"},
                                                    id="d1")]), request)
        return _reply(final_answer(f"Done: {last['content']}."), request)

    server.set_responder("openai", policy)
    asked = _run("approval.py", "Delete /tmp/report.txt", server=server, cwd=tmp_path).stdout
    assert asked.startswith("approve ") and "deleting" not in asked
    other = _run("approval.py", "Delete /tmp/other.txt", server=server, cwd=tmp_path).stdout
    assert other.startswith("approve ") and other != asked  # ids unique across processes
    command = asked.strip()
    done = _run("approval.py", command, server=server, cwd=tmp_path).stdout
    assert done == "deleting /tmp/report.txt\nDone: deleted /tmp/report.txt.\n"
    again = _run("approval.py", command, server=server, cwd=tmp_path, check=False)
    assert again.returncode != 0 and "deleting" not in again.stdout  # refused: runs nothing


def test_an_endpoint_a_use_chat_client_talks_to(server: ScriptedProviderServer,
                                                tmp_path: Path) -> None:
    def policy(request: RecordedRequest) -> ScriptedReply:
        last = _body(request)["messages"][-1]
        if last["role"] == "user":
            return _reply(tool_call_turn([tool_call("word_count", {"text": "one two three"},
                                                    id="w1")]), request)
        return _reply(final_answer(f"{last['content']} words."), request)

    server.set_responder("openai", policy)
    # Port 0: uvicorn binds a free port itself and names it once it listens (a port picked here
    # and closed could be taken by another socket before uvicorn binds it).
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "chat_endpoint:app", "--port", "0",
                             "--log-level", "info", "--no-access-log"], cwd=EXAMPLES,
                            env=_env(server, tmp_path), stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        seen = []
        for line in proc.stderr:  # uvicorn's log, up to "Uvicorn running on http://...:PORT"
            seen.append(line)
            if "Uvicorn running on" in line:
                port = int(line.split("http://127.0.0.1:", 1)[1].split()[0])
                break
        else:
            raise AssertionError(f"uvicorn did not start: {''.join(seen)[-2000:]}")
        chat = {"id": "c1", "trigger": "submit-message", "messages": [
            {"id": "u1", "role": "user",
             "parts": [{"type": "text", "text": "How many words in 'one two three'?"}]}]}
        r = httpx.post(f"http://127.0.0.1:{port}/api/chat", json=chat, timeout=60)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert r.status_code == 200 and r.headers["x-vercel-ai-ui-message-stream"] == "v1"
    chunks = [json.loads(line[6:]) for line in r.text.splitlines()
              if line.startswith("data: {")]
    assert {"type": "tool-output-available", "toolCallId": "w1", "output": "3"} in chunks
    assert "".join(c["delta"] for c in chunks if c["type"] == "text-delta") == "3 words."
    assert r.text.rstrip().endswith("data: [DONE]")


def test_the_tools_of_a_local_mcp_server(server: ScriptedProviderServer, tmp_path: Path) -> None:
    mcp = subprocess.Popen([sys.executable, "-m", "harness.fixtures.mcp_reference_server",
                            "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        assert mcp.stdout is not None
        ready = mcp.stdout.readline()
        assert ready.startswith("READY "), ready
        url = ready.split()[1]

        def policy(request: RecordedRequest) -> ScriptedReply:
            last = _body(request)["messages"][-1]
            if last["role"] == "user":
                return _reply(tool_call_turn([tool_call("calc__add", {"a": 2, "b": 3},
                                                        id="a1")]), request)
            return _reply(final_answer(f"2 + 3 = {last['content']}"), request)

        server.set_responder("openai", policy)
        out = _run("mcp_agent.py", url, server=server, cwd=tmp_path).stdout
    finally:
        mcp.terminate()
        mcp.wait(timeout=30)
    assert out.strip().startswith("2 + 3 = ") and "5" in out
    tools = [t["function"]["name"] for t in _body(server.requests[0])["tools"]]
    assert "calc__add" in tools
