from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindloop import (
    ControlledToolLoopResult,
    LoopBoundary,
    LoopControl,
    ToolLoopResult,
    ToolLoopState,
    encode_messages,
    run_tool_loop,
)
from bindloop.contracts import accumulate_run, empty_run_stats
from bindloop.errors import PortContractError
from bindloop.testing import final_answer, loop_harness, tool_call, tool_call_turn


def script(n: int) -> list[Any]:
    return [tool_call_turn([tool_call("add", {"a": i})]) for i in range(n)] + [final_answer("done")]


def test_one_argument_form_is_unchanged() -> None:
    h = loop_harness(script(2))
    r = anyio.run(run_tool_loop, h.params)
    assert type(r) is ToolLoopResult and r.stop_reason == "done"


def test_boundaries_fire_after_each_settled_iteration_and_at_the_end() -> None:
    seen: list[tuple[int, bool, Any]] = []

    def hook(b: LoopBoundary) -> str:
        seen.append((b.iterations, b.final, b.stop_reason))
        return "continue"

    h = loop_harness(script(2))
    r = anyio.run(run_tool_loop, h.params, LoopControl(on_boundary=hook))
    assert isinstance(r, ControlledToolLoopResult)
    assert r.stop_reason == "done" and r.iterations == 3
    assert seen == [(1, False, None), (2, False, None), (3, True, "done")]


def test_checkpoint_ends_before_the_next_model_call() -> None:
    h = loop_harness(script(3))
    r = anyio.run(run_tool_loop, h.params,
                  LoopControl(on_boundary=lambda b: "checkpoint" if b.iterations == 2 else "continue"))
    assert r.stop_reason == "checkpointed" and r.iterations == 2 and h.model.position == 2


def test_bad_hook_answer_is_a_port_error() -> None:
    h = loop_harness(script(1))
    with pytest.raises(PortContractError, match="on_boundary returned"):
        anyio.run(run_tool_loop, h.params, LoopControl(on_boundary=lambda b: "yes"))  # type: ignore[arg-type,return-value]


@given(st.integers(1, 6), st.integers(1, 6))
def test_checkpoint_anywhere_then_resume_equals_an_uninterrupted_run(n: int, stop_at: int) -> None:
    """Stop at a random settled boundary, serialize the state, resume with the remaining budget:
    the transcript and the combined stats equal those of one uninterrupted run."""
    whole = loop_harness(script(n), max_iterations=n + 1)
    full = anyio.run(run_tool_loop, whole.params)

    first = loop_harness(script(n), max_iterations=n + 1)
    r1 = anyio.run(run_tool_loop, first.params, LoopControl(
        on_boundary=lambda b: "checkpoint" if b.iterations == stop_at else "continue"))
    saved = msgspec.json.encode(first.state)
    if r1.stop_reason != "checkpointed":
        assert stop_at > n  # never reached that boundary
        assert encode_messages(first.state.messages) == encode_messages(whole.state.messages)
        return
    restored = msgspec.json.decode(saved, type=ToolLoopState)
    second = loop_harness(first.model, state=restored, max_iterations=n + 1 - r1.iterations,
                          now=first.clock)
    r2 = anyio.run(run_tool_loop, second.params)
    assert r2.stop_reason == full.stop_reason
    assert encode_messages(restored.messages) == encode_messages(whole.state.messages)
    combined = accumulate_run(r1.stats, r2.stats)
    # the clock is shared across both legs, so even the timings add up to the uninterrupted run's
    assert combined == accumulate_run(full.stats, empty_run_stats())
    assert restored.requested_tool_calls == whole.state.requested_tool_calls
