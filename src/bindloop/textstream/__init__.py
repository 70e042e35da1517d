"""The turn text stream a host shows: retractable text events for one turn as it streams
(:class:`TurnTextStream`), and the client reducer that folds them into what a viewer displays
(:class:`TurnStreamReducer`). See docs/textstream.md."""

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
from ._reducer import (
    ReduceOutcome as ReduceOutcome,
    TurnStreamReducer as TurnStreamReducer,
    TurnView as TurnView,
)

__all__ = (
    "TURN_RESET_REASONS",
    "TurnOutcome",
    "TurnResetEvent",
    "TurnResetReason",
    "TurnStreamEvent",
    "TurnStreamSink",
    "TurnTextEvent",
    "TurnTextStream",
    "create_turn_text_stream",
    "ReduceOutcome",
    "TurnStreamReducer",
    "TurnView",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
