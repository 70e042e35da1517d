"""Durable agent runs on Temporal (optional extra ``bindloop[temporal]``: temporalio).

A run is the workflow :class:`AgentRunWorkflow`. The loop itself — bindloop's deterministic
driver, :func:`bindloop.checkpoints.run_from_checkpoint` over ``run_tool_loop`` — runs *inside* the
workflow, so Temporal replays it from history after a worker dies; everything that touches the
world is an activity:

- each **model turn** is the activity ``bindloop.model_turn``;
- each **tool batch** (all the calls of one model turn) is ONE activity, ``bindloop.tool_batch``.
  The workflow's loop hands the batch to its ``run_tool_batch`` port, which runs the activity and
  then feeds the activity's outcomes through the loop's own runner, so the workflow's stats and
  transcript are what an unwired loop would make of them. Inside the activity the loop itself
  runs the batch (:func:`bindloop.loop.run_tool_loop` over that one turn): the host's
  ``runs_serially`` calls first, alone and in order, the rest pooled per tool name under
  ``batch_options``, a raise formatted by ``format_tool_exception``, a fatal one
  (``is_fatal_tool_error``) failing the workflow;
- every call's outcome is **journaled** in the payload store as it finishes, so a batch activity
  retried after its worker died (SIGKILL, lost machine) replays the calls that had finished and
  runs only the ones that had not. A call in flight at the kill runs again: side-effecting tools
  still go through idempotency receipts (``bindloop.run``) so that second run replays instead of
  repeating the effect. A call whose tool raised (not fatally) is journaled too, as the loop's
  answer to it — the :class:`~bindloop.contracts.ToolError` the model reads (the loop's
  ``tool_exception_error``, ``format_tool_exception``'s when wired) and the exception's type
  name, never the exception — so a retried batch answers it from the journal and the tool runs
  at most once. The host's ``on_tool_call_rejected`` (applied inside the batch) sees the
  rejection from the attempt that finishes the batch: the exception itself if that attempt ran
  the tool, a :class:`JournaledToolRaise` (the same text, kind and type name) if an earlier one
  did; the workflow's loop gets the call's ``ToolError`` among the batch's outcomes either way.
  A *fatal* raise is not journaled: it fails the workflow (a non-retryable activity failure),
  so no attempt retries the batch; a new workflow run of the execution journals under its own
  run id, so there the call runs again. With ``is_fatal_tool_error`` unwired, bindloop's own
  store failing inside a tool (:func:`bindloop.errors.is_infrastructure_error`: a receipt's
  claim or completion raising ``StoreError``) is neither an answer nor fatal: it is not
  journaled and fails the batch's attempt *retryably*, so Temporal retries the batch, which
  replays the calls that had finished and runs that one again, its receipt deciding what is
  left to do (the Temporal form of "the run stops and resumes from its last checkpoint");
- the loop's clock is workflow time, so replays see the same times.

**Suspends are updates.** A tool that returns ``ToolSuspend`` ends the loop with a
``waiting_for_reply`` (or ``resuming_later``) checkpoint held in the workflow; the update
``reply(tool_call_id, content)`` (or ``wake``) applies the answer
(:func:`bindloop.checkpoints.apply_checkpoint_input`) and the run goes on. An update that does not fit
the checkpoint is rejected by its validator, before it enters history.

**Cancellation is Temporal's.** Cancelling the workflow cancels the activity in flight and the
workflow ends as cancelled; the ``checkpoint`` query still answers with the last settled
checkpoint, from which a new run (or another engine) can go on. With ``heartbeat_timeout_s`` set
the batch activity heartbeats while its tools run, which is how the cancellation reaches them: the
activity's task is cancelled, the tools in flight get ``CancelledError`` at their next await and
the calls still queued never start. (Without a heartbeat timeout Temporal tells a worker of the
cancellation at the next throttled heartbeat, up to 30 s later, or never.)

**Large payloads by reference.** The transcript is not sent to every model turn: the workflow
puts each turn's new messages once into a :class:`~bindloop.stores.ToolCallReceiptStore` shared by
the workers (a completed receipt per chunk, under tenant ``"bindloop-temporal"``), and the
activity gets the list of chunk references, so history grows with each message about twice
instead of once per turn that follows. Each chunk is written by the model-turn activity that first
sends it; a retried attempt completes a chunk whose row an attempt that died (a killed worker, a
cut connection) had claimed but not completed — every attempt writes the same bytes there. A tool result whose content is larger than
``inline_bytes`` (16 KiB by default) does not enter history at all: the batch activity returns a
reference to its journal row (``ToolResult.content`` is ``"\\x00bindloop-ref:<name>"``), the
workflow's transcript, ``checkpoint`` query and result hold that reference, and the model-turn
activity reads the content back for the model. A host reading a result or query resolves them with
:func:`resolve_references`.

The host wires its model and tools with :func:`agent_activities` and registers the workflow with
:func:`agent_worker`; workflows must live in importable modules (this one), not ``__main__``.
What is not here: the agent API's hooks (``create_agent``) — the workflow drives the loop ports.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import msgspec
from temporalio import activity, workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from bindloop._awaitable import isawaitable
    from bindloop.contracts import (
        Message,
        ModelTurnResult,
        ToolCall,
        ToolDefinition,
        ToolError,
        ToolOutcome,
        decode_messages,
        encode_messages,
    )
    from bindloop.errors import BindloopError, PortContractError, RunCancelledError, ToolFailure
    from bindloop.completion import StreamEvent
    from bindloop.loop import (
        BatchRunner,
        BoundaryDecision,
        LoopHooks,
        ToolBatchOptions,
        ToolLoopParams,
        ToolLoopState,
        ToolRunner,
        run_tool_loop,
    )
    from bindloop.model import Model, ModelRequest, StreamModel, turn_events
    from bindloop.signal import AbortSignal
    from bindloop.errors import is_infrastructure_error
    from bindloop.lowlevel import is_fatal_raise, tool_exception_error
    from bindloop.run import sha256_hex
    from bindloop.stores import ToolCallReceiptStore
    from bindloop.checkpoints import (
        CheckpointInputError,
        CheckpointReply,
        CheckpointWake,
        LoopCheckpoint,
        RestoredLoop,
        apply_checkpoint_input,
        parse_loop_checkpoint,
        run_from_checkpoint,
        serialize_loop_checkpoint,
    )
    from bindloop.stores import StoreError

    from bindloop.hosts.temporal._payloads import (
        PAYLOAD_TENANT,
        JournaledRaise,
        chunk_key,
        journal_key,
        journal_outcome,
        read_payload,
        record_outcome,
        resolve_messages,
        resolve_references,
        stub_if_large,
        write_payload,
    )

__all__ = ("PAYLOAD_TENANT", "AgentActivities", "AgentRunInput", "AgentRunOutcome",
           "AgentRunWorkflow", "JournaledToolRaise", "ModelTurnInput", "ToolBatchInput",
           "agent_activities", "agent_worker", "resolve_references")

_OUTCOMES = msgspec.json.Decoder(list[ToolOutcome])


@dataclass(frozen=True, kw_only=True)
class AgentRunInput:  # Temporal's payload converter reads dataclasses
    """The run's start: the checkpoint to run from (its JSON), the tools offered to the model,
    and the activities' timeouts (``tool_timeout_s`` bounds one batch activity, start to close;
    ``heartbeat_timeout_s`` makes it heartbeat, see the module docstring)."""

    checkpoint: str
    tools: list[dict[str, Any]] = field(default_factory=list)
    model_timeout_s: float = 120.0
    tool_timeout_s: float = 300.0
    heartbeat_timeout_s: float | None = None


@dataclass(frozen=True, kw_only=True)
class AgentRunOutcome:  # Temporal's payload converter reads dataclasses
    stop_reason: str
    checkpoint: str
    revision: int
    model_turns: int
    tool_calls: int
    tool_batches: int = 0


@dataclass(frozen=True, kw_only=True)
class ModelTurnInput:  # Temporal's payload converter reads dataclasses
    execution_id: str
    chunks: list[str]
    new_chunk: str
    new_messages: str
    tools: list[dict[str, Any]]


@dataclass(frozen=True, kw_only=True)
class ToolBatchInput:  # Temporal's payload converter reads dataclasses
    """One model turn's tool calls; ``batch`` names the batch (Temporal run id and ordinal), so
    the journal rows of its calls are ``<batch>:<call id>:<hash of name and arguments>``."""

    execution_id: str
    batch: str
    calls: list[dict[str, Any]]


class JournaledToolRaise(ToolFailure):
    """What the host's ``on_tool_call_rejected`` receives, in a retried batch activity, for a call
    whose tool raised under an earlier attempt: the tool is not run again and its exception is
    gone with that attempt (only its answer was journaled). ``message`` and ``kind`` are the tool
    error the model read, ``exception_type`` the original exception's type name. The attempt
    that ran the tool reported the exception itself."""

    def __init__(self, message: str, *, kind: str = "error", exception_type: str) -> None:
        super().__init__(message, kind=kind)
        self.exception_type = exception_type


class _Abandon(Exception):
    """Raised inside a batch to end the activity instead of becoming a tool error the model reads
    (the journal failed, or a tool raised a fatal error)."""

    def __init__(self, error: ApplicationError) -> None:
        super().__init__(str(error))
        self.error = error


@asynccontextmanager
async def _heartbeating() -> AsyncIterator[None]:
    # With a heartbeat timeout the activity beats while it runs, which is also how a
    # cancellation (the workflow's) reaches its tools: as CancelledError at their next await.
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        yield
        return

    async def beat(every: float) -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(every)

    beats = asyncio.ensure_future(beat(timeout.total_seconds() / 3))
    try:
        yield
    finally:
        beats.cancel()


class AgentActivities:
    """The activities, bound to the host's model and tools. ``model`` answers each model turn
    (``model.complete(messages, request)``, the request carrying the tools the workflow offers).
    ``payloads`` is the shared store of transcript chunks and batch journals (any
    :class:`~bindloop.stores.ToolCallReceiptStore` every worker reaches: ``SqliteStore`` on one
    machine, ``PostgresStore`` across machines). ``run_tool_call``, ``runs_serially``,
    ``batch_options``, ``is_fatal_tool_error`` and ``format_tool_exception`` are the
    :class:`~bindloop.loop.ToolRunner`'s of those names and ``on_tool_call_rejected`` the
    :class:`~bindloop.loop.LoopHooks`' one, applied inside each batch (``is_fatal_tool_error``
    unwired: a store error inside a tool retries the batch, see the module's docstring);
    ``inline_bytes`` is the largest tool result content kept inline in workflow history."""

    def __init__(self, *, model: Model,
                 run_tool_call: Callable[[ToolCall], Awaitable[ToolOutcome]],
                 payloads: ToolCallReceiptStore,
                 runs_serially: Callable[[ToolCall], bool] | None = None,
                 batch_options: ToolBatchOptions = ToolBatchOptions(),
                 is_fatal_tool_error: Callable[[BaseException], bool] | None = None,
                 format_tool_exception: Callable[[Exception], ToolError] | None = None,
                 on_tool_call_rejected: Callable[[str, BaseException], None] | None = None,
                 inline_bytes: int = 16_384) -> None:
        if isinstance(inline_bytes, bool) or not isinstance(inline_bytes, int) or inline_bytes < 0:
            raise ValueError(f"inline_bytes must be a non-negative int, got {inline_bytes!r}")
        self._model = model
        self._run_tool_call = run_tool_call
        self._payloads = payloads
        self._runs_serially = runs_serially
        self._batch_options = batch_options
        self._is_fatal = is_fatal_tool_error
        self._format = format_tool_exception
        self._rejected = on_tool_call_rejected
        self._inline_bytes = inline_bytes

    @activity.defn(name="bindloop.model_turn")
    async def model_turn(self, turn: ModelTurnInput) -> str:
        store = self._payloads
        if turn.new_messages:
            # Idempotent: a retried activity finds its chunk completed, or completes it — also
            # when the attempt before it died between claiming the row and completing it (that
            # claim used to be trusted, and this turn then found its own chunk missing).
            await write_payload(store, chunk_key(turn.execution_id, turn.new_chunk),
                                turn.new_messages)
        messages: list[Any] = []
        for chunk in turn.chunks:
            text = await read_payload(store, chunk_key(turn.execution_id, chunk))
            if text is None:
                raise ApplicationError(f"transcript chunk {chunk!r} of {turn.execution_id!r} is "
                                       "missing from the payload store", non_retryable=True)
            messages.extend(decode_messages(text))
        try:
            messages = await resolve_messages(messages, execution_id=turn.execution_id,
                                              payloads=store)
        except StoreError as exc:
            raise ApplicationError(str(exc), non_retryable=True) from None
        tools = msgspec.convert(turn.tools, list[ToolDefinition])
        result = await self._model.complete(messages, ModelRequest(tools=tuple(tools)))
        return msgspec.json.encode(result).decode()

    @activity.defn(name="bindloop.tool_batch")
    async def tool_batch(self, batch: ToolBatchInput) -> str:
        calls = tuple(msgspec.convert(batch.calls, list[ToolCall]))
        async with _heartbeating():
            try:
                outcomes = await self._run_batch(batch, calls)
            except _Abandon as abandon:
                raise abandon.error from None
        limit = self._inline_bytes
        return msgspec.json.encode([stub_if_large(o, _row(batch, c), limit)
                                    for c, o in zip(calls, outcomes)]).decode()

    async def _run_batch(self, batch: ToolBatchInput,
                         calls: tuple[ToolCall, ...]) -> Sequence[ToolOutcome]:
        store, ident, tool = self._payloads, batch.execution_id, self._run_tool_call
        host_fatal, host_format = self._is_fatal, self._format
        # The tool errors journaled for this attempt's raises, by exception: the loop's own
        # formatting of the raise gives the model the very text the journal holds.
        formatted: dict[int, tuple[Exception, ToolError]] = {}

        def fatal(exc: BaseException) -> bool:
            if isinstance(exc, _Abandon):
                return True
            if isinstance(exc, JournaledToolRaise):
                return False  # journaled as an answer, so it was not fatal when it was raised
            return host_fatal is not None and host_fatal(exc)

        def format_raise(exc: Exception) -> ToolError:
            made = formatted.pop(id(exc), None)
            if made is not None and made[0] is exc:
                return made[1]
            return tool_exception_error(exc, host_format)

        def answer(entry: Any) -> ToolOutcome:
            if isinstance(entry, JournaledRaise):  # the loop reports it as the raise it was
                raise JournaledToolRaise(entry.error.error, kind=entry.error.kind,
                                         exception_type=entry.exception_type)
            outcome: ToolOutcome = entry
            return outcome

        async def journal(call: ToolCall, key: Any, attempt: int, entry: Any) -> Any:
            try:
                kept = await record_outcome(store, key, attempt, entry)
            except Exception as exc:
                raise _Abandon(_journal_error(exc)) from None
            if kept is None:
                raise _Abandon(ApplicationError(
                    f"the journal row of call {call.id!r} is held by another attempt"))
            return kept

        async def journaled(call: ToolCall) -> ToolOutcome:
            key = journal_key(ident, _row(batch, call))
            try:
                stored, attempt = await journal_outcome(store, key)
            except Exception as exc:
                raise _Abandon(_journal_error(exc)) from None
            if stored is not None:
                return answer(stored)  # finished before this attempt: replayed, not run again
            try:
                value: Any = tool(call)
                outcome: ToolOutcome = await value if isawaitable(value) else value
            except Exception as exc:
                if host_fatal is None and is_infrastructure_error(exc):
                    # Not an answer and not the run's end: this attempt of the batch fails and
                    # Temporal retries it; the call's receipt settles what its rerun does.
                    raise _Abandon(_tool_store_error(exc)) from None
                if is_fatal_raise(exc, fatal):
                    raise  # not an answer: the run ends (see tool_batch)
                error = tool_exception_error(exc, host_format)
                raised = JournaledRaise(error=error, exception_type=type(exc).__name__)
                kept = await journal(call, key, attempt, raised)
                if kept != raised:
                    return answer(kept)  # another attempt journaled first: its answer stands
                formatted[id(exc)] = (exc, error)
                raise  # the loop reports this attempt's raise with the exception itself
            return answer(await journal(call, key, attempt, outcome))

        got: list[Sequence[ToolOutcome]] = []

        async def port(given: Sequence[ToolCall], run: BatchRunner) -> Sequence[ToolOutcome]:
            got.append(await run(given))
            return got[-1]

        try:
            # The loop itself runs the batch: one model turn that asks for exactly these calls.
            await run_tool_loop(ToolLoopParams(
                model=_OneTurn(ModelTurnResult(tool_calls=calls)),
                runner=ToolRunner(
                    run_tool_call=journaled, run_tool_batch=port,
                    runs_serially=self._runs_serially, batch_options=self._batch_options,
                    is_fatal_tool_error=fatal, format_tool_exception=format_raise),
                hooks=LoopHooks(activate=_activations_are_the_workflows,
                                on_tool_call_rejected=self._rejected),
                state=ToolLoopState(), max_iterations=1))
        except _Abandon:
            raise
        except Exception as exc:  # a fatal tool error: the run must end, not retry the batch
            raise _Abandon(ApplicationError(
                f"a tool raised a fatal {type(exc).__name__}", type=type(exc).__name__,
                non_retryable=True)) from None
        if len(got) != 1 or len(got[0]) != len(calls):
            raise _Abandon(ApplicationError("the batch did not run as one batch",
                                            non_retryable=True))
        return got[0]


class _OneTurn(StreamModel):
    """The model of a batch activity's one-turn loop: it asks for the batch's calls."""

    id = "bindloop.tool_batch"

    def __init__(self, turn: ModelTurnResult) -> None:
        self.turn = turn

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        for event in turn_events(self.turn):
            yield event

    async def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                       on_event: Callable[[StreamEvent], None] | None = None,
                       on_reset: Callable[[], None] | None = None) -> ModelTurnResult:
        return self.turn


class _Turns(StreamModel):
    """The workflow's model: each turn is the model-turn activity, offered the request's tools."""

    id = "bindloop.model_turn"

    def __init__(self, call: Callable[[Sequence[Message], Sequence[ToolDefinition]],
                                      Awaitable[ModelTurnResult]]) -> None:
        self.call = call

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        for event in turn_events(await self.call(messages, request.tools)):
            yield event

    async def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                       on_event: Callable[[StreamEvent], None] | None = None,
                       on_reset: Callable[[], None] | None = None) -> ModelTurnResult:
        return await self.call(messages, request.tools)


def _row(batch: ToolBatchInput, call: ToolCall) -> str:
    # A call's journal row: its batch, its id, and what it asks (two calls of one batch that
    # share an id but not their arguments must not replay each other).
    asked = sha256_hex(f"{call.name}\n{call.arguments}")[:16]
    return f"{batch.batch}:{call.id}:{asked}"


def _activations_are_the_workflows(kind: str, names: tuple[str, ...]) -> None:
    # A result's activations travel back in the outcome; the workflow's loop applies them.
    return None


def _journal_error(exc: Exception) -> ApplicationError:
    # A StoreError's message names the store and the operation and nothing secret; anything
    # else is named by type only. Retryable: the store may be back for the next attempt.
    text = str(exc) if isinstance(exc, StoreError) else type(exc).__name__
    return ApplicationError(f"the batch journal failed: {text}")


def _tool_store_error(exc: Exception) -> ApplicationError:
    # As for the journal: a StoreError names the store and the operation and nothing secret;
    # anything else (raised from one, or a host's own InfrastructureError) by type only.
    text = str(exc) if isinstance(exc, StoreError) else type(exc).__name__
    return ApplicationError(f"a tool's store failed (the batch is retried): {text}",
                            type=type(exc).__name__)


def agent_activities(**kwargs: Any) -> list[Callable[..., Any]]:
    """``[model_turn, tool_batch]`` of an :class:`AgentActivities` built from ``kwargs``."""
    acts = AgentActivities(**kwargs)
    return [acts.model_turn, acts.tool_batch]


# A bindloop error raised in the workflow (a model turn the loop refuses, a port contract broken)
# fails the run, as it would end run_tool_loop anywhere else; any other exception fails only the
# workflow task, which Temporal retries (a bug fixed by a redeploy).
@workflow.defn(name="bindloop.AgentRun", failure_exception_types=[BindloopError])
class AgentRunWorkflow:
    """One agent run; see the module docstring."""

    def __init__(self) -> None:
        self._checkpoint: LoopCheckpoint | None = None
        self._inputs: list[CheckpointReply | CheckpointWake] = []
        self._chunks: list[str] = []
        self._sent = 0
        self._turns = 0
        self._calls = 0
        self._batches = 0
        self._served: dict[str, deque[ToolOutcome]] = {}
        self._cancelled = False

    @workflow.run
    async def run(self, start: AgentRunInput) -> AgentRunOutcome:
        cp = parse_loop_checkpoint(start.checkpoint)
        self._checkpoint = cp
        tools = msgspec.convert(start.tools, list[ToolDefinition])
        stop_reason = "done"
        while True:
            if self._inputs:
                cp = apply_checkpoint_input(cp, self._inputs.pop(0))
                self._checkpoint = cp
            if cp.status != "ready":
                if cp.status in ("waiting_for_reply", "resuming_later"):
                    await workflow.wait_condition(lambda: bool(self._inputs))
                    continue
                stop_reason = {"finished": "done"}.get(cp.status, cp.status)
                break
            result = await self._run_loop(cp, start, tools)
            cp = self._checkpoint = result.checkpoint
            stop_reason = str(result.stop_reason)
            if cp.status not in ("waiting_for_reply", "resuming_later", "ready"):
                break
        final = self._checkpoint
        assert final is not None
        return AgentRunOutcome(stop_reason=stop_reason,
                               checkpoint=serialize_loop_checkpoint(final).decode(),
                               revision=final.revision, model_turns=self._turns,
                               tool_calls=self._calls, tool_batches=self._batches)

    async def _run_loop(self, cp: LoopCheckpoint, start: AgentRunInput,
                        tools: Sequence[ToolDefinition]) -> Any:
        # The loop runs in its own task behind a shield: Temporal cancels the workflow by
        # cancelling this (the main) task, and inside the workflow's event loop the loop's anyio
        # task groups were seen to absorb that cancellation and run on (measured: every
        # remaining activity ran before the workflow ended as cancelled). Here the cancellation
        # is taken at the shield, the loop task is cancelled (cancelling the activities in
        # flight) and not waited for, and the workflow ends as cancelled at once.
        loop = asyncio.ensure_future(run_from_checkpoint(
            checkpoint=cp, commit=self._commit, restore=lambda c: self._restore(c, start, tools)))
        try:
            return await asyncio.shield(loop)
        except asyncio.CancelledError:
            # From here the ports refuse to start anything (a command after the cancellation
            # would be an invalid command sequence for Temporal).
            self._cancelled = True
            loop.cancel()
            loop.add_done_callback(lambda t: t.cancelled() or t.exception())  # seen, not logged
            raise

    def _refuse_if_cancelled(self) -> None:
        error = self._cancellation()
        if error is not None:
            raise error

    def _cancellation(self) -> RunCancelledError | None:
        # The run's stop signal polls it at every boundary: a cancelled workflow stops there.
        return RunCancelledError("the workflow was cancelled") if self._cancelled else None

    def _commit(self, cp: LoopCheckpoint) -> BoundaryDecision:
        self._checkpoint = cp  # history is the durable store; the checkpoint is for queries
        return "continue"

    def _restore(self, cp: LoopCheckpoint, start: AgentRunInput,
                 tools: Sequence[ToolDefinition]) -> RestoredLoop:
        ident = cp.execution_id
        run_id = workflow.info().run_id  # names this run's payload rows (see _temporal_payloads)

        async def call_model(messages: Sequence[Any],
                             offered: Sequence[ToolDefinition]) -> ModelTurnResult:
            self._refuse_if_cancelled()
            fresh = messages[self._sent:]
            chunk = f"{run_id}:{self._sent}-{len(messages)}" if fresh else ""
            if fresh:
                self._chunks.append(chunk)
                self._sent = len(messages)
            elif len(messages) < self._sent:  # compacted: start the mirror over
                self._chunks, self._sent = [], 0
                return await call_model(messages, offered)
            self._turns += 1
            out = await workflow.execute_activity(
                "bindloop.model_turn",
                ModelTurnInput(execution_id=ident, chunks=list(self._chunks), new_chunk=chunk,
                               new_messages=encode_messages(fresh).decode() if fresh else "",
                               tools=msgspec.to_builtins(list(offered))),
                start_to_close_timeout=timedelta(seconds=start.model_timeout_s),
                result_type=str)
            return msgspec.json.decode(out, type=ModelTurnResult)

        async def run_tool_batch(calls: Sequence[ToolCall],
                                 run: BatchRunner) -> list[ToolOutcome]:
            self._refuse_if_cancelled()
            batch = f"{run_id}-{self._batches}"
            self._batches += 1
            out = await workflow.execute_activity(
                "bindloop.tool_batch",
                ToolBatchInput(execution_id=ident, batch=batch,
                               calls=[msgspec.to_builtins(c) for c in calls]),
                start_to_close_timeout=timedelta(seconds=start.tool_timeout_s),
                heartbeat_timeout=(None if start.heartbeat_timeout_s is None
                                   else timedelta(seconds=start.heartbeat_timeout_s)),
                result_type=str)
            outcomes = _OUTCOMES.decode(out)
            if len(outcomes) != len(calls):
                raise PortContractError(f"the tool batch activity answered {len(outcomes)} "
                                        f"outcomes for {len(calls)} calls")
            for call, outcome in zip(calls, outcomes):
                self._served.setdefault(call.id, deque()).append(outcome)
            # Through the loop's own runner, which serves what the activity answered: the
            # loop's stats and rejections are those of an unwired loop that ran these calls.
            return await run(calls)

        def serve(call: ToolCall) -> ToolOutcome:
            self._calls += 1
            waiting = self._served.get(call.id)
            if not waiting:
                raise PortContractError(f"no outcome of the tool batch activity for call "
                                        f"{call.id!r}")
            outcome = waiting.popleft()
            if not waiting:
                del self._served[call.id]
            return outcome

        stop = AbortSignal()
        stop.add_check(self._cancellation)
        return RestoredLoop(model=_Turns(call_model),
                            runner=ToolRunner(
                                run_tool_call=serve, run_tool_batch=run_tool_batch,
                                build_tools=lambda: list(tools),
                                is_fatal_tool_error=lambda e: isinstance(
                                    e, (RunCancelledError, PortContractError))),
                            signal=stop,
                            now=lambda: workflow.time() * 1000.0,
                            capture_bindings=lambda: cp.bindings)
    def _check_input(self, answer: CheckpointReply | CheckpointWake) -> None:
        cp = self._checkpoint
        if cp is None:
            raise CheckpointInputError("ready", "the run has not started")
        apply_checkpoint_input(cp, answer)  # raises CheckpointInputError when it does not fit

    @workflow.update(name="reply")
    async def reply(self, tool_call_id: str, content: str) -> int:
        """Answer a ``waiting_for_reply`` suspend; the revision it lands on."""
        self._inputs.append(CheckpointReply(tool_call_id=tool_call_id, content=content))
        await workflow.wait_condition(lambda: not self._inputs)
        return self._checkpoint.revision if self._checkpoint else -1

    @reply.validator
    def _validate_reply(self, tool_call_id: str, content: str) -> None:
        self._check_input(CheckpointReply(tool_call_id=tool_call_id, content=content))

    @workflow.update(name="wake")
    async def wake(self, tool_call_id: str, content: str) -> int:
        """Answer a ``resuming_later`` suspend."""
        self._inputs.append(CheckpointWake(tool_call_id=tool_call_id, content=content))
        await workflow.wait_condition(lambda: not self._inputs)
        return self._checkpoint.revision if self._checkpoint else -1

    @wake.validator
    def _validate_wake(self, tool_call_id: str, content: str) -> None:
        self._check_input(CheckpointWake(tool_call_id=tool_call_id, content=content))

    @workflow.query(name="checkpoint")
    def checkpoint(self) -> str:
        """The latest settled checkpoint (JSON)."""
        cp = self._checkpoint
        return "" if cp is None else serialize_loop_checkpoint(cp).decode()


def agent_worker(client: Any, *, task_queue: str, activities: list[Callable[..., Any]],
                 **kwargs: Any) -> Any:
    """A ``temporalio.worker.Worker`` running :class:`AgentRunWorkflow` and ``activities``, with
    bindloop, msgspec and anyio passed through the workflow sandbox (they are deterministic and
    import-side-effect free; re-importing them per workflow would cost time for nothing)."""
    # anyio loads its asyncio backend on the first task group; a batch's runner opens one inside
    # the workflow, and a module first imported there is imported under the sandbox's
    # restrictions, which refuse it (seen: a fresh worker replaying a two-call batch).
    import anyio._backends._asyncio  # noqa: F401
    from temporalio.worker import Worker
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    runner = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default
                                     .with_passthrough_modules("bindloop", "msgspec", "anyio",
                                                               "sniffio"))
    return Worker(client, task_queue=task_queue, workflows=[AgentRunWorkflow],
                  activities=activities, workflow_runner=runner, **kwargs)
