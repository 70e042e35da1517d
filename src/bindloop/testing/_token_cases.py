"""The conformance cases of :class:`bindloop.stores.TokenStore` (MCP OAuth tokens and the client
registration), as plain async functions like the other store cases (:mod:`._store_cases`): a
pytest suite (``store_kit.TokenStoreSuite``) and a route inside workerd run the same checks.

A factory handle here is a view on one token store (one user at one MCP server): two handles of
the same factory see each other's saves. Tokens are secrets: the cases also check that a store's
``repr`` never shows them. A store shared by several processes must be a
:class:`bindloop.stores.SwapTokenStore`: the ``swap`` cases check its compare-and-swap save lands only
on the expected tokens, atomically across handles, and that two :class:`~bindloop.mcp.auth.McpOAuth`
on two handles refreshing at once end on one rotation.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import anyio

from ..mcp.auth import (
    McpOAuth,
    OAuthRequest,
    OAuthResponse,
)
from ..stores import (
    OAuthClientInfo,
    OAuthTokens,
    SwapTokenStore,
)
from ._store_cases import Case, StoreHandles

__all__ = ("TOKEN_CASES",)

FULL = OAuthTokens(access_token="at-SECRET-\u00e9\U0001f600", token_type="Bearer",
                   refresh_token="rt-SECRET-\"\\\x00", scope="read write",
                   expires_at_ms=1_734_000_000_123.5)
BARE = OAuthTokens(access_token="at-bare-SECRET")
CLIENT = OAuthClientInfo(client_id="client-\u00e9", client_secret="cs-SECRET",
                         token_endpoint_auth_method="client_secret_post")


async def token_store_starts_empty(stores: StoreHandles) -> None:
    store = await stores.open()
    assert await store.load_tokens() is None
    assert await store.load_client() is None


async def token_store_round_trips_through_another_handle(stores: StoreHandles) -> None:
    a, b = await stores.open(), await stores.open()
    await a.save_tokens(FULL)
    assert await b.load_tokens() == FULL
    await b.save_tokens(BARE)             # a refresh rotates the tokens: the latest save wins
    assert await a.load_tokens() == BARE
    assert (await a.load_tokens()).refresh_token is None


async def token_store_keeps_client_and_tokens_apart(stores: StoreHandles) -> None:
    a, b = await stores.open(), await stores.open()
    await a.save_client(CLIENT)
    assert await b.load_tokens() is None
    assert await b.load_client() == CLIENT
    await b.save_tokens(FULL)
    await a.save_tokens(None)             # forget the tokens: the registration stays
    assert await b.load_tokens() is None
    assert await b.load_client() == CLIENT
    await b.save_tokens(BARE)
    await a.save_client(None)
    assert await b.load_client() is None
    assert await b.load_tokens() == BARE
    minimal = OAuthClientInfo(client_id="c")
    await a.save_client(minimal)
    assert await b.load_client() == minimal


async def token_store_never_shows_a_secret(stores: StoreHandles) -> None:
    store = await stores.open()
    await store.save_tokens(FULL)
    await store.save_client(CLIENT)
    shown = repr(store) + str(store)
    for secret in ("SECRET", FULL.access_token, str(FULL.refresh_token), str(CLIENT.client_secret)):
        assert secret not in shown, shown


async def token_store_concurrent_saves_store_one_whole(stores: StoreHandles) -> None:
    handles = [await stores.open() for _ in range(6)]
    written = [OAuthTokens(access_token=f"at-{i}", refresh_token=f"rt-{i}", scope=f"s{i}",
                           expires_at_ms=float(i)) for i in range(len(handles))]

    async def save(i: int) -> None:
        await handles[i].save_tokens(written[i])

    async with anyio.create_task_group() as tg:
        for i in range(len(handles)):
            tg.start_soon(save, i)
    assert await handles[0].load_tokens() in written  # one writer's, never a mix of two


async def mcp_oauth_uses_the_stored_tokens(stores: StoreHandles) -> None:
    """Another McpOAuth (another isolate, a later run) starts from what one saved: no request."""
    saver, user = await stores.open(), await stores.open()
    await saver.save_tokens(BARE)
    requests: list[str] = []

    async def fetch(request: OAuthRequest) -> OAuthResponse:
        requests.append(request.url)
        return OAuthResponse(status=500)

    auth = McpOAuth(server_url="https://mcp.invalid/mcp", fetch=fetch, store=user,
                    grant="client_credentials", client_id="c", client_secret="cs-SECRET",
                    now=lambda: 0.0)
    await auth.prepare()
    assert list(auth.headers()) == [("authorization", f"Bearer {BARE.access_token}")]
    assert requests == []


def _swapping(store: object) -> SwapTokenStore:
    assert isinstance(store, SwapTokenStore), (
        f"{type(store).__name__} has no swap_tokens: a token store shared by processes needs "
        "the compare-and-swap save (bindloop.stores.SwapTokenStore)")
    return store


async def token_store_swap_lands_only_on_the_expected_tokens(stores: StoreHandles) -> None:
    a, b = _swapping(await stores.open()), _swapping(await stores.open())
    assert await a.swap_tokens(FULL, expected=None) is True       # nothing stored: expected None
    assert await b.swap_tokens(BARE, expected=None) is False      # FULL is stored now
    assert await b.load_tokens() == FULL
    stale = OAuthTokens(access_token=FULL.access_token, refresh_token=FULL.refresh_token,
                        scope=FULL.scope, expires_at_ms=1.0)  # differs in one field only
    assert await b.swap_tokens(BARE, expected=stale) is False
    assert await a.load_tokens() == FULL
    assert await b.swap_tokens(BARE, expected=FULL) is True       # through another handle
    assert await a.load_tokens() == BARE
    assert await a.swap_tokens(FULL, expected=FULL) is False
    assert await a.swap_tokens(None, expected=BARE) is True       # a swap can forget them
    assert await b.load_tokens() is None
    await a.save_client(CLIENT)
    assert await b.swap_tokens(BARE, expected=None) is True       # the registration is apart
    assert await b.load_client() == CLIENT


async def token_store_swap_race_has_one_winner(stores: StoreHandles) -> None:
    """Six holders of one refresh token each store their rotation: exactly one lands."""
    first = OAuthTokens(access_token="at-0", refresh_token="rt-0", expires_at_ms=0.0)
    handles = [_swapping(await stores.open()) for _ in range(6)]
    await handles[0].save_tokens(first)
    rotated = [OAuthTokens(access_token=f"at-{i}", refresh_token=f"rt-{i}", expires_at_ms=1.0)
               for i in range(1, len(handles) + 1)]
    landed: list[int] = []

    async def swap(i: int) -> None:
        if await handles[i].swap_tokens(rotated[i], expected=first):
            landed.append(i)

    async with anyio.create_task_group() as tg:
        for i in range(len(handles)):
            tg.start_soon(swap, i)
    assert len(landed) == 1, f"{len(landed)} swaps landed on the same expected tokens"
    for handle in handles:
        assert await handle.load_tokens() == rotated[landed[0]]


class _RotatingServer:
    """A token endpoint that rotates refresh tokens and answers only once both racing refreshes
    are in flight. ``strict``: a used refresh token is refused (``invalid_grant``); otherwise it
    is honoured again (a reuse grace period), so both refreshes succeed."""

    def __init__(self, strict: bool, racers: int) -> None:
        self.strict = strict
        self.live = {"rt-gen-0"}
        self.issued: list[str] = []
        self.refused = 0
        self._racers = racers
        self._arrived = 0
        self._all_in = anyio.Event()

    async def fetch(self, request: OAuthRequest) -> OAuthResponse:
        if request.method != "POST":
            return OAuthResponse(status=404)  # no metadata: the default endpoints at the origin
        form = dict(pair.split("=", 1) for pair in request.body.decode().split("&"))
        used = form.get("refresh_token", "")
        honoured = used in self.live
        if honoured:
            token = f"gen-{len(self.issued) + 1}"
            self.issued.append(token)
            if self.strict:
                self.live.discard(used)
            self.live.add(f"rt-{token}")
        self._arrived += 1
        if self._arrived >= self._racers:
            self._all_in.set()
        with anyio.fail_after(10):
            await self._all_in.wait()
        if not honoured:
            self.refused += 1
            return OAuthResponse(status=400, body=b'{"error": "invalid_grant"}')
        return OAuthResponse(status=200, body=(
            f'{{"access_token": "at-{token}", "token_type": "Bearer", "expires_in": 3600, '
            f'"refresh_token": "rt-{token}"}}').encode())


async def mcp_oauth_refreshes_race_to_one_rotation(stores: StoreHandles) -> None:
    """Two McpOAuth on two handles refresh one expired token at once: both end on the tokens
    the store holds, which the server still honours; a strict rotating server issued one."""
    for strict in (True, False):
        server = _RotatingServer(strict, racers=2)
        handles = [await stores.open() for _ in range(2)]
        await handles[0].save_tokens(OAuthTokens(access_token="at-gen-0",
                                                 refresh_token="rt-gen-0", expires_at_ms=1.0))
        clients = [McpOAuth(server_url="https://mcp.invalid/mcp", fetch=server.fetch, store=h,
                            grant="client_credentials", client_id="c", now=lambda: 0.0)
                   for h in handles]
        async with anyio.create_task_group() as tg:
            for client in clients:
                tg.start_soon(client.prepare)
        stored = await handles[1].load_tokens()
        assert stored is not None and stored.refresh_token in server.live, (
            strict, "the store holds a refresh token the server no longer honours")
        for client in clients:
            assert client.tokens == stored, (strict, "a client kept tokens the store lost")
        assert len(server.issued) == (1 if strict else 2) and server.refused == (
            1 if strict else 0), (strict, server.issued, server.refused)


def _by_name(*cases: Case) -> Mapping[str, Case]:
    return MappingProxyType({case.__name__: case for case in cases})


TOKEN_CASES: Mapping[str, Case] = _by_name(
    token_store_starts_empty, token_store_round_trips_through_another_handle,
    token_store_keeps_client_and_tokens_apart, token_store_never_shows_a_secret,
    token_store_concurrent_saves_store_one_whole, mcp_oauth_uses_the_stored_tokens,
    token_store_swap_lands_only_on_the_expected_tokens, token_store_swap_race_has_one_winner,
    mcp_oauth_refreshes_race_to_one_rotation)
"""The token store cases by name."""
