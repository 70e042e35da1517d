"""The loop's data: live state, settlement and result values, and the control hook's values."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Literal, TypeAlias, TypeVar

import msgspec

from ..contracts import (
    Message,
    ModelTurnResult,
    RunStats,
    StopReason,
    SuspendMode,
    ToolCall,
    ToolOutcome,
    TurnUsage,
)

__all__ = (
    "EFFECT_PORTS",
    "WIRABLE",
    "ActivationKind",
    "BatchRunner",
    "BoundaryDecision",
    "ControlledToolLoopResult",
    "LoopBoundary",
    "LoopControl",
    "LoopCounters",
    "MaybeAwaitable",
    "OpenSuspend",
    "StepSettlement",
    "ToolLoopResult",
    "ToolLoopState",
)

T = TypeVar("T")
MaybeAwaitable: TypeAlias = T | Awaitable[T]

ActivationKind: TypeAlias = Literal["plugins", "skills"]
"""What a tool asked to activate (``ToolResult.activate_plugins`` / ``.activate_skills``)."""


class OpenSuspend(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A tool call whose result is withheld until an answer (a tool message with this id) arrives.
    ``state`` is the suspending tool's own opaque text (:attr:`ToolSuspend.state`)."""

    tool_call_id: str
    tool_name: str
    mode: SuspendMode
    detail: str | None = None
    state: str | None = None


# Untracked by the cyclic collector (``gc=False``): numbers only, and every checkpoint holds one.
class LoopCounters(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True,
                   gc=False):
    """The loop's own figures, beside the spend in :class:`~bindloop.contracts.RunStats`: tool calls
    the model *requested* (``RunStats.tool_calls`` counts calls that ran) and the latest turn's token
    figures, which a compaction policy reads. ``has_fresh_token_count`` says the latest turn reported
    usage and no compaction has replaced the transcript since.

    One value, kept unchanged in :class:`ToolLoopState` and in a checkpoint
    (``bindloop.checkpoints.LoopCheckpoint.counters``); the loop replaces it with
    :meth:`after_turn` and :meth:`after_compaction`.
    """

    requested_tool_calls: int = 0
    last_prompt_tokens: int = 0
    last_output_tokens: int = 0
    has_fresh_token_count: bool = False

    def after_turn(self, usage: TurnUsage, requested_tool_calls: int = 0) -> LoopCounters:
        """The counters once a model turn reported ``usage`` and requested ``requested_tool_calls``."""
        return LoopCounters(
            requested_tool_calls=self.requested_tool_calls + requested_tool_calls,
            last_prompt_tokens=usage.input_tokens, last_output_tokens=usage.output_tokens,
            has_fresh_token_count=usage.input_tokens > 0 or usage.output_tokens > 0)

    def after_compaction(self) -> LoopCounters:
        """The counters once compaction replaced the transcript: the last token count is stale."""
        return msgspec.structs.replace(self, has_fresh_token_count=False)


class ToolLoopState(msgspec.Struct, kw_only=True):
    """The run's live state, updated in place so a heartbeat can read totals mid-run.

    ``totals`` is the spend (tokens, cost, turns, times) folded with the ``accumulate_*`` functions
    of :mod:`bindloop.contracts`; ``counters`` the loop's own figures (:class:`LoopCounters`). Seed
    both with the stored values when resuming: the loop adds this invocation to whatever is here.
    ``open_suspends`` lists calls whose results are withheld; a run started with open suspends ends
    at once with their stop reason and makes no model call.

    The flat read-only properties (``input_tokens``, ``requested_tool_calls``, ...) read those two
    values. Calls *requested* are ``requested_tool_calls`` here; calls that *ran* are
    ``totals.tool_calls`` (:class:`~bindloop.contracts.RunStats`).
    """

    messages: list[Message] = msgspec.field(default_factory=list)
    totals: RunStats = msgspec.field(default_factory=RunStats)
    counters: LoopCounters = msgspec.field(default_factory=LoopCounters)
    open_suspends: list[OpenSuspend] = msgspec.field(default_factory=list)

    @property
    def input_tokens(self) -> int:
        return self.totals.input_tokens

    @property
    def output_tokens(self) -> int:
        return self.totals.output_tokens

    @property
    def cached_input_tokens(self) -> int:
        return self.totals.cached_input_tokens

    @property
    def cost(self) -> int:
        return self.totals.cost

    @property
    def requested_tool_calls(self) -> int:
        return self.counters.requested_tool_calls

    @property
    def last_prompt_tokens(self) -> int:
        return self.counters.last_prompt_tokens

    @property
    def last_output_tokens(self) -> int:
        return self.counters.last_output_tokens

    @property
    def has_fresh_token_count(self) -> bool:
        return self.counters.has_fresh_token_count


