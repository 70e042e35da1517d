"""Streaming and completion: the normalized stream events and their fold into a turn, tool-call
accumulation and argument parsing, the stall watchdog, the retractable turn text stream with its
client reducer, and partial JSON for live structured output."""

from ._accumulator import (
    ToolCallAccumulator as ToolCallAccumulator,
    ToolCallDelta as ToolCallDelta,
    create_tool_call_accumulator as create_tool_call_accumulator,
)
from ._errors import ToolCallDeltaError as ToolCallDeltaError
from ._arguments import (
    ParsedArguments as ParsedArguments,
    ToolCallArguments as ToolCallArguments,
    UnparseableArguments as UnparseableArguments,
    UnsupportedToolCallType as UnsupportedToolCallType,
    parse_tool_call_arguments as parse_tool_call_arguments,
    read_tool_arguments as read_tool_arguments,
)
from ._collect import (
    TurnCollector as TurnCollector,
    collect_turn as collect_turn,
    collect_turn_async as collect_turn_async,
)
from ._errors import ModelStreamError as ModelStreamError
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
from ._partial_json import (
    PartialJson as PartialJson,
    PartialJsonParser as PartialJsonParser,
    PartialJsonState as PartialJsonState,
    parse_partial_json as parse_partial_json,
)
from ._reducer import (
    ReduceOutcome as ReduceOutcome,
    TurnStreamReducer as TurnStreamReducer,
    TurnView as TurnView,
)
from ._text_stream import (
    TURN_RESET_REASONS as TURN_RESET_REASONS,
    TurnOutcome as TurnOutcome,
    TurnResetEvent as TurnResetEvent,
    TurnResetReason as TurnResetReason,
    TurnStreamEvent as TurnStreamEvent,
    TurnStreamSink as TurnStreamSink,
    TurnTextEvent as TurnTextEvent,
    TurnTextStream as TurnTextStream,
    create_turn_text_stream as create_turn_text_stream,
)
from ._watchdog import (
    ChunkKind as ChunkKind,
    StallKind as StallKind,
    StreamBudgets as StreamBudgets,
    StreamStall as StreamStall,
    StreamWatchdog as StreamWatchdog,
    create_stream_watchdog as create_stream_watchdog,
)
from ._errors import StreamStalledError as StreamStalledError

__all__ = (
    "ChunkKind",
    "ErrorEvent",
    "ExtraEvent",
    "ProviderItemEvent",
    "FINISH_REASONS",
    "FinishEvent",
    "FinishReason",
    "ModelStreamError",
    "ParsedArguments",
    "PartialJson",
    "PartialJsonParser",
    "PartialJsonState",
    "ReasoningEvent",
    "ReduceOutcome",
    "StallKind",
    "StreamBudgets",
    "StreamEvent",
    "StreamStall",
    "StreamStalledError",
    "StreamWatchdog",
    "TURN_RESET_REASONS",
    "TextEvent",
    "ToolCallAccumulator",
    "ToolCallArguments",
    "ToolCallChunk",
    "ToolCallDelta",
    "ToolCallDeltaError",
    "ToolCallEvent",
    "TurnCollector",
    "TurnOutcome",
    "TurnResetEvent",
    "TurnResetReason",
    "TurnStreamEvent",
    "TurnStreamReducer",
    "TurnStreamSink",
    "TurnTextEvent",
    "TurnTextStream",
    "TurnView",
    "UnparseableArguments",
    "UnsupportedToolCallType",
    "UsageEvent",
    "collect_turn",
    "collect_turn_async",
    "create_stream_watchdog",
    "create_tool_call_accumulator",
    "create_turn_text_stream",
    "parse_partial_json",
    "parse_tool_call_arguments",
    "read_tool_arguments",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
