"""The checkpoint schema (version 1): what a settled loop position is, as plain JSON through msgspec.

Every Struct here is frozen and refuses unknown fields, so a typo in storage fails instead of being
dropped. The nested contract types (messages, ``RunStats``, ``OpenSuspend``) are the loop's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias

import msgspec

from ..contracts import Message, RunStats, StopReason
from ..loop import LoopCounters, OpenSuspend

__all__ = (
    "CHECKPOINT_VERSION",
    "CheckpointLineage",
    "CheckpointStatus",
    "LoopBindings",
    "LoopCheckpoint",
    "ReaskRecord",
    "ApprovalRecord",
    "DecidedCall",
    "status_of_stop",
    "stop_of_status",
)

CHECKPOINT_VERSION: Final = 1
"""The schema version :func:`serialize_loop_checkpoint` writes and the only one
:func:`parse_loop_checkpoint` reads."""

CheckpointStatus: TypeAlias = Literal[
    "ready", "waiting_for_reply", "resuming_later", "finished", "aborted", "iteration_limit"
]
"""Where a checkpoint stands.

``ready``: settled before a model call; running it infers. ``waiting_for_reply`` /
``resuming_later``: open suspends await a reply or a wake. ``finished``: the model answered; it takes a
new user message. ``aborted``: the host stopped the run (open suspends may remain). ``iteration_limit``:
the execution's budget is spent; fork it with a new budget to go on.
"""

_STATUS_OF_STOP: Final[Mapping[str, CheckpointStatus]] = MappingProxyType({
    "done": "finished", "waiting_for_reply": "waiting_for_reply",
    "resuming_later": "resuming_later", "iteration_limit": "iteration_limit", "aborted": "aborted",
})
_STOP_OF_STATUS: Final[Mapping[str, StopReason]] = MappingProxyType({
    "finished": "done", "waiting_for_reply": "waiting_for_reply",
    "resuming_later": "resuming_later", "iteration_limit": "iteration_limit", "aborted": "aborted",
})


def status_of_stop(stop_reason: str) -> CheckpointStatus:
    """The status a run that ended with ``stop_reason`` leaves its checkpoint in (``deadline`` and
    ``checkpointed`` have none: the loop raises for the one and the other leaves it ``ready``)."""
    return _STATUS_OF_STOP[stop_reason]


def stop_of_status(status: CheckpointStatus) -> StopReason:
    """The stop reason that left a checkpoint in ``status`` (``ready`` has none)."""
    return _STOP_OF_STATUS[status]


# Untracked by the cyclic collector (``gc=False``): its dicts hold JSON values (a checkpoint's are
# fresh copies), which cannot refer back to it, and every checkpoint a run keeps holds one.
class LoopBindings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
                   gc=False):
    """What the host pins an execution to, as JSON objects: ``config`` (model id, prompt and tool
    versions, any setting a replay must reuse) and ``environment`` (a descriptor of the workspace or
    sandbox the tools act on). bindloop only stores them; ``restore`` verifies or re-creates them
    before it hands back tools, and ``capture_bindings`` reports them at each commit."""

    config: dict[str, Any] = msgspec.field(default_factory=dict)
    environment: dict[str, Any] = msgspec.field(default_factory=dict)


# Untracked by the cyclic collector (``gc=False``): strings and numbers only.
class CheckpointLineage(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
                        gc=False):
    """Where a fork came from: its parent's identity and revision, and the parent's consumed
    iterations and transcript length at the fork point."""

    parent_execution_id: str
    parent_revision: int
    parent_iterations: int
    message_count: int


class ReaskRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Where a driver that re-asks refused answers stands (``bindloop.agent``'s chats write it).

    ``attempts`` are the answers refused so far, as ``[text, problem]`` pairs; the current attempt
    has used ``attempt_turns`` of its ``max_turn_steps`` model turns, and the prompt has
    ``turns_left`` model turns for all its attempts together. Every count is relative to the
    checkpoint's position, so a host that re-bases ``iterations`` (a session counting several
    prompts) keeps the record true."""

    attempts: tuple[tuple[str, str], ...] = ()
    attempt_turns: int = 0
    max_turn_steps: int
    turns_left: int


class DecidedCall(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A decision on an approval suspend, committed before its effect: ``approve`` (run with
    ``arguments``, the JSON text — the model's, or the approver's edit) or ``deny`` (answer with
    ``reason``). A checkpoint still listing one was saved before the call was answered."""

    call_id: str
    decision: Literal["approve", "deny"]
    arguments: str | None = None
    reason: str | None = None


class ApprovalRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Which open suspends wait on an approval (``bindloop.agent``'s ``equip_tool(needs_approval=)``
    writes it): ``pending`` call ids await a decision; ``decided`` holds the decisions committed
    but not yet answered in the transcript; ``signed`` says a decision must carry a valid token."""

    pending: tuple[str, ...] = ()
    decided: tuple[DecidedCall, ...] = ()
    signed: bool = False


class LoopCheckpoint(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
                     dict=True):
    """A settled loop position: everything needed to resume an execution, nothing executable.

    ``revision`` grows by one with every checkpoint derived from this one (a commit, an applied
    input); the host's storage enforces single-writer order with it (compare-and-set on the stored
    revision). ``iterations`` counts model turns consumed across every invocation and is never reset by
    a resume; ``max_iterations`` is the execution's whole budget. ``stats`` is cumulative over every
    invocation of this execution — its tokens and cost are the execution's spend. A fork starts a new
    ``execution_id`` with zero spend and iterations, and ``lineage`` pointing at its parent.
    ``reask`` is a re-asking driver's :class:`ReaskRecord` (absent from the JSON when unset);
    ``approvals`` an :class:`ApprovalRecord` while approval suspends are open (likewise).

    Build these with :func:`create_loop_checkpoint`, :func:`fork_loop_checkpoint`,
    :func:`apply_checkpoint_input` or :func:`run_from_checkpoint`; read stored ones with
    :func:`parse_loop_checkpoint`, which enforces the invariants a constructor call cannot.

    A checkpoint that bindloop validated (read by :func:`parse_loop_checkpoint`, made by
    :func:`create_loop_checkpoint`, :func:`fork_loop_checkpoint` or :func:`apply_checkpoint_input`,
    committed by :func:`run_from_checkpoint`) carries a mark in its ``__dict__`` (not a field: never encoded,
    compared, pickled or kept by ``msgspec.structs.replace``) holding the field values that passed,
    so storing it checks only its dicts again, not its transcript (see
    ``serialize_loop_checkpoint``).
    """

    version: int = CHECKPOINT_VERSION
    execution_id: str
    revision: int
    status: CheckpointStatus
    max_iterations: int
    iterations: int
    messages: tuple[Message, ...]
    open_suspends: tuple[OpenSuspend, ...] = ()
    stats: RunStats = msgspec.field(default_factory=RunStats)
    counters: LoopCounters = msgspec.field(default_factory=LoopCounters)
    bindings: LoopBindings = msgspec.field(default_factory=LoopBindings)
    lineage: CheckpointLineage | None = None
    # UNSET is never encoded: a checkpoint without a re-ask record keeps the bytes it always had.
    reask: ReaskRecord | msgspec.UnsetType = msgspec.UNSET
    # UNSET unless approval suspends are open (other checkpoints keep their bytes).
    approvals: ApprovalRecord | msgspec.UnsetType = msgspec.UNSET
