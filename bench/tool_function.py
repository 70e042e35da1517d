"""Per-call overhead of a tool made from a plain function vs the explicit form, in one run.

Both tools do the same work, ``add(a, b)`` with the answer as text, and are called the way the
loop calls them: the model's JSON text in, the outcome out.

- explicit: ``define_tool(name=, description=, args=Pair, execute=...)``, the body takes the
  typed Struct and the context and returns ``ToolResult(content=str(a + b))``;
- function: ``@define_tool def add(a: int, b: int) -> str``, the body returns ``str(a + b)``
  (the Struct is derived; the call unpacks its fields and makes the result);
- function + ctx: the same with a ``ctx: ToolContext`` parameter;
- function -> int: the same returning ``a + b``, encoded as JSON text.

Each shape is timed sync through ``Tool.invoke`` (the agent's direct path: no await for a sync
body) and async through ``await Tool.execute``. Reported: µs per call (median over rounds, the
shapes interleaved within each round) and the ratio to the explicit form in the same run; then
what defining each costs once.

    python bench/tool_function.py [--calls 20000] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import anyio
import msgspec

from bindloop.contracts import ToolResult
from bindloop.tools import Tool, ToolContext, define_tool


class Pair(msgspec.Struct):
    a: int
    b: int


def _explicit_sync(args: Pair, ctx: Any) -> ToolResult:
    return ToolResult(content=str(args.a + args.b))


async def _explicit_async(args: Pair, ctx: Any) -> ToolResult:
    return ToolResult(content=str(args.a + args.b))


def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


async def add_async(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def add_ctx(a: int, ctx: ToolContext, b: int) -> str:
    """Add two integers."""
    return str(a + b)


async def add_ctx_async(a: int, ctx: ToolContext, b: int) -> str:
    """Add two integers."""
    return str(a + b)


def add_int(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def add_int_async(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _explicit(execute: Any) -> Tool[Any, Any]:
    return define_tool(name="add", description="Add two integers.", args=Pair, execute=execute)


SHAPES: dict[str, tuple[Callable[[], Tool[Any, Any]], Callable[[], Tool[Any, Any]]]] = {
    # name: (sync tool factory, async tool factory)
    "explicit": (lambda: _explicit(_explicit_sync), lambda: _explicit(_explicit_async)),
    "function": (lambda: define_tool(add, name="add"), lambda: define_tool(add_async, name="add")),
    "function + ctx": (lambda: define_tool(add_ctx, name="add"),
                       lambda: define_tool(add_ctx_async, name="add")),
    "function -> int": (lambda: define_tool(add_int, name="add"),
                        lambda: define_tool(add_int_async, name="add")),
}
RAW = '{"a": 2, "b": 3}'
CTX = ToolContext("add", "Add two integers.", {}, RAW, "call_1", "agent")


def _time_sync(tool: Tool[Any, Any], calls: int) -> float:
    invoke = tool.invoke
    start = time.perf_counter()
    for _ in range(calls):
        invoke(RAW, CTX)
    return (time.perf_counter() - start) / calls * 1e6


async def _time_async(tool: Tool[Any, Any], calls: int) -> float:
    execute = tool.execute
    start = time.perf_counter()
    for _ in range(calls):
        await execute(RAW, CTX)
    return (time.perf_counter() - start) / calls * 1e6


def _definition_us(factory: Callable[[], Tool[Any, Any]], repeat: int = 200) -> float:
    start = time.perf_counter()
    for _ in range(repeat):
        factory()
    return (time.perf_counter() - start) / repeat * 1e6


async def _main(calls: int, rounds: int) -> None:
    tools = {name: (sync(), async_()) for name, (sync, async_) in SHAPES.items()}
    for sync_tool, async_tool in tools.values():  # same answer from every shape
        assert sync_tool.invoke(RAW, CTX) == ToolResult(content="5")
        assert await async_tool.execute(RAW, CTX) == ToolResult(content="5")
        _time_sync(sync_tool, 500)
        await _time_async(async_tool, 500)
    samples: dict[tuple[str, str], list[float]] = {}
    for _ in range(rounds):
        for name, (sync_tool, async_tool) in tools.items():
            samples.setdefault((name, "sync"), []).append(_time_sync(sync_tool, calls))
            samples.setdefault((name, "async"), []).append(await _time_async(async_tool, calls))
    median = {key: statistics.median(values) for key, values in samples.items()}
    print(f"per call, median of {rounds} rounds x {calls} calls (µs; ratio to explicit, same run)")
    print(f"{'tool':<18}{'sync invoke':>14}{'ratio':>8}{'async execute':>16}{'ratio':>8}")
    for name in tools:
        s, a = median[(name, "sync")], median[(name, "async")]
        rs, ra = s / median[("explicit", "sync")], a / median[("explicit", "async")]
        print(f"{name:<18}{s:>14.3f}{rs:>8.2f}{a:>16.3f}{ra:>8.2f}")
    print()
    print("defining the tool once (µs)")
    for name, (sync, _) in SHAPES.items():
        print(f"{name:<18}{_definition_us(sync):>14.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    anyio.run(_main, args.calls, args.rounds)


if __name__ == "__main__":
    main()
