"""The Worker template as an MCP server (``POST /mcp``, bindloop.hosts.workers.mcp_route) in real workerd:
bindloop's own client speaking 2026-07-28 and, kept on the handshake, 2025-11-25; the official
Python SDK's ``Client`` (2026-07-28); the official TypeScript SDK's client (npm
``@modelcontextprotocol/sdk`` from the conformance suite's install, 2025-11-25); the identity hook
(``API_TOKEN``) and the transport's refusals over raw HTTP.

``BINDLOOP_WORKER_WHEELS`` names another wheel directory than ``wasm/wheels-pyc`` (a wheel set
built from a working tree).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from bindloop.hosts.transports.httpx import HttpxTransport
from bindloop.mcp import MODERN_VERSIONS, McpHttpClient
from bindloop.mcp import McpLimits

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "worker" / "tools"))
from workerd_harness import WHEELS_DIR, Workerd, stage  # noqa: E402

TOKEN = "mcp-route-token"
AUTH = ("authorization", f"Bearer {TOKEN}")
SDK_ROOT = REPO / "tests" / "mcp" / "conformance" / "node_modules"


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("mcp-route")
    wheels = Path(os.environ.get("BINDLOOP_WORKER_WHEELS", str(WHEELS_DIR)))
    config = stage(tmp / "stage", bindings={"API_TOKEN": TOKEN}, storage_dir=tmp / "do",
                   with_conformance=False, wheels_dir=wheels)
    with Workerd(config) as wd:
        yield wd.base_url + "/mcp"


@pytest.fixture(scope="module")
def sealed_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The same Worker with an ``MCP_STATE_SECRET``: a suspend asks the client (MRTR)."""
    tmp = tmp_path_factory.mktemp("mcp-route-sealed")
    wheels = Path(os.environ.get("BINDLOOP_WORKER_WHEELS", str(WHEELS_DIR)))
    config = stage(tmp / "stage", bindings={"API_TOKEN": TOKEN,
                                            "MCP_STATE_SECRET": "a-worker-state-secret-0123"},
                   storage_dir=tmp / "do", with_conformance=False, wheels_dir=wheels)
    with Workerd(config) as wd:
        yield wd.base_url + "/mcp"


def test_with_a_state_secret_the_user_answers_the_workers_question(sealed_url: str) -> None:
    """``ask_user`` (a plain function returning a suspend) asks a 2026-07-28 client through
    ``input_required``; the client's re-issued call, on any isolate, gets the user's answer as
    the tool's result. A 2025-11-25 client still gets an error result (no way to resume)."""
    from bindloop.mcp.server_requests import (
        ElicitationRequest,
        ElicitationResult,
        ServerRequestHandlers,
    )

    seen: list[str] = []

    async def elicit(request: ElicitationRequest) -> ElicitationResult:
        seen.append(request.message)
        return ElicitationResult(action="accept", content={"reply": "Ada"})

    async def ask(modern: bool) -> tuple[bool, str]:
        transport = HttpxTransport(sealed_url, headers=[AUTH])
        try:
            async with McpHttpClient(transport, server="worker", listen=False,
                                     modern_versions=MODERN_VERSIONS if modern else (),
                                     handlers=ServerRequestHandlers(elicitation=elicit),
                                     limits=McpLimits(timeout_ms=60_000)) as client:
                asked = await client.call_tool("ask_user", {"question": "Your name?"})
                return asked.is_error, str(asked.content[0].get("text", ""))
        finally:
            await transport.aclose()

    assert anyio.run(ask, True) == (False, "Ada") and seen == ["Your name?"]
    legacy_error, _ = anyio.run(ask, False)
    assert legacy_error and seen == ["Your name?"]


