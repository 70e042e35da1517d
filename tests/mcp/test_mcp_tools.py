"""Tool building and the plugin's contract, over the scripted server: usage errors name the fix,
a plugin is inert until loaded, an already-fired signal never reaches the server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bindloop.errors import UsageError
from bindloop.hosts.transports.httpx import HttpxTransport
from harness.fixtures.scripted_server import RecordedRequest, ScriptedProviderServer, ScriptedReply
from bindloop.mcp import McpHttpClient, McpServerPlugin, build_mcp_tools, load_mcp_tools
from bindloop.mcp import McpLimits
from bindloop.mcp import McpToolInfo
from bindloop.signal import AbortSignal

pytestmark = pytest.mark.anyio

TOOL = {"name": "echo", "inputSchema": {"type": "object", "properties": {
    "text": {"type": "string"}}, "required": ["text"]}}


def responder(seen: list[dict[str, Any]]) -> Any:
    def answer(request: RecordedRequest) -> ScriptedReply:
        if request.method != "POST":
            return ScriptedReply(status=200, streamed=False)
        rpc = json.loads(request.body)
        seen.append(rpc)
        if "id" not in rpc:
            return ScriptedReply(status=202, streamed=False)
        result: dict[str, Any] = {"tools": [TOOL]}
        if rpc["method"] == "initialize":
            result = {"protocolVersion": "2025-03-26", "capabilities": {},
                      "serverInfo": {"name": "echo"}}
        elif rpc["method"] == "tools/call":
            result = {"content": [{"type": "text", "text": rpc["params"]["arguments"]["text"]}]}
        body = json.dumps({"jsonrpc": "2.0", "id": rpc["id"], "result": result}).encode()
        return ScriptedReply(headers=(("content-type", "application/json"),), chunks=(body,),
                             streamed=False)
    return answer


def test_bad_options_are_usage_errors_naming_the_fix() -> None:
    transport = HttpxTransport("http://127.0.0.1:9/mcp")
    with pytest.raises(UsageError, match="timeout_ms"):
        McpHttpClient(transport, server="s", limits=McpLimits(timeout_ms=0))
    with pytest.raises(UsageError, match="non-empty name"):
        McpHttpClient(transport, server="")
    client = McpHttpClient(transport, server="s")
    info = McpToolInfo(name="echo", input_schema=TOOL["inputSchema"])  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="prefix"):
        build_mcp_tools(client, [info], prefix="has space")
    with pytest.raises(UsageError, match="not one string"):
        build_mcp_tools(client, [info], allow="echo")
    with pytest.raises(UsageError, match="async callable"):
        McpServerPlugin(name="p", description="", connect=None)  # type: ignore[arg-type]


async def test_default_prefix_is_the_server_name_made_wire_safe(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    scripted.set_responder("mcp", responder([]))
    toolset = await load_mcp_tools(McpHttpClient(transport, server="my server.v2"))
    assert [t.name for t in toolset.tools] == ["my_server_v2__echo"]
    bare = await load_mcp_tools(McpHttpClient(transport, server="x"), prefix="")
    assert [t.name for t in bare.tools] == ["echo"]


async def test_a_fired_signal_never_reaches_the_server(scripted: ScriptedProviderServer,
                                                       transport: HttpxTransport) -> None:
    seen: list[dict[str, Any]] = []
    scripted.set_responder("mcp", responder(seen))
    echo = (await load_mcp_tools(McpHttpClient(transport, server="e"))).tools[0]
    outcome = await echo.execute('{"text": "hi"}', AbortSignal.aborted_with("too late"))
    assert outcome.kind == "cancelled" and "too late" in outcome.error  # type: ignore[union-attr]
    # The dual-era client probes first; this legacy server's answer sends it to the handshake.
    assert [r["method"] for r in seen] == ["server/discover", "initialize",
                                           "notifications/initialized", "tools/list"]
    assert (await echo.execute({"text": "hi"}, object())).content == "hi"  # type: ignore[union-attr]


async def test_a_plugin_is_inert_until_loaded_and_checks_what_connect_returns(
        scripted: ScriptedProviderServer, transport: HttpxTransport) -> None:
    scripted.set_responder("mcp", responder([]))

    async def connect() -> McpHttpClient:
        return McpHttpClient(transport, server="e")

    plugin = McpServerPlugin(name="echo", description="Echoes.", connect=connect)
    assert plugin.tool_definitions() == () and not plugin.loaded
    early = await plugin.execute("echo__echo", '{"text":"x"}', None)
    assert early.kind == "not_found" and "is not loaded" in early.error  # type: ignore[union-attr]
    await plugin.load()
    assert [d.name for d in plugin.tool_definitions()] == ["echo__echo"]
    missing = await plugin.execute("echo__nope", "{}", None)
    assert "offers no such tool" in missing.error  # type: ignore[union-attr]
    await plugin.aclose()

    async def wrong() -> Any:
        return "not a client"

    with pytest.raises(UsageError, match="not an McpHttpClient"):
        await McpServerPlugin(name="w", description="", connect=wrong).load()
