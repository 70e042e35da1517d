"""The official conformance suite's server scenarios (npm ``@modelcontextprotocol/conformance``,
Node 22 from npm) against bindloop's MCP server: ``tests/mcp/conformance/run_server.py``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

MCP_NODE_DIR = Path(__file__).resolve().parent / "conformance"


def test_the_conformance_suites_server_scenarios_pass() -> None:
    cli = MCP_NODE_DIR / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist"
    if not (MCP_NODE_DIR / "node_modules" / "node" / "bin" / "node").exists() or not cli.exists():
        if os.environ.get("BINDLOOP_REQUIRE_MCP_CONFORMANCE"):
            raise RuntimeError("the conformance suite is not installed: make test-mcp-conformance")
        pytest.skip("the MCP conformance suite is not installed (make test-mcp-conformance)")
    pytest.importorskip("uvicorn")
    proc = subprocess.run([sys.executable, str(MCP_NODE_DIR / "run_server.py")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "12/12 server scenarios passed"
