"""MCP tools: a sans-I/O Model Context Protocol client (:class:`McpClientSession`), its streamable
HTTP binding over the host's ``Transport`` (:class:`McpHttpClient`), and a server's tools as
bindloop tools (:func:`load_mcp_tools`), equipped in an agent (:func:`equip_mcp`) or as a registry
plugin (:class:`McpServerPlugin`).

See docs/mcp.md.
"""

from ._content import map_call_result as map_call_result, map_content_block as map_content_block
from ._equip import equip_mcp as equip_mcp
from ._errors import (
    McpConnectionError as McpConnectionError,
    McpError as McpError,
    McpHttpError as McpHttpError,
    McpProtocolError as McpProtocolError,
    McpRpcError as McpRpcError,
    McpSessionExpiredError as McpSessionExpiredError,
    McpTimeoutError as McpTimeoutError,
    McpVersionError as McpVersionError,
)
from ._http import (
    McpAuth as McpAuth,
    McpHttpClient as McpHttpClient,
    ProgressCallback as ProgressCallback,
    open_mcp_client as open_mcp_client,
)
from ._oauth import (
    AuthorizationGrant as AuthorizationGrant,
    AuthorizeRedirect as AuthorizeRedirect,
    McpAuthorizationError as McpAuthorizationError,
    McpOAuth as McpOAuth,
    MemoryTokenStore as MemoryTokenStore,
    OAuthFetch as OAuthFetch,
    OAuthRequest as OAuthRequest,
    OAuthResponse as OAuthResponse,
    TokenStore as TokenStore,
    id_jag_exchange as id_jag_exchange,
    transport_fetch as transport_fetch,
)
from ._oauth_model import (
    AuthorizationServerMetadata as AuthorizationServerMetadata,
    OAuthClientInfo as OAuthClientInfo,
    OAuthTokens as OAuthTokens,
    ProtectedResourceMetadata as ProtectedResourceMetadata,
    WwwAuthenticate as WwwAuthenticate,
    parse_www_authenticate as parse_www_authenticate,
)
from ._protocol import (
    PROTOCOL_VERSIONS as PROTOCOL_VERSIONS,
    CallToolResult as CallToolResult,
    Implementation as Implementation,
    InitializeResult as InitializeResult,
    ListToolsResult as ListToolsResult,
    McpToolInfo as McpToolInfo,
    RequestId as RequestId,
    SkippedMcpTool as SkippedMcpTool,
)
from ._serve import (
    ElicitationHandler as ElicitationHandler,
    ElicitationRequest as ElicitationRequest,
    ElicitationResult as ElicitationResult,
    McpRequestRefused as McpRequestRefused,
    McpRoot as McpRoot,
    McpSampling as McpSampling,
    SamplingHandler as SamplingHandler,
    SamplingRequest as SamplingRequest,
    ServerRequestHandlers as ServerRequestHandlers,
)
from ._session import (
    McpClientSession as McpClientSession,
    McpDiscarded as McpDiscarded,
    McpEvent as McpEvent,
    McpPhase as McpPhase,
    McpProgress as McpProgress,
    McpRequestFailed as McpRequestFailed,
    McpResponse as McpResponse,
    McpServerNotification as McpServerNotification,
    McpServerRequest as McpServerRequest,
    McpToolListChanged as McpToolListChanged,
    Outgoing as Outgoing,
)
from ._tools import (
    McpArguments as McpArguments,
    McpServerPlugin as McpServerPlugin,
    McpTool as McpTool,
    McpToolset as McpToolset,
    ToolFilter as ToolFilter,
    ToolProgress as ToolProgress,
    build_mcp_tools as build_mcp_tools,
    load_mcp_tools as load_mcp_tools,
    mcp_plugin_resolver as mcp_plugin_resolver,
)

__all__ = (
    "PROTOCOL_VERSIONS",
    "AuthorizationGrant",
    "AuthorizationServerMetadata",
    "AuthorizeRedirect",
    "CallToolResult",
    "ElicitationHandler",
    "ElicitationRequest",
    "ElicitationResult",
    "Implementation",
    "InitializeResult",
    "ListToolsResult",
    "McpArguments",
    "McpAuth",
    "McpAuthorizationError",
    "McpClientSession",
    "McpConnectionError",
    "McpDiscarded",
    "McpError",
    "McpEvent",
    "McpHttpClient",
    "McpHttpError",
    "McpOAuth",
    "McpPhase",
    "McpProgress",
    "McpProtocolError",
    "McpRequestFailed",
    "McpRequestRefused",
    "McpResponse",
    "McpRoot",
    "McpRpcError",
    "McpSampling",
    "McpServerNotification",
    "McpServerPlugin",
    "McpServerRequest",
    "McpSessionExpiredError",
    "McpTimeoutError",
    "McpTool",
    "McpToolInfo",
    "McpToolListChanged",
    "McpToolset",
    "McpVersionError",
    "MemoryTokenStore",
    "OAuthClientInfo",
    "OAuthFetch",
    "OAuthRequest",
    "OAuthResponse",
    "OAuthTokens",
    "Outgoing",
    "ProgressCallback",
    "ProtectedResourceMetadata",
    "RequestId",
    "SamplingHandler",
    "SamplingRequest",
    "ServerRequestHandlers",
    "SkippedMcpTool",
    "TokenStore",
    "ToolFilter",
    "ToolProgress",
    "WwwAuthenticate",
    "build_mcp_tools",
    "equip_mcp",
    "id_jag_exchange",
    "load_mcp_tools",
    "map_call_result",
    "map_content_block",
    "mcp_plugin_resolver",
    "open_mcp_client",
    "parse_www_authenticate",
    "transport_fetch",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
