"""The one model protocol: what every model is (the wire's adapters and routes, wrapped models,
the scripted models of ``bindloop.testing``) and what the agent, compaction's summaries and MCP
sampling call, and the loop's ``model`` port; the request a call carries; the fold of a model's
stream. See docs/model.md."""

from ._model import (
    Model as Model,
    StreamModel as StreamModel,
    fold_events as fold_events,
    turn_events as turn_events,
    unpriced as unpriced,
)
from ._request import (
    ForcedTool as ForcedTool,
    JsonSchemaFormat as JsonSchemaFormat,
    ModelRequest as ModelRequest,
    StructuredOutputMode as StructuredOutputMode,
    ToolChoice as ToolChoice,
)

__all__ = (
    "ForcedTool",
    "JsonSchemaFormat",
    "Model",
    "ModelRequest",
    "StreamModel",
    "StructuredOutputMode",
    "ToolChoice",
    "fold_events",
    "turn_events",
    "unpriced",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
