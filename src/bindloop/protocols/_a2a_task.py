"""The A2A task logic every binding shares, whatever carries the bytes (the ASGI server in
``bindloop.hosts.a2a``, the Worker's route module): the agent card, the ``A2A-Version`` check, the
user's text of a message, a task folded from its stream's updates, and the calls a transcript
leaves open. Pure: values in, values (or a typed :class:`~bindloop.protocols.A2aRpcError`) out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ..contracts import AssistantMessage, Message, ToolCall, ToolMessage
from ._a2a_types import (
    A2A_PROTOCOL_VERSION,
    A2aAgentCapabilities,
    A2aAgentCard,
    A2aAgentInterface,
    A2aAgentProvider,
    A2aAgentSkill,
    A2aErrorCode,
    A2aMessage,
    A2aPart,
    A2aStreamResponse,
    A2aTask,
)
from ._errors import A2aRpcError

__all__ = ("a2a_agent_card", "a2a_interface", "a2a_open_calls", "a2a_user_content",
           "check_a2a_version", "check_user_message", "fold_a2a_task", "join_a2a_text_parts")

_JSON = msgspec.json.Encoder()


def a2a_interface(url: str) -> A2aAgentInterface:
    """The JSON-RPC interface at ``url`` (A2A :data:`A2A_PROTOCOL_VERSION`)."""
    return A2aAgentInterface(url=url, protocol_binding="JSONRPC",
                             protocol_version=A2A_PROTOCOL_VERSION)


def a2a_agent_card(*, name: str, description: str, url: str,
                   skills: Sequence[A2aAgentSkill] = (), version: str = "1.0.0",
                   provider: A2aAgentProvider | None = None,
                   security_schemes: dict[str, Any] | None = None,
                   security_requirements: Sequence[dict[str, Any]] = (),
                   streaming: bool = True) -> A2aAgentCard:
    """The card of a bindloop agent served over the JSON-RPC binding at ``url``: text and JSON
    in, text out, no push notifications, no extended card; without ``skills``, one ``chat``
    skill of the name and description (the card requires one)."""
    return A2aAgentCard(
        name=name, description=description, version=version,
        supported_interfaces=(a2a_interface(url),),
        capabilities=A2aAgentCapabilities(streaming=streaming, push_notifications=False,
                                          extended_agent_card=False),
        default_input_modes=("text/plain", "application/json"),
        default_output_modes=("text/plain",), provider=provider,
        skills=tuple(skills) or (A2aAgentSkill(id="chat", name=name, description=description,
                                               tags=("chat",)),),
        security_schemes=security_schemes, security_requirements=tuple(security_requirements))


def check_a2a_version(version: str | None) -> None:
    """Refuse (``-32009``) a request whose ``A2A-Version`` (header or query parameter; ``None``:
    absent, which A2A reads as 0.3) is not this major.minor."""
    wanted = A2A_PROTOCOL_VERSION.split(".")
    got = (version.strip() if version is not None else "0.3").split(".")
    if got[:2] != wanted[:2]:
        raise A2aRpcError(A2aErrorCode.VERSION_NOT_SUPPORTED,
                          f"this agent speaks A2A {A2A_PROTOCOL_VERSION}: send the "
                          f"A2A-Version: {A2A_PROTOCOL_VERSION} header")


def a2a_user_content(message: A2aMessage) -> str:
    """The user's text of ``message``: text parts as they are, data parts as JSON, joined by
    newlines. A file part is refused (``-32005``), and so is a message with no text (``-32602``)."""
    pieces: list[str] = []
    for part in message.parts:
        if part.text is not None:
            pieces.append(part.text)
        elif part.data is not msgspec.UNSET:
            pieces.append(_JSON.encode(part.data).decode())
        else:
            raise A2aRpcError(A2aErrorCode.CONTENT_TYPE_NOT_SUPPORTED,
                              "this agent reads text and data parts only")
    text = "\n".join(pieces)
    if not text.strip():
        raise A2aRpcError(A2aErrorCode.INVALID_PARAMS, "the message holds no text")
    return text


def check_user_message(message: A2aMessage) -> None:
    """Refuse (``-32602``) a message a client may not send: not ``ROLE_USER``, no
    ``messageId``, no parts."""
    if message.role != "ROLE_USER":
        raise A2aRpcError(A2aErrorCode.INVALID_PARAMS, "message.role must be ROLE_USER")
    if not message.message_id:
        raise A2aRpcError(A2aErrorCode.INVALID_PARAMS, "message.messageId is required")
    if not message.parts:
        raise A2aRpcError(A2aErrorCode.INVALID_PARAMS, "message.parts must not be empty")


def join_a2a_text_parts(parts: Sequence[A2aPart]) -> tuple[A2aPart, ...]:
    """Adjacent plain text parts of one artifact as one (streamed chunks read back whole); empty
    text parts dropped unless the artifact holds nothing else."""
    out: list[A2aPart] = []
    for part in parts:
        if out and part.text is not None and out[-1].text is not None and \
                part.metadata is None and out[-1].metadata is None:
            out[-1] = msgspec.structs.replace(out[-1], text=(out[-1].text or "") + part.text)
        else:
            out.append(part)
    return tuple(p for p in out if p.text != "" or len(out) == 1)


def fold_a2a_task(task: A2aTask, update: A2aStreamResponse) -> A2aTask:
    """``task`` after one update of its stream: a whole task replaces it; a status update sets
    its status (the status's message, if any, joins its history); an artifact update adds the
    artifact, replaces the one of its id, or -- with ``append`` -- extends it (text chunks
    joined). A message leaves it as it is."""
    if update.task is not None:
        return update.task
    if update.status_update is not None:
        status = update.status_update.status
        history = task.history if status.message is None else (*task.history, status.message)
        return msgspec.structs.replace(task, status=status, history=history)
    if update.artifact_update is not None:
        change = update.artifact_update
        artifacts = list(task.artifacts)
        at = next((i for i, a in enumerate(artifacts)
                   if a.artifact_id == change.artifact.artifact_id), None)
        if at is None:
            artifacts.append(change.artifact)
        elif change.append:
            old = artifacts[at]
            artifacts[at] = msgspec.structs.replace(
                old, parts=join_a2a_text_parts(old.parts + change.artifact.parts))
        else:
            artifacts[at] = change.artifact
        return msgspec.structs.replace(task, artifacts=tuple(artifacts))
    return task


def a2a_open_calls(transcript: Sequence[Message]) -> tuple[ToolCall, ...]:
    """The calls of the transcript's last tool-call turn that no tool message answers yet (what
    an ``input-required`` task's reply answers)."""
    answered = {m.tool_call_id for m in transcript if isinstance(m, ToolMessage)}
    turn = next((m for m in reversed(transcript)
                 if isinstance(m, AssistantMessage) and m.tool_calls), None)
    return tuple(c for c in turn.tool_calls if c.id not in answered) if turn else ()
