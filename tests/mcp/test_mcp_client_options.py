"""McpHttpClient's grouped options: ``McpLimits`` refuses a bound outside its range when it is built
(before any client exists), and what ``limits`` and ``ports`` carry is what the client uses — its
request timeout, its reply size bound, its request ids. The transport is in memory (the edge)."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from hypothesis import given, strategies as st

from bindloop.errors import UsageError
from bindloop.mcp import (
    McpClientPorts,
    McpHttpClient,
    McpLimits,
    McpProtocolError,
    McpTimeoutError,
)
from bindloop.wire import HttpRequest


class _Response:
    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self._body = body

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        yield self._body


class MemoryServer:
    """Answers ``initialize``; ``tools/list`` hangs (``hang``) or answers ``reply_bytes`` of JSON."""

    def __init__(self, *, hang: bool = False, reply_bytes: int = 0) -> None:
        self.hang = hang
        self.reply_bytes = reply_bytes
        self.ids: list[Any] = []

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Response]:
        rpc = json.loads(request.body) if request.body else {}
        if "id" not in rpc:
            yield _Response(202, [], b"")
            return
        self.ids.append(rpc["id"])
        if rpc["method"] == "initialize":
            result: dict[str, Any] = {"protocolVersion": "2025-11-25", "capabilities": {},
                                      "serverInfo": {"name": "mem"}}
        else:
            if self.hang:
                await anyio.sleep_forever()
            result = {"tools": [], "padding": "x" * self.reply_bytes}
        body = json.dumps({"jsonrpc": "2.0", "id": rpc["id"], "result": result}).encode()
        yield _Response(200, [("Content-Type", "application/json")], body)


def _client(server: MemoryServer, **options: Any) -> McpHttpClient:
    return McpHttpClient(server, server="mem", listen=False, modern_versions=(), **options)


_BAD_LIMITS = st.one_of(
    st.builds(lambda v: {"timeout_ms": v}, st.sampled_from([0.0, -1.0, math.nan])),
    st.builds(lambda v: {"max_timeout_ms": v}, st.sampled_from([0.0, -5.0, "never"])),
    st.builds(lambda v: {"max_resumes": v}, st.integers(max_value=-1)),
    st.builds(lambda v: {"max_body_bytes": v}, st.integers(max_value=0)),
    st.builds(lambda v: {"max_input_rounds": v}, st.integers(max_value=0)),
)


@given(_BAD_LIMITS)
def test_a_bound_outside_its_range_is_refused_when_the_limits_are_built(bad: dict[str, Any]) -> None:
    with pytest.raises(UsageError) as caught:
        McpLimits(**bad)
    assert next(iter(bad)) in str(caught.value)


@given(st.floats(min_value=1.0, max_value=1e9), st.integers(0, 50), st.integers(1, 2**40),
       st.integers(1, 50))
def test_bounds_inside_their_range_are_kept(timeout_ms: float, resumes: int, body: int,
                                            rounds: int) -> None:
    limits = McpLimits(timeout_ms=timeout_ms, max_resumes=resumes, max_body_bytes=body,
                       max_input_rounds=rounds)
    assert (limits.timeout_ms, limits.max_resumes, limits.max_body_bytes,
            limits.max_input_rounds) == (timeout_ms, resumes, body, rounds)


def test_the_groups_are_checked_by_type() -> None:
    with pytest.raises(UsageError, match="limits= takes an McpLimits"):
        _client(MemoryServer(), limits={"timeout_ms": 5})
    with pytest.raises(UsageError, match="ports= takes an McpClientPorts"):
        _client(MemoryServer(), ports=McpLimits())


@pytest.mark.anyio
async def test_the_request_timeout_comes_from_the_limits() -> None:
    server = MemoryServer(hang=True)
    client = _client(server, limits=McpLimits(timeout_ms=50, notify_timeout_ms=50))
    await client.connect()
    with anyio.fail_after(5):
        with pytest.raises(McpTimeoutError):
            await client.list_tools()


@pytest.mark.anyio
async def test_the_reply_bound_comes_from_the_limits() -> None:
    roomy = _client(MemoryServer(reply_bytes=4_000))
    await roomy.connect()
    assert (await roomy.list_tools())[0] == ()
    tight = _client(MemoryServer(reply_bytes=4_000), limits=McpLimits(max_body_bytes=1_000))
    await tight.connect()
    with pytest.raises(McpProtocolError):
        await tight.list_tools()


@pytest.mark.anyio
async def test_request_ids_come_from_the_ports() -> None:
    minted = iter(f"req-{n}" for n in range(100))
    server = MemoryServer()
    client = _client(server, ports=McpClientPorts(ids=lambda: next(minted)))
    await client.connect()
    await client.list_tools()
    assert server.ids == ["req-0", "req-1"]
