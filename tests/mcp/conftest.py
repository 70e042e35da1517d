"""Fixtures for the MCP tests: the official SDK's server (a subprocess on 127.0.0.1, an ephemeral
port) and a scripted server for the hostile cases."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator

import pytest

from bindloop.hosts.httpx_transport import HttpxTransport
from bindloop.hosts.scripted_server import ScriptedProviderServer


def _start_reference(*extra: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "bindloop.hosts.mcp_reference_server", "--port", "0", *extra],
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
