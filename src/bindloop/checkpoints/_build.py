"""Making checkpoints without inference: prepared history, and forks that start a new identity."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import msgspec

from ..contracts import Message, RunStats
from ..errors import UsageError
from ._codec import copy_bindings, require_checkpoint
from ._schema import (
    CheckpointLineage,
    CheckpointStatus,
    LoopBindings,
    LoopCheckpoint,
)

__all__ = ("check_budget", "check_execution_id", "create_loop_checkpoint", "fork_loop_checkpoint")

# The message classes, from the Message union itself (a tuple: isinstance's quickest form).
_MESSAGE_TYPES: Final = Message.__args__
_EXACT_MESSAGE_TYPES: Final = frozenset(_MESSAGE_TYPES)  # looked up first: a missed isinstance()
# against a Struct class is a call of its metaclass's __instancecheck__


def check_execution_id(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise UsageError(f"execution_id must be a non-empty string, got {value!r}")
    return value


def check_budget(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"max_iterations must be an int >= 0, got {value!r}")
    return value


def _messages(messages: object) -> tuple[Message, ...]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise UsageError(f"messages must be a sequence of Message, got {type(messages).__name__}")
    out = tuple(messages)
    for k, m in enumerate(out):
        if type(m) not in _EXACT_MESSAGE_TYPES and not isinstance(m, _MESSAGE_TYPES):
            raise UsageError(f"messages[{k}] is {type(m).__name__}, not a Message")
    return out


def create_loop_checkpoint(*, execution_id: str, messages: Sequence[Message], max_iterations: int,
                           bindings: LoopBindings | None = None) -> LoopCheckpoint:
    """A ``ready`` checkpoint over prepared history: nothing is inferred, nothing spent.

    ``max_iterations`` is the execution's whole budget of model turns, across every resume.
    ``bindings`` (default: empty) is copied, so later changes to the caller's dicts do not reach the
    checkpoint. Bad arguments raise :class:`~bindloop.errors.UsageError` (bindings that are not JSON:
    :class:`CheckpointFormatError`). The transcript is stored as given; heal it first
    (``bindloop.transcript``) if it comes from an untrusted source.
    """
    cp = LoopCheckpoint(
        execution_id=check_execution_id(execution_id),
        revision=0,
        status="ready",
        max_iterations=check_budget(max_iterations),
        iterations=0,
        messages=_messages(messages),
        bindings=copy_bindings(LoopBindings() if bindings is None else bindings),
    )
    return require_checkpoint(cp)


def fork_loop_checkpoint(source: LoopCheckpoint, *, execution_id: str,
                         max_iterations: int | None = None,
                         bindings: LoopBindings | None = None) -> LoopCheckpoint:
    """A new execution that starts where ``source`` stands.

    Copied: the transcript, the open suspends and the status (so a finished fork still needs a new
    user message and a waiting fork its reply or wake), and the latest turn's token figures. Fresh:
    ``execution_id`` (which must differ from the source's), revision 0, zero spend and iterations,
    ``max_iterations`` (default: the source's) and ``bindings`` (default: a copy of the source's —
    pass isolated environment bindings for independent eval trials). ``lineage`` records the parent
    and the fork point. An ``iteration_limit`` source forks as ``ready``. ``source`` is not changed,
    and the fork shares nothing mutable with it.
    """
    src = require_checkpoint(source, "source")
    new_id = check_execution_id(execution_id)
    if new_id == src.execution_id:
        raise UsageError(f"a fork needs a new execution_id; {new_id!r} is the source's")
    # A fork gets a fresh budget, so "out of budget" no longer describes it: it is ready to go on.
    status: CheckpointStatus = "ready" if src.status == "iteration_limit" else src.status
    cp = LoopCheckpoint(
        execution_id=new_id,
        revision=0,
        status=status,
        max_iterations=src.max_iterations if max_iterations is None else check_budget(max_iterations),
        iterations=0,
        messages=src.messages,  # a tuple of frozen messages: sharing it shares nothing mutable
        open_suspends=src.open_suspends,
        stats=RunStats(),
        counters=msgspec.structs.replace(src.counters, requested_tool_calls=0),
        bindings=copy_bindings(src.bindings if bindings is None else bindings),
        lineage=CheckpointLineage(
            parent_execution_id=src.execution_id,
            parent_revision=src.revision,
            parent_iterations=src.iterations,
            message_count=len(src.messages),
        ),
    )
    return require_checkpoint(cp, known=src.messages)
