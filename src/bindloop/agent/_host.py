"""The run's root as the host of its stream consumers: :func:`hosting`.

An ``on_stream`` consumer keeps running past its prompt (an awaited one until its generation
closes, a fire-and-forget one until the run's root returns), so it needs a parent that outlives
the prompt: the root. The root returns once its body has and every consumer it hosts finished; no
task outlives the run, and cancelling the run cancels them.

On asyncio (CPython, Pyodide, workerd) the root is a :class:`TaskHost`: a consumer becomes a
task of the running loop when it starts, and the root joins those tasks. A run nobody watches
starts no task and opens no task group: an anyio task group costs two cancel scopes and an
event-loop round trip on exit even when empty, about 20 µs per run, paid by every run for
consumers most runs never have. On any other backend (trio) the root opens an anyio task group for
the whole run, as structured concurrency there requires.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import anyio
from anyio.abc import TaskGroup

from .._eventloop import running_asyncio_loop

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop, Task

    from ._context import RunState

__all__ = ("ConsumerHost", "TaskHost", "hosting")

R = TypeVar("R")


class TaskHost:
    """The root's consumers as tasks of the running asyncio loop, started on demand and joined by
    :meth:`join`; :meth:`cancel` cancels them and waits until each has finished (shielded, so the
    root's own cancellation cannot cut the wait short)."""

    __slots__ = ("_loop", "_tasks")

    def __init__(self, loop: AbstractEventLoop) -> None:
        self._loop = loop
        self._tasks: list[Task[Any]] = []

    def start_soon(self, func: Callable[..., Awaitable[Any]], *args: Any,
                   name: object = None) -> None:
        # The task runs in a copy of the current context, as a task group's child does.
        coro = func(*args)
        assert isinstance(coro, Coroutine), "a consumer runner is a coroutine function"
        self._tasks.append(self._loop.create_task(coro))

    async def join(self) -> None:
        tasks = self._tasks
        try:
            while tasks:  # a consumer may start consumers of its own: they join the list
                await tasks[0]
                tasks.pop(0)
        except BaseException:
            await self.cancel()
            raise

    async def cancel(self) -> None:
        import asyncio  # running on asyncio: already imported

        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        with anyio.CancelScope(shield=True):
            if tasks:
                await asyncio.wait(tasks)


ConsumerHost: TypeAlias = "TaskHost | TaskGroup"
"""Where a prompt starts the consumers that outlive it: the run root's :class:`TaskHost` or its
anyio task group."""


async def hosting(run: RunState, body: Callable[[], Awaitable[R]]) -> R:
    """Run ``body()`` as the root of ``run``, hosting its stream consumers past their prompts.

    ``body``'s own exception is re-raised as it is (never wrapped in an exception group); else the
    first exception a fire-and-forget consumer raised, once every consumer finished."""
    loop = running_asyncio_loop()
    if loop is None:
        return await _in_task_group(run, body)
    host = TaskHost(loop)
    run.background = host
    try:
        try:
            result = await body()
        except anyio.get_cancelled_exc_class():
            await host.cancel()
            raise
        except BaseException:  # the consumers still finish, then this is raised as it is
            await host.join()
            raise
        await host.join()
    finally:
        run.background = None
    if run.background_errors:
        raise run.background_errors[0]
    return result


async def _in_task_group(run: RunState, body: Callable[[], Awaitable[R]]) -> R:
    result: list[R] = []
    failure: BaseException | None = None
    async with anyio.create_task_group() as tg:
        run.background = tg
        try:
            result.append(await body())
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:  # re-raised outside the task group, never wrapped
            failure = exc
    run.background = None
    if failure is not None:
        raise failure
    if run.background_errors:
        raise run.background_errors[0]
    return result[0]
