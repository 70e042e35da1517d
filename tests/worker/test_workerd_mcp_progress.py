"""The Worker's MCP route streams a long call's progress as it happens (``POST /mcp`` in real
workerd, tests/worker/mcp_progress_worker): the first ``notifications/progress`` reaches the
client while the tool still holds, not with the final answer; a short call's stream carries its
progress, then the result; a client that asks for no progress gets one JSON answer; a client that
hangs up on a streamed call cancels its tool.

``BINDLOOP_WORKER_WHEELS`` names another wheel directory than ``wasm/wheels-pyc`` (a wheel set
built from a working tree).
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "worker" / "tools"))
from workerd_harness import WHEELS_DIR, Workerd, stage  # noqa: E402

TOKEN = "mcp-progress-token"
WORKER = Path(__file__).resolve().parent / "mcp_progress_worker"
HEADERS = {"authorization": f"Bearer {TOKEN}", "content-type": "application/json",
           "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
           "mcp-method": "tools/call", "mcp-name": "steps"}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("mcp-progress")
    wheels = Path(os.environ.get("BINDLOOP_WORKER_WHEELS", str(WHEELS_DIR)))
    config = stage(tmp / "stage", bindings={"API_TOKEN": TOKEN}, storage_dir=tmp / "do",
                   with_conformance=False, wheels_dir=wheels, src_dir=WORKER)
    with Workerd(config) as wd:
        yield wd.base_url + "/mcp"


def _call(seconds: float, token: str | None) -> bytes:
    meta: dict[str, Any] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                            "io.modelcontextprotocol/clientCapabilities": {}}
    if token is not None:
        meta["progressToken"] = token
    return json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "steps", "arguments": {"seconds": seconds}, "_meta": meta}}).encode()


def _messages(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.startswith("data:"):
            yield json.loads(line[5:])


def test_the_first_progress_arrives_while_the_tool_still_holds(url: str) -> None:
    # The tool holds 600 s after its first report; the read deadline is 90 s. Only a stream
    # written as the call runs delivers the report inside it: one sent with the answer would
    # time the read out.
    timeout = httpx.Timeout(90.0)
    with httpx.stream("POST", url, content=_call(600, "live"), headers=HEADERS,
                      timeout=timeout) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        first = next(_messages(response.iter_lines()))
    assert first["method"] == "notifications/progress"
    assert first["params"] == {"progressToken": "live", "progress": 1, "total": 2,
                               "message": "started"}


def test_a_short_call_streams_its_progress_then_its_result(url: str) -> None:
    with httpx.stream("POST", url, content=_call(0.2, 9), headers=HEADERS,
                      timeout=90) as response:
        assert response.status_code == 200
        got = list(_messages(response.iter_lines()))
    assert [m.get("method") for m in got] == ["notifications/progress"] * 2 + [None]
    assert [m["params"]["progress"] for m in got[:2]] == [1, 2]
    assert got[2]["id"] == 7
    assert got[2]["result"]["content"] == [{"type": "text", "text": "held 0.2 s"}]


def test_without_a_progress_token_the_answer_is_one_json_body(url: str) -> None:
    response = httpx.post(url, content=_call(0.1, None), headers=HEADERS, timeout=90)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["result"]["content"] == [{"type": "text", "text": "held 0.1 s"}]


def _seen(url: str) -> str:
    body = json.dumps({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {
        "name": "seen", "arguments": {}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}}).encode()
    answer = httpx.post(url, content=body, headers={**HEADERS, "mcp-name": "seen"}, timeout=90)
    return str(answer.json()["result"]["content"][0]["text"])


def test_a_client_that_hangs_up_cancels_its_streamed_call(url: str) -> None:
    # 777 s: a hold no other test uses, so its cancellation is this test's own.
    with httpx.stream("POST", url, content=_call(777, "gone"), headers=HEADERS,
                      timeout=90) as response:
        first = next(_messages(response.iter_lines()))
        assert first["method"] == "notifications/progress"
    # the connection is closed here, with the tool still holding; the Worker finds out within
    # three keep-alive intervals (5 s each)
    deadline = time.monotonic() + 60
    while "777" not in (seen := _seen(url)):
        assert time.monotonic() < deadline, f"the call was never cancelled ({seen})"
        time.sleep(0.2)
