"""What the protocol encoders read: the completion stream events of each model turn, the agent-only
kinds, and the few host-level facts no model stream carries (a tool's outcome, a data part, state).

The agent's ``on_stream`` events reach an encoder through one adapter, :func:`agent_event_input`,
which splits an agent event into ``(turn_index, event)`` with ``event`` a completion event or an
agent-only kind. Everything past that adapter is written against the completion events and the
agent-only kinds' own fields (never their ``turn_index``), and the encoders import those kinds from
here: a change of the agent event shape changes this module only.
"""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec

from ..agent import (
    AgentStreamEvent,
    StructuredDataEvent,
    ToolCallDoneEvent,
    TurnDoneEvent,
    TurnFailedEvent,
    TurnStartEvent,
)
from ..completion import StreamEvent
from ..textstream import TurnResetEvent, TurnTextEvent
from ..contracts import ToolError, ToolResult, ToolSuspend

__all__ = (
    "AgentOnlyEvent",
    "DataEvent",
    "EncoderInput",
    "StateDeltaEvent",
    "StateSnapshotEvent",
    "ToolDeniedEvent",
    "ToolOutputEvent",
    "agent_event_input",
    # the agent-only kinds, re-exported for the encoders (their one import site)
    "StructuredDataEvent",
    "ToolCallDoneEvent",
    "TurnDoneEvent",
    "TurnFailedEvent",
    "TurnStartEvent",
)


class ToolOutputEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                      tag="tool_output"):
    """What one tool call came back as (the host sees it in a tool middleware). A
    :class:`~bindloop.contracts.ToolSuspend` with ``approval_id`` set is an approval request; without
    it, a question for the user (``waiting_for_reply``) or a resume the tool scheduled itself."""

    tool_call_id: str
    outcome: ToolResult | ToolError | ToolSuspend
    approval_id: str | None = None


class ToolDeniedEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                      tag="tool_denied"):
    """The user refused a call that asked for approval; it never ran."""

    tool_call_id: str
    reason: str | None = None


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


AgentOnlyEvent: TypeAlias = (
    TurnStartEvent | ToolCallDoneEvent | StructuredDataEvent | TurnDoneEvent | TurnFailedEvent
)
"""The agent's own kinds an encoder reads: a turn starts, a call is assembled, the structured answer
so far, the turn is folded, the turn failed."""

EncoderInput: TypeAlias = (
    StreamEvent | TurnTextEvent | TurnResetEvent | AgentOnlyEvent | ToolOutputEvent
    | ToolDeniedEvent | DataEvent | StateSnapshotEvent | StateDeltaEvent
)
"""One thing an encoder is fed: a completion event of a turn, a turn text stream event, an agent-only
kind or a host-level fact."""


def agent_event_input(event: AgentStreamEvent) -> tuple[int, EncoderInput]:
    """The one adapter from the agent's stream events: the envelope's ``(turn_index, event)``, the
    event being a completion event as the model streamed it or an agent-only kind."""
    return event.turn_index, event.event
