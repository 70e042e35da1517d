"""bindloop as an MCP server, the protocol half with no I/O: :class:`McpServer` decides each POST of
the streamable HTTP transport (an :class:`McpReply` to send, or an :class:`McpCall` to run with
``run_call``); a served tool reads its :class:`McpToolContext` (a re-issued 2026-07-28 call's
answers as :class:`McpToolInput`) and may refuse a request with :class:`McpRequestRefused`.
:func:`answer_mcp_http` answers one HTTP request whole (an :class:`McpHttpAnswer`) for a
request/response host such as a Worker (:func:`decide_mcp_http`, :func:`mcp_http_streams` and
:func:`answer_mcp_call` are its halves, for a host that streams a call's progress as it
runs); :func:`mcp_post_refusal` and :func:`mcp_param_headers` are the transport checks and
header reading it shares with the streaming ASGI binding,
``bindloop.hosts.mcp.server.McpServerApp``.
See docs/mcp.md.
"""

from ._server import (
    McpToolInput as McpToolInput,
    McpCall as McpCall,
    McpReply as McpReply,
    McpServer as McpServer,
    McpToolContext as McpToolContext,
    ToolExceptionHook as ToolExceptionHook,
)
from ._errors import (
    McpRequestRefused as McpRequestRefused,
)
from ._server_http import (
    McpHttpAnswer as McpHttpAnswer,
    answer_mcp_call as answer_mcp_call,
    answer_mcp_http as answer_mcp_http,
    decide_mcp_http as decide_mcp_http,
    mcp_http_streams as mcp_http_streams,
    mcp_param_headers as mcp_param_headers,
    mcp_post_refusal as mcp_post_refusal,
)

__all__ = (
    "McpCall",
    "McpHttpAnswer",
    "McpReply",
    "McpRequestRefused",
    "McpServer",
    "McpToolContext",
    "McpToolInput",
    "ToolExceptionHook",
    "answer_mcp_call",
    "answer_mcp_http",
    "decide_mcp_http",
    "mcp_http_streams",
    "mcp_param_headers",
    "mcp_post_refusal",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
