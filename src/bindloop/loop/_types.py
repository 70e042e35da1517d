"""The loop's data: live state, parameters (the ports), settlement and result values."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Final, Literal, TypeAlias, TypeVar

import msgspec

from ..clock import Clock, monotonic_ms
from ..contracts import (
    AssistantMessage,
    CompactionApplied,
    Message,
    ModelTurnResult,
    RunStats,
    StopReason,
    SuspendMode,
    ToolCall,
    ToolDefinition,
    ToolError,
    ToolMessage,
    ToolOutcome,
    TurnUsage,
)
from ._pool import ToolBatchOptions
from ..signal import AbortSignal

__all__ = (
    "EFFECT_PORTS",
    "WIRABLE",
    "ActivationKind",
    "BatchRunner",
    "BoundaryDecision",
    "CallModelFn",
    "ControlledToolLoopResult",
    "LoopBoundary",
    "LoopControl",
    "LoopCounters",
    "MaybeAwaitable",
    "OpenSuspend",
    "RunToolBatchFn",
    "RunToolCallFn",
    "StepSettlement",
    "ToolLoopParams",
    "ToolLoopPorts",
    "ToolLoopResult",
    "ToolLoopState",
)

T = TypeVar("T")
MaybeAwaitable: TypeAlias = T | Awaitable[T]

ActivationKind: TypeAlias = Literal["plugins", "skills"]
"""What a tool asked to activate (``ToolResult.activate_plugins`` / ``.activate_skills``)."""


class OpenSuspend(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A tool call whose result is withheld until an answer (a tool message with this id) arrives."""

    tool_call_id: str
    tool_name: str
    mode: SuspendMode
    detail: str | None = None