class StepSettlement(msgspec.Struct, frozen=True, kw_only=True):
    """What ``LoopHooks.on_step_settled`` hands back: committed ``messages`` to append (in order), and ``stop``
    to end the run as ``aborted`` once they are appended."""

    messages: tuple[Message, ...] = ()
    stop: bool = False


class ToolLoopResult(msgspec.Struct, frozen=True, kw_only=True):
    """A finished run: why it stopped and what *this invocation* did (``state`` holds seed + this).

    ``final_turn`` is the model turn that ended a ``done`` run — the answer without tool calls, or
    the turn whose call satisfied ``is_final_call`` — exactly as the model returned it (also
    when ``accept_message=False`` kept it out of the transcript). ``None`` for every other stop
    reason: no model turn ended those runs."""

    stop_reason: StopReason
    stats: RunStats
    final_turn: ModelTurnResult | None = None


BatchRunner: TypeAlias = Callable[[Sequence[ToolCall]], Awaitable[list[ToolOutcome]]]
"""The loop's own executor, handed to ``ToolRunner.run_tool_batch``: runs ``calls`` exactly as the
loop runs a batch and returns one outcome per call, in order."""


EFFECT_PORTS: Final = (
    "activate", "before_tool_message_accepted", "compact", "is_final_call", "on_assistant_message",
    "on_progress_update", "on_step_settled", "on_turn_would_end", "run_tool_batch", "runs_serially",
)
"""The optional ports (``ToolRunner`` and ``LoopHooks`` methods) the machine emits effects for
only when wired (``runs_serially`` and ``is_final_call`` as the decision requests ``PlanBatch``
and ``CheckFinal``, whose answers the driver fills in)."""

WIRABLE: Final = frozenset(EFFECT_PORTS) | {"on_boundary"}
"""What a :class:`~bindloop.lowlevel.LoopMachine`'s ``wired`` set may name: :data:`EFFECT_PORTS`
and ``on_boundary`` (:class:`LoopControl`'s hook)."""


BoundaryDecision: TypeAlias = Literal["continue", "checkpoint"]

ControlledStopReason: TypeAlias = Literal[
    "done", "waiting_for_reply", "resuming_later", "iteration_limit", "aborted", "checkpointed",
]
"""What the loop itself can return: every :data:`~bindloop.contracts.StopReason` except
``deadline`` (raised, never returned), plus ``checkpointed`` (only with a control hook)."""


class LoopBoundary(msgspec.Struct, frozen=True, kw_only=True):
    """A settled point a custom driver may checkpoint at.

    ``final=False``: before a model call, after the nudge, suspension and compaction decisions — the
    transcript is provider-valid and nothing is pending. ``final=True``: the run has ended with
    ``stop_reason`` (the hook's answer is then ignored). ``stats`` is this invocation's so far,
    ``iterations`` the model turns it has used; ``state`` is the live state (copy what you persist).
    """

    state: ToolLoopState
    stats: RunStats
    iterations: int
    final: bool = False
    stop_reason: ControlledStopReason | None = None


class LoopControl(msgspec.Struct, frozen=True, kw_only=True):
    """The second argument of ``run_tool_loop(params, control)``: an awaited hook at every settled
    boundary. Returning ``"checkpoint"`` from a non-final boundary ends the run as ``checkpointed``
    before the next model call; ``"continue"`` goes on."""

    on_boundary: Callable[[LoopBoundary], MaybeAwaitable[BoundaryDecision]]


class ControlledToolLoopResult(msgspec.Struct, frozen=True, kw_only=True):
    """What the controlled form returns: a stop reason that may also be ``checkpointed``, this
    invocation's stats, the model turns it used and ``final_turn`` (as on :class:`ToolLoopResult`)."""

    stop_reason: ControlledStopReason
    stats: RunStats
    iterations: int
    final_turn: ModelTurnResult | None = None
