"""A test Worker: bindloop's MCP client in workerd, over JS fetch, against the server named by the
``MCP_URL`` binding (the official SDK's, started by tests/mcp/test_mcp_workerd.py).

``GET /`` connects, lists the tools, calls ``add`` and the raising ``explode``, opens the server's
own event stream (a GET, which fetch refuses with any body) for a moment, closes the session (a
DELETE) and answers what it saw as JSON, with timings.
"""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
from workers import Response, WorkerEntrypoint  # type: ignore[import-not-found]

from bindloop.contracts import ToolError, ToolResult, content_text
from bindloop.hosts.transports.js_fetch import FetchTransport
from bindloop.mcp import McpHttpClient, load_mcp_tools


def _outcome(outcome: object) -> dict[str, Any]:
    if isinstance(outcome, ToolResult):
        content = outcome.content
        return {"type": "result", "text": content if isinstance(content, str) else content_text(content)}
    if isinstance(outcome, ToolError):
        return {"type": "error", "error": outcome.error, "kind": outcome.kind}
    return {"type": type(outcome).__name__}


class Default(WorkerEntrypoint):  # type: ignore[misc]
    async def fetch(self, request: Any) -> Response:
        t0 = time.perf_counter()
        client = McpHttpClient(FetchTransport(str(self.env.MCP_URL)), server="ref",
                               modern_versions=())
        toolset = await load_mcp_tools(client)
        t1 = time.perf_counter()
        tools = {t.name: t for t in toolset.tools}
        added = await tools["ref__add"].execute({"a": 20, "b": 22}, None)
        t2 = time.perf_counter()
        exploded = await tools["ref__explode"].execute({"message": "boom"}, None)
        listened: str = "open"
        try:
            with anyio.move_on_after(0.3):  # a live stream is still open when this ends
                listened = f"ended: {await client.listen()}"
        except Exception as exc:  # what a refused GET looks like
            listened = f"{type(exc).__name__}: {exc}"
        await client.aclose()
        body = {"protocol_version": client.session.protocol_version,
                "tools": sorted(tools), "add": _outcome(added), "explode": _outcome(exploded),
                "listen": listened, "connect_list_ms": round((t1 - t0) * 1000, 1),
                "call_ms": round((t2 - t1) * 1000, 1)}
        return Response(json.dumps(body), headers={"content-type": "application/json"})
