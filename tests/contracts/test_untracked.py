"""What a run keeps alive across its awaits — its transcript, its stats, its checkpoint's bindings,
a journal's turns and tool outcomes —
is not tracked by the cyclic garbage collector: however built (constructed, decoded from the wire
or from storage, copied by a checkpoint's validation), none of it is walked by every collection."""

from __future__ import annotations

import gc

import msgspec

from bindloop.checkpoints import (
    LoopBindings,
    create_loop_checkpoint,
    parse_loop_checkpoint,
    serialize_loop_checkpoint,
)
from bindloop.contracts import (
    AssistantMessage,
    RunStats,
    SystemMessage,
    TextPart,
    ToolCall,
    ModelTurnResult,
    ReasoningPart,
    ToolError,
    ToolMessage,
    ToolResult,
    ToolTime,
    TurnUsage,
    UserMessage,
)

MESSAGES = (
    SystemMessage(content="be brief"),
    UserMessage(content=(TextPart(text="look"), TextPart(text="up")), name="ann"),
    UserMessage(content=[TextPart(text="a list where a tuple belongs")]),
    AssistantMessage(content="calling", tool_calls=(ToolCall(id="c1", name="lookup",
                                                             arguments='{"key": "k"}'),)),
    ToolMessage(tool_call_id="c1", content="found"),
)


def test_messages_are_untracked_however_built() -> None:
    decoded = msgspec.json.decode(msgspec.json.encode(MESSAGES),
                                  type=tuple[SystemMessage | UserMessage | AssistantMessage
                                             | ToolMessage, ...])
    for message in (*MESSAGES, *decoded, msgspec.structs.replace(MESSAGES[3], content="again")):
        assert not gc.is_tracked(message), message


def test_stats_and_bindings_are_untracked_in_a_stored_checkpoint() -> None:
    stats = RunStats(turns=1, tool_calls=2, tools={"lookup": ToolTime(calls=2, ms=1.5)})
    bindings = LoopBindings(config={"model": "m", "tools": ["lookup"]}, environment={"cwd": "/"})
    cp = create_loop_checkpoint(execution_id="e", max_iterations=3, messages=list(MESSAGES[:2]),
                                bindings=bindings)
    loaded = parse_loop_checkpoint(serialize_loop_checkpoint(cp))
    for value in (stats, bindings, cp.bindings, cp.stats, loaded.bindings, loaded.stats,
                  *loaded.messages):
        assert not gc.is_tracked(value), value
    assert loaded == cp



def test_turns_and_outcomes_are_untracked_however_built() -> None:
    turn = ModelTurnResult(text="hi", tool_calls=MESSAGES[3].tool_calls,  # type: ignore[union-attr]
                           reasoning=(ReasoningPart(text="why"),),
                           usage=TurnUsage(input_tokens=3, output_tokens=1), finish_reason="stop")
    outcomes = (ToolResult(content="found"), ToolResult(content=(TextPart(text="a"),)),
                ToolError(error="no such key", kind="not_found"))
    decoded_turn = msgspec.json.decode(msgspec.json.encode(turn), type=ModelTurnResult)
    decoded = msgspec.json.decode(msgspec.json.encode(outcomes),
                                  type=tuple[ToolResult | ToolError, ...])
    for value in (turn, turn.usage, decoded_turn, msgspec.structs.replace(turn, text="again"),
                  *outcomes, *decoded):
        assert not gc.is_tracked(value), value
