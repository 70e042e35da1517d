"""Crash anywhere, resume from storage, end where an uninterrupted execution ends.

A host runs a scripted execution through ``run_from_checkpoint`` (the testing kit's scripted model
and stepping clock; tools that answer, fail, or suspend for a reply or a wake; optionally a
threshold compaction and a nudge), storing every committed checkpoint as bytes. The interrupted host
also stops or crashes at random points: ``commit`` asks to stop (``"checkpoint"``), crashes before or
after its write lands, the model call crashes, or a tool crashes mid-batch. After every stop the host
parses the latest stored bytes and goes on from there (replying, waking or adding a user message when
the execution pauses). The stored history — every revision, byte for byte — and so the final
transcript and cumulative stats equal the uninterrupted host's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import msgspec
from hypothesis import event, given, settings
from hypothesis import strategies as st

from bindloop import (
    AssistantMessage,
    BoundaryDecision,
    Message,
    ModelTurnResult,
    ToolCall,
    ToolOutcome,
    ToolResult,
    ToolSuspend,
    TurnUsage,
    UserMessage,
)
from bindloop.contracts import CompactionApplied, content_text
from bindloop.checkpoints import (
    CheckpointInput,
    CheckpointReply,
    CheckpointWake,
    LoopBindings,
    LoopCheckpoint,
    RestoredLoop,
    apply_checkpoint_input,
    create_loop_checkpoint,
    parse_loop_checkpoint,
    run_from_checkpoint,
    serialize_loop_checkpoint,
)
from bindloop.loop import LoopHooks, ToolRunner
from bindloop.model import ModelRequest
from bindloop.testing import (
    final_answer,
    function_model,
    scripted_model,
    stepping_clock,
    tool_call,
    tool_call_turn,
)


class Crash(Exception):
    """The process dies here."""


TOOLS = ("echo", "echo", "echo", "ask", "later", "boom")


@st.composite
def scripts(draw: st.DrawFn) -> list[ModelTurnResult]:
    n = draw(st.integers(0, 6))
    turns: list[ModelTurnResult] = []
    for t in range(n):
        usage = TurnUsage(input_tokens=draw(st.integers(0, 50)),
                          output_tokens=draw(st.integers(0, 20)),
                          cached_input_tokens=draw(st.integers(0, 5)))
        cost = draw(st.integers(0, 9))
        if draw(st.integers(0, 5)) == 0:
            turns.append(final_answer(f"interim {t}", usage=usage, cost=cost))
            continue
        names = draw(st.lists(st.sampled_from(TOOLS), min_size=1, max_size=3))
        turns.append(tool_call_turn(
            [tool_call(name, {"turn": t, "i": i}, id=f"t{t}_{i}") for i, name in enumerate(names)],
            usage=usage, cost=cost))
    # The script ends in an answer, so a run never asks past it.
    turns.append(final_answer("all done", usage=TurnUsage(input_tokens=7, output_tokens=3), cost=1))
    return turns


async def run_tool(call: ToolCall) -> ToolOutcome:
    if call.name == "ask":
        return ToolSuspend(mode="waiting_for_reply", detail=f"question {call.id}")
    if call.name == "later":
        return ToolSuspend(mode="resuming_later")
    if call.name == "boom":
        raise ValueError(f"boom {call.id}")
    return ToolResult(content=f"echo {call.arguments}")


def compact(messages: list[Message]) -> CompactionApplied | None:
    # A threshold policy: idempotent on a transcript it already compacted, as a resume requires.
    if len(messages) <= 6:
        return None
    summary = UserMessage(content=f"summary of {len(messages) - 1} messages")
    return CompactionApplied(messages=(messages[0], summary),
                             usage=TurnUsage(input_tokens=11, output_tokens=2), cost=3)


def next_input(cp: LoopCheckpoint, script_len: int) -> CheckpointInput | None:
    """The deterministic user of this execution: answers what is open, asks for more when done."""
    if cp.open_suspends:
        s = cp.open_suspends[0]
        if s.mode == "waiting_for_reply":
            return CheckpointReply(tool_call_id=s.tool_call_id, content=f"reply {s.tool_call_id}")
        return CheckpointWake(tool_call_id=s.tool_call_id, content=f"woke {s.tool_call_id}")
    if cp.status == "finished" and cp.iterations < script_len:
        return UserMessage(content=f"more after {cp.iterations}")
    return None


class Host:
    """Storage plus the crash plan (each point fires once: the counters never rewind)."""

    def __init__(self, turns: Sequence[ModelTurnResult], *, with_compaction: bool,
                 with_nudge: bool = False,
                 checkpoint_at: frozenset[int] = frozenset(),
                 crash_before_write: frozenset[int] = frozenset(),
                 crash_after_write: frozenset[int] = frozenset(),
                 crash_model: frozenset[int] = frozenset(),
                 crash_tool: frozenset[int] = frozenset()) -> None:
        self.turns = tuple(turns)
        self.with_compaction = with_compaction
        self.with_nudge = with_nudge
        self.checkpoint_at = checkpoint_at
        self.crash_before_write = crash_before_write
        self.crash_after_write = crash_after_write
        self.crash_model = crash_model
        self.crash_tool = crash_tool
        self.stored: list[bytes] = []
        self.commits = self.model_calls = self.tool_calls = 0
        self.stops = 0

    def save(self, cp: LoopCheckpoint) -> None:
        data = serialize_loop_checkpoint(cp)
        if self.stored:
            # single writer: each write is exactly one revision after the stored one
            assert parse_loop_checkpoint(self.stored[-1]).revision + 1 == cp.revision
        self.stored.append(data)

    def restore(self, cp: LoopCheckpoint) -> RestoredLoop:
        model = scripted_model(self.turns[cp.iterations:])

        async def respond(messages: Sequence[Message], request: ModelRequest) -> ModelTurnResult:
            self.model_calls += 1
            if self.model_calls in self.crash_model:
                raise Crash(f"model call {self.model_calls}")
            return await model.complete(messages, request)

        async def tool(call: ToolCall) -> ToolOutcome:
            self.tool_calls += 1
            if self.tool_calls in self.crash_tool:
                raise Crash(f"tool call {self.tool_calls}")
            return await run_tool(call)

        # The nudge decides from the latest assistant text, which the host re-reads from the
        # checkpoint on restore: a decision that survives a crash.
        said = [content_text(m.content) for m in cp.messages if isinstance(m, AssistantMessage)]
        latest = [said[-1] if said else ""]

        def heard(message: AssistantMessage) -> None:
            latest[0] = content_text(message.content)

        def nudge(turn: Any) -> list[Message] | None:
            if latest[0].startswith("interim"):
                return [UserMessage(content=f"go on from {latest[0]!r}")]
            return None

        return RestoredLoop(
            model=function_model(respond),
            now=stepping_clock(),
            capture_bindings=lambda: cp.bindings,
            runner=ToolRunner(
                run_tool_call=tool,
                is_fatal_tool_error=lambda exc: isinstance(exc, Crash),
            ),
            hooks=LoopHooks(
                compact=compact if self.with_compaction else None,
                on_assistant_message=heard if self.with_nudge else None,
                on_turn_would_end=nudge if self.with_nudge else None,
            ),
        )

    def commit(self, cp: LoopCheckpoint) -> BoundaryDecision:
        self.commits += 1
        if self.commits in self.crash_before_write:
            raise Crash(f"commit {self.commits} lost")
        self.save(cp)
        if self.commits in self.crash_after_write:
            raise Crash(f"after commit {self.commits}")
        return "checkpoint" if self.commits in self.checkpoint_at else "continue"

    async def drive(self, first: LoopCheckpoint) -> LoopCheckpoint:
        self.save(first)
        while True:
            cp = parse_loop_checkpoint(msgspec.json.decode(self.stored[-1]))
            if cp.status == "ready":
                result = None
                try:
                    result = await run_from_checkpoint(checkpoint=cp, restore=self.restore,
                                                       commit=self.commit)
                except* Crash:  # two pooled tools may crash together
                    self.stops += 1
                if result is not None:
                    if result.stop_reason == "checkpointed":
                        self.stops += 1
                    assert result.cumulative_stats == result.checkpoint.stats
                continue
            given_input = next_input(cp, len(self.turns))
            if given_input is None:
                return cp
            self.save(apply_checkpoint_input(cp, given_input))


points = st.frozensets(st.integers(1, 12), max_size=3)


@settings(max_examples=150, deadline=None)
@given(turns=scripts(), budget_slack=st.integers(-3, 2), with_compaction=st.booleans(),
       with_nudge=st.booleans(),
       checkpoint_at=points, crash_before_write=points, crash_after_write=points,
       crash_model=points, crash_tool=points)
def test_crash_anywhere_then_resume_equals_the_uninterrupted_execution(
        turns: list[ModelTurnResult], budget_slack: int, with_compaction: bool, with_nudge: bool,
        checkpoint_at: frozenset[int], crash_before_write: frozenset[int],
        crash_after_write: frozenset[int], crash_model: frozenset[int],
        crash_tool: frozenset[int]) -> None:
    first = create_loop_checkpoint(
        execution_id="exec-1", messages=[UserMessage(content="start")],
        max_iterations=max(0, len(turns) + budget_slack),
        bindings=LoopBindings(config={"model": "scripted"}, environment={"sandbox": "s1"}))

    whole = Host(turns, with_compaction=with_compaction, with_nudge=with_nudge)
    final_whole = anyio.run(whole.drive, first)

    broken = Host(turns, with_compaction=with_compaction, with_nudge=with_nudge,
                  checkpoint_at=checkpoint_at,
                  crash_before_write=crash_before_write, crash_after_write=crash_after_write,
                  crash_model=crash_model, crash_tool=crash_tool)
    final_broken = anyio.run(broken.drive, first)

    assert whole.stops == 0
    event(f"final status: {final_whole.status}")
    event(f"interrupted: {broken.stops if broken.stops <= 3 else 'more than 3'} times")
    event(f"stored revisions: {'<= 3' if len(whole.stored) <= 3 else '> 3'}")
    # The same history, revision by revision, byte for byte: the final transcript, cumulative
    # stats (timings included), spend, open suspends and status all follow.
    assert broken.stored == whole.stored
    assert serialize_loop_checkpoint(final_broken) == serialize_loop_checkpoint(final_whole)
    assert final_broken.stats.turns == final_broken.iterations
    if broken.stops:
        # the interruption really happened and was recovered from
        assert broken.commits + broken.model_calls >= whole.commits + whole.model_calls


def test_the_property_exercises_interruptions() -> None:
    """A fixed case: stop at the first commit, crash the next model call, lose the next write."""
    turns = [tool_call_turn([tool_call("echo", {"a": i}, id=f"c{i}")]) for i in range(4)]
    turns.append(final_answer("done"))
    first = create_loop_checkpoint(execution_id="x", messages=[UserMessage(content="go")],
                                   max_iterations=10)
    whole = Host(turns, with_compaction=False)
    anyio.run(whole.drive, first)
    broken = Host(turns, with_compaction=False, checkpoint_at=frozenset({1}),
                  crash_model=frozenset({3}), crash_before_write=frozenset({3}),
                  crash_tool=frozenset({2}))
    anyio.run(broken.drive, first)
    assert broken.stops == 4
    assert broken.stored == whole.stored
    assert broken.model_calls > whole.model_calls
