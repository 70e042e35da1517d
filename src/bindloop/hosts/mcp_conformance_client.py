"""The adapter command the official MCP conformance suite (npm ``@modelcontextprotocol/conformance``)
launches for its client scenarios: ``python -m bindloop.hosts.mcp_conformance_client <server-url>``.

The suite starts a server for one scenario, runs this command with the server's URL as the last
argument and the scenario's name in ``MCP_CONFORMANCE_SCENARIO`` (and, for some, a JSON object in
``MCP_CONFORMANCE_CONTEXT``), then grades what the server saw. This host reads both (it is outside
the core's fences) and drives bindloop's client as a user would: connect, list the tools, call the
one the scenario expects, close. Exit status 0 on success; a failure prints its error on stderr.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio

from bindloop.hosts.httpx_transport import HttpxTransport
from bindloop.mcp import McpHttpClient

__all__ = ("main", "run_scenario")

_TOOL_FOR = {
    "tools_call": ("add_numbers", {"a": 5, "b": 3}),
    "sse-retry": ("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}


def _context() -> dict[str, Any]:
    raw = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    if not raw:
        return {}
    value = json.loads(raw)
    return value if isinstance(value, dict) else {}


def _client(transport: HttpxTransport, scenario: str, context: dict[str, Any]) -> McpHttpClient:
    options: dict[str, Any] = {"timeout_ms": 20_000}
    extra = _options(scenario, context)
    options.update(extra)
    return McpHttpClient(transport, server="conformance", **options)


def _options(scenario: str, context: dict[str, Any]) -> dict[str, Any]:
    """The client keywords a scenario needs beyond the defaults (hook for the newer features)."""
    del scenario, context
    return {}


async def run_scenario(url: str, scenario: str, context: dict[str, Any]) -> None:
    """Run ``scenario`` against the server at ``url``."""
    transport = HttpxTransport(url)
    try:
        mcp = _client(transport, scenario, context)
        try:
            await mcp.connect()
            tools, _ = await mcp.list_tools()
            if scenario == "initialize":
                return
            name, arguments = _TOOL_FOR.get(scenario, (None, {}))
            if name is None:
                if not tools:
                    return
                name = tools[0].name
            result = await mcp.call_tool(name, arguments)
            print(json.dumps({"tool": name, "is_error": result.is_error,
                              "content": result.content})[:2000])
        finally:
            await mcp.aclose()
    finally:
        await transport.aclose()


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m bindloop.hosts.mcp_conformance_client <server-url>", file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")
    try:
        anyio.run(run_scenario, args[-1], scenario, _context())
    except Exception as exc:  # reported to the suite through the exit status and stderr
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
