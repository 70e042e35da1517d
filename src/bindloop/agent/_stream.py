"""Agent stream events (``on_stream``): tagged frozen Structs multicast to every consumer of a
generation, each through its own unbounded buffer so a slow consumer never stalls the model."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Literal, TypeAlias

import anyio
import msgspec
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..completion import FinishReason, ToolCallChunk
from ..contracts import ToolCall, TurnUsage
from ..signal import AbortSignal

__all__ = (
    "AgentStreamEvent",
    "ErrorStreamEvent",
    "ExtraStreamEvent",
    "ReasoningStreamEvent",
    "StreamConsumer",
    "StreamHub",
    "StructuredDataEvent",
    "TextStreamEvent",
    "ToolCallStreamEvent",
    "ToolCallDoneEvent",
    "TurnDoneEvent",
    "TurnStartEvent",
    "UsageStreamEvent",
)


class TurnStartEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="turn_start"):
    """A model turn begins (clear the previous turn's local UI state)."""

    turn_index: int


class TextStreamEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="text"):
    turn_index: int
    delta: str


class ReasoningStreamEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                           tag="reasoning"):
    turn_index: int
    delta: str


class StructuredDataEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                          tag="structured_data"):
    """The structured answer parsed so far: ``partial`` while streaming, then ``complete`` (valid
    against the schema) or ``error``. ``is_valid`` says the data decodes against the schema."""

    turn_index: int
    status: Literal["partial", "complete", "error"]
    data: Any
    is_valid: bool


class ToolCallStreamEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                          tag="tool_call_stream"):
    turn_index: int
    chunk: ToolCallChunk


class ToolCallDoneEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                        tag="tool_call"):
    """A tool call assembled from its chunks."""

    turn_index: int
    tool_call: ToolCall


class UsageStreamEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="usage"):
    turn_index: int
    usage: TurnUsage


class ExtraStreamEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="extra"):
    turn_index: int
    extra: dict[str, Any]


class TurnDoneEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="turn_done"):
    turn_index: int
    finish_reason: FinishReason


class ErrorStreamEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", tag="error"):
    """The turn failed; ``error`` is the exception's type and message (no traceback, no secrets
    beyond what the message holds)."""

    turn_index: int
    error: str


AgentStreamEvent: TypeAlias = (
    TurnStartEvent | TextStreamEvent | ReasoningStreamEvent | StructuredDataEvent
    | ToolCallStreamEvent | ToolCallDoneEvent | UsageStreamEvent | ExtraStreamEvent
    | TurnDoneEvent | ErrorStreamEvent
)

ConsumerFn: TypeAlias = Callable[[AsyncIterator[AgentStreamEvent]], Awaitable[None] | None]


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


class StreamHub:
    """The multicast of one prompt: :meth:`emit` copies each event to every consumer's buffer.

    Consumers registered with ``await_on_end=True`` run as tasks of ``tg`` (the prompt's task
    group, which waits for them); the others as tasks of ``background`` (the run root's, which
    the prompt does not wait for: fire and forget). What a background consumer raises is appended
    to ``errors`` for the run's root to re-raise. :meth:`close` ends every stream, so each
    consumer sees the end; a consumer keeps running its own cleanup after that."""

    __slots__ = ("_sends",)

    def __init__(self, consumers: list[StreamConsumer], tg: TaskGroup | None,
                 background: TaskGroup | None = None,
                 errors: list[BaseException] | None = None) -> None:
        self._sends: list[MemoryObjectSendStream[AgentStreamEvent]] = []
        for c in consumers:
            send, receive = anyio.create_memory_object_stream[AgentStreamEvent](math.inf)
            self._sends.append(send)
            if c.await_on_end or background is None:
                assert tg is not None, "awaited consumers need the prompt's task group"
                tg.start_soon(self._run, c, receive)
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
        return bool(self._sends)

    def emit(self, event: AgentStreamEvent) -> None:
        for send in self._sends:
            try:
                send.send_nowait(event)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # that consumer stopped reading; the others still get the event

    def close(self) -> None:
        for send in self._sends:
            send.close()
        self._sends = []
