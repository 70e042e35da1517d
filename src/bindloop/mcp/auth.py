"""MCP authorization: :class:`McpOAuth` is the OAuth 2.1 ``auth`` provider of an
:class:`~bindloop.mcp.McpHttpClient` (discovery, registration, PKCE or client credentials,
refresh, step-up scopes), every outside effect a port (``fetch`` -- :func:`transport_fetch` over the
host's transport --, ``authorize``, ``random_bytes``, ``now``, ``store``); :class:`McpAuth` is the
port a client calls for its headers. Tokens and the client registration live in a
:class:`bindloop.stores.TokenStore` (:class:`~bindloop.stores.SwapTokenStore` when several
processes refresh; :class:`~bindloop.stores.MemoryTokenStore` in one process). The protocol's
documents and decisions without I/O: :func:`parse_www_authenticate`, the metadata documents;
:func:`id_jag_exchange` for enterprise-managed authorization. A refused authorization raises
:class:`McpAuthorizationError`. See docs/mcp.md.
"""

from ._oauth import (
    AuthorizationGrant as AuthorizationGrant,
    AuthorizeRedirect as AuthorizeRedirect,
    McpAuth as McpAuth,
    McpOAuth as McpOAuth,
    OAuthFetch as OAuthFetch,
    OAuthRequest as OAuthRequest,
    OAuthResponse as OAuthResponse,
    id_jag_exchange as id_jag_exchange,
    transport_fetch as transport_fetch,
)
from ._oauth_model import (
    AuthorizationServerMetadata as AuthorizationServerMetadata,
    ProtectedResourceMetadata as ProtectedResourceMetadata,
    WwwAuthenticate as WwwAuthenticate,
    parse_www_authenticate as parse_www_authenticate,
)
from ._errors import (
    McpAuthorizationError as McpAuthorizationError,
)

__all__ = (
    "AuthorizationGrant",
    "AuthorizationServerMetadata",
    "AuthorizeRedirect",
    "McpAuth",
    "McpAuthorizationError",
    "McpOAuth",
    "OAuthFetch",
    "OAuthRequest",
    "OAuthResponse",
    "ProtectedResourceMetadata",
    "WwwAuthenticate",
    "id_jag_exchange",
    "parse_www_authenticate",
    "transport_fetch",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
