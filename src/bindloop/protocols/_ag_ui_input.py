"""AG-UI's ``RunAgentInput`` (the POST body ``HttpAgent`` sends) decoded into bindloop's transcript,
the tools the client declares and the shared state."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from ..contracts import (
    AssistantMessage,
    FilePart,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
    decode_json_bounded,
    encode_tool_error,
)
from ._ag_ui_types import (
    AgUiActivityMessage,
    AgUiAssistantMessage,
    AgUiDeveloperMessage,
    AgUiMessage,
    AgUiReasoningMessage,
    AgUiSystemMessage,
    AgUiToolMessage,
    AgUiUserMessage,
)
from ._errors import ProtocolRequestError

__all__ = ("AgUiResume", "AgUiRunInput", "ag_ui_messages_to_transcript", "decode_run_agent_input")

MAX_AG_UI_REQUEST_BYTES = 1024 * 1024
MAX_AG_UI_REQUEST_DEPTH = 64


class _Wire(msgspec.Struct, frozen=True, kw_only=True, rename="camel", omit_defaults=True):
    pass


class AgUiTool(_Wire, frozen=True):
    name: str
    description: str
    parameters: Any = None


class AgUiContext(_Wire, frozen=True):
    description: str
    value: str


class AgUiResume(_Wire, frozen=True):
    """An answer to one interrupt of the run this one continues."""

    interrupt_id: str
    status: Literal["resolved", "cancelled"]
    payload: Any = None


class _RunAgentInput(_Wire, frozen=True, forbid_unknown_fields=False):
    thread_id: str
    run_id: str
    messages: tuple[AgUiMessage, ...]
    protocol_version: str | None = None
    parent_run_id: str | None = None
    state: Any = None
    tools: tuple[AgUiTool, ...] = ()
    context: tuple[AgUiContext, ...] = ()
    forwarded_props: Any = None
    resume: tuple[AgUiResume, ...] = ()


class AgUiRunInput(msgspec.Struct, frozen=True, kw_only=True):
    """A decoded ``RunAgentInput``: ``transcript`` is the canonical form of ``messages``; ``tools``
    the client-declared tools (frontend tools: the client runs them and sends the result back as a
    tool message on the next run); ``context`` the ambient ``(description, value)`` pairs."""

    thread_id: str
    run_id: str
    messages: tuple[AgUiMessage, ...]
    transcript: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...] = ()
    state: Any = None
    context: tuple[tuple[str, str], ...] = ()
    resume: tuple[AgUiResume, ...] = ()
    forwarded_props: Any = None
    parent_run_id: str | None = None


def decode_run_agent_input(body: bytes | str, *, max_bytes: int = MAX_AG_UI_REQUEST_BYTES,
                           max_depth: int = MAX_AG_UI_REQUEST_DEPTH) -> AgUiRunInput:
    """Read a ``POST /ag-ui`` body. Raises :class:`~bindloop.contracts.JsonBoundsError` (too
    large, too deep, not JSON, not an object) or :class:`ProtocolRequestError` naming the field."""
    raw = decode_json_bounded(body, max_bytes=max_bytes, max_depth=max_depth, require_object=True)
    try:
        run = msgspec.convert(raw, _RunAgentInput)
    except msgspec.ValidationError as exc:
        text = str(exc)
        path = text.rsplit("at `", 1)[-1].rstrip("`") if "at `" in text else "$"
        raise ProtocolRequestError(f"not a RunAgentInput: {text}", field=path) from None
    if not run.thread_id or not run.run_id:
        raise ProtocolRequestError("threadId and runId must be non-empty", field="$.threadId")
    tools = []
    for i, t in enumerate(run.tools):
        params = t.parameters if isinstance(t.parameters, dict) else {"type": "object",
                                                                       "properties": {}}
        if t.parameters is not None and not isinstance(t.parameters, dict):
            raise ProtocolRequestError("a tool's parameters must be a JSON Schema object",
                                       field=f"$.tools[{i}].parameters")
        tools.append(ToolDefinition(name=t.name, description=t.description, parameters=params))
    return AgUiRunInput(
        thread_id=run.thread_id, run_id=run.run_id, messages=run.messages,
        transcript=ag_ui_messages_to_transcript(run.messages), tools=tuple(tools),
        state=run.state, context=tuple((c.description, c.value) for c in run.context),
        resume=run.resume, forwarded_props=run.forwarded_props, parent_run_id=run.parent_run_id)


def _user_content(content: str | list[dict[str, Any]], where: str) -> str | tuple[
        TextPart | ImagePart | FilePart, ...]:
    if isinstance(content, str):
        return content
    parts: list[TextPart | ImagePart | FilePart] = []
    for j, p in enumerate(content):
        kind = p.get("type")
        if kind == "text" and isinstance(p.get("text"), str):
            parts.append(TextPart(text=p["text"]))
            continue
        source = p.get("source")
        if not isinstance(source, dict) or not isinstance(source.get("value"), str):
            raise ProtocolRequestError("a content part needs text, or a source with a value",
                                       field=f"{where}.content[{j}]")
        mime = source.get("mimeType") if isinstance(source.get("mimeType"), str) else None
        value = source["value"]
        url = value if source.get("type") == "url" else None
        data = value if source.get("type") == "data" else None
        file_id = value if source.get("type") == "file" else None
        if kind == "image" and file_id is None:
            parts.append(ImagePart(url=url, data=data, media_type=mime))
        else:
            parts.append(FilePart(url=url, data=data, file_id=file_id, media_type=mime))
    if all(isinstance(p, TextPart) for p in parts):
        return "".join(p.text for p in parts if isinstance(p, TextPart))
    return tuple(parts)


def ag_ui_messages_to_transcript(messages: tuple[AgUiMessage, ...]) -> tuple[Message, ...]:
    """AG-UI messages as the canonical transcript. Developer messages become system messages;
    reasoning and activity messages are UI-only (they carry no provider signature to send back)
    and are left out; a tool message with ``error`` becomes an error tool message, and takes its
    call's tool name (AG-UI's tool messages carry none)."""
    out: list[Message] = []
    names: dict[str, str] = {}  # a tool message carries no name: its call's, as the model saw it
    for i, m in enumerate(messages):
        where = f"$.messages[{i}]"
        if isinstance(m, (AgUiSystemMessage, AgUiDeveloperMessage)):
            out.append(SystemMessage(content=m.content))
        elif isinstance(m, AgUiUserMessage):
            out.append(UserMessage(content=_user_content(m.content, where), name=m.name))
        elif isinstance(m, AgUiAssistantMessage):
            calls = tuple(ToolCall(id=c.id, name=c.function.name, arguments=c.function.arguments)
                          for c in (m.tool_calls or ()))
            names.update((c.id, c.name) for c in calls)
            if m.content or calls:
                out.append(AssistantMessage(content=m.content or None, tool_calls=calls))
        elif isinstance(m, AgUiToolMessage):
            text = m.content if isinstance(m.content, str) else "".join(
                str(p.get("text", "")) for p in m.content if p.get("type") == "text")
            name = names.get(m.tool_call_id)
            if m.error is not None:
                out.append(ToolMessage(tool_call_id=m.tool_call_id, is_error=True, name=name,
                                       content=encode_tool_error(m.error)))
            else:
                out.append(ToolMessage(tool_call_id=m.tool_call_id, content=text, name=name))
        elif isinstance(m, (AgUiReasoningMessage, AgUiActivityMessage)):
            continue
    return tuple(out)
