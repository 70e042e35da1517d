"""``ToolLoopResult.stats`` is this invocation's part, folded from zero: the loop's own turns, calls
and times, whatever the seed looks like; what a hook folds into ``state.totals`` during the run stays
there and never enters the part."""

from __future__ import annotations

import math

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindloop.contracts import (
    AuxiliarySpend,
    ModelTurnResult,
    RunStats,
    ToolCall,
    ToolResult,
    ToolTime,
    TurnUsage,
    accumulate_auxiliary_spend,
)
from bindloop.errors import ProtocolError
from bindloop.loop import ToolLoopParams, run_tool_loop
from bindloop.lowlevel import BoundaryChecked, LoopMachine, ModelReplied, ToolReturned
from bindloop.testing import final_answer, fresh_state, scripted_model, tool_call, tool_call_turn
from bindloop.loop import LoopHooks, ToolRunner

_SEEDS = st.sampled_from([
    RunStats(), RunStats(model_ms=-0.0, tool_ms=-0.0), RunStats(model_ms=0),  # type: ignore[arg-type]
    RunStats(turns=False),  # type: ignore[arg-type]
    RunStats(turns=3, input_tokens=40, model_ms=12.5, tool_ms=2.0, tool_calls=1,
             tools={"add": ToolTime(calls=1, ms=2.0)}),
])


def _run(seed: RunStats, *, hook_folds: bool, turns: int) -> tuple[RunStats, RunStats]:
    state = fresh_state()
    state.totals = seed
    ticks = iter(float(i) for i in range(1000))

    def settled(_would_end: bool) -> None:
        if hook_folds:  # e.g. a classifier call the host accounts for itself
            state.totals = accumulate_auxiliary_spend(state.totals, AuxiliarySpend(
                usage=TurnUsage(input_tokens=7), model_ms=5.0))

    script = [tool_call_turn([tool_call("add", {})]) for _ in range(turns - 1)] + [
        final_answer("done")]
    result = anyio.run(run_tool_loop, ToolLoopParams(
        state=state,
        model=scripted_model(script),
        max_iterations=turns,
        now=lambda: next(ticks),
        runner=ToolRunner(run_tool_call=lambda call: ToolResult(content="2")),
        hooks=LoopHooks(on_step_settled=settled),
    ))
    return result.stats, state.totals


@given(_SEEDS, st.booleans(), st.integers(1, 4))
def test_stats_hold_the_loops_own_times_and_plain_zeros(seed: RunStats, hook_folds: bool,
                                                        turns: int) -> None:
    stats, totals = _run(seed, hook_folds=hook_folds, turns=turns)
    # Each model call and each tool call takes one tick of the injected clock.
    assert stats.model_ms == float(turns) and stats.tool_ms == float(turns - 1)
    assert stats.turns == turns and type(stats.turns) is int
    assert stats.input_tokens == 0  # the hook's spend is the host's, not the loop's
    assert totals.input_tokens == seed.input_tokens + (7 * turns if hook_folds else 0)
    assert totals.turns == seed.turns + turns and totals.tool_calls == seed.tool_calls + turns - 1
    assert totals.model_ms == seed.model_ms + float(turns) + (5.0 * turns if hook_folds else 0.0)
    assert stats.tools == ({"add": ToolTime(calls=turns - 1, ms=float(turns - 1))} if turns > 1
                           else {})


def test_a_run_that_does_nothing_reports_positive_zeros_for_any_zero_seed() -> None:
    for seed in (RunStats(), RunStats(model_ms=-0.0, tool_ms=-0.0), RunStats(turns=False)):  # type: ignore[arg-type]
        state = fresh_state()
        state.totals = seed
        result = anyio.run(run_tool_loop, ToolLoopParams(
            state=state,
            model=scripted_model([]),
            max_iterations=0,
            runner=ToolRunner(run_tool_call=lambda c: ToolResult(content="")),
        ))
        s = result.stats
        assert s == RunStats() and math.copysign(1.0, s.model_ms) == 1.0 and type(s.turns) is int


def test_stats_mid_run_do_not_share_the_tools_dict_with_the_state() -> None:
    state = fresh_state()
    machine = LoopMachine(state, 3)
    machine.start()
    machine.next_effect()
    machine.send(BoundaryChecked(False))
    machine.next_effect()
    machine.send(ModelReplied(ModelTurnResult(tool_calls=(ToolCall(id="c", name="add"),)), 1.0))
    machine.next_effect()
    machine.send(ToolReturned(0, ToolResult(content="2"), 1.0))
    stats = machine.stats
    stats.tools["add"] = ToolTime(calls=99, ms=0.0)
    assert state.totals.tools["add"] == ToolTime(calls=1, ms=1.0)


def test_a_refused_answer_raises_without_an_internal_exception_attached() -> None:
    machine = LoopMachine(fresh_state(), 1)
    machine.start()
    machine.next_effect()
    with pytest.raises(ProtocolError, match="does not answer CheckBoundary") as info:
        machine.send(ToolReturned(0, ToolResult(content=""), 0.0))
    error = info.value
    assert error.__cause__ is None and (error.__context__ is None or error.__suppress_context__)
