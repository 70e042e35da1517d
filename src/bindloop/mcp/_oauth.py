"""MCP authorization, driven: :class:`McpOAuth` is the ``auth`` provider of an
:class:`~bindloop.mcp.McpHttpClient`. On a 401 it discovers the protected-resource metadata (from
``WWW-Authenticate``, else the well-known URLs), the authorization server's metadata, registers
the client (client ID metadata document, pre-registration or dynamic registration), obtains a
token (authorization code with PKCE through the host's ``authorize`` port, or client credentials)
with the resource indicator, stores it in the token-store port, refreshes it when it expires, and
asks again with the union of scopes on a 403 ``insufficient_scope``.

Every outside effect is a port: ``fetch`` (HTTP to the metadata, registration and token
endpoints), ``authorize`` (the browser step: it gets the authorization URL and returns the
redirect URL the user came back to), ``random_bytes`` (PKCE verifier and state), ``now`` (token
lifetimes), ``store`` (tokens and client registration; :class:`MemoryTokenStore` by default).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Literal, Protocol, TypeVar

import anyio
import msgspec

from ..clock import Clock, monotonic_ms
from ..errors import UsageError
from ..wire import HttpRequest, Transport, TransportError
from ._errors import McpAuthorizationError, McpHttpError
from ._oauth_model import (
    AuthorizationServerMetadata,
    ProtectedResourceMetadata,
    WwwAuthenticate,
    authorization_server_metadata_urls,
    authorization_url,
    canonical_resource,
    client_auth,
    form_encode,
    parse_token_answer,
    parse_www_authenticate,
    pkce_pair,
    protected_resource_metadata_urls,
    query_params,
    registration_body,
    resource_allowed,
    select_scope,
    split_url,
    state_value,
)
from ..stores import (
    OAuthClientInfo,
    OAuthTokens,
)
from ..stores import MemoryTokenStore, SwapTokenStore, TokenStore

__all__ = (
    "AuthorizeRedirect",
    "McpAuth",
    "McpOAuth",
    "OAuthFetch",
    "OAuthRequest",
    "OAuthResponse",
    "AuthorizationGrant",
    "id_jag_exchange",
    "transport_fetch",
)

_MAX_BODY = 1024 * 1024
_JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
_JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
_TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
_M = TypeVar("_M", ProtectedResourceMetadata, AuthorizationServerMetadata)


class McpAuth(Protocol):
    """What an :class:`McpHttpClient` asks of an authorization provider (:class:`McpOAuth` is
    one): the headers for the next request, and what to do when the server refuses one."""

    def headers(self) -> Sequence[tuple[str, str]]:
        """The credential headers to send now (``[]`` before any token)."""
        ...

    async def prepare(self) -> None:
        """Called before each request: refresh a token that expired, if it can."""
        ...

    async def unauthorized(self, error: McpHttpError) -> bool:
        """The server answered 401, or 403 with ``insufficient_scope``: obtain a (better) token.
        ``True`` sends the request again; ``False`` raises ``error``."""
        ...


class OAuthRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One HTTP request to an authorization or metadata endpoint (absolute ``url``)."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...] = ()
    body: bytes = b""


class OAuthResponse(msgspec.Struct, frozen=True, kw_only=True):
    status: int
    body: bytes = b""


OAuthFetch = Callable[[OAuthRequest], Awaitable[OAuthResponse]]
"""The HTTP port for the authorization endpoints: ``fetch(request) -> response``."""
AuthorizationGrant = Callable[[str, str, "str | None"], Awaitable[str]]
"""``grant(audience, resource, scope) -> assertion``: a JWT authorization grant (RFC 7523) for
the authorization server ``audience``, e.g. an identity assertion from the enterprise's
identity provider (see :func:`id_jag_exchange`)."""
AuthorizeRedirect = Callable[[str], Awaitable[str]]
"""The browser step: given the authorization URL, return the redirect URL the user agent was
sent back to (it carries ``code`` and ``state``). A host opens a browser and listens on its
redirect URI; a test follows the server's redirect."""


