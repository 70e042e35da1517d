"""Durable agent runs on Temporal (optional extra ``bindloop[temporal]``: temporalio).

A run is the workflow :class:`AgentRunWorkflow`. The loop itself — bindloop's deterministic
driver, :func:`bindloop.session.run_from_checkpoint` over ``run_tool_loop`` — runs *inside* the
workflow, so Temporal replays it from history after a worker dies; everything that touches the
world is an activity:

- each **model turn** is the activity ``bindloop.model_turn``;
- each **tool call** is the activity ``bindloop.tool_call`` (the calls of one batch run as
  concurrent activities, pooled as the loop pools them); side-effecting tools should still go
  through idempotency receipts (``bindloop.run``), because an activity whose worker died after the
  effect but before reporting is run again;
- the loop's clock is workflow time, so replays see the same times.

**Suspends are updates.** A tool that returns ``ToolSuspend`` ends the loop with a
``waiting_for_reply`` (or ``resuming_later``) checkpoint held in the workflow; the update
``reply(tool_call_id, content)`` (or ``wake``) applies the answer
(:func:`bindloop.session.apply_checkpoint_input`) and the run goes on. An update that does not fit
the checkpoint is rejected by its validator, before it enters history.

**Cancellation is Temporal's.** Cancelling the workflow cancels the activity in flight and the
workflow ends as cancelled; the ``checkpoint`` query still answers with the last settled
checkpoint, from which a new run (or another engine) can go on.

**Large payloads by reference.** The transcript is not sent to every model turn: the workflow
puts each turn's new messages once into a :class:`~bindloop.run.ToolCallReceiptStore` shared by
the workers (a completed receipt per chunk, under tenant ``"bindloop-temporal"``), and the
activity gets the list of chunk references, so history grows with each message about twice (once
as the activity result that produced it, once as the chunk that stores it) instead of once per
turn that follows.

The host wires its model and tools with :func:`agent_activities` and registers the workflow with
:func:`agent_worker`; workflows must live in importable modules (this one), not ``__main__``.
What is not here: the agent API's hooks (``create_agent``) — the workflow drives the loop ports.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import msgspec
from temporalio import activity, workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from bindloop.contracts import (
        ModelTurnResult,
        ToolCall,
        ToolDefinition,
        ToolOutcome,
        decode_messages,
        encode_messages,
    )
    from bindloop.errors import RunCancelledError
    from bindloop.loop import BoundaryDecision
    from bindloop.run import ReceiptCompleted, ToolCallReceiptKey, ToolCallReceiptStore
    from bindloop.session import (
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

__all__ = ("AgentActivities", "AgentRunInput", "AgentRunOutcome", "AgentRunWorkflow",
           "ModelTurnInput", "ToolCallInput", "agent_activities", "agent_worker")

PAYLOAD_TENANT = "bindloop-temporal"


@dataclass(frozen=True, kw_only=True)
class AgentRunInput:  # Temporal's payload converter reads dataclasses
    """The run's start: the checkpoint to run from (its JSON), the tools offered to the model,
    and the activities' timeouts."""

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


@dataclass(frozen=True, kw_only=True)
class ModelTurnInput:  # Temporal's payload converter reads dataclasses
    execution_id: str
    chunks: list[str]
    new_chunk: str
    new_messages: str
    tools: list[dict[str, Any]]


@dataclass(frozen=True, kw_only=True)
class ToolCallInput:  # Temporal's payload converter reads dataclasses
    execution_id: str
    call: dict[str, Any]


def _chunk_key(execution_id: str, chunk: str) -> ToolCallReceiptKey:
    return ToolCallReceiptKey(tenant_id=PAYLOAD_TENANT, run_id=execution_id,
                              tool_name="transcript", args_hash=chunk)


