"""The MCP server core is runtime-agnostic: ``mcp_server_core_snippet.py`` drives
:class:`bindloop.mcp.server.McpServer` (both protocol forms, a call with progress, a refusal, bad
arguments, refusals, a hostile body) on CPython, and under Pyodide 314 in Node with this working
tree's ``src/bindloop`` (``run_pyodide_server.mjs``); the two transcripts must be identical.

The Pyodide half needs ``harness/wasm/node_modules`` and ``harness/wasm/wheels`` (``make wasm-node
wasm-wheels``); it is skipped without them unless ``BINDLOOP_REQUIRE_PYODIDE`` is set."""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[2]
SNIPPET = Path(__file__).resolve().parent / "mcp_server_core_snippet.py"
RUNNER = Path(__file__).resolve().parent / "run_pyodide_server.mjs"


def cpython_transcript() -> str:
    code = compile(SNIPPET.read_text(), str(SNIPPET), "exec",
                   flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, Any] = {}

    async def run() -> None:
        await eval(code, namespace)  # noqa: S307 - the repository's own snippet

    anyio.run(run)
    return json.dumps(namespace["transcript"], sort_keys=True)


def test_the_core_answers_as_documented_on_cpython() -> None:
    transcript = json.loads(cpython_transcript())
    init, listing, call, refused, bad, unknown, no_session, discover, stateless = transcript
    assert init["status"] == 200 and init["session"] == "session-1"
    assert [t["name"] for t in listing["body"]["result"]["tools"]] == ["add", "refuse"]
    assert [e["params"]["progress"] for e in call["emitted"]] == [1, 2, 3]
    assert call["answer"]["result"] == {"content": [{"type": "text", "text": "42"}]}
    assert refused["answer"]["result"]["isError"] is True
    assert refused["answer"]["result"]["content"][0]["text"] == "no, on purpose"
    assert bad["answer"]["result"]["isError"] is True
    assert unknown["body"]["error"]["code"] == -32601
    assert no_session["status"] == 404
    assert discover["body"]["result"]["supportedVersions"][0] == "2026-07-28"
    assert stateless["answer"]["result"]["resultType"] == "complete"


def test_pyodide_gives_the_same_transcript() -> None:
    import pytest

    missing = None
    if shutil.which("node") is None:
        missing = "node is not installed"
    elif not (ROOT / "harness" / "wasm" / "node_modules" / "pyodide" / "pyodide.mjs").exists():
        missing = "harness/wasm/node_modules is missing (make wasm-node)"
    elif not any((ROOT / "harness" / "wasm" / "wheels").glob("msgspec-*.whl")):
        missing = "harness/wasm/wheels is missing (make wasm-wheels)"
    if missing is not None:
        if os.environ.get("BINDLOOP_REQUIRE_PYODIDE"):
            pytest.fail(missing)
        pytest.skip(missing)
    done = subprocess.run(["node", str(RUNNER), str(SNIPPET)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == cpython_transcript()
