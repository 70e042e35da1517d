"""``ToolLoopParams.resume_calls``: calls of open suspends the run begins with, as its first batch,
run exactly as a turn's batch (serial rule, pool, signal, ``run_tool_batch``, rejections, stats)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from bindloop.contracts import AssistantMessage, ToolCall, ToolMessage, ToolResult, UserMessage
from bindloop.errors import UsageError
from bindloop.loop import OpenSuspend, ToolLoopParams, ToolLoopState, run_tool_loop
from bindloop.signal import AbortController
from bindloop.testing import final_answer, scripted_model
from bindloop.loop import LoopHooks, ToolRunner

CALLS = (ToolCall(id="a", name="pay", arguments='{"n":1}'),
         ToolCall(id="b", name="pay", arguments='{"n":2}'),
         ToolCall(id="c", name="ask", arguments="{}"))


def _suspended() -> ToolLoopState:
    return ToolLoopState(
        messages=[UserMessage(content="go"), AssistantMessage(content=None, tool_calls=CALLS)],
        open_suspends=[OpenSuspend(tool_call_id=c.id, tool_name=c.name, mode="waiting_for_reply")
                       for c in CALLS])


def _run(state: ToolLoopState, resume: tuple[ToolCall, ...], *,
         controller: AbortController | None = None, hooks: LoopHooks | None = None,
         **rules: Any) -> Any:
    ran: list[str] = []

    async def run_tool_call(call: ToolCall) -> ToolResult:
        ran.append(f"{call.id}:{call.arguments}")
        if call.id == "a" and controller is not None:
            controller.abort("stop")  # fired while the first resumed call runs
        return ToolResult(content=f"ran {call.id}")

    model = scripted_model([final_answer("done")])
    params = ToolLoopParams(
        model=model,
        state=state,
        max_iterations=3,
        resume_calls=resume,
        signal=None if controller is None else controller.signal,
        hooks=hooks or LoopHooks(),
        runner=ToolRunner(run_tool_call=run_tool_call, **rules),
    )
    return anyio.run(run_tool_loop, params), ran, model


def test_the_resumed_calls_are_the_first_batch_and_other_suspends_end_the_run() -> None:
    state = _suspended()
    edited = ToolCall(id="b", name="pay", arguments='{"n":20}')
    result, ran, model = _run(state, (CALLS[0], edited))
    assert ran == ['a:{"n":1}', 'b:{"n":20}']  # the edit's arguments are what runs
    assert result.stop_reason == "waiting_for_reply" and model.position == 0
    assert [s.tool_call_id for s in state.open_suspends] == ["c"]
    assert [m.tool_call_id for m in state.messages if isinstance(m, ToolMessage)] == ["a", "b"]
    assert result.stats.tool_calls == 2 and result.stats.turns == 0


def test_with_nothing_left_open_the_run_goes_on_to_the_model() -> None:
    state = _suspended()
    state.open_suspends.pop()  # "c" answered elsewhere
    state.messages.append(ToolMessage(tool_call_id="c", content="yes"))
    rejected: list[str] = []
    result, ran, model = _run(state, CALLS[:2], runs_serially=lambda call: True,
                              hooks=LoopHooks(on_tool_call_rejected=lambda cid, exc:
                                              rejected.append(cid)))
    assert result.stop_reason == "done" and model.position == 1 and ran == [
        'a:{"n":1}', 'b:{"n":2}']
    assert rejected == []


def test_the_signal_bounds_the_resumed_batch_as_any_batch() -> None:
    rejected: list[tuple[str, str]] = []
    result, ran, model = _run(
        _suspended(), CALLS[:2], runs_serially=lambda call: True,
        controller=AbortController(),
        hooks=LoopHooks(on_tool_call_rejected=lambda cid, exc:
                        rejected.append((cid, type(exc).__name__))))
    assert ran == ['a:{"n":1}'] and result.stop_reason == "aborted" and model.position == 0
    assert rejected == [("b", "AbortedToolCallError")]


def test_the_batch_port_wraps_the_resumed_batch() -> None:
    seen: list[tuple[str, ...]] = []

    async def port(calls: Any, run: Any) -> Any:
        seen.append(tuple(c.id for c in calls))
        return await run(calls)

    result, ran, _ = _run(_suspended(), CALLS[:1], run_tool_batch=port)
    assert seen == [("a",)] and ran == ['a:{"n":1}']


@pytest.mark.parametrize("bad", [
    (ToolCall(id="zz", name="pay", arguments="{}"),),  # no such suspend
    (ToolCall(id="a", name="ask", arguments="{}"),),  # another tool's name
    (CALLS[0], CALLS[0]),  # twice
    ("a",),
])
def test_resume_calls_that_answer_no_open_suspend_are_refused(bad: Any) -> None:
    with pytest.raises(UsageError, match="resume_calls"):
        _run(_suspended(), bad)


@pytest.mark.parametrize("resumed", [True, False])
def test_a_resumed_run_settles_a_boundary_after_its_first_batch(resumed: bool) -> None:
    """The decided calls' results are new state: the boundary before the first model call is
    reported for a resumed run (a host saves it, so a run lost later does not run them again),
    and skipped for a run starting from its input as before."""
    from bindloop.loop import LoopBoundary, LoopControl

    state = _suspended()
    state.open_suspends.pop()
    state.messages.append(ToolMessage(tool_call_id="c", content="yes"))
    if not resumed:
        state = ToolLoopState(messages=[UserMessage(content="go")])
    seen: list[tuple[int, bool, int, list[str]]] = []

    def on_boundary(b: LoopBoundary) -> str:
        seen.append((b.iterations, b.final, b.stats.tool_calls,
                     [m.tool_call_id for m in b.state.messages if isinstance(m, ToolMessage)]))
        return "checkpoint" if not b.final else "continue"

    async def run_tool_call(call: ToolCall) -> ToolResult:
        return ToolResult(content=f"ran {call.id}")

    model = scripted_model([final_answer("done")])
    params = ToolLoopParams(
        model=model,
        state=state,
        max_iterations=3,
        resume_calls=CALLS[:2] if resumed else (),
        runner=ToolRunner(run_tool_call=run_tool_call),
    )
    result = anyio.run(run_tool_loop, params, LoopControl(on_boundary=on_boundary))
    if resumed:
        assert result.stop_reason == "checkpointed" and model.position == 0
        assert seen[0] == (0, False, 2, ["c", "a", "b"])  # after the batch, before the model
    else:
        assert result.stop_reason == "done" and model.position == 1
        assert [s[1] for s in seen] == [True]  # only the final one
