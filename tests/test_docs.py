"""The README example and the tutorial's code blocks run as written."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _python_blocks(text: str) -> list[str]:
    return [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", text, re.S)]


def test_readme_first_example_runs_against_a_provider(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """The README's first example is an agent on a real provider model: run as written, its key
    and endpoint from the standard variables, against a loopback OpenAI-chat server."""
    import json

    from harness.fixtures.scripted_server import ScriptedProviderServer, turn_reply
    from bindloop.testing import final_answer, tool_call, tool_call_turn

    blocks = _python_blocks((ROOT / "README.md").read_text())
    assert blocks, "README lost its example"
    assert len(blocks[0].strip().splitlines()) <= 36
    assert 'create_model("openai:' in blocks[0] and "@define_tool" in blocks[0]

    def policy(request):  # type: ignore[no-untyped-def]
        body = json.loads(request.body)
        last = body["messages"][-1]
        turn = (tool_call_turn([tool_call("weather", {"city": "Lisbon"}, id="w1")])
                if last["role"] == "user" else final_answer('{"city": "Lisbon", "high_c": 24}'))
        return turn_reply("openai_chat", turn, stream=bool(body.get("stream")))

    server = ScriptedProviderServer().start()
    try:
        server.set_responder("v1", policy)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-readme")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url("v1"))
        exec(compile(blocks[0], "README.md", "exec"), {"__name__": "readme"})
    finally:
        server.stop()
    out = capsys.readouterr().out
    assert out.startswith('{"city": "Lisbon", "high_c": 24}')
    assert "Forecast(city='Lisbon', high_c=24)" in out
    assert json.loads(server.requests[0].body)["stream"] is True


def test_readme_loop_example_runs() -> None:
    blocks = _python_blocks((ROOT / "README.md").read_text())
    loop = next(b for b in blocks if "loop_harness" in b)
    assert len(loop.strip().splitlines()) <= 16
    exec(compile(loop, "README.md", "exec"), {})


def test_tutorial_runs_end_to_end(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """Every block, in order; the agent on a provider model against a loopback OpenAI-chat
    server (key and endpoint from the standard variables), the loop underneath on its own."""
    import json

    from harness.fixtures.scripted_server import ScriptedProviderServer, turn_reply
    from bindloop.testing import final_answer, tool_call, tool_call_turn

    def policy(request):  # type: ignore[no-untyped-def]
        body = json.loads(request.body)
        last = body["messages"][-1]
        turn = (tool_call_turn([tool_call("add", {"a": 2, "b": 3}, id="a1")])
                if last["role"] == "user" else final_answer(f"2 + 3 = {last['content']}"))
        return turn_reply("openai_chat", turn, stream=bool(body.get("stream")))

    blocks = _python_blocks((ROOT / "docs" / "tutorial.md").read_text())
    assert 'create_model("openai:' in blocks[0]
    server = ScriptedProviderServer().start()
    try:
        server.set_responder("v1", policy)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-tutorial")
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url("v1"))
        namespace: dict[str, object] = {}
        for block in blocks:
            exec(compile(block, "tutorial.md", "exec"), namespace)
    finally:
        server.stop()
    out = capsys.readouterr().out
    assert out.startswith("2 + 3 = 5\n")
    assert "done 2" in out
    assert "ToolMessage" in out


def test_agent_approval_example_runs_on_its_own(capsys) -> None:  # type: ignore[no-untyped-def]
    """docs/agent.md's approval block is self-contained: it runs alone, the approved call runs
    once inside the resumed run, and the repeated decision is refused."""
    text = (ROOT / "docs" / "agent.md").read_text()
    section = text.split("### Approvals", 1)[1].split("\n### ", 1)[0]
    (block,) = _python_blocks(section)
    exec(compile(block, "agent.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "waiting_for_reply [('rm', '{\"path\":\"/home/a.txt\"}')]",
        "refused: ('call_1_0',)",
        "Removed it. ['/home/a.txt'] finished",
    ]


@pytest.mark.parametrize("durable", [False, True])
def test_the_serve_page_server_answers_use_chat(monkeypatch, tmp_path,  # type: ignore[no-untyped-def]
                                                durable) -> None:
    """docs/serve.md's server, as written, behind a loopback provider: refused without the token,
    a chat that reads a note, and an approval asked for the deletion (nothing deleted); also as
    the page's "runs that outlive the process" block makes it (its files in a fresh directory)."""
    import json
    import threading

    import httpx
    import uvicorn

    from harness.fixtures.scripted_server import ScriptedProviderServer, turn_reply
    from bindloop.testing import final_answer, tool_call, tool_call_turn

    def policy(request):  # type: ignore[no-untyped-def]
        body = json.loads(request.body)
        last = body["messages"][-1]
        if last["role"] == "user" and "delete" in str(last["content"]):
            turn = tool_call_turn([tool_call("delete_note", {"title": "ideas"}, id="d1")])
        elif last["role"] == "user":
            turn = tool_call_turn([tool_call("read_note", {"title": "groceries"}, id="r1")])
        else:
            turn = final_answer(f"It says: {last['content']}")
        return turn_reply("openai_chat", turn, stream=bool(body.get("stream")))

    server_block, durable_block = _python_blocks((ROOT / "docs" / "serve.md").read_text())
    monkeypatch.chdir(tmp_path)
    provider = ScriptedProviderServer().start()
    provider.set_responder("v1", policy)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-serve")
    monkeypatch.setenv("OPENAI_BASE_URL", provider.base_url("v1"))
    namespace: dict[str, object] = {"__name__": "server"}
    exec(compile(server_block, "serve.md", "exec"), namespace)
    servers: list[uvicorn.Server] = []

    def serve() -> None:  # the SQLite stores are used on the thread that opened them
        if durable:
            exec(compile(durable_block, "serve.md", "exec"), namespace)
        config = uvicorn.Config(namespace["app"], host="127.0.0.1", port=0, log_level="warning")
        servers.append(uvicorn.Server(config))
        servers[0].run()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        while not servers or not servers[0].started:
            thread.join(0.05)
        web = servers[0]
        assert (tmp_path / "chats.db").exists() is durable
        port = web.servers[0].sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}/api/chat"

        def chat(chat_id: str, text: str, token: str | None = "Bearer let-me-in") -> httpx.Response:
            headers = {"authorization": token} if token else {}
            return httpx.post(url, headers=headers, timeout=60, json={
                "id": chat_id, "trigger": "submit-message", "messages": [
                    {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]})

        assert chat("a", "hi", token=None).status_code == 401
        def chunks(r: httpx.Response) -> list[dict[str, object]]:
            return [json.loads(line[6:]) for line in r.text.splitlines()
                    if line.startswith("data: {")]

        read = chunks(chat("a", "Read my groceries note"))
        assert {"type": "tool-output-available", "toolCallId": "r1",
                "output": "milk, eggs"} in read
        assert "".join(str(c["delta"]) for c in read if c["type"] == "text-delta") == (
            "It says: milk, eggs")
        asked = chunks(chat("b", "Please delete my ideas note"))
        assert any(c["type"] == "tool-approval-request" for c in asked)
        assert "ideas" in namespace["NOTES"]  # type: ignore[operator]
    finally:
        for web in servers:
            web.should_exit = True
        thread.join(10)
        provider.stop()


def test_model_page_runs(capsys) -> None:  # type: ignore[no-untyped-def]
    """docs/model.md's blocks: a StreamModel's own fold, priced, and the loop's port over a model."""
    namespace: dict[str, object] = {}
    for block in _python_blocks((ROOT / "docs" / "model.md").read_text()):
        exec(compile(block, "model.md", "exec"), namespace)
    assert capsys.readouterr().out.splitlines() == ["you said: hi 6 5", "done"]
