"""Run a batch of tool calls concurrently, pooled per tool name, answers in input order.

Each tool name gets its own pool; pools run side by side and ``max_per_tool`` bounds how many calls of
one tool are in flight at once (``None``: unbounded). With a ``signal``, a pool stops claiming queued
calls once it fires; those come back as :class:`~bindloop.errors.AbortedToolCallError` values in their
slot, so every input position always gets exactly one answer. Calls already running are not
interrupted: a tool that can stop early watches the signal itself.

An exception from ``run`` propagates (the other in-flight calls are cancelled): deciding which failures
are answers rather than crashes is the caller's job, done inside ``run``.

``concurrency`` (optional) caps the calls in flight across *all* pools. A call waiting for that
capacity has not started, so it still honours the signal: it is checked again once capacity frees up.

On asyncio (CPython, Pyodide, workerd) the lanes are tasks of an :class:`asyncio.TaskGroup`; on
any other backend (trio), of an anyio task group. Both are structured the same way: the batch
returns only once every lane has ended, the first failure cancels the other lanes, and a
cancellation of the caller (an anyio cancel scope, a run deadline) cancels every lane and waits for
them. On asyncio a batch of two calls costs about 16 µs this way against 48 in anyio's group
(``bench/tool_batch.py``), which every turn with parallel tool calls pays.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Generic, TypeVar

import anyio
import msgspec

from .._eventloop import running_asyncio_loop
from ..errors import AbortedToolCallError, UsageError
from ..signal import AbortSignal

__all__ = ("ToolBatchOptions", "run_tool_calls_pooled_by_tool")

T = TypeVar("T")
R = TypeVar("R")


class ToolBatchOptions(msgspec.Struct, frozen=True, kw_only=True):
    """``max_per_tool``: in-flight calls per tool name (``None`` = unbounded)."""

    max_per_tool: int | None = None

    def __post_init__(self) -> None:
        if self.max_per_tool is not None and (
            not isinstance(self.max_per_tool, int) or self.max_per_tool < 1
        ):
            raise UsageError(f"max_per_tool must be a positive int or None, got {self.max_per_tool!r}")


class _Slot(Generic[R]):
    __slots__ = ("filled", "value")

    def __init__(self) -> None:
        self.filled = False
        self.value: R | AbortedToolCallError | None = None

    def fill(self, value: R | AbortedToolCallError) -> None:
        self.filled = True
        self.value = value


async def run_tool_calls_pooled_by_tool(
    items: Sequence[T],
    run: Callable[[T], Awaitable[R]],
    *,
    tool_name: Callable[[T], str] | None = None,
    item_id: Callable[[T], str] | None = None,
    signal: AbortSignal | None = None,
    options: ToolBatchOptions = ToolBatchOptions(),
    concurrency: int | None = None,
) -> list[R | AbortedToolCallError]:
    """Run ``run(item)`` for every item; return the answers in ``items`` order.

    ``tool_name`` / ``item_id`` default to the items' ``name`` / ``id`` attributes (a
    :class:`~bindloop.contracts.ToolCall`'s). ``concurrency``: total in-flight cap (``None``:
    only the per-tool bound applies).
    """
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise UsageError(f"concurrency must be a positive int or None, got {concurrency!r}")
    if tool_name is None:
        tool_name = _attr_name
    if item_id is None:
        item_id = _attr_id
    n = len(items)
    if n == 0:
        return []
    slots: list[_Slot[R]] = [_Slot() for _ in range(n)]

    def reason() -> str | None:
        return None if signal is None or signal.reason is None else str(signal.reason)

    if n == 1:
        # The common case (one call per turn) skips the task group entirely.
        if signal is not None and signal.aborted:
            return [AbortedToolCallError(item_id(items[0]), reason())]
        return [await run(items[0])]

    pools: dict[str, list[int]] = {}
    for i, item in enumerate(items):
        pools.setdefault(tool_name(item), []).append(i)
    width = options.max_per_tool
    limiter = None if concurrency is None else anyio.CapacityLimiter(concurrency)
    ids = item_id

    async def lane(indices: list[int], cursor: list[int]) -> None:
        # Lanes of one pool share `cursor`, so each queued call is claimed exactly once.
        while cursor[0] < len(indices):
            i = indices[cursor[0]]
            cursor[0] += 1
            if signal is not None and signal.aborted:
                slots[i].fill(AbortedToolCallError(ids(items[i]), reason()))
                continue
            if limiter is None:
                slots[i].fill(await run(items[i]))
                continue
            async with limiter:
                if signal is not None and signal.aborted:
                    slots[i].fill(AbortedToolCallError(ids(items[i]), reason()))
                    continue
                slots[i].fill(await run(items[i]))

    starts: list[Coroutine[Any, Any, None]] = []
    for indices in pools.values():
        cursor = [0]
        lanes = len(indices) if width is None else min(width, len(indices))
        starts.extend(lane(indices, cursor) for _ in range(lanes))
    try:
        await _run_lanes(starts)
    except BaseExceptionGroup as group:
        # The first failure cancels its siblings, so the group normally holds exactly that one:
        # re-raise it as itself so callers can catch the type they know. When several calls failed
        # in the same instant, the first (in task order) is raised and the others are named in a note.
        leaves = _leaves(group)
        # An ordinary failure explains the exit better than the cancellations it caused.
        leaves = [e for e in leaves if isinstance(e, Exception)] or leaves
        first = leaves[0]
        for other in leaves[1:]:
            first.add_note(f"also raised concurrently: {type(other).__name__}: {other}")
        raise first from None

    out: list[R | AbortedToolCallError] = []
    for slot in slots:
        if not slot.filled:  # pragma: no cover - the group only exits normally once all lanes ran
            raise RuntimeError("a pooled tool call was never answered")
        out.append(slot.value)  # type: ignore[arg-type]
    return out


async def _run_lanes(lanes: list[Coroutine[Any, Any, None]]) -> None:
    """Run ``lanes`` side by side and return once all have ended (see the module docstring): an
    :class:`asyncio.TaskGroup` on asyncio, an anyio task group elsewhere. A failure is raised in
    an exception group, as either group raises it."""
    loop = running_asyncio_loop()
    if loop is not None:
        # asyncio is loaded (a loop runs): its module is read from sys.modules, never imported,
        # so a trio run never loads it (see bindloop._eventloop).
        group = sys.modules["asyncio"].TaskGroup()
        async with group:
            for coro in lanes:
                group.create_task(coro)
        return
    async with anyio.create_task_group() as tg:
        for coro in lanes:
            tg.start_soon(_awaited, coro)


async def _awaited(coro: Coroutine[Any, Any, None]) -> None:
    await coro


def _attr_name(item: object) -> str:
    name = getattr(item, "name", None)
    if not isinstance(name, str):
        raise UsageError(f"{type(item).__name__} has no str 'name'; pass tool_name=")
    return name


def _attr_id(item: object) -> str:
    ident = getattr(item, "id", None)
    if not isinstance(ident, str):
        raise UsageError(f"{type(item).__name__} has no str 'id'; pass item_id=")
    return ident


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            out.extend(_leaves(exc))
        else:
            out.append(exc)
    return out
