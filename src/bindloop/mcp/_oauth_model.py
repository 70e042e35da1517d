"""MCP authorization (the OAuth 2.1 profile of the 2025-11-25 revision) as pure decisions: parsing
``WWW-Authenticate``, the discovery URLs to try and in which order, the metadata documents, the
resource check, scope selection, PKCE, the authorization URL, the token and registration request
bodies and the token answer. No I/O, no clock reads, no randomness: the driver
(:class:`~bindloop.mcp.auth.McpOAuth`) passes bytes from its injected random source and times from its
injected clock.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from .._percent import percent_decode as _unquote, percent_encode as _quote
from ..stores import OAuthClientInfo, OAuthTokens

__all__ = (
    "AuthorizationServerMetadata",
    "ProtectedResourceMetadata",
    "WwwAuthenticate",
    "authorization_server_metadata_urls",
    "authorization_url",
    "form_encode",
    "parse_www_authenticate",
    "pkce_pair",
    "protected_resource_metadata_urls",
    "query_params",
    "resource_allowed",
    "select_scope",
    "split_url",
)

_PARAM = re.compile(r'([A-Za-z_][A-Za-z0-9_-]*)\s*=\s*("(?:[^"\\]|\\.)*"|[^\s,]+)')


class WwwAuthenticate(msgspec.Struct, frozen=True, kw_only=True):
    """A Bearer challenge: ``resource_metadata`` (the protected-resource metadata URL), ``scope``
    (what the resource wants), ``error`` (``invalid_token``, ``insufficient_scope``, ...)."""

    scheme: str = ""
    resource_metadata: str | None = None
    scope: str | None = None
    error: str | None = None
    error_description: str | None = None


def parse_www_authenticate(value: str | None) -> WwwAuthenticate:
    """The first challenge's parameters (RFC 9110 auth-params: tokens or quoted strings)."""
    if not value:
        return WwwAuthenticate()
    scheme, _, rest = value.strip().partition(" ")
    params: dict[str, str] = {}
    for name, raw in _PARAM.findall(rest):
        if raw.startswith('"'):
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        params.setdefault(name.lower(), raw)
    return WwwAuthenticate(scheme=scheme.lower(), resource_metadata=params.get("resource_metadata"),
                           scope=params.get("scope"), error=params.get("error"),
                           error_description=params.get("error_description"))


class ProtectedResourceMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """RFC 9728 protected-resource metadata: which resource, its authorization servers."""

    resource: str | None = None
    authorization_servers: list[str] = msgspec.field(default_factory=list)
    scopes_supported: list[str] | None = None


class AuthorizationServerMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """RFC 8414 / OpenID discovery: the endpoints and what the server supports."""

    issuer: str | None = None
    authorization_endpoint: str | None = None
    token_endpoint: str | None = None
    registration_endpoint: str | None = None
    scopes_supported: list[str] | None = None
    grant_types_supported: list[str] | None = None
    code_challenge_methods_supported: list[str] | None = None
    token_endpoint_auth_methods_supported: list[str] | None = None
    client_id_metadata_document_supported: bool = False
    authorization_response_iss_parameter_supported: bool = False


class _TokenAnswer(msgspec.Struct, frozen=True, kw_only=True):
    access_token: str
    token_type: str = "Bearer"
    expires_in: float | None = None
    refresh_token: str | None = None
    scope: str | None = None


def parse_token_answer(body: bytes, now_ms: float,
                       previous_refresh: str | None = None) -> OAuthTokens:
    """The token endpoint's JSON answer as :class:`OAuthTokens` (a refresh keeps the previous
    refresh token when the server sends none). Raises ``msgspec`` errors on a malformed body."""
    answer = msgspec.json.decode(body, type=_TokenAnswer)
    expires = None if answer.expires_in is None else now_ms + float(answer.expires_in) * 1000.0
    return OAuthTokens(access_token=answer.access_token, token_type=answer.token_type,
                       refresh_token=answer.refresh_token or previous_refresh,
                       scope=answer.scope, expires_at_ms=expires)


