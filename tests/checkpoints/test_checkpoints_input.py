"""apply_checkpoint_input: a reply, a wake or a new user message, each only where it fits."""

from __future__ import annotations

from typing import Any

import pytest

from bindloop import (
    AssistantMessage,
    RunStats,
    TextPart,
    ToolCall,
    ToolMessage,
    UsageError,
    UserMessage,
)
from bindloop.contracts import ToolTime
from bindloop.loop import OpenSuspend
from bindloop.loop import LoopCounters
from bindloop.checkpoints import (
    CheckpointInputError,
    CheckpointReply,
    CheckpointWake,
    LoopBindings,
    LoopCheckpoint,
    apply_checkpoint_input,
    create_loop_checkpoint,
    serialize_loop_checkpoint,
)

CALLS = AssistantMessage(tool_calls=(ToolCall(id="q", name="ask"), ToolCall(id="w", name="later"),
                                     ToolCall(id="a", name="add")))


def paused(status: str = "waiting_for_reply", modes: tuple[str, ...] = ("waiting_for_reply",
                                                                       "resuming_later")) -> LoopCheckpoint:
    suspends = tuple(
        OpenSuspend(tool_call_id=cid, tool_name=name, mode=mode)  # type: ignore[arg-type]
        for (cid, name), mode in zip((("q", "ask"), ("w", "later")), modes))
    return LoopCheckpoint(
        execution_id="e", revision=4, status=status, max_iterations=6,  # type: ignore[arg-type]
        iterations=2,
        messages=(UserMessage(content="go"), CALLS, ToolMessage(tool_call_id="a", content="2",
                                                               name="add")),
        open_suspends=suspends,
        stats=RunStats(turns=2, tool_calls=3, cost=5, tools={"add": ToolTime(calls=3, ms=3.0)}),
        counters=LoopCounters(requested_tool_calls=3),
        bindings=LoopBindings(environment={"box": 1}),
    )


def finished() -> LoopCheckpoint:
    return LoopCheckpoint(
        execution_id="e", revision=1, status="finished", max_iterations=3, iterations=1,
        messages=(UserMessage(content="hi"), AssistantMessage(content="hello")),
        stats=RunStats(turns=1))


def test_reply_answers_the_waiting_call_and_leaves_the_wake_open() -> None:
    cp = paused()
    before = serialize_loop_checkpoint(cp)
    after = apply_checkpoint_input(cp, CheckpointReply(tool_call_id="q", content="blue"))
    assert after.messages[-1] == ToolMessage(tool_call_id="q", content="blue", name="ask")
    assert [s.tool_call_id for s in after.open_suspends] == ["w"]
    assert after.status == "resuming_later"
    assert after.revision == cp.revision + 1
    # consumed iterations, spend and bindings carry over; the input checkpoint is unchanged
    assert (after.iterations, after.stats, after.bindings) == (cp.iterations, cp.stats, cp.bindings)
    assert after.stats.tools is not cp.stats.tools and after.bindings.environment is not \
        cp.bindings.environment
    assert serialize_loop_checkpoint(cp) == before
    woken = apply_checkpoint_input(after, CheckpointWake(tool_call_id="w",
                                                         content=(TextPart(text="ready"),)))
    assert woken.status == "ready" and woken.open_suspends == ()
    assert woken.messages[-1] == ToolMessage(tool_call_id="w", content=(TextPart(text="ready"),),
                                             name="later")
    assert woken.revision == cp.revision + 2


def test_wake_first_keeps_the_checkpoint_waiting_for_the_person() -> None:
    after = apply_checkpoint_input(paused(), CheckpointWake(tool_call_id="w", content="done"))
    assert after.status == "waiting_for_reply"
    assert [s.tool_call_id for s in after.open_suspends] == ["q"]


@pytest.mark.parametrize(("given", "words"), [
    (CheckpointWake(tool_call_id="q", content="x"), "suspended as waiting_for_reply: answer it with "
                                                    "a CheckpointReply"),
    (CheckpointReply(tool_call_id="w", content="x"), "suspended as resuming_later: answer it with "
                                                     "a CheckpointWake"),
    (CheckpointReply(tool_call_id="a", content="x"), "no such suspend is open"),
    (UserMessage(content="and also"), "a new user message does not fit a waiting_for_reply"),
    ("hello", "must be a CheckpointReply, CheckpointWake or UserMessage, got str"),
])
def test_wrong_input_for_a_waiting_checkpoint_is_a_typed_error(given: Any, words: str) -> None:
    with pytest.raises(CheckpointInputError, match=words) as info:
        apply_checkpoint_input(paused(), given)
    assert info.value.status == "waiting_for_reply"


def test_a_finished_checkpoint_takes_a_new_user_message() -> None:
    cp = finished()
    after = apply_checkpoint_input(cp, UserMessage(content="one more", name="ann"))
    assert after.status == "ready" and after.messages[-1] == UserMessage(content="one more",
                                                                         name="ann")
    assert after.iterations == 1 and after.revision == 2
    with pytest.raises(CheckpointInputError, match="no such suspend is open; a finished "
                                                   "checkpoint accepts a new UserMessage"):
        apply_checkpoint_input(cp, CheckpointReply(tool_call_id="q", content="x"))


def test_ready_and_spent_checkpoints_take_no_input() -> None:
    ready = create_loop_checkpoint(execution_id="e", messages=[UserMessage(content="x")],
                                   max_iterations=2)
    with pytest.raises(CheckpointInputError, match="it is ready, run it") as info:
        apply_checkpoint_input(ready, UserMessage(content="y"))
    assert info.value.status == "ready"
    spent = LoopCheckpoint(execution_id="e", revision=1, status="iteration_limit", max_iterations=1,
                           iterations=1, messages=(UserMessage(content="x"),),
                           stats=RunStats(turns=1))
    with pytest.raises(CheckpointInputError, match="fork it with a new max_iterations"):
        apply_checkpoint_input(spent, UserMessage(content="y"))


def test_aborted_takes_answers_while_suspends_are_open_then_a_user_message() -> None:
    aborted = paused(status="aborted")
    with pytest.raises(CheckpointInputError, match="CheckpointReply or CheckpointWake"):
        apply_checkpoint_input(aborted, UserMessage(content="stop it"))
    one = apply_checkpoint_input(aborted, CheckpointReply(tool_call_id="q", content="a"))
    assert one.status == "aborted"
    both = apply_checkpoint_input(one, CheckpointWake(tool_call_id="w", content="b"))
    assert both.status == "ready"
    stopped = LoopCheckpoint(execution_id="e", revision=1, status="aborted", max_iterations=3,
                             iterations=1, messages=(UserMessage(content="x"),),
                             stats=RunStats(turns=1))
    assert apply_checkpoint_input(stopped, UserMessage(content="go on")).status == "ready"


def test_malformed_content_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="content must be a string or a sequence of content parts"):
        apply_checkpoint_input(paused(), CheckpointReply(tool_call_id="q", content=7))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="name must be a string"):
        apply_checkpoint_input(finished(), UserMessage(content="x", name=3))  # type: ignore[arg-type]


def test_list_content_is_stored_as_a_tuple() -> None:
    after = apply_checkpoint_input(paused(), CheckpointReply(
        tool_call_id="q", content=[TextPart(text="a")]))  # type: ignore[arg-type]
    assert after.messages[-1].content == (TextPart(text="a"),)
    serialize_loop_checkpoint(after)
