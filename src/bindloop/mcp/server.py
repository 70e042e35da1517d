"""bindloop as an MCP server, the protocol half with no I/O: :class:`McpServer` decides each POST of
the streamable HTTP transport (an :class:`McpReply` to send, or an :class:`McpCall` to run with
``run_call``); a served tool reads its :class:`McpToolContext` and may refuse a request with
:class:`McpRequestRefused`. The ASGI binding is ``bindloop.hosts.mcp_server.McpServerApp``.
See docs/mcp.md.
"""

from ._server import (
    McpCall as McpCall,
    McpReply as McpReply,
    McpServer as McpServer,
    McpToolContext as McpToolContext,
    ToolExceptionHook as ToolExceptionHook,
)
from ._errors import (
    McpRequestRefused as McpRequestRefused,
)

__all__ = (
    "McpCall",
    "McpReply",
    "McpRequestRefused",
    "McpServer",
    "McpToolContext",
    "ToolExceptionHook",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
