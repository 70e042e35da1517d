"""The run's events (``on_stream``): each one an :class:`AgentStreamEvent` envelope, the turn's
index around one member of :data:`RunEvent`, the one tagged union a run is observed through -- a
completion event exactly as the model's stream produced it
(:data:`bindloop.completion.StreamEvent`), a turn's start, end or failure, a tool call requested,
started and finished, an approval requested and decided, a checkpoint saved. They are multicast to
every consumer of a generation, each through its own unbounded buffer so a slow consumer never
stalls the model; the protocol encoders, the ASGI host and :func:`stream_text` read them."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypeVar

import anyio
import msgspec
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..completion import FinishReason, StreamEvent
from ..checkpoints import LoopCheckpoint
from ..contracts import ModelTurnResult, ToolCall, ToolOutcome, TurnUsage
from ..signal import AbortSignal

if TYPE_CHECKING:
    from ._context import RunState
    from ._host import ConsumerHost

__all__ = (
    "AgentStreamEvent",
    "ApprovalDecidedEvent",
    "ApprovalRequestedEvent",
    "CheckpointSavedEvent",
    "ConsumerTask",
    "RETRY_START",
    "RunEvent",
    "StreamConsumer",
    "StreamHub",
    "StructuredDataEvent",
    "ToolCallDoneEvent",
    "ToolFinishedEvent",
    "ToolStartedEvent",
    "TurnDoneEvent",
    "TurnFailedEvent",
    "TurnStartEvent",
    "close_consumers",
    "tool_finished",
    "turn_done",
    "turn_failed",
    "with_consumers",
)


class TurnStartEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="turn_start"):
    """A model turn begins (clear the previous turn's local UI state). A second ``turn_start`` of
    the same ``turn_index`` is a reset: another attempt (a route's fallback) took the turn over
    after this one's events were seen, and what the turn streamed so far is void."""


RETRY_START = TurnStartEvent()
"""What a retractable model (a route streaming ``"live"``) sends its observer when another attempt
takes the turn over after this one's events were seen: the turn starts again. The observer
reports it as a second ``turn_start`` of the same ``turn_index`` and starts its views afresh."""


class StructuredDataEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                          tag="structured_data"):
    """The structured answer parsed so far: ``partial`` while streaming, then ``complete`` (valid
    against the schema) or ``error``. ``is_valid`` says the data decodes against the schema."""

    status: Literal["partial", "complete", "error"]
    data: Any
    is_valid: bool


class ToolCallDoneEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                        tag="tool_call_done"):
    """A tool call the model *requested*, assembled from its chunks (the ``tool_call``
    completion events), at the end of its turn. Whether and when it runs is told by
    :class:`ToolStartedEvent` / :class:`ToolFinishedEvent` (or an approval's events)."""

    tool_call: ToolCall


class TurnDoneEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="turn_done",
                    dict=True):
    """The turn is folded: what the loop receives next is this turn. ``usage`` is the turn's
    tokens as its fold totals them (every detail kept) and ``cost`` the model's price of them,
    charged once, as the prompt's stats count them.

    :attr:`turn` and :attr:`prompt_hash` are for the host (a trace's journal data): not fields,
    so never encoded, and two events that differ only in them compare equal."""

    finish_reason: FinishReason
    usage: TurnUsage = TurnUsage()
    cost: int = 0

    @property
    def turn(self) -> ModelTurnResult | None:
        """The folded turn itself (``None`` on an event built without it)."""
        turn: ModelTurnResult | None = self.__dict__.get("turn")
        return turn

    @property
    def prompt_hash(self) -> str:
        """The hash of the prompt the turn answered (``""`` when the run records none)."""
        hash_: str = self.__dict__.get("prompt_hash", "")
        return hash_


def turn_done(turn: ModelTurnResult, prompt_hash: str = "") -> TurnDoneEvent:
    """The :class:`TurnDoneEvent` of ``turn``, carrying the turn and its prompt hash for the
    host."""
    event = TurnDoneEvent(finish_reason=turn.finish_reason or "stop",  # type: ignore[arg-type]
                          usage=turn.usage, cost=turn.cost)
    event.__dict__["turn"] = turn
    event.__dict__["prompt_hash"] = prompt_hash
    return event


class TurnFailedEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                      tag="turn_failed", dict=True):
    """The turn failed; ``error`` is the exception's type and message (no traceback, no secrets
    beyond what the message holds). :attr:`raised` is the exception itself, for the host: not a
    field, never encoded."""

    error: str

    @property
    def raised(self) -> BaseException | None:
        """What failed the turn (``None`` on an event built without it)."""
        raised: BaseException | None = self.__dict__.get("raised")
        return raised


def turn_failed(exc: BaseException) -> TurnFailedEvent:
    """The :class:`TurnFailedEvent` of ``exc``, carrying the exception for the host."""
    event = TurnFailedEvent(error=f"{type(exc).__name__}: {exc}")
    event.__dict__["raised"] = exc
    return event


class ToolStartedEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                       tag="tool_started"):
    """The loop starts running ``call`` (as it runs it: an approval's edited arguments in place of
    the model's). A journaled call a replay serves starts and finishes too, without running."""

    call: ToolCall


class ToolFinishedEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                        tag="tool_finished", dict=True):
    """``call`` finished: ``outcome`` is what the model reads for it -- the tool's result, error
    or suspend, or for a raise the redacted tool error the loop makes of it -- and ``None`` when
    the raise is fatal (the run stops; the model reads nothing).

    :attr:`error` is the exception the tool raised, for the host alone: it is not a field, so it
    is never encoded (no JSON form, no protocol frame, no trace attribute carries it) and two
    events that differ only in it compare equal."""

    call: ToolCall
    outcome: ToolOutcome | None

    @property
    def error(self) -> BaseException | None:
        """What the tool raised (``None`` when it returned)."""
        raised: BaseException | None = self.__dict__.get("raised")
        return raised


def tool_finished(call: ToolCall, outcome: ToolOutcome | None,
                  error: BaseException | None = None) -> ToolFinishedEvent:
    """A :class:`ToolFinishedEvent` carrying ``error`` for the host."""
    event = ToolFinishedEvent(call=call, outcome=outcome)
    if error is not None:
        event.__dict__["raised"] = error
    return event


class ApprovalRequestedEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                             tag="approval_requested"):
    """The prompt ends waiting for a decision on ``call_id`` (``equip_tool(needs_approval=)``):
    one event per pending approval of the suspend's checkpoint, asked for now or before, each
    with the token a decision must carry when an ``approval_secret`` is in use."""

    call_id: str
    tool: str
    arguments: str
    token: str | None = None


class ApprovalDecidedEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                           tag="approval_decided"):
    """A decision ``resume_chat(decisions=)`` committed, before the call runs: ``approved``
    (with the ``arguments`` it runs with) or denied, the model then reading ``reason``."""

    call_id: str
    approved: bool
    arguments: str | None = None
    reason: str | None = None


class CheckpointSavedEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                           tag="checkpoint_saved"):
    """``on_checkpoint`` stored ``checkpoint`` (it returned): a settled boundary, a decisions'
    commit, a suspend, the end or running out of turns."""

    checkpoint: LoopCheckpoint


RunEvent: TypeAlias = (
    StreamEvent | TurnStartEvent | StructuredDataEvent | ToolCallDoneEvent | TurnDoneEvent
    | TurnFailedEvent | ToolStartedEvent | ToolFinishedEvent | ApprovalRequestedEvent
    | ApprovalDecidedEvent | CheckpointSavedEvent
)
"""What an :class:`AgentStreamEvent` carries, one tagged union (``type``): a completion event as
the model streamed it, or one of the run's own kinds."""


class AgentStreamEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One run event: ``event`` happened in the prompt's model turn ``turn_index`` (0-based,
    counting every model call of the prompt, re-asks included). A tool, approval or checkpoint
    event carries the index of the prompt's latest model turn (the one whose calls are running),
    ``-1`` before the prompt's first (a resumed chat's approved calls)."""

    turn_index: int
    event: RunEvent


ConsumerFn: TypeAlias = Callable[[AsyncIterator[AgentStreamEvent]], Awaitable[None] | None]
Watcher: TypeAlias = Callable[[AgentStreamEvent], None]
"""A run-level observer called synchronously with each event of a prompt (:func:`stream_text`'s)."""


class StreamConsumer:
    """One ``on_stream`` registration."""

    __slots__ = ("await_on_end", "consumer", "signal")

    def __init__(self, consumer: ConsumerFn, signal: AbortSignal | None,
                 await_on_end: bool) -> None:
        self.consumer = consumer
        self.signal = signal
        self.await_on_end = await_on_end


async def _iterate(receive: MemoryObjectReceiveStream[AgentStreamEvent],
                   signal: AbortSignal | None) -> AsyncIterator[AgentStreamEvent]:
    async with receive:
        async for event in receive:
            if signal is not None and signal.aborted:
                return
            yield event


class ConsumerTask:
    """An awaited consumer (``await_on_end=True``) running past its prompt: the generation waits
    for ``done`` when it closes and re-raises ``error``, what the consumer itself raised."""

    __slots__ = ("done", "error")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.error: Exception | None = None


class StreamHub:
    """The multicast of one prompt: :meth:`emit` copies each event to every consumer's buffer.

    With the run root's host (``background``, always there inside a run) every consumer runs
    there: the prompt never waits for one. An awaited consumer (``await_on_end=True``) gets a
    :class:`ConsumerTask` in ``pending``, which its generation waits for when it closes; what a
    fire-and-forget one raises is appended to ``errors`` for the run's root to re-raise. Without
    it, consumers run in ``tg`` (the prompt's own task group). :meth:`close` ends every stream, so
    each consumer sees the end; a consumer keeps running its own cleanup after that."""

    __slots__ = ("_sends", "_watch")

    def __init__(self, consumers: list[StreamConsumer], tg: TaskGroup | None,
                 background: ConsumerHost | None = None,
                 errors: list[BaseException] | None = None,
                 pending: list[ConsumerTask] | None = None,
                 watch: Watcher | None = None) -> None:
        self._sends: list[MemoryObjectSendStream[AgentStreamEvent]] = []
        self._watch = watch
        for c in consumers:
            send, receive = anyio.create_memory_object_stream[AgentStreamEvent](math.inf)
            self._sends.append(send)
            if background is None:
                assert tg is not None and pending is not None, "consumers need a task group"
                task = ConsumerTask()
                pending.append(task)
                tg.start_soon(self._run_awaited, c, receive, task)
            elif c.await_on_end and pending is not None:
                task = ConsumerTask()
                pending.append(task)
                background.start_soon(self._run_awaited, c, receive, task)
            else:
                background.start_soon(self._run_detached, c, receive,
                                      [] if errors is None else errors)

    @staticmethod
    async def _run(c: StreamConsumer,
                   receive: MemoryObjectReceiveStream[AgentStreamEvent]) -> None:
        out = c.consumer(_iterate(receive, c.signal))
        if out is not None:
            await out

    @staticmethod
    async def _run_awaited(c: StreamConsumer,
                           receive: MemoryObjectReceiveStream[AgentStreamEvent],
                           task: ConsumerTask) -> None:
        try:
            await StreamHub._run(c, receive)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # the generation re-raises it as itself, never in a group
            task.error = exc
        finally:
            task.done.set()

    @staticmethod
    async def _run_detached(c: StreamConsumer,
                            receive: MemoryObjectReceiveStream[AgentStreamEvent],
                            errors: list[BaseException]) -> None:
        try:
            await StreamHub._run(c, receive)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:  # kept for the run's root: it must not cancel the run midway
            errors.append(exc)

    @property
    def active(self) -> bool:
        return bool(self._sends) or self._watch is not None

    def emit(self, event: AgentStreamEvent) -> None:
        for send in self._sends:
            try:
                send.send_nowait(event)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # that consumer stopped reading; the others still get the event
        if self._watch is not None:
            self._watch(event)

    def close(self) -> None:
        for send in self._sends:
            send.close()
        self._sends = []
        self._watch = None


async def close_consumers(pending: list[ConsumerTask], failure: BaseException | None) -> None:
    """A generation closes: wait for its awaited consumers (their cleanup may wait for handler
    code that ran after the prompt, so this happens at the generation's end, not the prompt's),
    then re-raise the first one's own exception — unless the generation already raised
    ``failure``: that one wins, and the consumers' errors are added to it as notes."""
    tasks = list(pending)
    pending.clear()
    for task in tasks:
        await task.done.wait()
    errors = [t.error for t in tasks if t.error is not None]
    if failure is None:
        if errors:
            raise errors[0]
        return
    for error in errors:
        failure.add_note(f"an on_stream consumer also raised {type(error).__name__}: {error}")


R = TypeVar("R")


def with_consumers(run: RunState, consumers: list[StreamConsumer],
                   body: Callable[[StreamHub | None], Awaitable[R]],
                   on_end: Callable[[bool], None] | None = None,
                   pending: list[ConsumerTask] | None = None,
                   watch: Watcher | None = None) -> Awaitable[R]:
    """Run ``body(hub)`` with a generation's stream ``consumers``; the hub is closed (every
    consumer sees its end) however ``body`` ends, after ``on_end(ok)``. Without consumers there is
    no hub: a prompt nobody watches pays nothing for streaming (and without ``on_end`` either, the
    awaitable is ``body(None)`` itself). Inside a run the consumers are
    tasks the run's root hosts and the prompt returns without waiting for them: the
    awaited ones are added to ``pending`` (the generation's, waited for by
    :func:`close_consumers` when it closes). Outside one (no root host) the prompt hosts
    them in a task group of its own and waits; a consumer's exception is re-raised as itself.
    ``watch`` (the run's :func:`stream_text` observer) is called with each event as it is
    emitted."""
    if not consumers and on_end is None and watch is None:
        return body(None)
    return _with_consumers(run, consumers, body, on_end, pending, watch)


async def _with_consumers(run: RunState, consumers: list[StreamConsumer],
                          body: Callable[[StreamHub | None], Awaitable[R]],
                          on_end: Callable[[bool], None] | None,
                          pending: list[ConsumerTask] | None, watch: Watcher | None) -> R:
    background = run.background
    if not consumers or background is not None:
        hub = None if not consumers and watch is None else StreamHub(
            consumers, None, background, run.background_errors, pending, watch)
        ok = False
        try:
            out = await body(hub)
            ok = True
            return out
        finally:
            if on_end is not None:
                on_end(ok)
            if hub is not None:
                hub.close()
    result: list[R] = []
    failure: BaseException | None = None
    own: list[ConsumerTask] = []
    async with anyio.create_task_group() as tg:
        hub = StreamHub(consumers, tg, None, run.background_errors, own, watch)
        try:
            result.append(await body(hub))
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:  # re-raised outside the task group, never wrapped
            failure = exc
        finally:
            if on_end is not None:
                on_end(failure is None and bool(result))
            hub.close()
    if failure is not None:
        raise failure
    await close_consumers(own, None)
    return result[0]
