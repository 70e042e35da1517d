"""What the protocol encoders read: the agent's run events (:data:`bindloop.agent.events.RunEvent`: the
completion stream events of each model turn, the turns' edges, tool calls requested, started and
finished, approvals requested and decided, checkpoints saved) and the few host-level facts no run
carries (a data part, state), plus a turn text stream's events.

The agent's ``on_stream`` events reach an encoder through one adapter, :func:`agent_event_input`,
which splits an envelope into ``(turn_index, event)``. Everything past that adapter is written
against the events' own fields, and the encoders import the agent's kinds from here: a change of
the agent event shape changes this module only.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

from ..agent.events import (
    AgentStreamEvent,
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    CheckpointSavedEvent,
    RunEvent,
    StructuredDataEvent,
    ToolCallDoneEvent,
    ToolFinishedEvent,
    ToolStartedEvent,
    TurnDoneEvent,
    TurnFailedEvent,
    TurnStartEvent,
)
from ..textstream import TurnResetEvent, TurnTextEvent

__all__ = (
    "DataEvent",
    "EncoderInput",
    "StateDeltaEvent",
    "StateSnapshotEvent",
    "agent_event_input",
    # the agent's kinds, re-exported for the encoders (their one import site)
    "ApprovalDecidedEvent",
    "ApprovalRequestedEvent",
    "CheckpointSavedEvent",
    "StructuredDataEvent",
    "ToolCallDoneEvent",
    "ToolFinishedEvent",
    "ToolStartedEvent",
    "TurnDoneEvent",
    "TurnFailedEvent",
    "TurnStartEvent",
)


class DataEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="data"):
    """Application data for the UI. ``name`` is the part's kind (the AI SDK's ``data-<name>``, AG-UI's
    ``CUSTOM`` name); a later event with the same ``name`` and ``id`` replaces the earlier one in an AI
    SDK message; ``transient`` data is shown once and not kept in the message."""

    name: str
    data: Any
    id: str | None = None
    transient: bool = False


class StateSnapshotEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                         tag="state_snapshot"):
    """The whole shared state (any JSON value)."""

    state: Any


class StateDeltaEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                      tag="state_delta"):
    """An RFC 6902 JSON Patch against the last state (a list of operation objects)."""

    patch: tuple[dict[str, Any], ...]


EncoderInput: TypeAlias = (
    RunEvent | TurnTextEvent | TurnResetEvent | DataEvent | StateSnapshotEvent | StateDeltaEvent
)
"""One thing an encoder is fed: a run event, a turn text stream event or a host-level fact."""

_UNTURNED = (ToolStartedEvent, ToolFinishedEvent, ApprovalRequestedEvent, ApprovalDecidedEvent,
             CheckpointSavedEvent)


def agent_event_input(event: AgentStreamEvent) -> tuple[int | None, EncoderInput]:
    """The one adapter from the agent's stream events: the envelope's ``(turn_index, event)``.
    A tool, approval or checkpoint event belongs to no model turn of its own (its envelope names
    the latest one): its turn index is ``None``, so it never opens a step."""
    inner = event.event
    return (None if isinstance(inner, _UNTURNED) else event.turn_index), inner
