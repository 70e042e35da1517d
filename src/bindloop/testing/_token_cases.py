"""The conformance cases of :class:`bindloop.mcp.TokenStore` (MCP OAuth tokens and the client
registration), as plain async functions like the other store cases (:mod:`._store_cases`): a
pytest suite (``store_kit.TokenStoreSuite``) and a route inside workerd run the same checks.

A factory handle here is a view on one token store (one user at one MCP server): two handles of
the same factory see each other's saves. Tokens are secrets: the cases also check that a store's
``repr`` never shows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import anyio

from ..mcp import McpOAuth, OAuthClientInfo, OAuthRequest, OAuthResponse, OAuthTokens
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


def _by_name(*cases: Case) -> Mapping[str, Case]:
    return MappingProxyType({case.__name__: case for case in cases})


TOKEN_CASES: Mapping[str, Case] = _by_name(
    token_store_starts_empty, token_store_round_trips_through_another_handle,
    token_store_keeps_client_and_tokens_apart, token_store_never_shows_a_secret,
    token_store_concurrent_saves_store_one_whole, mcp_oauth_uses_the_stored_tokens)
"""The token store cases by name."""
