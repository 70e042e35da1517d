"""The MCP client session as a state machine with no I/O, for a custom driver:
:class:`McpClientSession` gives the bytes of each request and turns every message the server sends
into events (:data:`McpEvent`); messages it decides to send itself queue up as :class:`Outgoing`.
:class:`~bindloop.mcp.McpHttpClient` is the driver bindloop ships. See docs/mcp.md.
"""

from ._session import (
    McpClientSession as McpClientSession,
    McpDiscarded as McpDiscarded,
    McpElicitationComplete as McpElicitationComplete,
    McpEra as McpEra,
    McpEvent as McpEvent,
    McpInputRequired as McpInputRequired,
    McpPhase as McpPhase,
    McpProgress as McpProgress,
    McpRequestFailed as McpRequestFailed,
    McpResponse as McpResponse,
    McpServerNotification as McpServerNotification,
    McpServerRequest as McpServerRequest,
    McpToolListChanged as McpToolListChanged,
    Outgoing as Outgoing,
)

__all__ = (
    "McpClientSession",
    "McpDiscarded",
    "McpElicitationComplete",
    "McpEra",
    "McpEvent",
    "McpInputRequired",
    "McpPhase",
    "McpProgress",
    "McpRequestFailed",
    "McpResponse",
    "McpServerNotification",
    "McpServerRequest",
    "McpToolListChanged",
    "Outgoing",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