class AgentActivities:
    """The activities, bound to the host's model and tools. ``payloads`` is the shared store of
    transcript chunks (any :class:`~bindloop.run.ToolCallReceiptStore` every worker reaches:
    ``SqliteStore`` on one machine, ``PostgresStore`` across machines)."""

    def __init__(self, *, call_model: Callable[[list[Any], list[ToolDefinition]],
                                                Awaitable[ModelTurnResult]],
                 run_tool_call: Callable[[ToolCall], Awaitable[ToolOutcome]],
                 payloads: ToolCallReceiptStore) -> None:
        self._call_model = call_model
        self._run_tool_call = run_tool_call
        self._payloads = payloads

    @activity.defn(name="bindloop.model_turn")
    async def model_turn(self, turn: ModelTurnInput) -> str:
        store = self._payloads
        if turn.new_messages:
            key = _chunk_key(turn.execution_id, turn.new_chunk)
            # Idempotent: a retried activity finds its chunk already completed.
            if await store.claim(key, 1, 600_000.0):
                await store.complete(key, 1, turn.new_messages)
        messages: list[Any] = []
        for chunk in turn.chunks:
            state = await store.read(_chunk_key(turn.execution_id, chunk))
            if not isinstance(state, ReceiptCompleted) or not isinstance(state.result, str):
                raise ApplicationError(f"transcript chunk {chunk!r} of {turn.execution_id!r} is "
                                       "missing from the payload store", non_retryable=True)
            messages.extend(decode_messages(state.result))
        tools = msgspec.convert(turn.tools, list[ToolDefinition])
        result = await self._call_model(messages, tools)
        return msgspec.json.encode(result).decode()

    @activity.defn(name="bindloop.tool_call")
    async def tool_call(self, call: ToolCallInput) -> str:
        # With a heartbeat timeout the activity beats while the tool runs, which is also how a
        # cancellation (the workflow's) reaches the tool: as CancelledError at its next await.
        timeout = activity.info().heartbeat_timeout
        beats = None
        if timeout:
            async def beat(every: float) -> None:
                while True:
                    activity.heartbeat()
                    await asyncio.sleep(every)

            beats = asyncio.ensure_future(beat(timeout.total_seconds() / 3))
        try:
            outcome = await self._run_tool_call(msgspec.convert(call.call, ToolCall))
        finally:
            if beats is not None:
                beats.cancel()
        return msgspec.json.encode(outcome).decode()


def agent_activities(**kwargs: Any) -> list[Callable[..., Any]]:
    """``[model_turn, tool_call]`` of an :class:`AgentActivities` built from ``kwargs``."""
    acts = AgentActivities(**kwargs)
    return [acts.model_turn, acts.tool_call]


@workflow.defn(name="bindloop.AgentRun")
class AgentRunWorkflow:
    """One agent run; see the module docstring."""

    def __init__(self) -> None:
        self._checkpoint: LoopCheckpoint | None = None
        self._inputs: list[CheckpointReply | CheckpointWake] = []
        self._chunks: list[str] = []
        self._sent = 0
        self._turns = 0
        self._calls = 0
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
                               tool_calls=self._calls)

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
        if self._cancelled:
            raise RunCancelledError("the workflow was cancelled")

    def _commit(self, cp: LoopCheckpoint) -> BoundaryDecision:
        self._checkpoint = cp  # history is the durable store; the checkpoint is for queries
        return "continue"

    def _restore(self, cp: LoopCheckpoint, start: AgentRunInput,
                 tools: Sequence[ToolDefinition]) -> RestoredLoop:
        ident = cp.execution_id

        async def call_model(messages: list[Any], offered: list[ToolDefinition]) -> ModelTurnResult:
            self._refuse_if_cancelled()
            fresh = messages[self._sent:]
            chunk = f"{self._sent}-{len(messages)}" if fresh else ""
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

        async def run_tool_call(call: ToolCall) -> ToolOutcome:
            self._refuse_if_cancelled()
            self._calls += 1
            out = await workflow.execute_activity(
                "bindloop.tool_call",
                ToolCallInput(execution_id=ident, call=msgspec.to_builtins(call)),
                start_to_close_timeout=timedelta(seconds=start.tool_timeout_s),
                heartbeat_timeout=(None if start.heartbeat_timeout_s is None
                                   else timedelta(seconds=start.heartbeat_timeout_s)),
                result_type=str)
            return msgspec.json.decode(out, type=ToolOutcome)

        return RestoredLoop(call_model=call_model, run_tool_call=run_tool_call,
                            build_tools=lambda: list(tools),
                            now=lambda: workflow.time() * 1000.0,
                            ensure_not_cancelled=self._refuse_if_cancelled,
                            is_fatal_tool_error=lambda e: isinstance(e, RunCancelledError),
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
    from temporalio.worker import Worker
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    runner = SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default
                                     .with_passthrough_modules("bindloop", "msgspec", "anyio",
                                                               "sniffio"))
    return Worker(client, task_queue=task_queue, workflows=[AgentRunWorkflow],
                  activities=activities, workflow_runner=runner, **kwargs)
