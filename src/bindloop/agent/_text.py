"""``stream_text``: a run's answer text as it streams, the one-loop way to print it::

    async with stream_text(agent, initial_props=None, model=model) as chunks:
        async for text in chunks:
            print(text, end="")

It is ``run_with`` with an ``on_event`` observer of the run's events
(:data:`~bindloop.agent.events.RunEvent`) that keeps the text deltas of the top-level agent's prompts;
nothing else is different.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Generic, TypeVar

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream

from ..completion import TextEvent
from ..errors import UsageError
from ._run import run_with
from ._stream import AgentStreamEvent

__all__ = ("TextStream", "stream_text")

R = TypeVar("R")
_UNSET: Any = object()


class TextStream(Generic[R]):
    """What ``async with stream_text(...) as chunks`` gives: iterate it for the text deltas as the
    model streams them (``async for text in chunks``), in order, every model turn of the top-level
    agent's prompts included (text a model writes before its tool calls too; a route's fallback
    that takes a turn over cannot take back text already given). The iteration ends when the run
    does; :attr:`result` is then what the run returned."""

    __slots__ = ("_done", "_receive", "_result")

    def __init__(self, receive: MemoryObjectReceiveStream[str]) -> None:
        self._receive = receive
        self._result: Any = None
        self._done = False

    def __aiter__(self) -> TextStream[R]:
        return self

    async def __anext__(self) -> str:
        try:
            return await self._receive.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    @property
    def result(self) -> R:
        """What the run returned (the agent's value, a ``ChatResult``, ...), once the iteration
        ended; before, :class:`~bindloop.errors.UsageError`. A run that raised raises when the
        ``async with`` block ends, not here."""
        if not self._done:
            raise UsageError("stream_text(): the run has not returned yet; read .result after "
                             "the `async for` over the chunks ended")
        result: R = self._result
        return result


@asynccontextmanager
async def stream_text(fn: Callable[..., Awaitable[R]], *, initial_props: Any = _UNSET,
                      **options: Any) -> AsyncIterator[TextStream[R]]:
    """Run ``fn`` as :func:`~bindloop.agent.run_with` does (``options`` are its keywords but
    ``on_event``, which this takes) while
    the block iterates the text the top-level agent's model streams (see :class:`TextStream`).

    The run starts when the block is entered and the block's end waits for it to return: leaving
    the iteration early stops the printing, not the run. What the run raises is raised when the
    block ends; what the block raises cancels the run. Print the text as it streams with a model
    that streams (``WireOptions(stream=True)`` for the wire's models): one that answers in one
    piece gives each turn's text as one chunk."""
    send, receive = anyio.create_memory_object_stream[str](math.inf)
    stream: TextStream[R] = TextStream(receive)
    failure: list[Exception] = []

    def watch(event: AgentStreamEvent) -> None:
        e = event.event
        if type(e) is TextEvent and e.content:
            try:
                send.send_nowait(e.content)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the block stopped reading; the run goes on

    async def go() -> None:
        try:
            if initial_props is not _UNSET:
                options["initial_props"] = initial_props
            stream._result = await run_with(fn, on_event=watch, **options)
            stream._done = True
        except Exception as exc:  # raised as itself when the block ends, never in a group
            failure.append(exc)
        finally:
            send.close()

    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        try:
            yield stream
        finally:
            receive.close()
    if failure:
        raise failure[0]
