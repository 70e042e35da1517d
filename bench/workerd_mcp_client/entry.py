"""A bench Worker: bindloop's MCP client in workerd, over JS fetch, against the MCP server named
by the ``MCP_URL`` binding (bench/mcp_workerd.py starts one on 127.0.0.1).

``GET /?n=200&era=modern`` connects (``era=legacy``: the 2025-11-25 handshake), makes ``n + 10``
``tools/call`` requests (``add``), the first 10 as warm-up, and answers each timed call's
milliseconds (request sent to result decoded) as JSON.
"""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import parse_qs, urlparse

from workers import Response, WorkerEntrypoint  # type: ignore[import-not-found]

from bindloop.hosts.transports.js_fetch import FetchTransport
from bindloop.mcp import MODERN_VERSIONS, McpHttpClient


class Default(WorkerEntrypoint):  # type: ignore[misc]
    async def fetch(self, request: Any) -> Response:
        query = parse_qs(urlparse(str(request.url)).query)
        n = int(query.get("n", ["200"])[0])
        modern = query.get("era", ["modern"])[0] == "modern"
        client = McpHttpClient(FetchTransport(str(self.env.MCP_URL)), server="bench",
                               modern_versions=MODERN_VERSIONS if modern else (), listen=False)
        await client.connect()
        times: list[float] = []
        for i in range(n + 10):
            started = time.perf_counter()
            result = await client.call_tool("add", {"a": 2, "b": 40})
            if i >= 10:
                times.append((time.perf_counter() - started) * 1000)
            assert result.content[0]["text"] == "42"
        await client.aclose()
        return Response(json.dumps({"era": client.session.era, "ms": times}),
                        headers={"content-type": "application/json"})
