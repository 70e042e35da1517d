"""The token-store port of ``bindloop.mcp.auth.McpOAuth``: where an MCP client's OAuth tokens and
client registration live between runs and between processes (the two records it keeps,
:class:`OAuthTokens` and :class:`OAuthClientInfo`), and the compare-and-swap save that keeps a
rotated refresh token from being lost when two processes refresh at once."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import msgspec

__all__ = ("MemoryTokenStore", "OAuthClientInfo", "OAuthTokens", "SwapTokenStore", "TokenStore")


class OAuthClientInfo(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """This client at one authorization server: registered, pre-registered or a client ID
    metadata document URL. ``token_endpoint_auth_method`` is how it authenticates at the token
    endpoint (``none``, ``client_secret_basic``, ``client_secret_post``, ``private_key_jwt``).
    ``issuer`` is the authorization server a registration was made at: a stored registration is
    used only there (a server that moved to another issuer gets a new registration)."""

    client_id: str
    client_secret: str | None = None
    token_endpoint_auth_method: str | None = None
    issuer: str | None = None


class OAuthTokens(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A token answer. ``expires_at_ms`` is on the driver's injected clock (``None``: the server
    gave no lifetime). ``issuer`` is the authorization server that issued it (``None`` for tokens
    stored before it was recorded): its refresh token is only ever sent back there."""

    access_token: str
    token_type: str = "Bearer"
    refresh_token: str | None = None
    scope: str | None = None
    expires_at_ms: float | None = None
    issuer: str | None = None

    def expired(self, now_ms: float, margin_ms: float = 30_000.0) -> bool:
        return self.expires_at_ms is not None and now_ms + margin_ms >= self.expires_at_ms


class TokenStore(Protocol):
    """Where a client's tokens and registration live between runs (memory, a file, Durable
    Object storage): the host's port. ``save_tokens`` is last-writer-wins; a store shared by
    several processes should also be a :class:`SwapTokenStore`, so a refresh token the server
    rotates is never lost to a concurrent refresh."""

    async def load_tokens(self) -> OAuthTokens | None: ...

    async def save_tokens(self, tokens: OAuthTokens | None) -> None: ...

    async def load_client(self) -> OAuthClientInfo | None: ...

    async def save_client(self, client: OAuthClientInfo | None) -> None: ...


@runtime_checkable
class SwapTokenStore(TokenStore, Protocol):
    """A :class:`TokenStore` with a compare-and-swap save: what ``McpOAuth`` uses to store
    a refreshed token, so two processes refreshing at once agree on one rotation.

    ``swap_tokens(tokens, expected=e)`` stores ``tokens`` only if the stored tokens equal ``e``
    (``None``: none stored), atomically with respect to every other handle on the same store,
    and says whether it did (``False`` is an answer, not an error: someone else saved first).

    It is a separate protocol, not a required method of :class:`TokenStore`, so a store written
    before it keeps working: ``McpOAuth`` then compares and saves in two calls, which is
    correct within one process (its refreshes are serialized) but can lose a rotation to
    another process between the two calls."""

    async def swap_tokens(self, tokens: OAuthTokens | None, *,
                          expected: OAuthTokens | None) -> bool: ...


class MemoryTokenStore:
    """A :class:`SwapTokenStore` in memory: tokens live as long as the object (every handle on
    it is the object itself, so ``swap_tokens`` is atomic: it does not await)."""

    __slots__ = ("client", "tokens")

    def __init__(self) -> None:
        self.tokens: OAuthTokens | None = None
        self.client: OAuthClientInfo | None = None

    def __repr__(self) -> str:  # never the tokens
        return f"MemoryTokenStore(tokens={'set' if self.tokens else 'none'})"

    async def load_tokens(self) -> OAuthTokens | None:
        return self.tokens

    async def save_tokens(self, tokens: OAuthTokens | None) -> None:
        self.tokens = tokens

    async def swap_tokens(self, tokens: OAuthTokens | None, *,
                          expected: OAuthTokens | None) -> bool:
        if self.tokens != expected:
            return False
        self.tokens = tokens
        return True

    async def load_client(self) -> OAuthClientInfo | None:
        return self.client

    async def save_client(self, client: OAuthClientInfo | None) -> None:
        self.client = client