async def _with_bindloop(url: str, modern: bool) -> dict[str, Any]:
    transport = HttpxTransport(url, headers=[AUTH])
    try:
        async with McpHttpClient(transport, server="worker", listen=False,
                                 modern_versions=MODERN_VERSIONS if modern else (),
                                 limits=McpLimits(timeout_ms=60_000)) as client:
            infos, _ = await client.list_tools()
            counted = await client.call_tool("word_count", {"text": "one two three"})
            asked = await client.call_tool("ask_user", {"question": "Name?"})
            return {"era": client.session.era, "session": client.session_id,
                    "tools": sorted(i.name for i in infos),
                    "counted": counted.content[0]["text"], "asked": asked.is_error}
    finally:
        await transport.aclose()


@pytest.mark.parametrize("modern", [True, False], ids=["2026-07-28", "2025-11-25"])
def test_bindloops_client_calls_the_workers_tools(url: str, modern: bool) -> None:
    seen = anyio.run(_with_bindloop, url, modern)
    assert seen == {"era": "modern" if modern else "legacy", "session": None,
                    "tools": ["ask_user", "word_count"], "counted": "3",
                    "asked": True}  # a suspend cannot be resumed over a stateless call


def test_the_official_python_sdk_client_speaks_2026_07_28(url: str) -> None:
    pytest.importorskip("mcp")

    async def probe() -> tuple[str | None, str]:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers=dict([AUTH]), timeout=60) as http:
            async with Client(streamable_http_client(url, http_client=http)) as client:
                counted = await client.call_tool("word_count", {"text": "a b"})
                return client.protocol_version, counted.content[0].text  # type: ignore[union-attr]

    assert anyio.run(probe) == ("2026-07-28", "2")


def test_the_official_typescript_sdk_client(url: str) -> None:
    node = shutil.which("node")
    if node is None or not (SDK_ROOT / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail("node and tests/mcp/conformance's npm install are needed "
                    "(make test-mcp-conformance installs them)")
    proc = subprocess.run([node, str(REPO / "tests" / "worker" / "mcp_ts_client.mjs"), url,
                           TOKEN, str(SDK_ROOT)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["tools"] == ["ask_user", "word_count"] and seen["counted"] == "3"
    assert seen["session"] is None  # stateless: no Mcp-Session-Id
    assert seen["bad"]["isError"] and "text" in seen["bad"]["text"]


def _post(url: str, body: bytes, **headers: str) -> httpx.Response:
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream",
            AUTH[0]: AUTH[1], **{k.replace("_", "-"): v for k, v in headers.items()}}
    return httpx.post(url, content=body, headers={k: v for k, v in sent.items() if v},
                      timeout=60)


def test_refusals_are_typed_json_rpc_errors_with_nothing_internal(url: str) -> None:
    ping = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
    cases = {
        "no token": (_post(url, ping, authorization=""), 401, -32000),
        "not json": (_post(url, b"{nope", ), 400, -32700),
        "batch": (_post(url, b"[]"), 400, -32600),
        "text/plain": (_post(url, ping, content_type="text/plain"), 415, -32000),
        "accept": (_post(url, ping, accept="text/html"), 406, -32000),
        "too large": (_post(url, b'{"x":"' + b"a" * (1024 * 1024 + 10) + b'"}'), 413, -32000),
        "deep": (_post(url, b"[" * 10_000 + b"]" * 10_000), 400, -32700),
    }
    for name, (resp, status, code) in cases.items():
        assert resp.status_code == status, (name, resp.status_code, resp.text[:300])
        error = resp.json()["error"]
        assert error["code"] == code, (name, error)
        assert "Traceback" not in resp.text and "File \"" not in resp.text, name
    unknown = _post(url, json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
                                     "params": {"_meta": {
                                         "io.modelcontextprotocol/protocolVersion": "2099-01-01",
                                         "io.modelcontextprotocol/clientCapabilities": {}}}}
                                    ).encode(), mcp_protocol_version="2099-01-01",
                    mcp_method="tools/list")
    assert unknown.status_code == 400
    assert unknown.json()["error"]["code"] == -32022
    assert unknown.json()["error"]["data"] == {"supported": ["2026-07-28"],
                                               "requested": "2099-01-01"}
    got = httpx.get(url, headers=dict([AUTH]), timeout=60)
    assert got.status_code == 405
