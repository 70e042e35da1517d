from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given, strategies as st

from bindloop.contracts import ToolCall
from bindloop.errors import AbortedToolCallError, UsageError
from bindloop.loop import ToolBatchOptions, run_tool_calls_pooled_by_tool
from bindloop.signal import AbortController


def calls(*names: str) -> list[ToolCall]:
    return [ToolCall(id=f"c{i}", name=n, arguments="{}") for i, n in enumerate(names)]


# The lanes run in asyncio's own task group on asyncio and in anyio's elsewhere: every behaviour
# below is checked on both.
BACKENDS = ("asyncio", "trio")
backends = pytest.mark.parametrize("backend", BACKENDS)


@backends
def test_defaults_read_tool_call_name_and_id_and_keep_input_order(backend: str) -> None:
    async def run(c: ToolCall) -> str:
        await anyio.sleep(0.02 if c.id == "c0" else 0)
        return c.id

    out = anyio.run(run_tool_calls_pooled_by_tool, calls("a", "b", "a"), run, backend=backend)
    assert out == ["c0", "c1", "c2"]


def test_explicit_accessors_still_work() -> None:
    async def main() -> list[Any]:
        async def run(x: tuple[str, str]) -> str:
            return x[1]

        return await run_tool_calls_pooled_by_tool(
            [("t", "1"), ("u", "2")], run, tool_name=lambda x: x[0], item_id=lambda x: x[1])

    assert anyio.run(main) == ["1", "2"]
    with pytest.raises(UsageError, match="tool_name"):
        anyio.run(run_tool_calls_pooled_by_tool, [1, 2], lambda x: x)  # type: ignore[arg-type]


@backends
@pytest.mark.parametrize("concurrency", [1, 2, 3])
def test_concurrency_caps_total_in_flight(concurrency: int, backend: str) -> None:
    active = [0]
    peak = [0]

    async def run(c: ToolCall) -> str:
        active[0] += 1
        peak[0] = max(peak[0], active[0])
        await anyio.sleep(0.005)
        active[0] -= 1
        return c.id

    async def main() -> list[Any]:
        return await run_tool_calls_pooled_by_tool(calls("a", "b", "c", "d", "a", "b"), run,
                                                   concurrency=concurrency)

    assert anyio.run(main, backend=backend) == [f"c{i}" for i in range(6)]
    assert peak[0] == concurrency


@backends
def test_per_tool_bound_and_concurrency_combine(backend: str) -> None:
    active: dict[str, int] = {}
    peak: dict[str, int] = {}

    async def run(c: ToolCall) -> str:
        active[c.name] = active.get(c.name, 0) + 1
        peak[c.name] = max(peak.get(c.name, 0), active[c.name])
        await anyio.sleep(0.005)
        active[c.name] -= 1
        return c.id

    async def main() -> None:
        await run_tool_calls_pooled_by_tool(calls("a", "a", "a", "b", "b"), run,
                                            options=ToolBatchOptions(max_per_tool=1), concurrency=5)

    anyio.run(main, backend=backend)
    assert peak == {"a": 1, "b": 1}


@backends
def test_abort_while_waiting_for_capacity_returns_not_run(backend: str) -> None:
    controller = AbortController()
    ran: list[str] = []

    async def run(c: ToolCall) -> str:
        ran.append(c.id)
        controller.abort("deadline")
        await anyio.sleep(0)
        return c.id

    async def main() -> list[Any]:
        return await run_tool_calls_pooled_by_tool(calls("a", "b", "c"), run,
                                                   signal=controller.signal, concurrency=1)

    out = anyio.run(main, backend=backend)
    # Exactly one call took the capacity (asyncio starts lanes in order, trio in any order); the
    # others, still waiting when the signal fired, come back as not run.
    assert len(ran) == 1
    first = int(ran[0][1:])
    assert out[first] == ran[0]
    rest = out[:first] + out[first + 1:]
    assert all(isinstance(o, AbortedToolCallError) and o.reason == "deadline" for o in rest)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_bad_concurrency(bad: object) -> None:
    with pytest.raises(UsageError):
        anyio.run(lambda: run_tool_calls_pooled_by_tool(calls("a"), _echo, concurrency=bad))  # type: ignore[arg-type]


async def _echo(c: ToolCall) -> str:
    return c.id


@given(names=st.lists(st.sampled_from("abc"), min_size=1, max_size=8),
       abort_after=st.none() | st.integers(0, 8), concurrency=st.none() | st.integers(1, 3),
       width=st.none() | st.integers(1, 2), backend=st.sampled_from(BACKENDS))
