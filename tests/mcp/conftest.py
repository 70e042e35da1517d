"""Fixtures for the MCP tests: the official SDK's server (a subprocess on 127.0.0.1, an ephemeral
port) and a scripted server for the hostile cases."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bindloop.hosts.transports.httpx import HttpxTransport
from harness.fixtures.scripted_server import ScriptedProviderServer


def _start_reference(*extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.fixtures.mcp_reference_server", "--port", "0", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        _, err = proc.communicate(timeout=10)
        raise RuntimeError(f"the reference MCP server did not start: {line!r} {err[-2000:]}")
    return proc, line.split()[1]


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def reference_url() -> Iterator[str]:
    """The MCP endpoint of the SDK's server answering with event streams."""
    pytest.importorskip("mcp")
    proc, url = _start_reference()
    try:
        yield url
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def reference_json_url() -> Iterator[str]:
    """The same server answering with one JSON body per request (``json_response=True``)."""
    pytest.importorskip("mcp")
    proc, url = _start_reference("--json-response")
    try:
        yield url
    finally:
        _stop(proc)


@pytest.fixture(scope="session")
def reference_features_url() -> Iterator[str]:
    """The same server with the client-feature tools (sampling with tools, elicitation)."""
    pytest.importorskip("mcp")
    proc, url = _start_reference("--client-features")
    try:
        yield url
    finally:
        _stop(proc)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def scripted() -> Iterator[ScriptedProviderServer]:
    with ScriptedProviderServer() as server:
        yield server


@pytest.fixture
async def transport(scripted: ScriptedProviderServer) -> AsyncIterator[HttpxTransport]:
    """An httpx transport whose base URL is the scripted server's ``/mcp`` endpoint."""
    t = HttpxTransport(scripted.base_url("mcp"))
    try:
        yield t
    finally:
        await t.aclose()


MCP_NODE_DIR = Path(__file__).resolve().parent / "conformance"


@pytest.fixture(scope="session")
def everything_url() -> Iterator[str]:
    """The TypeScript everything server (npm, Node 22 from npm) over streamable HTTP, bound to
    127.0.0.1 by a preload; skipped unless ``make mcp-everything`` installed it (required there)."""
    node = MCP_NODE_DIR / "node_modules" / "node" / "bin" / "node"
    entry = (MCP_NODE_DIR / "node_modules" / "@modelcontextprotocol" / "server-everything"
             / "dist" / "index.js")
    if not node.exists() or not entry.exists():
        if os.environ.get("BINDLOOP_REQUIRE_MCP_EVERYTHING"):
            raise RuntimeError("the everything server is not installed: make mcp-everything")
        pytest.skip("the TypeScript everything server is not installed (make mcp-everything)")
    proc = subprocess.Popen(
        [str(node), "--require", str(MCP_NODE_DIR / "loopback.cjs"), str(entry), "streamableHttp"],
        env={**os.environ, "PORT": "0"}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    assert proc.stderr is not None
    port = None
    for _ in range(200):
        line = proc.stderr.readline()
        if not line:
            break
        if line.startswith("BINDLOOP_LISTENING "):
            port = int(line.split()[1])
            break
    if port is None:
        proc.kill()
        raise RuntimeError("the everything server did not start")
    # Keep reading its stderr so the pipe never fills up.
    threading.Thread(target=lambda: proc.stderr.read() if proc.stderr else None,
                     daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        _stop_popen(proc)


def _stop_popen(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