def split_url(url: str) -> tuple[str, str, str]:
    """``(origin, path, query)`` of an absolute URL; the fragment is dropped."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise ValueError(f"not an absolute URL: {url[:80]!r}")
    rest = rest.split("#", 1)[0]
    authority_end = len(rest)
    for mark in "/?":
        at = rest.find(mark)
        if at != -1:
            authority_end = min(authority_end, at)
    authority, tail = rest[:authority_end], rest[authority_end:]
    path, _, query = tail.partition("?")
    return f"{scheme.lower()}://{authority.lower()}", path, query


def _trim(path: str) -> str:
    return path.rstrip("/")


def protected_resource_metadata_urls(server_url: str, challenge: WwwAuthenticate) -> list[str]:
    """Where to look for the protected-resource metadata, in order: the challenge's
    ``resource_metadata``, then the path-aware well-known URL, then the root one."""
    origin, path, _ = split_url(server_url)
    urls = [challenge.resource_metadata] if challenge.resource_metadata else []
    if _trim(path):
        urls.append(f"{origin}/.well-known/oauth-protected-resource{_trim(path)}")
    urls.append(f"{origin}/.well-known/oauth-protected-resource")
    return list(dict.fromkeys(urls))


def authorization_server_metadata_urls(issuer: str) -> list[str]:
    """RFC 8414 and OpenID discovery URLs for ``issuer``, in the order MCP asks for: a path-aware
    issuer never has its metadata looked up at the root."""
    origin, path, _ = split_url(issuer)
    path = _trim(path)
    if path:
        return [f"{origin}/.well-known/oauth-authorization-server{path}",
                f"{origin}/.well-known/openid-configuration{path}",
                f"{origin}{path}/.well-known/openid-configuration"]
    return [f"{origin}/.well-known/oauth-authorization-server",
            f"{origin}/.well-known/openid-configuration"]


def canonical_resource(server_url: str) -> str:
    """The MCP server's canonical URI (RFC 8707): scheme and host lower-cased, no fragment, no
    trailing slash on a path."""
    origin, path, query = split_url(server_url)
    return origin + _trim(path) + (f"?{query}" if query else "")


def resource_allowed(server_url: str, resource: str) -> bool:
    """Whether metadata naming ``resource`` may speak for ``server_url``: same origin, and the
    resource's path is the server's path or a parent of it."""
    try:
        origin, path, _ = split_url(server_url)
        r_origin, r_path, _ = split_url(resource)
    except ValueError:
        return False
    path, r_path = _trim(path) + "/", _trim(r_path) + "/"
    return origin == r_origin and path.startswith(r_path)


def select_scope(challenge: WwwAuthenticate, resource: ProtectedResourceMetadata | None,
                 server: AuthorizationServerMetadata, *, offline: bool,
                 previous: str | None = None) -> str | None:
    """The scope to ask for: the challenge's, else every scope the resource lists, else none;
    joined with the scopes held before (a step-up asks for the union), plus ``offline_access``
    when a refresh token is wanted and the authorization server lists it."""
    chosen: list[str] = []
    if challenge.scope:
        chosen = challenge.scope.split()
    elif resource is not None and resource.scopes_supported:
        chosen = list(resource.scopes_supported)
    if previous:
        chosen = [*previous.split(), *chosen]
    if offline and "offline_access" in (server.scopes_supported or ()):
        chosen.append("offline_access")
    unique = list(dict.fromkeys(s for s in chosen if s))
    return " ".join(unique) if unique else None


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def pkce_pair(random: bytes) -> tuple[str, str]:
    """``(code_verifier, code_challenge)`` for S256 from at least 32 random bytes."""
    if len(random) < 32:
        raise ValueError("PKCE needs at least 32 random bytes")
    verifier = _b64url(random)
    return verifier, _b64url(hashlib.sha256(verifier.encode("ascii")).digest())


def state_value(random: bytes) -> str:
    return _b64url(random)


def form_encode(fields: Mapping[str, str | None] | Sequence[tuple[str, str | None]]) -> str:
    """``application/x-www-form-urlencoded`` (``None`` values left out)."""
    pairs = fields.items() if isinstance(fields, Mapping) else fields
    return "&".join(f"{_quote(k, plus=True)}={_quote(v, plus=True)}" for k, v in pairs
                    if v is not None)


def query_params(url: str) -> dict[str, str]:
    """The query parameters of ``url`` (the first of each name), decoded."""
    query = url.split("#", 1)[0].partition("?")[2]
    out: dict[str, str] = {}
    for pair in query.split("&"):
        name, eq, value = pair.partition("=")
        if name:
            out.setdefault(_unquote(name.replace("+", " ")), _unquote(value.replace("+", " ")))
    return out


def authorization_url(endpoint: str, *, client_id: str, redirect_uri: str, challenge: str,
                      state: str, scope: str | None, resource: str | None) -> str:
    """The authorization request (code flow with S256 PKCE and a resource indicator)."""
    query = form_encode([("response_type", "code"), ("client_id", client_id),
                         ("redirect_uri", redirect_uri), ("code_challenge", challenge),
                         ("code_challenge_method", "S256"), ("state", state), ("scope", scope),
                         ("resource", resource)])
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"


def client_auth(client: OAuthClientInfo, methods: Sequence[str] | None,
                form: list[tuple[str, str | None]]) -> list[tuple[str, str]]:
    """Authenticate ``client`` on a token request: the headers to add (HTTP Basic), after adding
    ``client_id`` / ``client_secret`` to ``form`` as the method wants."""
    method = client.token_endpoint_auth_method
    if method is None:
        offered = list(methods or ["client_secret_basic"])
        if client.client_secret is None:
            method = "none"
        elif "client_secret_basic" in offered:
            method = "client_secret_basic"
        elif "client_secret_post" in offered:
            method = "client_secret_post"
        else:
            method = offered[0]
    if method == "client_secret_basic" and client.client_secret is not None:
        pair = f"{_quote(client.client_id, plus=True)}:{_quote(client.client_secret, plus=True)}"
        return [("authorization", "Basic " + base64.b64encode(pair.encode()).decode("ascii"))]
    form.append(("client_id", client.client_id))
    if method == "client_secret_post" and client.client_secret is not None:
        form.append(("client_secret", client.client_secret))
    return []


def application_type(redirect_uris: Sequence[str]) -> str:
    """OpenID's ``application_type`` for a registration (SEP-837): ``"native"`` when every
    redirect goes to this machine (loopback) or to an app's own scheme, else ``"web"``."""
    for uri in redirect_uris:
        scheme, _, rest = uri.partition("://")
        host = rest.split("/", 1)[0].rsplit("@", 1)[-1]
        host = host[1:].split("]", 1)[0] if host.startswith("[") else host.split(":", 1)[0]
        if scheme.lower() in ("http", "https") and host.lower() not in (
                "localhost", "127.0.0.1", "::1"):
            return "web"
    return "native"


def registration_body(*, client_name: str, redirect_uris: Sequence[str],
                      grant_types: Sequence[str], methods: Sequence[str] | None,
                      scope: str | None) -> dict[str, Any]:
    """A dynamic client registration request (RFC 7591): a public client when the server allows
    ``none``, else one with a secret sent the way the server prefers."""
    offered = list(methods or ["client_secret_basic"])
    method = ("none" if "none" in offered else
              "client_secret_basic" if "client_secret_basic" in offered else offered[0])
    body: dict[str, Any] = {"client_name": client_name, "redirect_uris": list(redirect_uris),
                            "grant_types": list(grant_types), "response_types": ["code"],
                            "token_endpoint_auth_method": method,
                            "application_type": application_type(redirect_uris)}
    if scope:
        body["scope"] = scope
    return body
