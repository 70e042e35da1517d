"""AG-UI 1.0 events and messages as frozen Structs whose JSON is the wire's (``type`` / ``role`` as
the tag, camelCase fields, absent optionals left out)."""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias

import msgspec

__all__ = (
    "AG_UI_HEADERS",
    "AgUiEvent",
    "AgUiInterrupt",
    "AgUiMessage",
    "AgUiToolCall",
    "encode_ag_ui_event",
)

AG_UI_HEADERS: Final[tuple[tuple[str, str], ...]] = (
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("connection", "keep-alive"),
    ("x-accel-buffering", "no"),
)


class _Wire(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    pass


# -- messages (MESSAGES_SNAPSHOT, RunAgentInput.messages) -----------------------------------------

class AgUiFunction(_Wire, frozen=True):
    name: str
    arguments: str


class AgUiToolCall(_Wire, frozen=True):
    id: str
    function: AgUiFunction
    type: Literal["function"] = "function"


class _Message(_Wire, frozen=True, tag_field="role"):
    id: str


class AgUiSystemMessage(_Message, frozen=True, tag="system"):
    content: str
    name: str | None = None


class AgUiDeveloperMessage(_Message, frozen=True, tag="developer"):
    content: str
    name: str | None = None


class AgUiUserMessage(_Message, frozen=True, tag="user"):
    content: str | list[dict[str, Any]]
    name: str | None = None


class AgUiAssistantMessage(_Message, frozen=True, tag="assistant"):
    content: str | None = None
    tool_calls: tuple[AgUiToolCall, ...] | None = None
    name: str | None = None


class AgUiToolMessage(_Message, frozen=True, tag="tool"):
    content: str | list[dict[str, Any]]
    tool_call_id: str
    error: str | None = None


class AgUiReasoningMessage(_Message, frozen=True, tag="reasoning"):
    content: str
    encrypted_value: str | None = None


class AgUiActivityMessage(_Message, frozen=True, tag="activity"):
    activity_type: str
    content: dict[str, Any]


AgUiMessage: TypeAlias = (
    AgUiSystemMessage | AgUiDeveloperMessage | AgUiUserMessage | AgUiAssistantMessage
    | AgUiToolMessage | AgUiReasoningMessage | AgUiActivityMessage
)


# -- events -----------------------------------------------------------------------------------------

class _Event(_Wire, frozen=True, tag_field="type"):
    pass


class RunStarted(_Event, frozen=True, tag="RUN_STARTED"):
    thread_id: str
    run_id: str
    parent_run_id: str | None = None


class AgUiInterrupt(_Wire, frozen=True):
    """Something the run needs before it can go on: an approval (``reason="approval"``) or an
    answer (``reason="waiting_for_reply"``), tied to the tool call that asked."""

    id: str
    reason: str
    message: str | None = None
    tool_call_id: str | None = None


class OutcomeSuccess(_Wire, frozen=True, tag_field="type", tag="success"):
    pending_tool_call_ids: tuple[str, ...] | None = None


class OutcomeInterrupt(_Wire, frozen=True, tag_field="type", tag="interrupt"):
    interrupts: tuple[AgUiInterrupt, ...]


class OutcomeCancelled(_Wire, frozen=True, tag_field="type", tag="cancelled"):
    pass


class AgUiTokenUsage(_Wire, frozen=True):
    """AG-UI's ``TokenUsage``: the two totals and their sum; the details (cache reads, cache
    writes, reasoning) are parts of the totals, present only when reported."""

    input_tokens: int
    output_tokens: int
    total_tokens: int
    reasoning_tokens: int | None = None
    cached_input_tokens: int | None = None
    cache_write_input_tokens: int | None = None
    provider: str | None = None
    model: str | None = None


class RunFinished(_Event, frozen=True, tag="RUN_FINISHED"):
    thread_id: str
    run_id: str
    result: Any = None
    outcome: OutcomeSuccess | OutcomeInterrupt | OutcomeCancelled | None = None
    usage: tuple[AgUiTokenUsage, ...] | None = None


class RunError(_Event, frozen=True, tag="RUN_ERROR"):
    message: str
    code: str | None = None


class StepStarted(_Event, frozen=True, tag="STEP_STARTED"):
    step_name: str


class StepFinished(_Event, frozen=True, tag="STEP_FINISHED"):
    step_name: str


class TextMessageStart(_Event, frozen=True, tag="TEXT_MESSAGE_START"):
    message_id: str
    role: Literal["assistant"] = "assistant"


class TextMessageContent(_Event, frozen=True, tag="TEXT_MESSAGE_CONTENT"):
    message_id: str
    delta: str


class TextMessageEnd(_Event, frozen=True, tag="TEXT_MESSAGE_END"):
    message_id: str


class ToolCallStart(_Event, frozen=True, tag="TOOL_CALL_START"):
    tool_call_id: str
    tool_call_name: str
    parent_message_id: str | None = None


class ToolCallArgs(_Event, frozen=True, tag="TOOL_CALL_ARGS"):
    tool_call_id: str
    delta: str


class ToolCallEnd(_Event, frozen=True, tag="TOOL_CALL_END"):
    tool_call_id: str


class ToolCallResult(_Event, frozen=True, tag="TOOL_CALL_RESULT"):
    message_id: str
    tool_call_id: str
    content: str
    role: Literal["tool"] = "tool"


class StateSnapshot(_Event, frozen=True, tag="STATE_SNAPSHOT"):
    snapshot: Any


class StateDelta(_Event, frozen=True, tag="STATE_DELTA"):
    delta: tuple[dict[str, Any], ...]


class MessagesSnapshot(_Event, frozen=True, tag="MESSAGES_SNAPSHOT"):
    messages: tuple[AgUiMessage, ...]


class ReasoningStart(_Event, frozen=True, tag="REASONING_START"):
    message_id: str


class ReasoningMessageStart(_Event, frozen=True, tag="REASONING_MESSAGE_START"):
    message_id: str
    role: Literal["reasoning"]  # required on the wire (a default would be left out)


class ReasoningMessageContent(_Event, frozen=True, tag="REASONING_MESSAGE_CONTENT"):
    message_id: str
    delta: str


class ReasoningMessageEnd(_Event, frozen=True, tag="REASONING_MESSAGE_END"):
    message_id: str


class ReasoningEnd(_Event, frozen=True, tag="REASONING_END"):
    message_id: str


class Custom(_Event, frozen=True, tag="CUSTOM"):
    name: str
    value: Any


AgUiEvent: TypeAlias = (
    RunStarted | RunFinished | RunError | StepStarted | StepFinished | TextMessageStart
    | TextMessageContent | TextMessageEnd | ToolCallStart | ToolCallArgs | ToolCallEnd
    | ToolCallResult | StateSnapshot | StateDelta | MessagesSnapshot | ReasoningStart
    | ReasoningMessageStart | ReasoningMessageContent | ReasoningMessageEnd | ReasoningEnd | Custom
)

_ENCODER: Final = msgspec.json.Encoder()


def encode_ag_ui_event(event: AgUiEvent) -> bytes:
    """The event's wire JSON (compact; the same bytes on every runtime)."""
    return _ENCODER.encode(event)
