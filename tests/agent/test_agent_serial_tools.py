"""``equip_tool(serial=True)``: such calls run first, alone, in the model's order; the rest of the
turn's calls then run concurrently; answers reach the transcript in the model's order."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.agent import (
    create_agent,
    equip_instruction,
    equip_tool,
    equip_tool_call_loop_middleware,
    prompt_chat,
)
from bindloop.agent.middleware import (
    ToolCallLoopMiddleware,
    ToolOutput,
)
from bindloop.contracts import ToolMessage, ToolResult
from bindloop.errors import UsageError
from bindloop.tools import define_tool
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn


class Args(msgspec.Struct):
    q: str = ""


def _tool(name: str, log: list[str], running: list[int], peak: list[int]) -> Any:
    async def run(args: Args, ctx: object) -> ToolResult:
        running[0] += 1
        peak[0] = max(peak[0], running[0])
        log.append(f"start {name}:{args.q}")
        await anyio.sleep(0.001)  # a real suspension point, so concurrent calls interleave
        log.append(f"end {name}:{args.q}")
        running[0] -= 1
        return ToolResult(content=f"{name}:{args.q}")

    return define_tool(name=name, description=name, args=Args, execute=run)


def _passthrough() -> ToolCallLoopMiddleware:
    async def handler(ctx: Any, calls: list[Any], next: Any) -> list[ToolOutput]:
        return list(await next(calls))

    return ToolCallLoopMiddleware(name="pass", handler=handler)


def _run(calls: list[str], *, serial: set[str], with_loop_middleware: bool,
         backend: str = "asyncio") -> tuple[list[str], list[ToolMessage], int]:
    log: list[str] = []
    running, peak = [0], [0]
    tools = {n: _tool(n, log, running, peak) for n in "abc"}
    model = scripted_stream_model([
        tool_call_turn([tool_call(n, {"q": str(i)}) for i, n in enumerate(calls)]),
        final_answer("ok")])

    async def handler(_: None) -> Any:
        equip_instruction("go")
        for name, tool in tools.items():
            equip_tool(tool, serial=name in serial)
        if with_loop_middleware:
            equip_tool_call_loop_middleware(_passthrough())
        return await prompt_chat()

    chat = anyio.run(create_agent(id="a", handler=handler, model=model), None, backend=backend)
    return log, [m for m in chat.delta if isinstance(m, ToolMessage)], peak[0]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from("abc"), min_size=1, max_size=6),
       st.sets(st.sampled_from("abc")), st.booleans())
def test_serial_calls_run_alone_first_in_model_order(calls: list[str], serial: set[str],
                                                     with_loop_middleware: bool) -> None:
    log, answers, _ = _run(calls, serial=serial, with_loop_middleware=with_loop_middleware)
    serial_calls = [f"{n}:{i}" for i, n in enumerate(calls) if n in serial]
    # Each serial call starts and ends before anything else starts, in the model's order.
    assert log[:2 * len(serial_calls)] == [e for c in serial_calls for e in (f"start {c}", f"end {c}")]
    rest = log[2 * len(serial_calls):]
    assert sorted(e.split(" ")[1] for e in rest if e.startswith("start")) == sorted(
        f"{n}:{i}" for i, n in enumerate(calls) if n not in serial)
    # Answers are in the model's order, whatever order the calls ran in.
    assert [m.content for m in answers] == [f"{n}:{i}" for i, n in enumerate(calls)]


@pytest.mark.parametrize("with_loop_middleware", [False, True])
@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_non_serial_calls_still_run_concurrently(with_loop_middleware: bool,
                                                     backend: str) -> None:
    _, _, peak = _run(["b", "a", "c", "a", "b"], serial={"a"},
                      with_loop_middleware=with_loop_middleware, backend=backend)
    assert peak == 3  # b, c, b together once both a calls are done
    _, _, peak = _run(["a", "a", "a"], serial={"a"}, with_loop_middleware=with_loop_middleware,
                      backend=backend)
    assert peak == 1


def test_equipping_again_without_serial_makes_the_tool_concurrent_again() -> None:
    log: list[str] = []
    running, peak = [0], [0]
    tool = _tool("a", log, running, peak)
    model = scripted_stream_model([tool_call_turn([tool_call("a", {"q": "1"}),
                                                   tool_call("a", {"q": "2"})]),
                                   final_answer("ok")])

    async def handler(_: None) -> Any:
        equip_instruction("go")
        equip_tool(tool, serial=True)
        equip_tool(tool)  # replaces the first, serial flag included
        return await prompt_chat()

    anyio.run(create_agent(id="a", handler=handler, model=model), None)
    assert peak[0] == 2


def test_serial_must_be_a_bool() -> None:
    tool = _tool("a", [], [0], [0])

    async def handler(_: None) -> Any:
        equip_tool(tool, serial="yes")  # type: ignore[arg-type]
        return await prompt_chat()

    with pytest.raises(UsageError, match="serial"):
        anyio.run(create_agent(id="a", handler=handler, model=scripted_stream_model([])), None)


@pytest.mark.parametrize("with_loop_middleware", [False, True])
def test_the_loops_pool_decides_with_a_loop_middleware_too(with_loop_middleware: bool) -> None:
    """A serial call fires the run's signal: the loop stops claiming calls, so the pooled ones
    never start — also when a tool-call-loop middleware wraps the batch (its next() is the loop's
    own runner, not a copy of it)."""
    from bindloop.agent import run_with
    from bindloop.errors import RunCancelledError
    from bindloop.signal import AbortController

    controller = AbortController()
    ran: list[str] = []

    async def stop(args: Args, ctx: object) -> ToolResult:
        ran.append("stop")
        controller.abort("enough")
        return ToolResult(content="stopped")

    async def work(args: Args, ctx: object) -> ToolResult:
        ran.append(f"work:{args.q}")
        return ToolResult(content="done")

    model = scripted_stream_model([tool_call_turn(
        [tool_call("stop", {}), tool_call("work", {"q": "1"}), tool_call("work", {"q": "2"})]),
        final_answer("never")])

    async def handler(_: None) -> Any:
        equip_instruction("go")
        equip_tool(define_tool(name="stop", description="s", args=Args, execute=stop),
                   serial=True)
        equip_tool(define_tool(name="work", description="w", args=Args, execute=work))
        if with_loop_middleware:
            equip_tool_call_loop_middleware(_passthrough())
        return await prompt_chat()

    agent = create_agent(id="a", handler=handler, model=model)
    with pytest.raises(RunCancelledError):
        anyio.run(lambda: run_with(agent, initial_props=None, signal=controller.signal))
    assert ran == ["stop"]
    assert model.position == 1
