"""Completion: the normalized stream events a wire yields, and their fold into one turn (tool-call
deltas accumulated into calls on the way)."""

from ._accumulator import (
    ToolCallAccumulator as ToolCallAccumulator,
    ToolCallDelta as ToolCallDelta,
    create_tool_call_accumulator as create_tool_call_accumulator,
)
from ._collect import (
    TurnCollector as TurnCollector,
    collect_turn as collect_turn,
    collect_turn_async as collect_turn_async,
    fold_usage as fold_usage,
)
from ._errors import ModelStreamError as ModelStreamError, ToolCallDeltaError as ToolCallDeltaError
from ._events import (
    FINISH_REASONS as FINISH_REASONS,
    ErrorEvent as ErrorEvent,
    ExtraEvent as ExtraEvent,
    ProviderItemEvent as ProviderItemEvent,
    FinishEvent as FinishEvent,
    FinishReason as FinishReason,
    ReasoningEvent as ReasoningEvent,
    StreamEvent as StreamEvent,
    TextEvent as TextEvent,
    ToolCallChunk as ToolCallChunk,
    ToolCallEvent as ToolCallEvent,
    UsageEvent as UsageEvent,
)

__all__ = (
    "ErrorEvent",
    "ExtraEvent",
    "ProviderItemEvent",
    "FINISH_REASONS",
    "FinishEvent",
    "FinishReason",
    "ModelStreamError",
    "ReasoningEvent",
    "StreamEvent",
    "TextEvent",
    "ToolCallAccumulator",
    "ToolCallChunk",
    "ToolCallDelta",
    "ToolCallDeltaError",
    "ToolCallEvent",
    "TurnCollector",
    "UsageEvent",
    "collect_turn",
    "collect_turn_async",
    "create_tool_call_accumulator",
    "fold_usage",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
