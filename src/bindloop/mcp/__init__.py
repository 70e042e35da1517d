"""MCP: the client side, bindloop talking to a Model Context Protocol server — its streamable HTTP
client over the host's ``Transport`` (:class:`McpHttpClient`, :func:`open_mcp_client`), and a
server's tools as bindloop tools (:func:`load_mcp_tools`), equipped in an agent
(``bindloop.agent.equip_mcp``) or as a registry plugin (:class:`McpServerPlugin`); the protocol's
results and the client's errors.

The specialist areas are sub-namespaces, each with its full ``__all__``: :mod:`bindloop.mcp.auth`
(OAuth and the token stores), :mod:`bindloop.mcp.server_requests` (roots, sampling and elicitation
answered through the host's ports), :mod:`bindloop.mcp.features` (resources, prompts and
completion), :mod:`bindloop.mcp.tasks` (tool calls run as tasks), :mod:`bindloop.mcp.session` (the
sans-I/O client session, for a custom driver) and :mod:`bindloop.mcp.server` (bindloop tools served
to MCP clients, the protocol's decisions without I/O; its ASGI binding is
``bindloop.hosts.mcp_server.McpServerApp``).

See docs/mcp.md.
"""

from ._client_options import McpClientPorts as McpClientPorts, McpLimits as McpLimits
from ._content import map_call_result as map_call_result, map_content_block as map_content_block
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
    McpHttpClient as McpHttpClient,
    ProgressCallback as ProgressCallback,
    open_mcp_client as open_mcp_client,
)
from ._protocol import (
    MODERN_VERSIONS as MODERN_VERSIONS,
    PROTOCOL_VERSIONS as PROTOCOL_VERSIONS,
    CallToolResult as CallToolResult,
    DiscoverResult as DiscoverResult,
    Implementation as Implementation,
    InitializeResult as InitializeResult,
    ListToolsResult as ListToolsResult,
    McpToolInfo as McpToolInfo,
    RequestId as RequestId,
    SkippedMcpTool as SkippedMcpTool,
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
    "MODERN_VERSIONS",
    "PROTOCOL_VERSIONS",
    "CallToolResult",
    "Implementation",
    "InitializeResult",
    "ListToolsResult",
    "McpArguments",
    "McpClientPorts",
    "McpConnectionError",
    "DiscoverResult",
    "McpError",
    "McpHttpClient",
    "McpHttpError",
    "McpLimits",
    "McpProtocolError",
    "McpRpcError",
    "McpServerPlugin",
    "McpSessionExpiredError",
    "McpTimeoutError",
    "McpTool",
    "McpToolInfo",
    "McpToolset",
    "McpVersionError",
    "ProgressCallback",
    "RequestId",
    "SkippedMcpTool",
    "ToolFilter",
    "ToolProgress",
    "build_mcp_tools",
    "load_mcp_tools",
    "map_call_result",
    "map_content_block",
    "mcp_plugin_resolver",
    "open_mcp_client",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)

# The sub-namespaces load with the package, so each object reports its public home from the first
# import on.
from . import auth, features, server, server_requests, session, tasks  # noqa: E402, F401
