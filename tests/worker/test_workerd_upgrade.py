"""An existing deployment upgrades in place (docs/workers.md, "Upgrading a deployment"): the
Worker of an older release -- the template as of commit ``a7ef76d``, when its machinery was still
copied into ``worker/src`` (11 modules over the bindloop of that commit), checked out from the
repository's history -- suspends a chat on an approval in real workerd, on Durable Object storage
on disk; then the current template (its machinery in the wheel, its model from one line) is
started on the same storage, and the approval is answered there: the run completes, the tool runs
once, and a second answer of the same approval is refused.

Needs the repository's git history (a shallow clone without ``a7ef76d`` skips, saying so).
"""

from __future__ import annotations

import http.client
import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import msgspec
import pytest

from harness.fixtures.scripted_server import (
    RecordedRequest,
    ScriptedProviderServer,
    ScriptedReply,
    turn_reply,
)
from bindloop.testing import final_answer, tool_call, tool_call_turn

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "worker" / "tools"))
from workerd_harness import WHEELS_DIR, Workerd, read_worker, stage, stage_worker  # noqa: E402

PREVIOUS = "a7ef76d"
"""The last commit whose template carried its machinery in ``worker/src``."""


def policy(request: RecordedRequest) -> ScriptedReply:
    body = msgspec.json.decode(request.body)
    last = body["messages"][-1]
    if last["role"] == "tool":
        turn = final_answer(f"Counted {last['content']} words.")
    else:
        turn = tool_call_turn([tool_call("word_count", {"text": "a b c"}, id="wc-5")])
    return turn_reply("openai_chat", turn, stream=True, model=body["model"], delay_s=0.001)


def previous_worker(tmp: Path) -> Path:
    """The template and the bindloop sources of :data:`PREVIOUS`, as a Worker directory whose
    ``python_modules/bindloop`` is that commit's package."""
    found = subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"{PREVIOUS}^{{commit}}"],
                           capture_output=True, check=False)
    if found.returncode != 0:
        pytest.skip(f"the repository's history does not hold {PREVIOUS} (a shallow clone?): "
                    "the previous release's Worker cannot be checked out")
    archive = tmp / "previous.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", "-o", str(archive),
                    PREVIOUS, "worker/src", "worker/wrangler.jsonc", "worker/pyproject.toml",
                    "src/bindloop"], check=True)
    root = tmp / "previous"
    with tarfile.open(archive) as tar:
        tar.extractall(root, filter="data")
    worker = root / "worker"
    shutil.copytree(root / "src" / "bindloop", worker / "python_modules" / "bindloop")
    return worker


def dependency_wheels(tmp: Path) -> Path:
    """The wheel set both Workers are served with, but bindloop's: the previous Worker brings its
    own (``python_modules/bindloop``)."""
    deps = tmp / "deps"
    deps.mkdir()
    for wheel in WHEELS_DIR.glob("*.whl"):
        if not wheel.name.startswith("bindloop-"):
            shutil.copy2(wheel, deps / wheel.name)
    return deps


def post(port: int, path: str, body: dict[str, Any]) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", path, body=json.dumps(body),
                     headers={"content-type": "application/json"})
        resp = conn.getresponse()
        return resp.status, resp.read().decode()
    finally:
        conn.close()


def chunks(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


ASKED = {"id": "upgraded", "messages": [
    {"id": "u", "role": "user", "parts": [{"type": "text", "text": "count a b c"}]}]}
APPROVED = {"id": "upgraded", "messages": [
    {"id": "u", "role": "user", "parts": [{"type": "text", "text": "count a b c"}]},
    {"id": "a", "role": "assistant", "parts": [
        {"type": "step-start"},
        {"type": "tool-word_count", "toolCallId": "wc-5", "state": "approval-responded",
         "input": {"text": "a b c"},
         "approval": {"id": "approval-wc-5", "approved": True}}]}]}


def test_a_chat_suspended_by_the_previous_release_is_answered_by_this_one(tmp_path: Path) -> None:
    storage = tmp_path / "do"  # workerd's on-disk Durable Object storage, shared by both
    with ScriptedProviderServer() as server:
        server.set_responder("p", policy)
        # Both releases' settings: the previous one reads PROVIDER_*, this one's template its
        # one-line model (OPENAI_*); the word counts wait for the user's approval.
        bindings = {"PROVIDER_BASE_URL": server.base_url("p"), "PROVIDER_API_KEY": "sk-old",
                    "OPENAI_BASE_URL": server.base_url("p"), "OPENAI_API_KEY": "sk-new",
                    "APPROVAL_TOOLS": "word_count"}
        old = stage_worker(read_worker(previous_worker(tmp_path)), tmp_path / "old-stage",
                           storage_dir=storage, bindings=bindings,
                           wheels_dirs=(dependency_wheels(tmp_path),))
        with Workerd(old) as previous:
            status, text = post(previous.port, "/api/chat", ASKED)
        assert status == 200, text
        assert [c["toolCallId"] for c in chunks(text)
                if c["type"] == "tool-approval-request"] == ["wc-5"], text
        assert not [c for c in chunks(text) if c["type"] == "tool-output-available"], text
        assert len(server.requests) == 1

        new = stage(tmp_path / "new-stage", storage_dir=storage, bindings=bindings,
                    with_conformance=False)
        with Workerd(new) as current:
            status, text = post(current.port, "/api/chat", APPROVED)
            assert status == 200, text
            assert "approval was refused" not in text, text
            outputs = [c for c in chunks(text) if c["type"] == "tool-output-available"]
            assert [(c["toolCallId"], c["output"]) for c in outputs] == [("wc-5", "3")], text
            said = "".join(c.get("delta", "") for c in chunks(text) if c["type"] == "text-delta")
            assert said == "Counted 3 words.", text
            assert len(server.requests) == 2
            asked = msgspec.json.decode(server.requests[1].body)["messages"]
            assert [m["content"] for m in asked if m["role"] == "tool"] == ["3"]  # ran once
            sent = {k.lower(): v for k, v in server.requests[1].headers}
            assert sent.get("authorization") == "Bearer sk-new"
            # The approval was taken by the run it started: sent again, it runs nothing.
            status, again = post(current.port, "/api/chat", APPROVED)
            assert status == 200 and "approval was refused" in again, again
            assert "tool-output-available" not in again and len(server.requests) == 2
