"""Two MCP clients sharing one token store refresh one expired token at once, over loopback HTTP
against an authorization server that rotates refresh tokens: neither ends on a revoked token,
neither fails with ``invalid_grant``, nobody is sent back to the browser, and a strict server
sees exactly one successful rotation per generation."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings, strategies as st

from bindloop.hosts.transports.httpx import HttpxTransport
from harness.fixtures.scripted_server import RecordedRequest, ScriptedProviderServer, ScriptedReply
from bindloop.mcp import McpHttpClient
from bindloop.mcp import McpLimits
from bindloop.mcp.auth import (
    McpOAuth,
    OAuthRequest,
    OAuthResponse,
    transport_fetch,
)
from bindloop.stores import (
    MemoryTokenStore,
    OAuthTokens,
)
from bindloop.mcp._oauth_model import query_params
from test_mcp_oauth import World

pytestmark = pytest.mark.anyio


class RotatingWorld(World):
    """:class:`World` whose authorization server rotates refresh tokens: a refresh revokes the
    refresh token it used and the access token issued with it. ``strict``: a used refresh token
    is refused with ``invalid_grant`` (answered at once, while the winner's answer is delayed, so
    the loser hears first); otherwise a reuse is honoured again (a grace period), both racers
    succeed and only the token store can keep them on one rotation."""

    def __init__(self, scripted: ScriptedProviderServer, *, strict: bool) -> None:
        super().__init__(scripted)
        self.strict = strict
        self.live_refresh: set[str] = set()
        self.rotations: list[str] = []
        self.refused = 0

    def auth_server(self, request: RecordedRequest) -> ScriptedReply:
        form = query_params("?" + request.body.decode()) if request.path == "/as/token" else {}
        used = form.get("refresh_token")
        if form.get("grant_type") == "refresh_token":
            assert used is not None
            if used not in self.live_refresh:
                self.refused += 1
                self.token_forms.append(form)
                return ScriptedReply(status=400, streamed=False, headers=(
                    ("content-type", "application/json"),), chunks=(b'{"error":"invalid_grant"}',))
            if self.strict:
                self.live_refresh.discard(used)
                self.tokens.pop(used.removeprefix("refresh-token-"), None)
        reply = super().auth_server(request)
        if request.path == "/as/token":
            issued = json.loads(reply.chunks[0])["access_token"]
            self.live_refresh.add(f"refresh-token-{issued}")
            if used is not None:
                self.rotations.append(issued)
                return ScriptedReply(status=reply.status, headers=reply.headers,
                                     chunks=reply.chunks, streamed=False, delay_s=0.3)
        return reply


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


@pytest.mark.parametrize("strict", [True, False], ids=["strict", "reuse-grace"])
async def test_two_clients_refreshing_at_once_end_on_one_live_rotation(
        scripted: ScriptedProviderServer, http: httpx.AsyncClient, strict: bool) -> None:
    world = RotatingWorld(scripted, strict=strict)
    clock = [0.0]
    randomness = itertools.count()
    store = MemoryTokenStore()
    transports = [HttpxTransport(world.base + "/mcp") for _ in range(2)]

    def oauth() -> McpOAuth:
        return McpOAuth(server_url=world.base + "/mcp",
                        fetch=transport_fetch(lambda url: HttpxTransport(url, client=http)),
                        authorize=world.authorize, redirect_uri="http://127.0.0.1:9/cb",
                        random_bytes=lambda n: bytes(next(randomness) % 256 for _ in range(n)),
                        store=store, now=lambda: clock[0])

    auths = [oauth(), oauth()]
    clients = [McpHttpClient(t, server="rotating", auth=a, limits=McpLimits(timeout_ms=10_000))
               for t, a in zip(transports, auths)]
    try:
        await clients[0].connect()          # the browser step, once
        await clients[1].connect()          # starts from the stored tokens
        assert len(world.authorizations) == 1 and len(world.token_forms) == 1
        for generation in (1, 2):
            clock[0] += 120_000             # the access token expired for both
            refreshes = len(world.token_forms)

            async def list_tools(client: McpHttpClient, out: list[Any]) -> None:
                out.append(await client.list_tools())

            listed: list[Any] = []
            async with anyio.create_task_group() as tg:
                for client in clients:
                    tg.start_soon(list_tools, client, listed)
            assert len(listed) == 2 and all(tools for tools in listed)
            asked = world.token_forms[refreshes:]
            assert [f["grant_type"] for f in asked] == ["refresh_token"] * 2, asked
            assert len({f["refresh_token"] for f in asked}) == 1  # both held the same one
            assert len(world.rotations) == (generation if strict else 2 * generation)
            assert world.refused == (generation if strict else 0)
            stored = store.tokens
            assert stored is not None and stored.refresh_token in world.live_refresh
            assert stored.access_token in world.tokens
            for auth in auths:
                assert auth.tokens == stored
            if strict:  # the one rotation of this generation is the one both use
                assert stored.access_token == world.rotations[-1]
        # Neither is on a revoked token: more calls need no token request and no new browser step.
        before = len(world.token_forms)
        for client in clients:
            await client.list_tools()
        assert len(world.token_forms) == before and len(world.authorizations) == 1
    finally:
        for t in transports:
            await t.aclose()


async def test_a_refused_refresh_with_nothing_newer_stored_is_an_authorization_error(
        scripted: ScriptedProviderServer, http: httpx.AsyncClient) -> None:
    """The refresh token was revoked for real (nobody rotated it): after ``refresh_wait_ms`` of
    re-reading the store the provider gives up and authorizes again; no token in any message."""
    world = RotatingWorld(scripted, strict=True)
    clock = [0.0]
    randomness = itertools.count()
    store = MemoryTokenStore()
    naps: list[float] = []

    async def sleep(seconds: float) -> None:
        naps.append(seconds)

    auth = McpOAuth(server_url=world.base + "/mcp",
                    fetch=transport_fetch(lambda url: HttpxTransport(url, client=http)),
                    authorize=world.authorize, redirect_uri="http://127.0.0.1:9/cb",
                    random_bytes=lambda n: bytes(next(randomness) % 256 for _ in range(n)),
                    store=store, now=lambda: clock[0], sleep=sleep, refresh_wait_ms=500)
    transport = HttpxTransport(world.base + "/mcp")
    client = McpHttpClient(transport, server="rotating", auth=auth,
                           limits=McpLimits(timeout_ms=10_000))
    try:
        await client.connect()
        world.live_refresh.clear()          # the server revoked the whole family
        clock[0] += 120_000
        await client.list_tools()           # refresh refused → 401 → a new browser step
        assert world.refused == 1 and naps == [0.1] * 5
        assert len(world.authorizations) == 2
        assert store.tokens is not None and store.tokens == auth.tokens
        assert "token" not in repr(auth).lower() and "access-token" not in repr(store)
    finally:
        await transport.aclose()


@settings(max_examples=60, deadline=None)
@given(strict=st.booleans(), delays=st.lists(st.integers(0, 6), min_size=2, max_size=5),
       save_delay=st.integers(0, 4))
def test_any_number_of_racing_refreshes_end_on_the_stored_rotation(
        strict: bool, delays: list[int], save_delay: int) -> None:
    """Property: n clients on one store refresh one expired token at once, each request answered
    after its own number of scheduler turns and the store's swap yielding too: every client ends
    on the stored tokens, which the server still honours; a strict server issued exactly one."""
    live = {"rt-0"}
    issued: list[str] = []
    calls = itertools.count()

    class SlowStore(MemoryTokenStore):
        async def swap_tokens(self, tokens: Any, *, expected: Any) -> bool:
            for _ in range(save_delay):  # the I/O before an atomic compare-and-swap
                await anyio.sleep(0)
            return await super().swap_tokens(tokens, expected=expected)

    store = SlowStore()
    store.tokens = OAuthTokens(access_token="at-0", refresh_token="rt-0", expires_at_ms=1.0)

    async def fetch(request: OAuthRequest) -> OAuthResponse:
        if request.method != "POST":
            return OAuthResponse(status=404)
        used = query_params("?" + request.body.decode())["refresh_token"]
        honoured = used in live
        if honoured:
            token = f"{len(issued) + 1}"
            issued.append(token)
            if strict:
                live.discard(used)
            live.add(f"rt-{token}")
        for _ in range(delays[next(calls) % len(delays)]):
            await anyio.sleep(0)
        if not honoured:
            return OAuthResponse(status=400, body=b'{"error": "invalid_grant"}')
        return OAuthResponse(status=200, body=json.dumps({
            "access_token": f"at-{token}", "expires_in": 3600,
            "refresh_token": f"rt-{token}"}).encode())

    async def nap(_: float) -> None:
        await anyio.sleep(0)

    async def main() -> list[McpOAuth]:
        clients = [McpOAuth(server_url="https://mcp.invalid/mcp", fetch=fetch, store=store,
                            grant="client_credentials", client_id="c", now=lambda: 0.0,
                            sleep=nap) for _ in delays]
        async with anyio.create_task_group() as tg:
            for client in clients:
                tg.start_soon(client.prepare)
        return clients

    clients = anyio.run(main)
    stored = store.tokens
    assert stored is not None and stored.refresh_token in live
    assert all(client.tokens == stored for client in clients)
    assert 1 <= len(issued) <= len(delays) and (len(issued) == 1 or not strict)
