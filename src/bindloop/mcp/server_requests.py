"""Requests an MCP server sends the client, answered through ports the host fills
(:class:`ServerRequestHandlers`): ``roots/list`` (:class:`McpRoot`), ``sampling/createMessage``
(:class:`McpSampling` over a model, or a :data:`SamplingHandler`) and ``elicitation/create``
(an :data:`ElicitationHandler`, or :class:`PendingElicitations` to answer later). A server that
needs a URL elicitation before a call raises :class:`McpUrlElicitationRequired`. See docs/mcp.md.
"""

from ._serve import (
    ElicitationHandler as ElicitationHandler,
    ElicitationRequest as ElicitationRequest,
    ElicitationResult as ElicitationResult,
    McpRoot as McpRoot,
    McpSampling as McpSampling,
    SamplingHandler as SamplingHandler,
    SamplingRequest as SamplingRequest,
    ServerRequestHandlers as ServerRequestHandlers,
)
from ._pending import (
    PendingElicitation as PendingElicitation,
    PendingElicitations as PendingElicitations,
)
from ._errors import (
    ElicitationContentError as ElicitationContentError,
    ElicitationNotPendingError as ElicitationNotPendingError,
    McpUrlElicitationRequired as McpUrlElicitationRequired,
)

__all__ = (
    "ElicitationContentError",
    "ElicitationHandler",
    "ElicitationNotPendingError",
    "ElicitationRequest",
    "ElicitationResult",
    "McpRoot",
    "McpSampling",
    "McpUrlElicitationRequired",
    "PendingElicitation",
    "PendingElicitations",
    "SamplingHandler",
    "SamplingRequest",
    "ServerRequestHandlers",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
