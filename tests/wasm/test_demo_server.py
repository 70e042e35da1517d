"""harness/wasm/demo/serve.py over real loopback HTTP: static files confined to their roots, the wheel
index, and the two scripted providers' per-turn behaviour (503, served, cut mid-stream)."""

from __future__ import annotations

import http.client
import importlib.util
import sys
from urllib.parse import urlsplit
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import msgspec
import pytest

from bindloop.contracts import AssistantMessage, ToolCall, ToolMessage, UserMessage, messages_to_openai

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


serve = _load("bindloop_demo_serve", ROOT / "harness" / "wasm" / "demo" / "serve.py")


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    wheels = tmp_path_factory.mktemp("wheels")
    (wheels / "b-1-py3-none-any.whl").write_bytes(b"PK")
    (wheels / "a-1-py3-none-any.whl").write_bytes(b"PK")
    (wheels / "notes.txt").write_text("not a wheel")
    with serve.build_server(wheels, pyc_wheels=wheels, bytecode_wheels=wheels, delay_s=0) as server:
        yield server.base_url("")


def _chat(base: str, prefix: str, messages: list[object]) -> httpx.Response:
    body = {"model": "m", "stream": True, "messages": messages_to_openai(messages)}  # type: ignore[arg-type]
    return httpx.post(f"{base}{prefix}/v1/chat/completions", content=msgspec.json.encode(body),
                      headers={"content-type": "application/json"})


def _streamed_text(resp: httpx.Response) -> str:
    events = [msgspec.json.decode(line[6:]) for line in resp.text.split("\n")
              if line.startswith("data: {")]
    return "".join(c["delta"].get("content") or "" for e in events for c in e["choices"])


def test_static_files_with_their_types(base: str) -> None:
    page = httpx.get(f"{base}demo/index.html")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert b'src="./app.js"' in page.content
    assert httpx.get(f"{base}demo/").content == page.content
    assert httpx.get(f"{base}demo/app.js").headers["content-type"] == "text/javascript"
    assert httpx.get(f"{base}demo/page_agent.py").headers["content-type"].startswith("text/x-python")


@pytest.mark.parametrize("path", ["demo/../serve.py", "demo/%2e%2e/serve.py", "demo/nope.js",
                                  "wheels/../../pyproject.toml", "pyodide/../../../etc/passwd"])
def test_nothing_outside_the_roots(base: str, path: str) -> None:
    # http.client sends the path as given (httpx would resolve the dot segments first).
    conn = http.client.HTTPConnection(urlsplit(base).netloc, timeout=10)
    try:
        conn.request("GET", "/" + path)
        assert conn.getresponse().status == 404
    finally:
        conn.close()


def test_wheel_index_lists_only_wheels(base: str) -> None:
    for prefix in ("wheels", "wheels-pyc", "wheels-bytecode"):
        got = httpx.get(f"{base}{prefix}/index.json")
        assert got.status_code == 200 and got.headers["content-type"] == "application/json"
        assert got.json() == ["a-1-py3-none-any.whl", "b-1-py3-none-any.whl"]


def test_static_refuses_other_methods(base: str) -> None:
    assert httpx.post(f"{base}demo/index.html", content=b"x").status_code == 405


PROMPT = [UserMessage(content="What is 2 + 3?")]
AFTER_TOOLS = [*PROMPT,
               AssistantMessage(content="", tool_calls=(ToolCall(id="calc_0", name="calculator",
                                                                 arguments='{"expression":"2 + 3"}'),)),
               ToolMessage(tool_call_id="calc_0", content="5")]
FINAL = [*AFTER_TOOLS, AssistantMessage(content="", tool_calls=(ToolCall(id="list_0", name="notes_list",
                                                                         arguments="{}"),)),
         ToolMessage(tool_call_id="list_0", content="[]")]


def test_primary_fails_the_first_turn_with_503(base: str) -> None:
    got = _chat(base, "primary", PROMPT)  # type: ignore[arg-type]
    assert got.status_code == 503 and got.headers["retry-after"] == "1"
    assert got.json()["error"]["status"] == "UNAVAILABLE"


def test_backup_streams_the_policy_turn_word_by_word(base: str) -> None:
    got = _chat(base, "backup", PROMPT)  # type: ignore[arg-type]
    assert got.status_code == 200 and got.headers["content-type"] == "text/event-stream"
    events = [msgspec.json.decode(line[6:]) for line in got.text.split("\n")
              if line.startswith("data: {")]
    text = _streamed_text(got)
    assert text == "I'll evaluate 1 expression(s) first."
    pieces = [c["delta"]["content"] for e in events for c in e["choices"] if c["delta"].get("content")]
    assert len(pieces) == len(text.split(" "))
    calls = [c["delta"]["tool_calls"] for e in events for c in e["choices"] if c["delta"].get("tool_calls")]
    assert calls and calls[0][0]["function"]["name"] == "calculator"


def test_primary_serves_the_second_turn(base: str) -> None:
    got = _chat(base, "primary", AFTER_TOOLS)  # type: ignore[arg-type]
    assert got.status_code == 200 and '"notes_list"' in got.text


def test_primary_cuts_the_final_answer_mid_stream(base: str) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        _chat(base, "primary", FINAL)  # type: ignore[arg-type]
    whole = _chat(base, "backup", FINAL)  # type: ignore[arg-type]
    assert whole.status_code == 200 and whole.text.endswith("data: [DONE]\n\n")
    assert _streamed_text(whole).startswith("Here is what I found:\n  2 + 3 = 5\n")


def test_the_outage_fails_two_model_calls_then_serves_each_provider(
        tmp_path: Path) -> None:
    """``/down/<name>/``: the page's ``?providers=down`` -- two 503s (the run's primary and backup),
    then the named provider itself (the retry goes through)."""
    with serve.build_server(tmp_path, delay_s=0) as server:
        down = server.base_url("down")
        first = [_chat(down, f"/{name}", [UserMessage(content="hi")]).status_code
                 for name in ("primary", "backup")]
        assert first == [503, 503]
        served = _chat(down, "/backup", [UserMessage(content="hi")])
        assert served.status_code == 200 and b"data:" in served.content
        assert _chat(down, "/primary", [UserMessage(content="hi")]).status_code == 503  # flaky turn 1
        assert _chat(down, "/nowhere", [UserMessage(content="hi")]).status_code == 404