def test_every_slot_answered_once_in_order(names: list[str], abort_after: int | None,
                                           concurrency: int | None, width: int | None,
                                           backend: str) -> None:
    controller = AbortController()
    started: list[str] = []
    items = calls(*names)

    async def run(c: ToolCall) -> str:
        started.append(c.id)
        if abort_after is not None and len(started) > abort_after:
            controller.abort()
        await anyio.sleep(0)
        return c.id

    async def main() -> list[Any]:
        return await run_tool_calls_pooled_by_tool(
            items, run, signal=controller.signal if abort_after is not None else None,
            options=ToolBatchOptions(max_per_tool=width), concurrency=concurrency)

    out = anyio.run(main, backend=backend)
    assert len(out) == len(items)
    for item, answer in zip(items, out):
        if isinstance(answer, AbortedToolCallError):
            assert answer.tool_call_id == item.id and item.id not in started
        else:
            assert answer == item.id
    assert sorted(started) == sorted(set(started))
    if abort_after is None:
        assert len(started) == len(items)  # without a signal every call runs


@backends
def test_a_cancelled_caller_cancels_every_lane_and_waits_for_them(backend: str) -> None:
    # A run deadline or an abort cancels the scope around the batch: every lane is cancelled
    # (its cleanup runs) before the batch's frame is left, and the scope absorbs the cancellation.
    started: list[str] = []
    cleaned: list[str] = []

    async def run(c: ToolCall) -> str:
        started.append(c.id)
        try:
            await anyio.sleep(30)
        finally:
            cleaned.append(c.id)
        return c.id

    async def main() -> tuple[bool, list[str]]:
        with anyio.move_on_after(0.05) as scope:
            await run_tool_calls_pooled_by_tool(calls("a", "b", "a"), run)
        return scope.cancelled_caught, sorted(cleaned)

    caught, cleaned_when_left = anyio.run(main, backend=backend)
    assert caught
    assert sorted(started) == ["c0", "c1", "c2"]
    assert cleaned_when_left == ["c0", "c1", "c2"]


@backends
def test_a_failing_call_cancels_the_others_and_is_raised_as_itself(backend: str) -> None:
    cleaned: list[str] = []

    class Boom(Exception):
        pass

    async def run(c: ToolCall) -> str:
        try:
            if c.id == "c1":
                await anyio.sleep(0)
                raise Boom("c1 failed")
            await anyio.sleep(30)
            return c.id
        finally:
            cleaned.append(c.id)

    async def main() -> list[str]:
        with anyio.fail_after(10):  # a hang (the others never cancelled) fails the test here
            try:
                await run_tool_calls_pooled_by_tool(calls("a", "b", "c"), run)
            except Boom:
                # The others were cancelled and have ended by the time the failure is raised.
                return sorted(cleaned)
        raise AssertionError("the failure was not raised")

    assert anyio.run(main, backend=backend) == ["c0", "c1", "c2"]


@backends
def test_calls_see_the_callers_context(backend: str) -> None:
    import contextvars

    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")

    async def run(c: ToolCall) -> str:
        await anyio.sleep(0)
        seen = var.get()
        var.set(f"changed by {c.id}")  # a call's own changes stay in its lane
        return seen

    async def main() -> tuple[list[Any], str]:
        var.set("caller")
        out = await run_tool_calls_pooled_by_tool(calls("a", "b"), run)
        return out, var.get()

    out, after = anyio.run(main, backend=backend)
    assert out == ["caller", "caller"]
    assert after == "caller"


@backends
def test_calls_may_use_anyio_scopes_and_task_groups_inside_their_lane(backend: str) -> None:
    # A tool's own timeouts and task groups (an MCP call, an HTTP client) work in its lane.
    async def run(c: ToolCall) -> str:
        if c.id == "c0":
            with anyio.move_on_after(0.01) as scope:
                await anyio.sleep(30)
            return f"timed out: {scope.cancelled_caught}"
        got: list[int] = []
        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(lambda i=i: _append_later(got, i))
        return f"gathered {sorted(got)}"

    out = anyio.run(run_tool_calls_pooled_by_tool, calls("a", "b"), run, backend=backend)
    assert out == ["timed out: True", "gathered [0, 1, 2]"]


async def _append_later(into: list[int], value: int) -> None:
    await anyio.sleep(0)
    into.append(value)
