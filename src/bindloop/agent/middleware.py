"""Middleware onions around a model call, a tool call, an agent and a batch of tool calls.

Every list is an onion read left to right: the first middleware is the outermost layer. Equip them
with :func:`~bindloop.agent.augment_model`, :func:`~bindloop.agent.augment_tool`,
:func:`~bindloop.agent.augment_agent` and :func:`~bindloop.agent.equip_tool_call_loop_middleware`;
:func:`create_retry_middleware` retries a model call.
"""

from ._middleware import (
    AgentMiddleware as AgentMiddleware,
    AgentMiddlewareContext as AgentMiddlewareContext,
    ModelMiddleware as ModelMiddleware,
    ToolCallLoopContext as ToolCallLoopContext,
    ToolCallLoopMiddleware as ToolCallLoopMiddleware,
    ToolMiddleware as ToolMiddleware,
    ToolOutput as ToolOutput,
    ToolTurn as ToolTurn,
    WrappedModel as WrappedModel,
)
from ._retry import (
    create_retry_middleware as create_retry_middleware,
)

__all__ = (
    "AgentMiddleware",
    "AgentMiddlewareContext",
    "ModelMiddleware",
    "ToolCallLoopContext",
    "ToolCallLoopMiddleware",
    "ToolMiddleware",
    "ToolOutput",
    "ToolTurn",
    "WrappedModel",
    "create_retry_middleware",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
