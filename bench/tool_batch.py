"""A batch of parallel tool calls: what the loop adds to run K calls side by side.

A model turn that asks for several tool calls at once (parallel tool calls, the providers'
default) has them run concurrently by ``run_tool_calls_pooled_by_tool``: lanes per tool name, the
answers in call order, the first failure cancelling the rest. Printed, CPU µs per batch of K
trivial async calls (``await`` nothing, return the id), in one process, the rows measured
alternately round by round (median of ``--rounds``):

- ``pool``: ``run_tool_calls_pooled_by_tool`` itself (on asyncio its lanes are tasks of an
  ``asyncio.TaskGroup``);
- ``asyncio.TaskGroup``: the same K coroutines in a bare ``asyncio.TaskGroup`` (the floor of
  running them concurrently on asyncio);
- ``anyio task group``: the same K coroutines in an anyio task group (what the pool's lanes cost
  on asyncio before, and what they cost on trio);
- and, with ``--loop``, a whole ``run_tool_loop`` turn asking for K calls against one asking for
  one (µs per turn).

    python bench/tool_batch.py [--ks 2,3,5] [--rounds 5] [--loop]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import anyio  # noqa: E402

from bindloop import (  # noqa: E402
    Message,
    ModelTurnResult,
    ToolCall,
    ToolLoopParams,
    ToolLoopState,
    ToolResult,
    UserMessage,
    run_tool_loop,
)
from bindloop.loop import ToolRunner, run_tool_calls_pooled_by_tool  # noqa: E402
from bindloop.model import ModelRequest  # noqa: E402

_clock = time.process_time
REPEATS = 4000


async def _echo(call: ToolCall) -> str:
    return call.id


def _calls(k: int) -> list[ToolCall]:
    return [ToolCall(id=f"c{i}", name="lookup", arguments="{}") for i in range(k)]


async def _pool(calls: list[ToolCall]) -> None:
    await run_tool_calls_pooled_by_tool(calls, _echo)


async def _asyncio_group(calls: list[ToolCall]) -> None:
    async with asyncio.TaskGroup() as tg:
        for c in calls:
            tg.create_task(_echo(c))


async def _anyio_group(calls: list[ToolCall]) -> None:
    async with anyio.create_task_group() as tg:
        for c in calls:
            tg.start_soon(_echo, c)


ROWS: dict[str, Callable[[list[ToolCall]], Awaitable[None]]] = {
    "pool": _pool,
    "asyncio.TaskGroup": _asyncio_group,
    "anyio task group": _anyio_group,
}


async def _per_batch(row: Callable[[list[ToolCall]], Awaitable[None]], k: int) -> float:
    calls = _calls(k)
    for _ in range(200):
        await row(calls)
    started = _clock()
    for _ in range(REPEATS):
        await row(calls)
    return (_clock() - started) / REPEATS * 1e6


class _Scripted:
    """Asks for ``k`` calls on each of ``turns`` turns, then answers."""

    id = "scripted"
    provider = None
    structured_output = "tool"

    def __init__(self, k: int, turns: int) -> None:
        self._k, self._turns, self._n = k, turns, 0

    def price(self, usage: Any, /) -> int:
        return 0

    def stream(self, messages: Sequence[Message], request: ModelRequest, /) -> Any:
        raise NotImplementedError

    async def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                       on_event: Any = None, on_reset: Any = None) -> ModelTurnResult:
        self._n += 1
        if self._n > self._turns:
            return ModelTurnResult(text="done")
        return ModelTurnResult(tool_calls=tuple(
            ToolCall(id=f"t{self._n}_{i}", name="lookup", arguments="{}") for i in range(self._k)))


async def _per_turn(k: int, turns: int = 200) -> float:
    async def lookup(call: ToolCall) -> ToolResult:
        return ToolResult(content=call.id)

    runner = ToolRunner(run_tool_call=lookup)
    best = []
    for _ in range(5):
        state = ToolLoopState(messages=[UserMessage(content="go")])
        params = ToolLoopParams(model=_Scripted(k, turns), runner=runner, state=state,
                                max_iterations=turns + 1)
        started = _clock()
        result = await run_tool_loop(params)
        best.append((_clock() - started) / (turns + 1) * 1e6)
        assert result.stop_reason == "done"
    return min(best)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ks", default="2,3,5")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--loop", action="store_true")
    args = parser.parse_args()
    ks = [int(k) for k in args.ks.split(",")]

    async def run() -> None:
        figures: dict[tuple[str, int], list[float]] = {}
        for _ in range(args.rounds):
            for k in ks:
                for name, row in ROWS.items():
                    figures.setdefault((name, k), []).append(await _per_batch(row, k))
        print(f"CPU µs per batch of K parallel calls (median of {args.rounds} rounds, asyncio)")
        print(f"{'':22s}" + "".join(f"{'K=' + str(k):>18s}" for k in ks))
        for name in ROWS:
            cells = []
            for k in ks:
                value = statistics.median(figures[(name, k)])
                floor = statistics.median(figures[("asyncio.TaskGroup", k)])
                cells.append(f"{value:8.1f} ({value / floor:4.2f}x)")
            print(f"{name:22s}" + "".join(f"{c:>18s}" for c in cells))
        print("(ratios: to asyncio.TaskGroup running the same coroutines)")
        if args.loop:
            one = await _per_turn(1)
            for k in ks:
                many = await _per_turn(k)
                print(f"run_tool_loop turn with {k} calls: {many:.1f} µs, with 1 call: {one:.1f} µs"
                      f" ({many - one:+.1f} µs)")

    anyio.run(run)


if __name__ == "__main__":
    main()