class LoopCounters(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The loop's own figures, beside the spend in :class:`~bindloop.contracts.RunStats`: tool calls
    the model *requested* (``RunStats.tool_calls`` counts calls that ran) and the latest turn's token
    figures, which a compaction policy reads. ``has_fresh_token_count`` says the latest turn reported
    usage and no compaction has replaced the transcript since.

    One value, kept unchanged in :class:`ToolLoopState` and in a checkpoint
    (``bindloop.session.LoopCheckpoint.counters``); the loop replaces it with
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
    """What ``on_step_settled`` hands back: committed ``messages`` to append (in order), and ``stop``
    to end the run as ``aborted`` once they are appended."""

    messages: tuple[Message, ...] = ()
    stop: bool = False


class ToolLoopResult(msgspec.Struct, frozen=True, kw_only=True):
    """A finished run: why it stopped and what *this invocation* did (``state`` holds seed + this).

    ``final_turn`` is the model turn that ended a ``done`` run — the answer without tool calls, or
    the turn whose call satisfied ``is_final_call`` — exactly as ``call_model`` returned it (also
    when ``accept_message=False`` kept it out of the transcript). ``None`` for every other stop
    reason: no model turn ended those runs."""

    stop_reason: StopReason
    stats: RunStats
    final_turn: ModelTurnResult | None = None


CallModelFn: TypeAlias = Callable[
    [list[Message], list[ToolDefinition]], Awaitable[ModelTurnResult]
]
RunToolCallFn: TypeAlias = Callable[[ToolCall], MaybeAwaitable[ToolOutcome]]
BatchRunner: TypeAlias = Callable[[Sequence[ToolCall]], Awaitable[list[ToolOutcome]]]
"""The loop's own executor, handed to ``run_tool_batch``: runs ``calls`` exactly as the loop runs a
batch and returns one outcome per call, in order (see :class:`ToolLoopPorts`)."""
RunToolBatchFn: TypeAlias = Callable[
    [Sequence[ToolCall], BatchRunner], Awaitable[Sequence[ToolOutcome]]
]


class ToolLoopPorts(msgspec.Struct, frozen=True, kw_only=True):
    """The executable side of a run: every port. Only ``call_model`` and ``run_tool_call`` are
    required; an unwired optional port changes nothing. :class:`ToolLoopParams` adds the run's
    ``state`` and ``max_iterations``; ``bindloop.session.RestoredLoop`` adds ``capture_bindings``.

    Ports may be plain functions or coroutine functions, except ``call_model`` and
    ``run_tool_batch`` (always awaited) and ``runs_serially``, ``is_fatal_tool_error``,
    ``is_final_call``, ``format_tool_exception``, ``on_tool_call_rejected``, ``on_progress_update``
    and ``throw_if_timed_out`` (always synchronous). ``call_model`` receives the live
    ``state.messages`` list: read it, copy it if you keep it, never mutate it.

    - ``activate(kind, names)``: a tool's result asked to activate plugins (``kind="plugins"``,
      ``ToolResult.activate_plugins``) or skills (``"skills"``); awaited before the next call of a
      serial run starts. Unwired, the request is reported as
      :class:`~bindloop.errors.MissingActivationPortError` and the run goes on.
    - ``runs_serially(call)``: such calls run first, alone, in model order, each outcome (including
      activations) applied before the next; the rest run concurrently, pooled per tool name. Asked
      once per call of a turn, after the turn's ``on_assistant_message`` and before its first call
      runs (with ``run_tool_batch`` wired, by the runner for the calls it is handed).
    - ``is_fatal_tool_error(exc)``: a raise that must end the run instead of becoming a tool error the
      model reads, asked the moment a call raises. :class:`~bindloop.errors.RunCancelledError` is
      always fatal. Unwired, :func:`~bindloop.errors.is_infrastructure_error` decides: a
      :class:`~bindloop.stores.StoreError` (a receipt's claim or completion failing) ends the run,
      which resumes from its last checkpoint, instead of the model reading it and the effect being
      lost. Wired, the predicate replaces that default (``lambda e: is_infrastructure_error(e) or
      mine(e)`` adds to it; returning ``False`` for a store error makes it a tool error again).
    - ``format_tool_exception(exc)``: the :class:`~bindloop.contracts.ToolError` the model reads for
      any other raise. Unwired, the model sees only the exception's type and a fixed text
      (``"RuntimeError: the tool failed"``): an exception message can hold what must never reach a
      provider (a password in a connection error, a path, a query). A
      :class:`~bindloop.errors.ToolFailure` the tool raises on purpose keeps its message either way.
      The host still receives the exception itself through ``on_tool_call_rejected``.
    - ``signal``: bounds the batch and is checked between iterations; a fired signal ends as
      ``aborted`` and queued calls come back ``not_run``.
    - ``before_tool_message_accepted(message, ordinal)``: awaited before each tool result this loop
      produced is appended; ``ordinal`` is dense over accepted results within the batch. A raise means
      the message is not appended and the run fails.
    - ``on_step_settled(would_end)``: at most once per iteration, where input may join the transcript.
    - ``on_turn_would_end(turn)``: the run would end ``done`` with ``turn`` (the
      :class:`~bindloop.contracts.ModelTurnResult` that would become ``final_turn``); returning
      messages (a nudge, or a re-ask after a validator refused ``turn``) appends them and continues
      the run; ``None`` or ``()`` lets it end.
    - ``run_tool_batch(calls, run)``: wraps every tool batch (a tool-call-loop middleware). Wired,
      each turn's calls — all of them, serial ones and a lone call included — reach it once, in the
      model's order, with ``run``, the loop's own executor: ``await run(calls)`` runs the calls it
      is given (all, some, or rewritten ones, as often as it likes) exactly as the unwired loop runs
      a batch — ``runs_serially`` calls first, alone, in order; the rest pooled per tool name under
      ``batch_options``; once ``signal`` fires no further call starts and each is answered as a
      ``not_run`` :class:`~bindloop.contracts.ToolError`; a raise becomes the tool error
      ``format_tool_exception`` gives (reported through ``on_tool_call_rejected``), a fatal one
      propagates out of ``run``. It returns one outcome per call, in order. The port returns one
      :class:`~bindloop.contracts.ToolOutcome` per call it was given, in order (a sequence of the
      wrong length or holding a non-outcome is a :class:`~bindloop.errors.PortContractError`
      naming the port); those are the results the transcript gets. ``stats`` counts what ``run``
      ran; activations are read off the port's outcomes and applied after the port returns (a
      serial call's activation is not applied before the next call starts, as it is unwired).
      Unwired, the loop runs every batch itself, as ``runs_serially`` describes.
    - ``is_final_call(call, outcome)``: after a batch, a call whose outcome satisfies it (asked
      once every call is answered, for each call in model order, with its outcome as the
      transcript gets it) makes the batch end the run: once its
      results are appended the run is treated as a turn that would end — ``on_step_settled(True)``,
      then ``on_turn_would_end(turn)`` — and ends ``done`` with that turn as ``final_turn``; the
      real call and its result stay in the transcript, nothing is made up. A fired signal still
      ends it ``aborted``, and a suspend still open ends it with the suspend's reason.
    - ``compact(messages)``: before each model call; returning :class:`CompactionApplied` replaces the
      transcript.
    """

    call_model: CallModelFn
    run_tool_call: RunToolCallFn
    build_tools: Callable[[], MaybeAwaitable[Sequence[ToolDefinition]]] | None = None
    now: Clock = monotonic_ms
    runs_serially: Callable[[ToolCall], bool] | None = None
    activate: Callable[[ActivationKind, tuple[str, ...]], MaybeAwaitable[None]] | None = None
    is_fatal_tool_error: Callable[[BaseException], bool] | None = None
    format_tool_exception: Callable[[Exception], ToolError] | None = None
    on_tool_call_rejected: Callable[[str, BaseException], None] | None = None
    should_stop: Callable[[], MaybeAwaitable[bool]] | None = None
    signal: AbortSignal | None = None
    throw_if_timed_out: Callable[[], None] | None = None
    ensure_not_cancelled: Callable[[], MaybeAwaitable[None]] | None = None
    on_assistant_message: Callable[[AssistantMessage], MaybeAwaitable[None]] | None = None
    on_progress_update: Callable[[int, int], None] | None = None
    on_turn_would_end: Callable[
        [ModelTurnResult], MaybeAwaitable[Sequence[Message] | None]] | None = None
    before_tool_message_accepted: Callable[[ToolMessage, int], MaybeAwaitable[None]] | None = None
    on_step_settled: Callable[[bool], MaybeAwaitable[StepSettlement | None]] | None = None
    compact: Callable[[list[Message]], MaybeAwaitable[CompactionApplied | None]] | None = None
    batch_options: ToolBatchOptions = ToolBatchOptions()
    run_tool_batch: RunToolBatchFn | None = None
    is_final_call: Callable[[ToolCall, ToolOutcome], bool] | None = None


EFFECT_PORTS: Final = (
    "activate", "before_tool_message_accepted", "compact", "is_final_call", "on_assistant_message",
    "on_progress_update", "on_step_settled", "on_turn_would_end", "run_tool_batch", "runs_serially",
)
"""The optional ports of :class:`ToolLoopPorts` the machine emits effects for only when wired
(``runs_serially`` and ``is_final_call`` as the decision requests ``PlanBatch`` and
``CheckFinal``, whose answers the driver fills in)."""

WIRABLE: Final = frozenset(EFFECT_PORTS) | {"on_boundary"}
"""What a :class:`~bindloop.lowlevel.LoopMachine`'s ``wired`` set may name: :data:`EFFECT_PORTS`
and ``on_boundary`` (:class:`LoopControl`'s hook)."""


class ToolLoopParams(ToolLoopPorts, frozen=True, kw_only=True):
    """Everything a run needs: its live ``state``, the model turns it may use
    (``max_iterations``), and the ports of :class:`ToolLoopPorts`.

    ``resume_calls`` are calls of ``state.open_suspends`` to run now (an approved call: each names
    an open suspend's call id and tool, its arguments may differ): the run begins with them as its
    first batch, run and reported exactly as a turn's batch — pool, bounds, signal,
    ``run_tool_batch`` — and their results answer the suspends; the run then goes on as after any
    batch (suspends still open end it with their reason)."""

    state: ToolLoopState
    max_iterations: int
    resume_calls: tuple[ToolCall, ...] = ()


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