def transport_fetch(transport_for: Callable[[str], Transport]) -> OAuthFetch:
    """An :data:`OAuthFetch` over the host's transports: ``transport_for(url)`` returns a
    ``Transport`` whose base URL is ``url`` (e.g. ``lambda url: HttpxTransport(url,
    client=shared)``). Bodies are read up to 1 MiB."""

    async def fetch(request: OAuthRequest) -> OAuthResponse:
        transport = transport_for(request.url)
        http = HttpRequest(method=request.method, path="", headers=request.headers,
                           body=request.body)
        body = bytearray()
        async with transport.open(http) as resp:
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > _MAX_BODY:
                    break
            return OAuthResponse(status=resp.status, body=bytes(body[:_MAX_BODY]))

    return fetch


def id_jag_exchange(fetch: OAuthFetch, *, token_endpoint: str, id_token: str,
                    client_id: str | None = None,
                    client_secret: str | None = None) -> AuthorizationGrant:
    """An :data:`AuthorizationGrant` for cross-app access (enterprise-managed authorization): the
    user's ID token is exchanged at the identity provider's ``token_endpoint`` (RFC 8693) for an
    identity assertion authorization grant (ID-JAG) naming the authorization server and the
    resource."""

    async def grant(audience: str, resource: str, scope: str | None) -> str:
        form: list[tuple[str, str | None]] = [
            ("grant_type", _TOKEN_EXCHANGE), ("subject_token", id_token),
            ("subject_token_type", "urn:ietf:params:oauth:token-type:id_token"),
            ("requested_token_type", "urn:ietf:params:oauth:token-type:id-jag"),
            ("audience", audience), ("resource", resource), ("scope", scope)]
        headers = [("content-type", "application/x-www-form-urlencoded"),
                   ("accept", "application/json")]
        if client_id is not None:
            headers += client_auth(OAuthClientInfo(client_id=client_id,
                                                   client_secret=client_secret), None, form)
        resp = await fetch(OAuthRequest(method="POST", url=token_endpoint,
                                        headers=tuple(headers), body=form_encode(form).encode()))
        try:
            answer = msgspec.json.decode(resp.body)
        except msgspec.DecodeError:
            answer = None
        token = answer.get("access_token") if isinstance(answer, dict) else None
        if resp.status != 200 or not isinstance(token, str):
            raise TransportError(f"the identity provider refused the token exchange with HTTP "
                                 f"{resp.status}")
        return token

    return grant


class _Discovered(msgspec.Struct, frozen=True):
    resource: ProtectedResourceMetadata | None
    server: AuthorizationServerMetadata
    issuer: str


