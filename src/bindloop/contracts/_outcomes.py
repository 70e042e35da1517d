"""What a tool call can come back as, and how each outcome is written into the transcript.

A tool call ends in exactly one of three ways: a result the model reads, an error the model reads
(the run goes on), or a suspend (the run pauses; the result is withheld until an answer arrives).
A result may also ask the loop to widen the tool surface (activate plugins or skills).
"""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from ..errors import UsageError
from ._messages import Content, ToolMessage

__all__ = (
    "ErrorKind",
    "SuspendMode",
    "ToolError",
    "ToolOutcome",
    "ToolResult",
    "ToolSuspend",
    "encode_tool_error",
    "tool_error_message",
    "tool_outcome_message",
)

SuspendMode: TypeAlias = Literal["waiting_for_reply", "resuming_later"]
ErrorKind: TypeAlias = str
"""Well-known kinds: ``error`` (the tool failed), ``not_run`` (an aborted batch never started it),
``validation`` (bad arguments), ``not_found`` (no such tool), ``rejected`` (refused by policy)."""


# The outcomes are untracked by the cyclic collector (``gc=False``), as the messages are: content
# and text cannot form a cycle, and a journaled run keeps every outcome alive.
class ToolResult(msgspec.Struct, frozen=True, kw_only=True, tag_field="outcome", tag="result",
                 omit_defaults=True, gc=False):
    """A successful call. ``activate_plugins`` / ``activate_skills`` ask the loop to widen the tool
    surface before the next call that depends on it (pair with ``runs_serially``)."""

    content: Content
    activate_plugins: tuple[str, ...] = ()
    activate_skills: tuple[str, ...] = ()


class ToolError(msgspec.Struct, frozen=True, kw_only=True, tag_field="outcome", tag="error",
                omit_defaults=True, gc=False):
    """A failed or refused call the model can read and recover from."""

    error: str
    kind: ErrorKind = "error"


class ToolSuspend(msgspec.Struct, frozen=True, kw_only=True, tag_field="outcome", tag="suspend",
                  omit_defaults=True):
    """The call cannot finish now. ``waiting_for_reply``: a person must answer (``detail`` is the
    question). ``resuming_later``: the tool scheduled its own resume. Either way the result is withheld;
    the answer arrives later as a tool message carrying this call's id. ``state`` is opaque text
    the tool needs to finish the call after an answer (kept with the open suspend in the
    checkpoint, so another process can pick it up; never shown to the model)."""

    mode: SuspendMode
    detail: str | None = None
    state: str | None = None


ToolOutcome: TypeAlias = ToolResult | ToolError | ToolSuspend

_ERROR_ENCODER = msgspec.json.Encoder()


def encode_tool_error(error: str, kind: ErrorKind = "error") -> str:
    """The one encoding of a failed or refused call the model ever sees: ``{"error": ..., "kind": ...}``
    as compact JSON, so a transcript never teaches the model two error formats."""
    return _ERROR_ENCODER.encode({"error": error, "kind": kind}).decode()


def tool_error_message(tool_call_id: str, error: str, kind: ErrorKind = "error",
                       name: str | None = None) -> ToolMessage:
    """The tool message for a failed or refused call."""
    return ToolMessage(tool_call_id=tool_call_id, content=encode_tool_error(error, kind), name=name,
                       is_error=True)


def tool_outcome_message(tool_call_id: str, outcome: ToolResult | ToolError,
                         name: str | None = None) -> ToolMessage:
    """The one builder of the ``tool`` message for an outcome: a result's content, or an error in
    the loop's encoding (:func:`encode_tool_error`), so a transcript never holds two error formats.
    A suspend has no message (its result is withheld): :class:`~bindloop.errors.UsageError`."""
    if isinstance(outcome, ToolResult):
        return ToolMessage(tool_call_id=tool_call_id, content=outcome.content, name=name)
    if isinstance(outcome, ToolError):
        return tool_error_message(tool_call_id, outcome.error, outcome.kind, name)
    raise UsageError(f"no tool message for {type(outcome).__name__}: a suspend withholds its result")
