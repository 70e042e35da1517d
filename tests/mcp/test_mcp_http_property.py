"""The streamable HTTP binding over an in-memory transport (the edge of the system under test): a
reply stream cut into any chunks gives the same answer, with every progress event, in order."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from hypothesis import given, strategies as st

from bindloop.mcp import McpHttpClient
from bindloop.mcp.session import McpProgress
from bindloop.wire import HttpRequest


class _Response:
    def __init__(self, status: int, headers: list[tuple[str, str]], chunks: list[bytes]) -> None:
        self.status = status
        self.headers = headers
        self._chunks = chunks

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


class ChunkingTransport:
    """Answers initialize with JSON and tools/call with an event stream cut at ``cuts``."""

    def __init__(self, cuts: list[int], progress: int, crlf: bool) -> None:
        self.cuts = cuts
        self.progress = progress
        self.crlf = crlf

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Response]:
        rpc = json.loads(request.body) if request.body else {}
        if "id" not in rpc:
            yield _Response(202, [], [])
            return
        if rpc["method"] == "initialize":
            body = json.dumps({"jsonrpc": "2.0", "id": rpc["id"], "result": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "serverInfo": {"name": "mem"}}}).encode()
            yield _Response(200, [("Content-Type", "application/json")], [body])
            return
        eol = "\r\n" if self.crlf else "\n"
        events = [{"jsonrpc": "2.0", "method": "notifications/progress",
                   "params": {"progressToken": rpc["id"], "progress": n, "message": "é" * n}}
                  for n in range(self.progress)]
        events.append({"jsonrpc": "2.0", "id": rpc["id"], "result": {
            "content": [{"type": "text", "text": "done ✓"}]}})
        blob = "".join(f"id: {n}{eol}data: {json.dumps(e, ensure_ascii=False)}{eol}{eol}"
                       for n, e in enumerate(events)).encode()
        points = sorted({c % (len(blob) + 1) for c in self.cuts} | {0, len(blob)})
        chunks = [blob[a:b] for a, b in zip(points, points[1:]) if b > a]
        yield _Response(200, [("content-type", "text/event-stream; charset=utf-8")], chunks)


@given(st.lists(st.integers(0, 10_000), max_size=30), st.integers(0, 5), st.booleans())
def test_any_chunking_of_a_reply_stream_gives_the_same_answer(
        cuts: list[int], progress: int, crlf: bool) -> None:
    async def run() -> tuple[Any, list[McpProgress]]:
        client = McpHttpClient(ChunkingTransport(cuts, progress, crlf), server="mem")
        await client.connect()
        seen: list[McpProgress] = []
        result = await client.call_tool("t", {}, on_progress=seen.append)
        return result, seen

    result, seen = anyio.run(run)
    assert result.content == [{"type": "text", "text": "done ✓"}]
    assert [(p.progress, p.message) for p in seen] == [(float(n), "é" * n) for n in range(progress)]