class McpOAuth:
    """An authorization provider for :class:`~bindloop.mcp.McpHttpClient` (``auth=``).

    ``server_url`` is the MCP endpoint (the resource). ``fetch`` reaches the authorization
    endpoints (see :func:`transport_fetch`). ``grant`` is ``"authorization_code"`` (needs
    ``authorize``, ``redirect_uri`` and ``random_bytes``) or ``"client_credentials"`` (needs
    ``client_id`` and ``client_secret``, or ``client_assertion`` for ``private_key_jwt``:
    ``client_assertion(audience)`` returns a signed JWT) or ``"jwt_bearer"`` (an
    :data:`AuthorizationGrant` from ``authorization_grant``, exchanged by the pre-registered
    client for a token: cross-app access). ``client_id`` / ``client_secret``
    name a pre-registered client; ``client_metadata_url`` is this client's metadata document,
    used as its ``client_id`` where the server supports that; otherwise the client registers
    dynamically as ``client_name``. ``offline`` asks for ``offline_access`` (a refresh token)
    where the server offers it.

    A refresh is shared with every other client on the same ``store`` (other processes,
    isolates): it reloads the stored tokens first and uses them if another client already
    rotated; it saves with the store's compare-and-swap (:class:`SwapTokenStore`) and, if that
    refuses because another client saved first, uses the winner's tokens; and if the server
    refuses the refresh token (already rotated by another client whose save has not landed
    yet), it re-reads the store for up to ``refresh_wait_ms`` (every 100 ms, on ``sleep``) and
    uses the tokens that appear there before giving up.

    Discovery stays on the MCP server's origin: a ``resource_metadata`` URL in a 401 challenge on
    another origin is not fetched (a hostile server would make the client request any URL it
    names) unless that origin is listed in ``metadata_origins``; the well-known URLs at the
    server's origin are tried instead.
    """

    def __init__(self, *, server_url: str, fetch: OAuthFetch,
                 grant: Literal["authorization_code", "client_credentials",
                                "jwt_bearer"] = "authorization_code",
                 authorize: AuthorizeRedirect | None = None, redirect_uri: str | None = None,
                 random_bytes: Callable[[int], bytes] | None = None,
                 store: TokenStore | None = None, now: Clock = monotonic_ms,
                 client_id: str | None = None, client_secret: str | None = None,
                 client_metadata_url: str | None = None, client_name: str = "bindloop",
                 client_assertion: Callable[[str], Awaitable[str]] | None = None,
                 authorization_grant: AuthorizationGrant | None = None,
                 offline: bool = True, scope: str | None = None,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
                 refresh_wait_ms: float = 2_000.0,
                 metadata_origins: tuple[str, ...] = ()) -> None:
        split_url(server_url)  # an absolute URL, or ValueError now
        self._metadata_origins = frozenset(
            split_url(u)[0].lower() for u in (server_url, *metadata_origins))
        if grant == "authorization_code" and (authorize is None or redirect_uri is None
                                              or random_bytes is None):
            raise UsageError("McpOAuth(grant='authorization_code') needs authorize=, "
                             "redirect_uri= and random_bytes=")
        if grant in ("client_credentials", "jwt_bearer") and client_id is None:
            raise UsageError(f"McpOAuth(grant={grant!r}) needs client_id=")
        if grant == "jwt_bearer" and authorization_grant is None:
            raise UsageError("McpOAuth(grant='jwt_bearer') needs authorization_grant=")
        if grant not in ("authorization_code", "client_credentials", "jwt_bearer"):
            raise UsageError(f"unknown grant {grant!r}")
        self.server_url = server_url
        self._fetch = fetch
        self._grant = grant
        self._authorize = authorize
        self._redirect_uri = redirect_uri
        self._random = random_bytes
        self._store: TokenStore = store if store is not None else MemoryTokenStore()
        self._swap = self._store if isinstance(self._store, SwapTokenStore) else None
        self._sleep = sleep
        self._refresh_wait_ms = refresh_wait_ms
        self._refreshing = anyio.Lock()
        self._now = now
        self._preset = (None if client_id is None else
                        OAuthClientInfo(client_id=client_id, client_secret=client_secret,
                                        token_endpoint_auth_method=(
                                            "private_key_jwt" if client_assertion else None)))
        self._metadata_url = client_metadata_url
        self._client_name = client_name
        self._assertion = client_assertion
        self._authorization_grant = authorization_grant
        self._offline = offline
        self._scope = scope
        self._tokens: OAuthTokens | None = None
        self._loaded = False
        self._discovered: _Discovered | None = None
        self._discovered_from: str | None = None
        self._server = "mcp"
        self._on_secret: Callable[[str], None] = lambda _s: None

    def __repr__(self) -> str:
        return f"McpOAuth(server_url={self.server_url!r}, grant={self._grant!r})"

    def bind(self, client: Any) -> None:
        """Called by the client that uses this provider: errors name its server, and every token
        obtained is added to its redaction."""
        self._server = str(getattr(client, "server", "mcp"))
        add = getattr(client, "add_secret", None)
        if callable(add):
            self._on_secret = add
            for token in self._secrets(self._tokens):
                add(token)

    @property
    def tokens(self) -> OAuthTokens | None:
        """The tokens in use (``None`` before the first authorization)."""
        return self._tokens

    # -- McpAuth ----------------------------------------------------------------------------

    def headers(self) -> Sequence[tuple[str, str]]:
        if self._tokens is None:
            return []
        return [("authorization", f"Bearer {self._tokens.access_token}")]

    async def prepare(self) -> None:
        if not self._loaded:
            self._loaded = True
            self._use(await self._store.load_tokens())
        tokens = self._tokens
        if tokens is not None and tokens.expired(self._now()) and tokens.refresh_token:
            try:
                await self._refresh(tokens)
            except McpAuthorizationError:
                self._use(None)  # the next 401 starts a fresh authorization

    async def unauthorized(self, error: McpHttpError) -> bool:
        challenge = parse_www_authenticate(error.www_authenticate)
        tokens = self._tokens
        step_up = error.status == 403
        if not step_up and tokens is not None and tokens.refresh_token:
            try:
                await self._refresh(tokens)
                return True
            except McpAuthorizationError:
                pass  # refused: authorize from scratch
        if not step_up and tokens is not None:
            # A token the server no longer takes: its metadata may name another authorization
            # server now (a migration), so it is read again rather than trusted from before.
            self._discovered = None
        discovered = await self._discover(challenge)
        previous = tokens.scope if (step_up and tokens is not None) else None
        if step_up and previous is None and tokens is not None:
            previous = self._scope
        scope = self._scope if (self._scope and not challenge.scope) else select_scope(
            challenge, discovered.resource, discovered.server,
            offline=self._offline and self._grant == "authorization_code", previous=previous)
        client = await self._client(discovered, scope)
        resource = self._resource(discovered)
        if self._grant == "client_credentials":
            await self._client_credentials(discovered, client, scope, resource)
        elif self._grant == "jwt_bearer":
            assert self._authorization_grant is not None
            try:
                assertion = await self._authorization_grant(discovered.issuer, resource, scope)
            except TransportError as exc:
                raise self._fail(f"no authorization grant: {exc}") from exc
            await self._token_request(discovered, client, [
                ("grant_type", _JWT_BEARER_GRANT), ("assertion", assertion), ("scope", scope),
                ("resource", resource)], "JWT authorization grant")
        else:
            await self._authorization_code(discovered, client, scope, resource)
        return True

    # -- steps ------------------------------------------------------------------------------

    def _fail(self, message: str) -> McpAuthorizationError:
        return McpAuthorizationError(self._server, f"authorization failed: {message}")

    async def _get(self, url: str) -> OAuthResponse:
        try:
            return await self._fetch(OAuthRequest(method="GET", url=url,
                                                  headers=(("accept", "application/json"),)))
        except TransportError as exc:
            raise self._fail(f"could not reach {url}: {exc}") from exc

    async def _first_metadata(self, urls: Iterable[str], kind: type[_M], what: str) -> _M | None:
        """The metadata document at the first of ``urls`` that answers 200 (``None`` if none does);
        one that answers with a malformed document fails the discovery."""
        for url in urls:
            resp = await self._get(url)
            if resp.status == 200:
                try:
                    return msgspec.json.decode(resp.body, type=kind)
                except msgspec.DecodeError as exc:
                    raise self._fail(f"{what} at {url} is malformed: {exc}") from exc
        return None

    async def _discover(self, challenge: WwwAuthenticate) -> _Discovered:
        if self._discovered is not None and challenge.resource_metadata in (
                None, self._discovered_from):
            return self._discovered
        hinted = challenge.resource_metadata
        if hinted is not None and _origin_of(hinted) not in self._metadata_origins:
            challenge = msgspec.structs.replace(challenge, resource_metadata=None)
        resource = await self._first_metadata(
            protected_resource_metadata_urls(self.server_url, challenge), ProtectedResourceMetadata,
            "protected resource metadata")
        origin = split_url(self.server_url)[0]
        if resource is not None:
            if resource.resource and not resource_allowed(self.server_url, resource.resource):
                raise self._fail(f"the protected resource metadata names resource "
                                 f"{resource.resource!r}, which is not {self.server_url!r}")
            if not resource.authorization_servers:
                raise self._fail("the protected resource metadata names no authorization server")
            issuer = resource.authorization_servers[0]
        else:
            issuer = origin  # the 2025-03-26 revision: the MCP server's origin is the issuer
        server = await self._first_metadata(authorization_server_metadata_urls(issuer),
                                            AuthorizationServerMetadata,
                                            "authorization server metadata")
        if server is None:
            if resource is not None:
                raise self._fail(f"no authorization server metadata for {issuer!r}")
            # No metadata at all (2025-03-26): the default endpoints at the server's origin.
            base = split_url(issuer)[0]
            server = AuthorizationServerMetadata(
                issuer=base, authorization_endpoint=f"{base}/authorize",
                token_endpoint=f"{base}/token", registration_endpoint=f"{base}/register")
        if resource is not None and server.issuer is not None and server.issuer != issuer:
            # RFC 8414 section 3.3: the metadata must name the issuer it was fetched for, exactly.
            raise self._fail(f"the authorization server metadata names issuer "
                             f"{server.issuer!r}, not {issuer!r}")
        if server.code_challenge_methods_supported is not None and (
                "S256" not in server.code_challenge_methods_supported
                and self._grant == "authorization_code"):
            raise self._fail("the authorization server does not support PKCE with S256")
        self._discovered = _Discovered(resource, server, server.issuer or issuer)
        self._discovered_from = challenge.resource_metadata
        return self._discovered

    def _resource(self, discovered: _Discovered) -> str:
        named = discovered.resource.resource if discovered.resource is not None else None
        return named or canonical_resource(self.server_url)

    async def _client(self, discovered: _Discovered, scope: str | None) -> OAuthClientInfo:
        stored = await self._store.load_client()
        if stored is not None and (stored.issuer is None or stored.issuer == discovered.issuer):
            return stored  # (registered at another issuer: the server moved; register again)
        if self._preset is not None:
            return self._preset
        server = discovered.server
        if self._metadata_url and server.client_id_metadata_document_supported:
            return OAuthClientInfo(client_id=self._metadata_url, token_endpoint_auth_method="none")
        if not server.registration_endpoint:
            raise self._fail("the authorization server offers no dynamic registration and no "
                             "client_id was given")
        grants = (["authorization_code", "refresh_token"] if self._grant == "authorization_code"
                  else ["client_credentials"])
        body = registration_body(client_name=self._client_name,
                                 redirect_uris=[self._redirect_uri] if self._redirect_uri else [],
                                 grant_types=grants,
                                 methods=server.token_endpoint_auth_methods_supported,
                                 scope=scope)
        resp = await self._post(server.registration_endpoint, msgspec.json.encode(body),
                                "application/json", "registration")
        if resp.status not in (200, 201):
            raise self._fail(f"registration answered HTTP {resp.status}")
        try:
            client = msgspec.json.decode(resp.body, type=OAuthClientInfo)
        except msgspec.DecodeError as exc:
            raise self._fail(f"the registration answer is malformed: {exc}") from exc
        if client.token_endpoint_auth_method is None:
            asked = body["token_endpoint_auth_method"]
            client = OAuthClientInfo(
                client_id=client.client_id, client_secret=client.client_secret,
                token_endpoint_auth_method=None if asked == "none" and client.client_secret
                else asked)
        client = msgspec.structs.replace(client, issuer=discovered.issuer)
        if client.client_secret:
            self._on_secret(client.client_secret)
        await self._store.save_client(client)
        return client

    async def _post(self, url: str, body: bytes, kind: str, what: str,
                    headers: Sequence[tuple[str, str]] = ()) -> OAuthResponse:
        try:
            return await self._fetch(OAuthRequest(method="POST", url=url, body=body, headers=(
                ("content-type", kind), ("accept", "application/json"), *headers)))
        except TransportError as exc:
            raise self._fail(f"{what} at {url}: {exc}") from exc

    async def _token_request(self, discovered: _Discovered, client: OAuthClientInfo,
                             form: list[tuple[str, str | None]], what: str,
                             previous_refresh: str | None = None) -> OAuthTokens:
        """Ask the token endpoint; the tokens it issued (used and saved unless refreshing:
        :meth:`_refresh` saves with compare-and-swap)."""
        endpoint = discovered.server.token_endpoint
        if not endpoint:
            raise self._fail("the authorization server metadata has no token_endpoint")
        if client.token_endpoint_auth_method == "private_key_jwt" and self._assertion:
            form += [("client_id", client.client_id),
                     ("client_assertion_type", _JWT_BEARER),
                     ("client_assertion", await self._assertion(discovered.issuer))]
            headers: list[tuple[str, str]] = []
        else:
            headers = client_auth(client, discovered.server.token_endpoint_auth_methods_supported,
                                  form)
        resp = await self._post(endpoint, form_encode(form).encode(),
                                "application/x-www-form-urlencoded", what, headers)
        if resp.status != 200:
            detail = ""
            try:
                answer = msgspec.json.decode(resp.body)
                if isinstance(answer, dict) and isinstance(answer.get("error"), str):
                    detail = f" ({answer['error']})"
            except msgspec.DecodeError:
                pass
            raise self._fail(f"the token endpoint refused the {what} with HTTP "
                             f"{resp.status}{detail}")
        try:
            tokens = parse_token_answer(resp.body, self._now(), previous_refresh)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise self._fail(f"the token answer is malformed: {exc}") from exc
        if tokens.token_type.lower() != "bearer":
            raise self._fail(f"the token endpoint issued a {tokens.token_type!r} token, not "
                             "Bearer")
        tokens = msgspec.structs.replace(tokens, issuer=discovered.issuer)
        if previous_refresh is None:
            self._use(tokens)
            await self._store.save_tokens(tokens)
        return tokens

    async def _authorization_code(self, discovered: _Discovered, client: OAuthClientInfo,
                                  scope: str | None, resource: str) -> None:
        assert self._random is not None and self._authorize is not None
        assert self._redirect_uri is not None
        endpoint = discovered.server.authorization_endpoint
        if not endpoint:
            raise self._fail("the authorization server metadata has no authorization_endpoint")
        verifier, challenge = pkce_pair(self._random(32))
        state = state_value(self._random(16))
        url = authorization_url(endpoint, client_id=client.client_id,
                                redirect_uri=self._redirect_uri, challenge=challenge,
                                state=state, scope=scope, resource=resource)
        redirected = await self._authorize(url)
        params = query_params(redirected)
        if "error" in params:
            raise self._fail(f"the authorization server answered {params['error']!r}")
        if params.get("state") != state:
            raise self._fail("the redirect's state does not match the request's")
        # RFC 9207: the redirect names the issuer that answered; compared exactly (no
        # normalization), required when the server says it sends it.
        iss = params.get("iss")
        if iss is None and discovered.server.authorization_response_iss_parameter_supported:
            raise self._fail("the redirect carries no iss although the authorization server "
                             "says it sends one")
        if iss is not None and iss != discovered.issuer:
            raise self._fail(f"the redirect's iss {iss!r} is not the authorization server "
                             f"{discovered.issuer!r}")
        code = params.get("code")
        if not code:
            raise self._fail("the redirect carries no authorization code")
        await self._token_request(discovered, client, [
            ("grant_type", "authorization_code"), ("code", code),
            ("redirect_uri", self._redirect_uri), ("code_verifier", verifier),
            ("resource", resource)], "authorization code")

    async def _client_credentials(self, discovered: _Discovered, client: OAuthClientInfo,
                                  scope: str | None, resource: str) -> None:
        await self._token_request(discovered, client, [
            ("grant_type", "client_credentials"), ("scope", scope), ("resource", resource)],
            "client credentials")

    async def _refresh(self, tokens: OAuthTokens) -> None:
        """Refresh ``tokens`` (expired or refused), in agreement with every other client of the
        store; raises :class:`McpAuthorizationError` when no usable token results."""
        async with self._refreshing:
            held = self._tokens
            if held is not None and held != tokens and not held.expired(self._now()):
                return  # a concurrent request of this provider refreshed already
            current = tokens
            for _ in range(4):  # each round ends in a token, or another client's newer save
                stored = await self._store.load_tokens()
                if stored is not None and stored != current:
                    current = stored  # another client rotated first: theirs, or refresh theirs
                    if not stored.expired(self._now()):
                        self._use(stored)
                        return
                if current.refresh_token is None:
                    raise self._fail("the stored token expired and has no refresh token")
                try:
                    fresh = await self._refresh_request(current)
                except McpAuthorizationError:
                    if await self._store_changed(stored):
                        continue  # the rotation that beat this one has landed: use it
                    raise
                if await self._save_if(fresh, stored):
                    self._use(fresh)
                    return
                for secret in self._secrets(fresh):  # unused, but live: never shown either
                    self._on_secret(secret)
                # Another client saved first: the next round loads and uses the winner's.
            raise self._fail("the stored tokens kept changing while refreshing")

    async def _refresh_request(self, tokens: OAuthTokens) -> OAuthTokens:
        assert tokens.refresh_token is not None
        discovered = await self._discover(WwwAuthenticate())
        if tokens.issuer is not None and tokens.issuer != discovered.issuer:
            # Credentials are the issuer's: a refresh token never goes to another server.
            raise self._fail("the stored refresh token was issued by another authorization "
                             "server than the one this resource names now; authorize again")
        client = await self._client(discovered, tokens.scope)
        return await self._token_request(discovered, client, [
            ("grant_type", "refresh_token"), ("refresh_token", tokens.refresh_token),
            ("resource", self._resource(discovered))], "refresh", tokens.refresh_token)

    async def _store_changed(self, seen: OAuthTokens | None) -> bool:
        """Whether the stored tokens differ from ``seen``, re-reading for up to
        ``refresh_wait_ms``: a refused refresh token may have been rotated by another client
        that has not saved yet."""
        waited = 0.0
        while True:
            stored = await self._store.load_tokens()
            if stored is not None and stored != seen:
                return True
            if waited >= self._refresh_wait_ms:
                return False
            await self._sleep(0.1)
            waited += 100.0

    async def _save_if(self, tokens: OAuthTokens, expected: OAuthTokens | None) -> bool:
        if self._swap is not None:
            return await self._swap.swap_tokens(tokens, expected=expected)
        # A store without compare-and-swap: compare, then save (atomic within this provider,
        # whose refreshes hold a lock; not across processes -- see SwapTokenStore).
        if await self._store.load_tokens() != expected:
            return False
        await self._store.save_tokens(tokens)
        return True

    def _use(self, tokens: OAuthTokens | None) -> None:
        self._tokens = tokens
        for secret in self._secrets(tokens):
            self._on_secret(secret)

    @staticmethod
    def _secrets(tokens: OAuthTokens | None) -> list[str]:
        if tokens is None:
            return []
        return [t for t in (tokens.access_token, tokens.refresh_token) if t]


def _origin_of(url: str) -> str | None:
    """``url``'s origin, or ``None`` when it is not an absolute URL."""
    try:
        return split_url(url)[0].lower()
    except ValueError:
        return None
