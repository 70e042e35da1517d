"""The loop's ports, grouped (:class:`ToolLoopPorts`): the model, the :class:`ToolRunner` (what a
tool call is and how it runs), the :class:`LoopHooks` (what the host hears and may change at each
step) and one stop signal.

:class:`ToolRunner` and :class:`LoopHooks` are plain classes whose optional methods do nothing (or the documented default) until
overridden, by a subclass or by passing the function by keyword to the constructor. Which ones are
overridden is fixed when the object is built (:attr:`LoopHooks.wired`, :attr:`ToolRunner.wired`):
the loop asks only those, so an unwired method changes nothing and costs nothing. A subclass
that defines ``__init__`` calls ``super().__init__()``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar

import msgspec

from ..contracts import (
    AssistantMessage,
    CompactionApplied,
    Message,
    ModelTurnResult,
    ToolCall,
    ToolDefinition,
    ToolError,
    ToolMessage,
    ToolOutcome,
)
from ..clock import Clock, monotonic_ms
from ..errors import UsageError, is_infrastructure_error
from ..model import Model, ModelRequest
from ..signal import AbortSignal
from ._pool import ToolBatchOptions
from ._tool_errors import default_tool_exception_error
from ._types import ActivationKind, BatchRunner, MaybeAwaitable, StepSettlement, ToolLoopState

__all__ = ("LoopHooks", "ToolLoopParams", "ToolLoopPorts", "ToolRunner")


def _overridden(cls: type, base: type, names: tuple[str, ...]) -> frozenset[str]:
    return frozenset(n for n in names if getattr(cls, n) is not getattr(base, n))


def _take(obj: object, kind: str, given: dict[str, Any]) -> frozenset[str]:
    """Set the functions passed by keyword on ``obj``; the names set. A non-callable is a
    :class:`~bindloop.errors.UsageError` naming it."""
    wired = []
    for name, fn in given.items():
        if fn is None:
            continue
        if not callable(fn):
            raise UsageError(f"{kind}({name}=...) must be callable, got {type(fn).__name__}")
        setattr(obj, name, fn)
        wired.append(name)
    return frozenset(wired)


class LoopHooks:
    """What the host hears at each step of a run, and where it may change the run. Every method
    does nothing until overridden — subclass it, or pass the functions by keyword
    (``LoopHooks(on_step_settled=settle)``); the loop calls only the overridden ones.

    Each may be a plain function or a coroutine function, except ``on_progress_update`` and
    ``on_tool_call_rejected`` (always synchronous).

    - ``on_assistant_message(message)``: each assistant message the transcript accepts, before its
      calls run.
    - ``on_progress_update(output_tokens, requested_tool_calls)``: the run's figures after each
      model turn.
    - ``activate(kind, names)``: a tool's result asked to activate plugins (``kind="plugins"``,
      ``ToolResult.activate_plugins``) or skills (``"skills"``); awaited before the next call of a
      serial run starts. Not overridden, the request is reported as
      :class:`~bindloop.errors.MissingActivationPortError` and the run goes on.
    - ``on_tool_call_rejected(tool_call_id, exc)``: a call that did not produce its result — the
      exception it raised (the model reads the formatted :class:`~bindloop.contracts.ToolError`),
      or the typed error for a call refused or never run.
    - ``before_tool_message_accepted(message, ordinal)``: awaited before each tool result this loop
      produced is appended; ``ordinal`` is dense over accepted results within the batch. A raise
      means the message is not appended and the run fails.
    - ``on_step_settled(would_end)``: at most once per iteration, where input may join the
      transcript: the :class:`StepSettlement` returned appends its messages (and may stop the run).
    - ``on_turn_would_end(turn)``: the run would end ``done`` with ``turn`` (the
      :class:`~bindloop.contracts.ModelTurnResult` that would become ``final_turn``); returning
      messages (a nudge, or a re-ask after a validator refused ``turn``) appends them and continues
      the run; ``None`` or ``()`` lets it end.
    - ``compact(messages)``: before each model call; returning
      :class:`~bindloop.contracts.CompactionApplied` replaces the transcript.
    """

    PORTS: ClassVar[tuple[str, ...]] = (
        "activate", "before_tool_message_accepted", "compact", "on_assistant_message",
        "on_progress_update", "on_step_settled", "on_tool_call_rejected", "on_turn_would_end",
    )
    _overridden: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._overridden = _overridden(cls, LoopHooks, LoopHooks.PORTS)

    def __init__(
        self, *,
        on_assistant_message: Callable[[AssistantMessage], MaybeAwaitable[None]] | None = None,
        on_progress_update: Callable[[int, int], None] | None = None,
        activate: Callable[[ActivationKind, tuple[str, ...]], MaybeAwaitable[None]] | None = None,
        on_tool_call_rejected: Callable[[str, BaseException], None] | None = None,
        before_tool_message_accepted: Callable[[ToolMessage, int], MaybeAwaitable[None]]
        | None = None,
        on_step_settled: Callable[[bool], MaybeAwaitable[StepSettlement | None]] | None = None,
        on_turn_would_end: Callable[[ModelTurnResult], MaybeAwaitable[Sequence[Message] | None]]
        | None = None,
        compact: Callable[[list[Message]], MaybeAwaitable[CompactionApplied | None]] | None = None,
    ) -> None:
        given = _take(self, "LoopHooks", {
            "on_assistant_message": on_assistant_message, "on_progress_update": on_progress_update,
            "activate": activate, "on_tool_call_rejected": on_tool_call_rejected,
            "before_tool_message_accepted": before_tool_message_accepted,
            "on_step_settled": on_step_settled, "on_turn_would_end": on_turn_would_end,
            "compact": compact})
        self.wired: frozenset[str] = type(self)._overridden | given
        """The hooks overridden (by the class or the constructor): the only ones the loop calls."""

    def on_assistant_message(self, message: AssistantMessage, /) -> MaybeAwaitable[None]:
        return None

    def on_progress_update(self, output_tokens: int, requested_tool_calls: int, /) -> None:
        return None

    def activate(self, kind: ActivationKind, names: tuple[str, ...], /) -> MaybeAwaitable[None]:
        return None

    def on_tool_call_rejected(self, tool_call_id: str, exc: BaseException, /) -> None:
        return None

    def before_tool_message_accepted(self, message: ToolMessage, ordinal: int,
                                     /) -> MaybeAwaitable[None]:
        return None

    def on_step_settled(self, would_end: bool, /) -> MaybeAwaitable[StepSettlement | None]:
        return None

    def on_turn_would_end(self, turn: ModelTurnResult,
                          /) -> MaybeAwaitable[Sequence[Message] | None]:
        return None

    def compact(self, messages: list[Message], /) -> MaybeAwaitable[CompactionApplied | None]:
        return None


class ToolRunner:
    """What the loop's tools are and how a call runs: ``run_tool_call`` is required (override it
    or pass it by keyword, ``ToolRunner(run_tool_call=dispatch)``; the loop refuses a runner
    without it); the rest have defaults.

    ``run_tool_call`` and ``build_tools`` may be plain functions or coroutine functions;
    ``run_tool_batch`` is always awaited; the predicates and ``format_tool_exception`` are always
    synchronous.

    - ``run_tool_call(call)``: one call's :class:`~bindloop.contracts.ToolOutcome`.
    - ``build_tools()``: the tool definitions offered with each model call (the request's
      ``tools``); by default none.
    - ``runs_serially(call)``: such calls run first, alone, in model order, each outcome (including
      activations) applied before the next; the rest run concurrently, pooled per tool name under
      ``batch_options``. Asked once per call of a turn, after the turn's ``on_assistant_message``
      and before its first call runs (with ``run_tool_batch`` overridden, by the runner for the
      calls it is handed). By default no call does.
    - ``is_fatal_tool_error(exc)``: a raise that must end the run instead of becoming a tool error
      the model reads, asked the moment a call raises. :class:`~bindloop.errors.RunCancelledError`
      is always fatal. By default :func:`~bindloop.errors.is_infrastructure_error` decides: a
      :class:`~bindloop.stores.StoreError` (a receipt's claim or completion failing) ends the run,
      which resumes from its last checkpoint, instead of the model reading it and the effect being
      lost. An override replaces that default (``super().is_fatal_tool_error(e) or mine(e)`` adds
      to it).
    - ``format_tool_exception(exc)``: the :class:`~bindloop.contracts.ToolError` the model reads
      for any other raise. By default only the exception's type and a fixed text
      (``"RuntimeError: the tool failed"``): an exception message can hold what must never reach a
      provider. A :class:`~bindloop.errors.ToolFailure` the tool raises on purpose keeps its
      message either way; the host receives the exception itself through
      ``LoopHooks.on_tool_call_rejected``.
    - ``run_tool_batch(calls, run)``: wraps every tool batch (a tool-call-loop middleware).
      Overridden, each turn's calls — all of them, serial ones and a lone call included — reach it
      once, in the model's order, with ``run``, the loop's own executor: ``await run(calls)`` runs
      the calls it is given (all, some, or rewritten ones, as often as it likes) exactly as the
      loop runs a batch — ``runs_serially`` calls first, alone, in order; the rest pooled per
      tool name under ``batch_options``; once the signal fires no further call starts and each is
      answered as a ``not_run`` :class:`~bindloop.contracts.ToolError`; a raise becomes the tool
      error ``format_tool_exception`` gives (reported through ``on_tool_call_rejected``), a fatal
      one propagates out of ``run``. It returns one outcome per call, in order. The method returns
      one :class:`~bindloop.contracts.ToolOutcome` per call it was given, in order (a sequence of
      the wrong length or holding a non-outcome is a :class:`~bindloop.errors.PortContractError`
      naming the port); those are the results the transcript gets. ``stats`` counts what ``run``
      ran; activations are read off the returned outcomes and applied after it returns.
      Not overridden, the loop runs each batch itself.
    - ``is_final_call(call, outcome)``: after a batch, a call whose outcome satisfies it (asked
      once every call is answered, for each call in model order, with its outcome as the
      transcript gets it) makes the batch end the run: once its results are appended the run is
      treated as a turn that would end — ``on_step_settled(True)``, then
      ``on_turn_would_end(turn)`` — and ends ``done`` with that turn as ``final_turn``; the real
      call and its result stay in the transcript. A fired signal still ends it ``aborted``, and a
      suspend still open ends it with the suspend's reason.
    """

    PORTS: ClassVar[tuple[str, ...]] = (
        "build_tools", "format_tool_exception", "is_fatal_tool_error", "is_final_call",
        "run_tool_batch", "run_tool_call", "runs_serially",
    )
    _overridden: ClassVar[frozenset[str]] = frozenset()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._overridden = _overridden(cls, ToolRunner, ToolRunner.PORTS)

    def __init__(
        self, *,
        run_tool_call: Callable[[ToolCall], MaybeAwaitable[ToolOutcome]] | None = None,
        build_tools: Callable[[], MaybeAwaitable[Sequence[ToolDefinition]]] | None = None,
        runs_serially: Callable[[ToolCall], bool] | None = None,
        is_fatal_tool_error: Callable[[BaseException], bool] | None = None,
        format_tool_exception: Callable[[Exception], ToolError] | None = None,
        run_tool_batch: Callable[[Sequence[ToolCall], BatchRunner],
                                 Awaitable[Sequence[ToolOutcome]]] | None = None,
        is_final_call: Callable[[ToolCall, ToolOutcome], bool] | None = None,
        batch_options: ToolBatchOptions | None = None,
    ) -> None:
        given = _take(self, "ToolRunner", {
            "run_tool_call": run_tool_call, "build_tools": build_tools,
            "runs_serially": runs_serially, "is_fatal_tool_error": is_fatal_tool_error,
            "format_tool_exception": format_tool_exception, "run_tool_batch": run_tool_batch,
            "is_final_call": is_final_call})
        wired = type(self)._overridden | given
        if batch_options is not None:
            if not isinstance(batch_options, ToolBatchOptions):
                raise UsageError(f"batch_options must be a ToolBatchOptions, got "
                                 f"{type(batch_options).__name__}")
            self.batch_options = batch_options
        self.wired: frozenset[str] = wired
        """The methods overridden (by the class or the constructor): the only optional ones the
        loop calls."""

    batch_options: ToolBatchOptions = ToolBatchOptions()
    """Per-tool bounds of a pooled batch (:class:`~bindloop.loop.ToolBatchOptions`)."""

    def run_tool_call(self, call: ToolCall, /) -> MaybeAwaitable[ToolOutcome]:
        raise UsageError(f"{type(self).__name__} does not run tool calls: override "
                         "run_tool_call or pass it to the constructor")

    def build_tools(self) -> MaybeAwaitable[Sequence[ToolDefinition]]:
        return ()

    def runs_serially(self, call: ToolCall, /) -> bool:
        return False

    def is_fatal_tool_error(self, exc: BaseException, /) -> bool:
        return is_infrastructure_error(exc)

    def format_tool_exception(self, exc: Exception, /) -> ToolError:
        return default_tool_exception_error(exc)

    def run_tool_batch(self, calls: Sequence[ToolCall], run: BatchRunner,
                       /) -> Awaitable[Sequence[ToolOutcome]]:
        return run(calls)

    def is_final_call(self, call: ToolCall, outcome: ToolOutcome, /) -> bool:
        return False


_NO_REQUEST = ModelRequest()


class ToolLoopPorts(msgspec.Struct, frozen=True, kw_only=True):
    """The executable side of a run, in four parts: the model, the tool runner, the hooks and one
    stop signal. :class:`ToolLoopParams` adds the run's ``state`` and ``max_iterations``;
    ``bindloop.checkpoints.RestoredLoop`` adds ``capture_bindings``.

    - ``model``: the :class:`~bindloop.model.Model` each turn is asked of. The loop awaits
      ``model.complete(state.messages, request)`` — ``request`` with the runner's
      ``build_tools()`` as its ``tools`` when it builds any — and reads the
      :class:`~bindloop.contracts.ModelTurnResult` (its ``accept_message`` and ``cost`` included).
      The model receives the live ``state.messages`` list: read it, copy what you keep, never
      mutate it.
    - ``runner``: the :class:`ToolRunner` — the one required tool port (``run_tool_call``) and the
      tool rules (serial calls, fatal raises, what the model reads for a raise, the batch wrapper,
      the final call).
    - ``hooks``: the :class:`LoopHooks` the run reports to (by default none).
    - ``signal``: the run's one stop signal, polled (:meth:`~bindloop.signal.AbortSignal.poll`)
      at every boundary between iterations. Fired, the run ends ``aborted``; when its reason is a
      :class:`~bindloop.errors.RunTimeoutError` (a deadline's signal,
      :attr:`bindloop.run.RunDeadline.signal`) or a :class:`~bindloop.errors.RunCancelledError`,
      the loop raises that reason instead. A host's own test ("should this run stop?") is a check
      on the signal (:meth:`~bindloop.signal.AbortSignal.add_check`). The signal also bounds the
      batch: once it fires no queued call starts and each comes back ``not_run``.
    - ``request``: what every model call shares besides the tools (``tool_choice``, ``schema``,
      ``additional_options``, the model call's own ``signal``); it carries no ``tools``.
    - ``now``: the clock that times model and tool calls.
    """

    model: Model
    runner: ToolRunner
    hooks: LoopHooks = msgspec.field(default_factory=LoopHooks)
    signal: AbortSignal | None = None
    request: ModelRequest = _NO_REQUEST
    now: Clock = monotonic_ms


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
