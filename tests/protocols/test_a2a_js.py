"""The official A2A JavaScript SDK (npm ``@a2a-js/sdk`` 1.3, pinned in harness/clients/a2a/package-lock.json)
on Node against bindloop's A2A server under uvicorn: its client reads the card, streams a task,
reads it back, continues the context, answers an approval, and maps bindloop's errors to its own
typed errors. ``cd harness/clients/a2a && npm ci`` installs it; without it the test skips, unless
``BINDLOOP_REQUIRE_CLIENTS=1``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest

from bindloop.contracts import ToolResult
from bindloop.hosts.a2a.server import A2aServer
from bindloop.hosts.chat.agent import agent_runner
from bindloop.tools import define_tool
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

CLIENT = Path(__file__).resolve().parents[2] / "harness" / "clients" / "a2a"


class Title(msgspec.Struct):
    title: str


def test_the_a2a_js_sdk_client_against_bindloops_server(served: Any) -> None:
    if shutil.which("node") is None or not (CLIENT / "node_modules" / "@a2a-js" / "sdk").is_dir():
        if os.environ.get("BINDLOOP_REQUIRE_CLIENTS") == "1":
            pytest.fail("@a2a-js/sdk is not installed: cd harness/clients/a2a && npm ci")
        pytest.skip("@a2a-js/sdk not installed (cd harness/clients/a2a && npm ci)")
    deleted: list[str] = []

    def delete(args: Title, _ctx: object) -> ToolResult:
        deleted.append(args.title)
        return ToolResult(content="deleted")

    tool = define_tool(name="delete_note", description="Delete a note.", args=Title,
                       execute=delete)
    model = scripted_stream_model([
        final_answer("Hello from bindloop."), final_answer("Again."),
        tool_call_turn([tool_call("delete_note", {"title": "groceries"}, id="c1")]),
        final_answer("Deleted.")], chunk_size=5)
    app = A2aServer(agent_runner(model, tools=[tool], needs_approval=["delete_note"]),
                    name="js", description="d")
    with served(app) as base:
        proc = subprocess.run(["node", str(CLIENT / "a2a_js.mjs"), base], capture_output=True,
                              text=True, timeout=120, cwd=CLIENT)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    # TaskState: 1 submitted, 2 working, 3 completed, 6 input-required (the SDK's enum numbers)
    assert out["streamCases"][0] == "task" and out["streamCases"][-1] == "statusUpdate"
    assert "artifactUpdate" in out["streamCases"]
    assert out["streamStates"] == [1, 2, 3]
    assert out["task"] == {"state": 3, "text": "Hello from bindloop."}
    assert out["second"] == {"kind": "task", "state": 3, "sameContext": True, "text": "Again."}
    assert out["asked"] == {"state": 6, "data": [{
        "kind": "approval", "id": "approval-c1", "toolCallId": "c1", "toolName": "delete_note",
        "arguments": {"title": "groceries"}}]}
    assert out["approved"] == {"state": 3, "text": "Deleted."} and deleted == ["groceries"]
    assert out["missing"] == "JsonRpcTaskNotFoundError"
    assert out["ended"] == "JsonRpcTaskNotCancelableError"
