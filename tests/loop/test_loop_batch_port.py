"""The ports the agent layer runs on: ``run_tool_batch``, ``final_turn``, ``is_final_call`` and the
turn ``on_turn_would_end`` receives."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from bindloop import (
    AbortController,
    ModelTurnResult,
    StepSettlement,
    ToolCall,
    ToolError,
    ToolLoopResult,
    ToolMessage,
    ToolOutcome,
    ToolResult,
    ToolSuspend,
    UserMessage,
    run_tool_loop,
)
from bindloop.errors import AbortedToolCallError, PortContractError
from bindloop.loop import BatchRunner, LoopBoundary, LoopControl
from bindloop.loop import ToolBatchOptions
from bindloop.testing import final_answer, loop_harness, tool_call, tool_call_turn
from bindloop.loop import LoopHooks, ToolRunner


def run(h: Any) -> ToolLoopResult:
    return anyio.run(run_tool_loop, h.params)


def passthrough(seen: list[tuple[str, ...]]) -> Any:
    async def port(calls: Sequence[ToolCall], runner: BatchRunner) -> list[ToolOutcome]:
        seen.append(tuple(c.name for c in calls))
        return await runner(calls)
    return port


# ---- run_tool_batch ------------------------------------------------------------------------------

def test_every_batch_reaches_the_port_once_with_serial_and_lone_calls() -> None:
    seen: list[tuple[str, ...]] = []
    h = loop_harness(
        [
        tool_call_turn([tool_call("a"), tool_call("s"), tool_call("b")]),
        tool_call_turn([tool_call("s")]),
        final_answer("done"),
    ],
        runner=ToolRunner(run_tool_batch=passthrough(seen), runs_serially=lambda c: c.name == "s"),
    )
    r = run(h)
    assert r.stop_reason == "done"
    assert seen == [("a", "s", "b"), ("s",)]
    # The runner runs serial calls first, alone, then the pool; results keep the model's order.
    assert h.ran == ["s", "a", "b", "s"]
    tools = [m.tool_call_id for m in h.state.messages if isinstance(m, ToolMessage)]
    assert tools == ["call_1_0", "call_1_1", "call_1_2", "call_2_0"]
    assert r.stats.tool_calls == 4


def test_the_ports_outcomes_are_what_the_transcript_gets_and_stats_count_what_ran() -> None:
    async def port(calls: Sequence[ToolCall], runner: BatchRunner) -> list[ToolOutcome]:
        ran = await runner([c for c in calls if c.name != "blocked"])
        out = iter(ran)
        return [ToolError(error="blocked by policy", kind="policy") if c.name == "blocked"
                else ToolResult(content=f"wrapped {next(out).content}")  # type: ignore[union-attr]
                for c in calls]

    h = loop_harness(
        [tool_call_turn([tool_call("a"), tool_call("blocked")]), final_answer("ok")],
        runner=ToolRunner(run_tool_batch=port),
    )
    r = run(h)
    contents = [m.content for m in h.state.messages if isinstance(m, ToolMessage)]
    assert contents == ["wrapped a ok", '{"error":"blocked by policy","kind":"policy"}']
    assert h.ran == ["a"]
    assert r.stats.tool_calls == 1 and set(r.stats.tools) == {"a"}
    assert h.state.totals.tool_calls == 1


def test_a_retrying_middleware_counts_every_run() -> None:
    async def twice(calls: Sequence[ToolCall], runner: BatchRunner) -> list[ToolOutcome]:
        await runner(calls)
        return await runner(calls)

    h = loop_harness(
        [tool_call_turn([tool_call("a")]), final_answer("ok")],
        runner=ToolRunner(run_tool_batch=twice),
    )
    r = run(h)
    assert h.ran == ["a", "a"] and r.stats.tool_calls == 2 and r.stats.tools["a"].calls == 2


@pytest.mark.parametrize(("answer", "match"), [
    ([], r"run_tool_batch returned 0 outcomes for 2 calls"),
    ("nope", r"run_tool_batch returned str for 2 calls"),
    ([ToolResult(content="x"), "not an outcome"], r"run_tool_batch returned str for call"),
    ([ToolResult(content="x"), ToolResult(content=5)], r"run_tool_batch\('call_1_1'\)\.content"),
])
def test_a_wrong_answer_is_a_port_contract_error_naming_the_port(answer: Any, match: str) -> None:
    async def port(calls: Sequence[ToolCall], runner: BatchRunner) -> Any:
        return answer

    h = loop_harness(
        [tool_call_turn([tool_call("a"), tool_call("b")]), final_answer("ok")],
        runner=ToolRunner(run_tool_batch=port),
    )
    with pytest.raises(PortContractError, match=match):
        run(h)


def test_a_sync_port_and_a_leaked_runner_are_refused() -> None:
    h = loop_harness(
        [tool_call_turn([tool_call("a")])],
        runner=ToolRunner(run_tool_batch=lambda calls, r: []),
    )
    with pytest.raises(PortContractError, match="instead of an awaitable"):
        run(h)
    kept: list[BatchRunner] = []

    async def leak(calls: Sequence[ToolCall], runner: BatchRunner) -> list[ToolOutcome]:
        kept.append(runner)
        return await runner(calls)

    h = loop_harness(
        [tool_call_turn([tool_call("a")]), final_answer("ok")],
        runner=ToolRunner(run_tool_batch=leak),
    )
    run(h)
    with pytest.raises(PortContractError, match="after the port returned"):
        anyio.run(kept[0], [ToolCall(id="x", name="a", arguments="{}")])


def test_the_runner_refuses_what_is_not_a_tool_call() -> None:
    async def port(calls: Sequence[ToolCall], runner: BatchRunner) -> list[ToolOutcome]:
        return await runner([{"id": "x"}])  # type: ignore[list-item]

    h = loop_harness([tool_call_turn([tool_call("a")])], runner=ToolRunner(run_tool_batch=port))
    with pytest.raises(PortContractError, match=r"runner was given a dict at \[0\]"):
        run(h)


def test_a_raise_inside_the_runner_follows_the_loops_policy() -> None:
    rejected: list[tuple[str, BaseException]] = []
    seen: list[ToolOutcome] = []

    def secret(args: Any) -> Any:
        raise RuntimeError("db password=hunter2 refused")

    async def port(calls: Sequence[ToolCall], runner: BatchRunner) -> list[ToolOutcome]:
        out = await runner(calls)
        seen.extend(out)
        return out

    h = loop_harness(
        [tool_call_turn([tool_call("secret")]), final_answer("ok")],
        tools={"secret": secret},
        runner=ToolRunner(run_tool_batch=port),
        hooks=LoopHooks(on_tool_call_rejected=lambda i, e: rejected.append((i, e))),
    )
    assert run(h).stop_reason == "done"
    assert seen == [ToolError(error="RuntimeError: the tool failed")]
    assert "hunter2" not in msgspec.json.encode(h.state.messages).decode()
    assert [(i, str(e)) for i, e in rejected] == [("call_1_0", "db password=hunter2 refused")]


def test_a_fatal_raise_propagates_out_of_the_runner_and_the_port() -> None:
    class Fatal(Exception):
        pass

    def boom(args: Any) -> Any:
        raise Fatal("stop")

    h = loop_harness(
        [tool_call_turn([tool_call("boom")])],
        tools={"boom": boom},
        runner=ToolRunner(
            run_tool_batch=passthrough([]),
            is_fatal_tool_error=lambda e: isinstance(e, Fatal),
        ),
    )
    with pytest.raises(Fatal):
        run(h)


def test_the_runner_bounds_each_tool_by_batch_options() -> None:
    live = [0]
    peak = [0]

    async def slow(args: Any) -> Any:
        live[0] += 1
        peak[0] = max(peak[0], live[0])
        await anyio.sleep(0.01)
        live[0] -= 1
        return "ok"

    h = loop_harness(
        [tool_call_turn([tool_call("slow") for _ in range(4)]), final_answer("ok")],
        tools={"slow": slow},
        runner=ToolRunner(
            run_tool_batch=passthrough([]),
            batch_options=ToolBatchOptions(max_per_tool=2),
        ),
    )
    run(h)
    assert peak[0] == 2


def test_once_the_signal_fires_the_runner_starts_nothing_and_the_run_aborts() -> None:
    ctl = AbortController()
    rejected: list[BaseException] = []

    def stopper(args: Any) -> Any:
        ctl.abort("enough")
        return "stopped"

    h = loop_harness(
        [tool_call_turn([tool_call("stop"), tool_call("later")]), final_answer("x")],
        tools={"stop": stopper},
        signal=ctl.signal,
        runner=ToolRunner(run_tool_batch=passthrough([]), runs_serially=lambda c: c.name == "stop"),
        hooks=LoopHooks(on_tool_call_rejected=lambda i, e: rejected.append(e)),
    )
    r = run(h)
    assert r.stop_reason == "aborted" and h.ran == ["stop"]
    last = h.state.messages[-1]
    assert isinstance(last, ToolMessage) and '"kind":"not_run"' in str(last.content)
    assert [type(e) for e in rejected] == [AbortedToolCallError]


def test_activations_are_read_off_the_ports_outcomes() -> None:
    active: list[tuple[str, ...]] = []

    async def port(calls: Sequence[ToolCall], runner: BatchRunner) -> list[ToolOutcome]:
        await runner(calls)
        return [ToolResult(content="loaded", activate_plugins=("pdf",))]

    h = loop_harness(
        [tool_call_turn([tool_call("load")]), final_answer("ok")],
        runner=ToolRunner(run_tool_batch=port),
        hooks=LoopHooks(activate=lambda kind, names: active.append(names)),
    )
    run(h)
    assert active == [("pdf",)]


_NAMES = ("a", "b", "s")
_turns = st.lists(st.lists(st.tuples(st.sampled_from(_NAMES), st.booleans()), min_size=1,
                           max_size=4), max_size=4)


@settings(max_examples=60, deadline=None)
@given(turns=_turns, serial=st.booleans())
def test_a_passthrough_middleware_changes_nothing(turns: list[list[tuple[str, bool]]],
                                                  serial: bool) -> None:
    """The same scripted run with and without an identity ``run_tool_batch``: identical transcript,
    stats (times included, on a stepping clock), state and rejections."""

    def world(port: Any) -> tuple[Any, ...]:
        rejected: list[tuple[str, str]] = []
        script = [tool_call_turn([tool_call(n, {"fail": f}) for n, f in t]) for t in turns]

        def tool(args: Any) -> Any:
            if args["fail"]:
                raise ValueError("no")
            return "fine"

        h = loop_harness(
            script + [final_answer("end")],
            tools=dict.fromkeys(_NAMES, tool),
            runner=ToolRunner(
                run_tool_batch=port,
                runs_serially=(lambda c: c.name == "s") if serial else None,
            ),
            hooks=LoopHooks(on_tool_call_rejected=lambda i, e: rejected.append((i, repr(e)))),
        )
        r = run(h)
        return (r, h.state.messages, h.state.totals, h.state.counters, rejected, h.ran)

    assert world(passthrough([])) == world(None)


# ---- final_turn ----------------------------------------------------------------------------------

def test_final_turn_is_the_turn_that_ended_a_done_run() -> None:
    h = loop_harness([tool_call_turn([tool_call("a")]), final_answer("the answer")])
    r = run(h)
    assert r.final_turn is not None and r.final_turn.text == "the answer"
    assert r.final_turn.to_message() == h.state.messages[-1]


def test_final_turn_is_none_when_no_model_turn_ended_the_run() -> None:
    h = loop_harness([tool_call_turn([tool_call("a")])], max_iterations=1)
    r = run(h)
    assert r.stop_reason == "iteration_limit" and r.final_turn is None
    h = loop_harness([tool_call_turn([tool_call("wait")])],
                     tools={"wait": lambda a: ToolSuspend(mode="waiting_for_reply")})
    assert run(h).final_turn is None


def test_final_turn_kept_out_of_the_transcript_is_still_reported() -> None:
    quiet = msgspec.structs.replace(final_answer(""), accept_message=False)
    h = loop_harness([quiet])
    r = run(h)
    assert r.final_turn is not None and r.final_turn.text == ""
    assert len(h.state.messages) == 1


def test_the_controlled_result_carries_final_turn() -> None:
    h = loop_harness([tool_call_turn([tool_call("a")]), final_answer("x")])
    r = anyio.run(run_tool_loop, h.params, LoopControl(on_boundary=lambda b: "continue"))
    assert r.final_turn is not None and r.final_turn.text == "x"
    h = loop_harness([tool_call_turn([tool_call("a")]), final_answer("x")])

    def checkpoint(b: LoopBoundary) -> Any:
        return "checkpoint"

    r = anyio.run(run_tool_loop, h.params, LoopControl(on_boundary=checkpoint))
    assert r.stop_reason == "checkpointed" and r.final_turn is None


# ---- is_final_call -------------------------------------------------------------------------------

def is_output(call: ToolCall, outcome: ToolOutcome) -> bool:
    return call.name == "final_result" and isinstance(outcome, ToolResult)


def test_a_final_call_ends_the_run_done_with_the_real_call_and_result() -> None:
    turn = tool_call_turn([tool_call("search"), tool_call("final_result", {"answer": 42})])
    h = loop_harness(
        [turn, final_answer("never asked")],
        runner=ToolRunner(is_final_call=is_output),
    )
    r = run(h)
    assert r.stop_reason == "done" and r.stats.turns == 1
    assert r.final_turn is not None and [c.name for c in r.final_turn.tool_calls] == [
        "search", "final_result"]
    last = h.state.messages[-1]
    assert isinstance(last, ToolMessage) and last.tool_call_id == "call_1_1"
    assert all(m.content != "never asked" for m in h.state.messages)


def test_a_refused_final_call_does_not_end_the_run() -> None:
    h = loop_harness(
        [
        tool_call_turn([tool_call("final_result")]), tool_call_turn([tool_call("final_result")]),
    ],
        tools={"final_result": lambda a: ToolError(error="missing answer")},
        max_iterations=2,
        runner=ToolRunner(is_final_call=is_output),
    )
    assert run(h).stop_reason == "iteration_limit"


def test_a_final_batch_settles_as_a_turn_that_would_end_and_can_be_reasked() -> None:
    order: list[Any] = []

    def settle(would_end: bool) -> StepSettlement | None:
        order.append(("settle", would_end))
        return None

    def reask(turn: ModelTurnResult) -> list[Any] | None:
        order.append(("nudge", [c.name for c in turn.tool_calls], turn.text))
        return [UserMessage(content="try again")] if len(order) < 3 else None

    h = loop_harness(
        [tool_call_turn([tool_call("final_result")]), final_answer("plain")],
        runner=ToolRunner(is_final_call=is_output),
        hooks=LoopHooks(on_step_settled=settle, on_turn_would_end=reask),
    )
    r = run(h)
    assert order == [("settle", True), ("nudge", ["final_result"], None), ("settle", True),
                     ("nudge", [], "plain")]
    assert r.stop_reason == "done" and r.final_turn is not None and r.final_turn.text == "plain"


def test_signal_and_open_suspends_outrank_a_final_call() -> None:
    h = loop_harness(
        [tool_call_turn([tool_call("final_result"), tool_call("wait")])],
        tools={"wait": lambda a: ToolSuspend(mode="resuming_later")},
        runner=ToolRunner(is_final_call=is_output),
    )
    r = run(h)
    assert r.stop_reason == "resuming_later" and r.final_turn is None
    ctl = AbortController()

    def stop(args: Any) -> Any:
        ctl.abort()
        return "ok"

    h = loop_harness(
        [tool_call_turn([tool_call("final_result"), tool_call("x")])],
        tools={"final_result": stop},
        signal=ctl.signal,
        runner=ToolRunner(
            is_final_call=is_output,
            runs_serially=lambda c: c.name == "final_result",
        ),
    )
    assert run(h).stop_reason == "aborted"


def test_is_final_call_must_be_a_sync_predicate() -> None:
    h = loop_harness(
        [tool_call_turn([tool_call("a")])],
        runner=ToolRunner(is_final_call=lambda c, o: "yes"),
    )
    with pytest.raises(PortContractError, match="is_final_call must return a bool"):
        run(h)

    async def later(call: ToolCall, outcome: ToolOutcome) -> bool:
        return True

    h = loop_harness([tool_call_turn([tool_call("a")])], runner=ToolRunner(is_final_call=later))
    with pytest.raises(PortContractError, match="is_final_call returned an awaitable"):
        run(h)


def test_a_final_call_through_the_batch_port_is_read_off_the_ports_outcome() -> None:
    async def port(calls: Sequence[ToolCall], runner: BatchRunner) -> list[ToolOutcome]:
        await runner(calls)
        return [ToolResult(content="accepted")]

    h = loop_harness(
        [tool_call_turn([tool_call("final_result")])],
        tools={"final_result": lambda a: ToolError(error="raw")},
        runner=ToolRunner(run_tool_batch=port, is_final_call=is_output),
    )
    r = run(h)
    assert r.stop_reason == "done" and h.state.messages[-1].content == "accepted"


# ---- on_turn_would_end(turn) --------------------------------------------------------------------

def test_the_nudge_sees_the_turn_that_would_end() -> None:
    turns: list[str | None] = []

    def nudge(turn: ModelTurnResult) -> list[Any] | None:
        turns.append(turn.text)
        return [UserMessage(content="more")] if len(turns) == 1 else None

    h = loop_harness(
        [final_answer("first"), final_answer("second")],
        hooks=LoopHooks(on_turn_would_end=nudge),
    )
    r = run(h)
    assert turns == ["first", "second"]
    assert r.final_turn is not None and r.final_turn.text == "second"


def test_a_raise_out_of_the_port_propagates_with_no_result_appended() -> None:
    from bindloop import AssistantMessage

    async def broken(calls: Sequence[ToolCall], runner: BatchRunner) -> list[ToolOutcome]:
        await runner(calls)
        raise RuntimeError("middleware bug")

    h = loop_harness(
        [tool_call_turn([tool_call("a")]), final_answer("x")],
        runner=ToolRunner(run_tool_batch=broken),
    )
    with pytest.raises(RuntimeError, match="middleware bug"):
        run(h)
    assert isinstance(h.state.messages[-1], AssistantMessage) and h.ran == ["a"]
