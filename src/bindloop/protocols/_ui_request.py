"""The AI SDK chat request (``DefaultChatTransport``'s POST body) decoded into bindloop's transcript.

The body is ``{"id", "messages", "trigger", "messageId", ...}`` where ``messages`` are UI messages
(``{id, role, parts}``). :func:`decode_ui_chat_request` reads it with the size and depth bounded
before any recursive parse, then :func:`ui_messages_to_transcript` folds the parts the way the AI
SDK's own ``convertToModelMessages`` does: an assistant message splits into one assistant turn per
``step-start``, each followed by the tool messages of the calls it answered (client-side tool
results and denials included). A call the client approved or refused but that has not run is
reported as a :class:`ToolApproval`, for the host to act on; a call with no answer at all is left
unanswered (the host heals or answers it).

Both AI SDK majors' messages are read (6 and 7 send the same body): 7's ``steering-message`` part (a
user message added while the assistant message was generated) becomes a user message between the
steps around it, and a call that failed before it ran (``output-error`` after a
``tool-input-error``) keeps the arguments the model wrote, whether they come back as 7's ``input``
or 6's ``rawInput``.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

import msgspec

from ..contracts import (
    AssistantMessage,
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
    decode_json_bounded,
    encode_tool_error,
)
from ._errors import ProtocolRequestError

__all__ = (
    "ToolApproval",
    "UIChatRequest",
    "UIChatTrigger",
    "decode_ui_chat_request",
    "ui_messages_to_transcript",
)

UIChatTrigger: TypeAlias = Literal["submit-message", "regenerate-message"]

MAX_UI_REQUEST_BYTES = 1024 * 1024
"""A chat request carries the whole conversation: 1 MiB by default (a host may lower it)."""
MAX_UI_REQUEST_DEPTH = 64

_ENC = msgspec.json.Encoder()


class ToolApproval(msgspec.Struct, frozen=True, kw_only=True):
    """The user's answer to a ``tool-approval-request``: the call it names has not run yet."""

    approval_id: str
    tool_call_id: str
    tool_name: str
    arguments: str
    approved: bool
    reason: str | None = None


class UIChatRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A decoded chat request. ``messages`` are the UI messages as sent (plain JSON objects, for a
    host that stores them); ``transcript`` their canonical form; ``approvals`` the approval answers
    still to apply; ``continues`` the id of the trailing assistant message the response must go on
    building (a client tool result or an approval was added to it), else ``None``."""

    id: str
    trigger: UIChatTrigger
    message_id: str | None
    messages: tuple[dict[str, Any], ...]
    transcript: tuple[Message, ...]
    approvals: tuple[ToolApproval, ...] = ()
    continues: str | None = None
    body: dict[str, Any] = msgspec.field(default_factory=dict)


def _str(value: Any, where: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ProtocolRequestError(f"{where} must be a string", field=where)
    return value


def decode_ui_chat_request(body: bytes | str, *, max_bytes: int = MAX_UI_REQUEST_BYTES,
                           max_depth: int = MAX_UI_REQUEST_DEPTH) -> UIChatRequest:
    """Read a ``POST /api/chat`` body. Raises :class:`~bindloop.contracts.JsonBoundsError` (too
    large, too deep, not JSON, not an object) or :class:`ProtocolRequestError` naming the field."""
    raw = decode_json_bounded(body, max_bytes=max_bytes, max_depth=max_depth, require_object=True)
    chat_id = _str(raw.get("id"), "id")
    assert chat_id is not None
    if not chat_id:
        raise ProtocolRequestError("id must be a non-empty string", field="id")
    trigger = raw.get("trigger", "submit-message")
    if trigger not in ("submit-message", "regenerate-message"):
        raise ProtocolRequestError("trigger must be 'submit-message' or 'regenerate-message'",
                                   field="trigger")
    message_id = _str(raw.get("messageId"), "messageId", optional=True)
    messages = raw.get("messages")
    if not isinstance(messages, list):
        raise ProtocolRequestError("messages must be a list of UI messages", field="messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise ProtocolRequestError(f"messages[{i}] must be an object", field=f"messages[{i}]")
    transcript, approvals = ui_messages_to_transcript(messages)
    last = messages[-1] if messages else None
    continues = (str(last.get("id")) if last is not None and last.get("role") == "assistant"
                 and trigger == "submit-message" else None)
    extra = {k: v for k, v in raw.items() if k not in ("id", "messages", "trigger", "messageId")}
    return UIChatRequest(id=chat_id, trigger=trigger, message_id=message_id,
                         messages=tuple(messages), transcript=transcript,
                         approvals=approvals, continues=continues, body=extra)


def ui_messages_to_transcript(
        messages: list[dict[str, Any]]) -> tuple[tuple[Message, ...], tuple[ToolApproval, ...]]:
    """UI messages (JSON objects) as the canonical transcript, and the approval answers in them."""
    out: list[Message] = []
    approvals: list[ToolApproval] = []
    for i, m in enumerate(messages):
        where = f"messages[{i}]"
        _str(m.get("id"), f"{where}.id")  # a client keys its messages by it (and `continues`)
        role = m.get("role")
        parts = m.get("parts")
        if not isinstance(parts, list):
            raise ProtocolRequestError(f"{where}.parts must be a list", field=f"{where}.parts")
        for j, p in enumerate(parts):
            if not isinstance(p, dict) or not isinstance(p.get("type"), str):
                raise ProtocolRequestError(f"{where}.parts[{j}] must be an object with a string "
                                           "type", field=f"{where}.parts[{j}]")
        if role == "system":
            out.append(SystemMessage(content="".join(
                _text(p, f"{where}.parts[{j}]") for j, p in enumerate(parts)
                if p["type"] == "text")))
        elif role == "user":
            out.append(UserMessage(content=_user_content(parts, where)))
        elif role == "assistant":
            _assistant(parts, where, out, approvals)
        else:
            raise ProtocolRequestError(f"{where}.role must be system, user or assistant",
                                       field=f"{where}.role")
    return tuple(out), tuple(approvals)


def _text(part: dict[str, Any], where: str) -> str:
    text = _str(part.get("text"), f"{where}.text")
    assert text is not None
    return text


def _user_content(parts: list[dict[str, Any]], where: str) -> str | tuple[TextPart | ImagePart | FilePart, ...]:
    content: list[TextPart | ImagePart | FilePart] = []
    for j, p in enumerate(parts):
        at = f"{where}.parts[{j}]"
        if p["type"] == "text":
            content.append(TextPart(text=_text(p, at)))
        elif p["type"] == "file":
            url = _str(p.get("url"), f"{at}.url")
            media = _str(p.get("mediaType"), f"{at}.mediaType")
            assert media is not None
            if media.startswith("image/"):
                content.append(ImagePart(url=url, media_type=media))
            else:
                content.append(FilePart(url=url, media_type=media,
                                        filename=_str(p.get("filename"), f"{at}.filename",
                                                      optional=True)))
        # data-*, source-* and step-start parts are UI-only: the model never saw them.
    if all(isinstance(c, TextPart) for c in content):
        return "".join(c.text for c in content if isinstance(c, TextPart))
    return tuple(content)


def _tool_name(part: dict[str, Any], where: str) -> str | None:
    kind: str = part["type"]
    if kind == "dynamic-tool":
        return _str(part.get("toolName"), f"{where}.toolName")
    if kind.startswith("tool-"):
        return kind[5:]
    return None


def _assistant(parts: list[dict[str, Any]], where: str, out: list[Message],
               approvals: list[ToolApproval]) -> None:
    block: list[tuple[int, dict[str, Any]]] = []
    for j, p in enumerate(parts):
        if p["type"] == "step-start":
            _step(block, where, out, approvals)
            block = []
        elif p["type"] == "steering-message":
            # AI SDK 7: a user message the run took in between two steps, where it stands.
            _step(block, where, out, approvals)
            block = []
            at = f"{where}.parts[{j}]"
            inner = p.get("parts")
            if not isinstance(inner, list) or not all(
                    isinstance(q, dict) and q.get("type") in ("text", "file") for q in inner):
                raise ProtocolRequestError(f"{at}.parts must be a list of text and file parts",
                                           field=f"{at}.parts")
            out.append(UserMessage(content=_user_content(inner, at)))
        else:
            block.append((j, p))
    _step(block, where, out, approvals)


def _arguments(part: dict[str, Any], state: object) -> str:
    """A call's arguments as the model wrote them. An ``output-error`` call whose arguments did
    not parse carries their raw text: as ``input`` (AI SDK 7) or ``rawInput`` (AI SDK 6)."""
    raw_input = part.get("input")
    if state == "output-error":
        if raw_input is None:
            raw_input = part.get("rawInput")
        if isinstance(raw_input, str):
            return raw_input
    return "{}" if raw_input is None else _ENC.encode(raw_input).decode()


def _step(block: list[tuple[int, dict[str, Any]]], where: str, out: list[Message],
          approvals: list[ToolApproval]) -> None:
    texts: list[str] = []
    reasoning: list[ReasoningPart] = []
    calls: list[ToolCall] = []
    answers: list[ToolMessage] = []
    for j, p in block:
        at = f"{where}.parts[{j}]"
        kind = p["type"]
        if kind == "text":
            texts.append(_text(p, at))
            continue
        if kind == "reasoning":
            reasoning.append(ReasoningPart(text=_text(p, at)))
            continue
        name = _tool_name(p, at)
        if name is None:
            continue  # file, source-*, data-*: nothing the model is sent back
        state = p.get("state")
        if state == "input-streaming":
            continue  # never finished: it was not a call
        call_id = _str(p.get("toolCallId"), f"{at}.toolCallId")
        assert call_id is not None
        arguments = _arguments(p, state)
        calls.append(ToolCall(id=call_id, name=name, arguments=arguments))
        approval = p.get("approval")
        if state == "output-available":
            output = p.get("output")
            text = output if isinstance(output, str) else _ENC.encode(output).decode()
            answers.append(ToolMessage(tool_call_id=call_id, name=name, content=text))
        elif state == "output-error":
            error = _str(p.get("errorText"), f"{at}.errorText")
            assert error is not None
            answers.append(ToolMessage(tool_call_id=call_id, name=name, is_error=True,
                                       content=encode_tool_error(error)))
        elif state == "output-denied":
            reason = approval.get("reason") if isinstance(approval, dict) else None
            answers.append(ToolMessage(
                tool_call_id=call_id, name=name, is_error=True,
                content=encode_tool_error(reason if isinstance(reason, str) and reason
                                          else "the user denied this tool call", "denied")))
        elif state == "approval-responded":
            if not isinstance(approval, dict) or not isinstance(approval.get("approved"), bool):
                raise ProtocolRequestError(f"{at}.approval must hold a boolean approved",
                                           field=f"{at}.approval")
            approval_id = _str(approval.get("id"), f"{at}.approval.id")
            assert approval_id is not None
            approvals.append(ToolApproval(
                approval_id=approval_id, tool_call_id=call_id, tool_name=name,
                arguments=arguments, approved=approval["approved"],
                reason=_str(approval.get("reason"), f"{at}.approval.reason", optional=True)))
    text = "".join(texts)
    if not (text or reasoning or calls):
        return
    content: str | tuple[ReasoningPart | TextPart, ...] | None
    if reasoning:
        content = (*reasoning, *((TextPart(text=text),) if text else ()))
    else:
        content = text or None
    out.append(AssistantMessage(content=content, tool_calls=tuple(calls)))
    out.extend(answers)
