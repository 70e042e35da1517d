"""fork_loop_checkpoint: a new identity at the source's position, with fresh spend, budget and
lineage, and nothing shared with the source or with other forks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop import (
    BoundaryDecision,
    ModelTurnResult,
    RunStats,
    ToolCall,
    ToolOutcome,
    ToolResult,
    ToolSuspend,
    TurnUsage,
    UsageError,
    UserMessage,
)
from bindloop.checkpoints import (
    CheckpointInputError,
    CheckpointLineage,
    CheckpointReply,
    LoopBindings,
    LoopCheckpoint,
    RestoredLoop,
    apply_checkpoint_input,
    create_loop_checkpoint,
    fork_loop_checkpoint,
    run_from_checkpoint,
    serialize_loop_checkpoint,
)
from bindloop.testing import final_answer, scripted_model, stepping_clock, tool_call, tool_call_turn
from bindloop.loop import ToolRunner


async def tool(call: ToolCall) -> ToolOutcome:
    if call.name == "ask":
        return ToolSuspend(mode="waiting_for_reply", detail="which one?")
    return ToolResult(content=f"{call.name} {call.arguments}")


def restorer(turns: Sequence[ModelTurnResult], seen: list[LoopCheckpoint] | None = None) -> Any:
    def restore(cp: LoopCheckpoint) -> RestoredLoop:
        if seen is not None:
            seen.append(cp)
        return RestoredLoop(
            model=scripted_model(turns[cp.iterations:]),
            capture_bindings=lambda: cp.bindings,
            now=stepping_clock(),
            runner=ToolRunner(run_tool_call=tool),
        )
    return restore


async def run(cp: LoopCheckpoint, turns: Sequence[ModelTurnResult],
              stored: list[bytes] | None = None) -> LoopCheckpoint:
    def commit(c: LoopCheckpoint) -> BoundaryDecision:
        if stored is not None:
            stored.append(serialize_loop_checkpoint(c))
        return "continue"
    result = await run_from_checkpoint(checkpoint=cp, restore=restorer(turns), commit=commit)
    return result.checkpoint


SCRIPT = [tool_call_turn([tool_call("add", {"a": 1}, id="c1")],
                         usage=TurnUsage(input_tokens=5, output_tokens=2), cost=3),
          final_answer("first answer", usage=TurnUsage(input_tokens=8, output_tokens=1), cost=2)]


def finished_source() -> LoopCheckpoint:
    start = create_loop_checkpoint(execution_id="src", messages=[UserMessage(content="hi")],
                                   max_iterations=4,
                                   bindings=LoopBindings(config={"model": "m"},
                                                         environment={"box": "src"}))
    return anyio.run(run, start, SCRIPT)


def test_a_fork_starts_fresh_at_the_sources_position() -> None:
    src = finished_source()
    assert src.status == "finished" and src.iterations == 2 and src.stats.cost == 5
    fork = fork_loop_checkpoint(src, execution_id="trial-1", max_iterations=3,
                                bindings=LoopBindings(config={"model": "m"},
                                                      environment={"box": "trial-1"}))
    assert fork.execution_id == "trial-1" and fork.revision == 0
    assert fork.messages == src.messages and fork.status == "finished"
    assert fork.iterations == 0 and fork.stats == RunStats() and fork.max_iterations == 3
    assert fork.counters.requested_tool_calls == 0
    assert fork.counters.last_prompt_tokens == src.counters.last_prompt_tokens == 8
    assert fork.bindings.environment == {"box": "trial-1"}
    assert fork.lineage == CheckpointLineage(parent_execution_id="src", parent_revision=src.revision,
                                             parent_iterations=2, message_count=len(src.messages))
    default = fork_loop_checkpoint(src, execution_id="trial-2")
    assert default.max_iterations == src.max_iterations and default.bindings == src.bindings
    assert default.bindings.config is not src.bindings.config


def test_a_finished_fork_needs_new_input_and_does_no_inference_without_it() -> None:
    fork = fork_loop_checkpoint(finished_source(), execution_id="f")
    seen: list[LoopCheckpoint] = []
    result = anyio.run(lambda: run_from_checkpoint(
        checkpoint=fork, restore=restorer([], seen), commit=lambda c: "continue"))
    assert result.stop_reason == "done" and result.iterations == 0 and seen == []
    assert result.checkpoint == fork


def test_a_waiting_fork_needs_its_reply() -> None:
    turns = [tool_call_turn([tool_call("ask", id="q1")]), final_answer("thanks")]
    start = create_loop_checkpoint(execution_id="s", messages=[UserMessage(content="x")],
                                   max_iterations=5)
    src = anyio.run(run, start, turns)
    assert src.status == "waiting_for_reply"
    fork = fork_loop_checkpoint(src, execution_id="f")
    assert fork.status == "waiting_for_reply" and fork.open_suspends == src.open_suspends
    with pytest.raises(CheckpointInputError):
        apply_checkpoint_input(fork, UserMessage(content="hello?"))
    answered = apply_checkpoint_input(fork, CheckpointReply(tool_call_id="q1", content="red"))
    # the fork's own budget counts from zero, so it resumes its script at the source's position
    done = anyio.run(run, answered, turns[1:])
    assert done.status == "finished" and done.iterations == 1 and done.execution_id == "f"
    assert src.status == "waiting_for_reply"


def test_an_iteration_limit_source_forks_ready_with_its_new_budget() -> None:
    turns = [tool_call_turn([tool_call("add", id=f"c{i}")]) for i in range(3)]
    start = create_loop_checkpoint(execution_id="s", messages=[UserMessage(content="x")],
                                   max_iterations=2)
    src = anyio.run(run, start, turns)
    assert src.status == "iteration_limit" and src.iterations == 2
    fork = fork_loop_checkpoint(src, execution_id="f", max_iterations=1)
    assert fork.status == "ready"
    out = anyio.run(run, fork, turns[2:])
    assert out.status == "iteration_limit" and out.iterations == 1


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"execution_id": "src"}, "needs a new execution_id"),
    ({"execution_id": ""}, "non-empty string"),
    ({"execution_id": "f", "max_iterations": -1}, "max_iterations must be an int >= 0"),
    ({"execution_id": "f", "max_iterations": 2.0}, "max_iterations must be an int >= 0"),
])
def test_bad_fork_arguments(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(UsageError, match=words):
        fork_loop_checkpoint(finished_source(), **kwargs)


@settings(max_examples=60, deadline=None)
@given(first=st.text(min_size=1, max_size=10), second=st.text(min_size=1, max_size=10),
       tools_a=st.integers(0, 3), tools_b=st.integers(0, 3))
def test_forks_with_different_inputs_are_independent(first: str, second: str, tools_a: int,
                                                    tools_b: int) -> None:
    src = finished_source()
    src_bytes = serialize_loop_checkpoint(src)

    def script(n: int, tag: str) -> list[ModelTurnResult]:
        return [tool_call_turn([tool_call("add", {"i": i}, id=f"{tag}{i}")]) for i in range(n)] + [
            final_answer(f"answer {tag}")]

    a = apply_checkpoint_input(fork_loop_checkpoint(src, execution_id="a", max_iterations=9,
                                                    bindings=LoopBindings(environment={"box": "a"})),
                               UserMessage(content=first))
    b = apply_checkpoint_input(fork_loop_checkpoint(src, execution_id="b", max_iterations=9,
                                                    bindings=LoopBindings(environment={"box": "b"})),
                               UserMessage(content=second))
    b_bytes = serialize_loop_checkpoint(b)

    # b alone, as if a had never existed
    alone_store: list[bytes] = []
    b_alone = anyio.run(run, b, script(tools_b, "b"), alone_store)

    # a and b run side by side; a's host also mutates what it was handed afterwards
    async def both() -> tuple[LoopCheckpoint, LoopCheckpoint, list[bytes]]:
        out: dict[str, LoopCheckpoint] = {}
        store_b: list[bytes] = []

        async def go(name: str, cp: LoopCheckpoint, turns: list[ModelTurnResult],
                     store: list[bytes] | None) -> None:
            out[name] = await run(cp, turns, store)

        async with anyio.create_task_group() as tg:
            tg.start_soon(go, "a", a, script(tools_a, "a"), None)
            tg.start_soon(go, "b", b, script(tools_b, "b"), store_b)
        return out["a"], out["b"], store_b

    a_done, b_done, b_store = anyio.run(both)
    # a's host scribbling on what it was handed reaches nobody else
    a_done.bindings.environment["box"] = "tampered"
    a_done.stats.tools.clear()

    assert serialize_loop_checkpoint(src) == src_bytes  # the source is unchanged
    assert serialize_loop_checkpoint(b) == b_bytes      # so is the other fork's input
    assert b_store == alone_store                        # and b's whole history ignores a
    assert serialize_loop_checkpoint(b_done) == serialize_loop_checkpoint(b_alone)
    assert b_done.bindings.environment == {"box": "b"}
    assert b_done.stats.tools == b_alone.stats.tools
    assert a_done.messages[len(src.messages)] == UserMessage(content=first)
    assert b_done.messages[len(src.messages)] == UserMessage(content=second)
    assert a_done.iterations == tools_a + 1 and b_done.iterations == tools_b + 1
    lineage = CheckpointLineage(parent_execution_id="src", parent_revision=src.revision,
                                parent_iterations=2, message_count=len(src.messages))
    assert a_done.lineage == b_done.lineage == lineage
