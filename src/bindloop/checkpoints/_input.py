"""Explicit input for a paused checkpoint: a reply, a wake, or a new user message."""

from __future__ import annotations

from typing import TypeAlias

import msgspec

from ..contracts import (
    Content,
    FilePart,
    ImagePart,
    ProviderItemPart,
    ReasoningPart,
    TextPart,
    ToolMessage,
    UserMessage,
)
from ..errors import UsageError
from ..loop import OpenSuspend
from ._codec import require_checkpoint
from ._errors import CheckpointInputError
from ._schema import CheckpointStatus, LoopCheckpoint

__all__ = ("CheckpointInput", "CheckpointReply", "CheckpointWake", "apply_checkpoint_input")

_PART_TYPES = (TextPart, ImagePart, FilePart, ReasoningPart, ProviderItemPart)


class CheckpointReply(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="reply"):
    """A person's answer to the ``waiting_for_reply`` suspend of call ``tool_call_id``; it becomes
    that call's tool message."""

    tool_call_id: str
    content: Content


class CheckpointWake(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="wake"):
    """The scheduled resume of the ``resuming_later`` suspend of call ``tool_call_id``, carrying the
    result the tool produced; it becomes that call's tool message."""

    tool_call_id: str
    content: Content


CheckpointInput: TypeAlias = CheckpointReply | CheckpointWake | UserMessage


def _content(value: object) -> Content:
    if isinstance(value, str):
        return value
    if isinstance(value, (tuple, list)) and all(isinstance(p, _PART_TYPES) for p in value):
        return tuple(value)
    raise UsageError("content must be a string or a sequence of content parts, got "
                     f"{type(value).__name__}")


def _accepts(cp: LoopCheckpoint) -> str:
    status = cp.status
    if status == "ready":
        return "nothing: it is ready, run it with run_from_checkpoint"
    if status == "iteration_limit":
        return "nothing: its budget is spent, fork it with a new max_iterations"
    if status == "finished" or (status == "aborted" and not cp.open_suspends):
        return "a new UserMessage"
    return "a CheckpointReply or CheckpointWake for each open suspend (" + ", ".join(
        f"{s.tool_call_id}: {s.mode}" for s in cp.open_suspends) + ")"


def _status_after(cp: LoopCheckpoint, suspends: tuple[OpenSuspend, ...]) -> CheckpointStatus:
    if not suspends:
        return "ready"
    if cp.status == "aborted":
        return "aborted"
    if any(s.mode == "waiting_for_reply" for s in suspends):
        return "waiting_for_reply"
    return "resuming_later"


def apply_checkpoint_input(checkpoint: LoopCheckpoint, input: CheckpointInput) -> LoopCheckpoint:
    """The checkpoint with ``input`` applied, one revision later; ``checkpoint`` is not changed.

    - :class:`CheckpointReply` answers an open ``waiting_for_reply`` suspend and
      :class:`CheckpointWake` an open ``resuming_later`` one: the answer is appended as the call's
      tool message and the suspend closes. With none left open the checkpoint is ``ready``.
    - A :class:`~bindloop.contracts.UserMessage` continues a ``finished`` checkpoint (or an
      ``aborted`` one with no open suspend): it is appended and the checkpoint is ``ready``.

    Consumed iterations, spend and bindings carry over. Any other combination raises
    :class:`CheckpointInputError` saying what the status accepts — in particular a user message is
    refused while a suspend is open, because appending it would put a user turn between a tool call
    and its answer, which providers reject. Content that storage would refuse (a part of the wrong
    type, text with a lone surrogate) raises :class:`CheckpointFormatError` here. The result is
    validated, so saving it or running it does not check its transcript again.
    """
    cp = require_checkpoint(checkpoint)
    status = cp.status
    if isinstance(input, (CheckpointReply, CheckpointWake)):
        mode = "waiting_for_reply" if isinstance(input, CheckpointReply) else "resuming_later"
        kind = type(input).__name__
        match = next((s for s in cp.open_suspends if s.tool_call_id == input.tool_call_id), None)
        if match is None:
            raise CheckpointInputError(
                status, f"a {kind} for {input.tool_call_id!r}, but no such suspend is open; a "
                        f"{status} checkpoint accepts {_accepts(cp)}")
        if match.mode != mode:
            other = "CheckpointWake" if kind == "CheckpointReply" else "CheckpointReply"
            raise CheckpointInputError(
                status, f"call {input.tool_call_id!r} suspended as {match.mode}: answer it with a "
                        f"{other}, not a {kind}")
        answer = ToolMessage(tool_call_id=match.tool_call_id, content=_content(input.content),
                             name=match.tool_name)
        remaining = tuple(s for s in cp.open_suspends if s is not match)
        messages = (*cp.messages, answer)
        new_status = _status_after(cp, remaining)
    elif isinstance(input, UserMessage):
        if not (status == "finished" or (status == "aborted" and not cp.open_suspends)):
            raise CheckpointInputError(
                status, f"a new user message does not fit a {status} checkpoint; it accepts "
                        f"{_accepts(cp)}")
        if input.name is not None and not isinstance(input.name, str):
            raise UsageError(f"UserMessage.name must be a string or None, got {input.name!r}")
        message = UserMessage(content=_content(input.content), name=input.name)
        remaining = ()
        messages = (*cp.messages, message)
        new_status = "ready"
    else:
        raise CheckpointInputError(
            status, f"input must be a CheckpointReply, CheckpointWake or UserMessage, got "
                    f"{type(input).__name__}")
    # ``cp`` is already a private copy (require_checkpoint rebuilt it), so its dicts can be reused;
    # validating the result checks only the appended message and marks it, so a store's save or a
    # run from it does not check the transcript again.
    return require_checkpoint(
        msgspec.structs.replace(cp, revision=cp.revision + 1, status=new_status,
                                messages=messages, open_suspends=remaining), known=cp.messages)
