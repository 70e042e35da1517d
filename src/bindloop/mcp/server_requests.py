"""Requests an MCP server sends the client, answered through ports the host fills
(:class:`ServerRequestHandlers`): ``roots/list`` (:class:`McpRoot`), ``sampling/createMessage``
(:class:`McpSampling` over a model, or a :data:`SamplingHandler`) and ``elicitation/create``
(an :data:`ElicitationHandler`, or :class:`PendingElicitations` to answer later). A 2026-07-28
call's ``input_required`` kept in the run's checkpoint (``PendingElicitations(durable=True)``,
raising :class:`McpInputPending` inside the call) is a :class:`PendingMcpInput`, listed with
:func:`pending_mcp_inputs` and answered once with :func:`claim_mcp_input` /
:func:`answer_mcp_input`. A server that needs a URL elicitation before a call raises
:class:`McpUrlElicitationRequired`. See docs/mcp.md.
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
    McpInputPending as McpInputPending,
    ElicitationNotPendingError as ElicitationNotPendingError,
    McpUrlElicitationRequired as McpUrlElicitationRequired,
)
from ._deferred import (
    PendingMcpInput as PendingMcpInput,
    answer_mcp_input as answer_mcp_input,
    claim_mcp_input as claim_mcp_input,
    pending_mcp_inputs as pending_mcp_inputs,
)

__all__ = (
    "ElicitationContentError",
    "ElicitationHandler",
    "ElicitationNotPendingError",
    "ElicitationRequest",
    "ElicitationResult",
    "McpInputPending",
    "McpRoot",
    "McpSampling",
    "McpUrlElicitationRequired",
    "PendingElicitation",
    "PendingElicitations",
    "PendingMcpInput",
    "SamplingHandler",
    "SamplingRequest",
    "ServerRequestHandlers",
    "answer_mcp_input",
    "claim_mcp_input",
    "pending_mcp_inputs",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
