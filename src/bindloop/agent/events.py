"""What a run reports as it goes.

The stream (``on_stream``): each event an :class:`AgentStreamEvent` envelope around one member of
:data:`RunEvent` -- a completion event, a turn's start, end or failure, a tool call requested,
started and finished, an approval requested and decided, a checkpoint saved, structured data.
The trace: :class:`TraceEvent` spans named after OpenTelemetry's GenAI conventions, handed to the
:class:`TraceEmitter` a run is given (``run_with(event_bus=)``), with the trace id, parent span and
attributes of ``run_with(trace=TraceOptions(...))``.
"""

from ._stream import (
    AgentStreamEvent as AgentStreamEvent,
    ApprovalDecidedEvent as ApprovalDecidedEvent,
    ApprovalRequestedEvent as ApprovalRequestedEvent,
    CheckpointSavedEvent as CheckpointSavedEvent,
    RunEvent as RunEvent,
    StructuredDataEvent as StructuredDataEvent,
    ToolCallDoneEvent as ToolCallDoneEvent,
    ToolFinishedEvent as ToolFinishedEvent,
    ToolStartedEvent as ToolStartedEvent,
    TurnDoneEvent as TurnDoneEvent,
    TurnFailedEvent as TurnFailedEvent,
    TurnStartEvent as TurnStartEvent,
)
from ._trace import (
    TraceEmitter as TraceEmitter,
    TraceEvent as TraceEvent,
    TraceOptions as TraceOptions,
)

__all__ = (
    "AgentStreamEvent",
    "ApprovalDecidedEvent",
    "ApprovalRequestedEvent",
    "CheckpointSavedEvent",
    "RunEvent",
    "StructuredDataEvent",
    "ToolCallDoneEvent",
    "ToolFinishedEvent",
    "ToolStartedEvent",
    "TraceEmitter",
    "TraceEvent",
    "TraceOptions",
    "TurnDoneEvent",
    "TurnFailedEvent",
    "TurnStartEvent",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
