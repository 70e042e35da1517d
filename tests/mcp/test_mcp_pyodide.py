"""The same MCP client under Pyodide 314 in Node, over JS fetch, against the official SDK's server.

Run by ``make mcp-pyodide`` (part of ``make test``), which builds ``harness/wasm/node_modules`` and
``harness/wasm/wheels`` first and sets ``BINDLOOP_REQUIRE_PYODIDE``; a plain pytest run skips it, so
``make test`` pays its ~10 s once, and never against a stale wheel.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNNER = ROOT / "tests" / "mcp" / "run_pyodide_mcp.mjs"
SNIPPET = ROOT / "tests" / "mcp" / "pyodide_mcp.py"


def _missing() -> str | None:
    if shutil.which("node") is None:
        return "node is not installed"
    if not (ROOT / "harness" / "wasm" / "node_modules" / "pyodide" / "pyodide.mjs").exists():
        return "harness/wasm/node_modules is missing (make wasm-node)"
    if not any((ROOT / "harness" / "wasm" / "wheels").glob("bindloop-*.whl")):
        return "harness/wasm/wheels is missing (make wasm-wheels)"
    return None


@pytest.mark.skipif(not os.environ.get("BINDLOOP_REQUIRE_PYODIDE"),
                    reason="run by `make mcp-pyodide`, after the wheels are rebuilt")
def test_the_client_runs_under_pyodide_against_the_sdk_server(reference_url: str) -> None:
    missing = _missing()
    if missing is not None:
        pytest.fail(missing)
    done = subprocess.run(["node", str(RUNNER), str(SNIPPET), reference_url], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["ok"] is True and report["mcp_call_ms"] > 0
