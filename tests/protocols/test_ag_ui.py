"""The AG-UI encoder: the event order HttpAgent's verifier accepts, one assistant message per turn,
interrupts and pending frontend calls, a reset taken back with MESSAGES_SNAPSHOT."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings

from bindloop.agent.events import (
    ApprovalRequestedEvent,
    ToolCallDoneEvent,
    ToolFinishedEvent,
    TurnStartEvent,
)
from bindloop.completion import TextEvent, ToolCallChunk, ToolCallEvent, UsageEvent
from bindloop.textstream import TurnResetEvent, TurnTextEvent
from bindloop.contracts import ToolCall, ToolResult, ToolSuspend, TurnUsage
from bindloop.protocols import (
    AgUiEncoder,
    StateDeltaEvent,
    StateSnapshotEvent,
    encode_ag_ui_event,
)
from protocol_helpers import agent_kind, feed_all, run_events


def _wire(events: list[Any]) -> list[dict[str, Any]]:
    return [msgspec.json.decode(encode_ag_ui_event(e)) for e in events]


def check_sequence(events: list[dict[str, Any]]) -> None:
    """The rules the client's verifier enforces: one run, starts before contents before ends,
    steps balanced, nothing after the run's end."""
    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
    text: set[str] = set()
    reasoning: set[str] = set()
    calls: set[str] = set()
    steps: list[str] = []
    for e in events[1:-1]:
        kind = e["type"]
        assert kind not in ("RUN_STARTED", "RUN_FINISHED", "RUN_ERROR")
        if kind == "TEXT_MESSAGE_START":
            assert e["messageId"] not in text
            text.add(e["messageId"])
        elif kind == "TEXT_MESSAGE_CONTENT":
            assert e["messageId"] in text and e["delta"]
        elif kind == "TEXT_MESSAGE_END":
            text.remove(e["messageId"])
        elif kind == "REASONING_MESSAGE_START":
            reasoning.add(e["messageId"])
        elif kind == "REASONING_MESSAGE_CONTENT":
            assert e["messageId"] in reasoning
        elif kind == "REASONING_MESSAGE_END":
            reasoning.remove(e["messageId"])
        elif kind == "TOOL_CALL_START":
            assert e["toolCallId"] not in calls
            calls.add(e["toolCallId"])
        elif kind == "TOOL_CALL_ARGS":
            assert e["toolCallId"] in calls
        elif kind == "TOOL_CALL_END":
            calls.remove(e["toolCallId"])
        elif kind == "STEP_STARTED":
            steps.append(e["stepName"])
        elif kind == "STEP_FINISHED":
            assert steps.pop() == e["stepName"]
    assert not text and not reasoning and not calls and not steps


@settings(max_examples=200, deadline=None)
@given(run_events())
def test_any_event_sequence_is_one_the_verifier_accepts(events: list[Any]) -> None:
    enc = AgUiEncoder(thread_id="t", run_id="r")
    check_sequence(_wire([*enc.start(), *feed_all(enc, events), *enc.finish()]))


def _tool_turn(enc: AgUiEncoder) -> list[Any]:
    return [*enc.feed(TextEvent(content="Looking."), turn_index=0),
            *enc.feed(ToolCallEvent(tool_call=ToolCallChunk(index=0, id="c1", name="wc",
                                                            arguments='{"a":')), turn_index=0),
            *enc.feed(ToolCallEvent(tool_call=ToolCallChunk(index=0, arguments='1}')),
                      turn_index=0),
            *enc.feed(UsageEvent(usage=TurnUsage(input_tokens=4, output_tokens=2)),
                      turn_index=0),
            *enc.feed(agent_kind(ToolCallDoneEvent, 0, tool_call=ToolCall(
                id="c1", name="wc", arguments='{"a":1}')), turn_index=0)]


def test_a_turn_is_one_assistant_message_with_its_calls_and_results() -> None:
    enc = AgUiEncoder(thread_id="t", run_id="r")
    out = [*enc.start(), *_tool_turn(enc),
           *enc.feed(ToolFinishedEvent(call=ToolCall(id="c1", name="wc", arguments='{"a":1}'),
                                       outcome=ToolResult(content="2"))),
           *enc.feed(TextEvent(content="Two."), turn_index=1), *enc.finish("Two.")]
    wire = _wire(out)
    check_sequence(wire)
    start = next(e for e in wire if e["type"] == "TOOL_CALL_START")
    text = next(e for e in wire if e["type"] == "TEXT_MESSAGE_START")
    assert start["parentMessageId"] == text["messageId"]
    assert [e["delta"] for e in wire if e["type"] == "TOOL_CALL_ARGS"] == ['{"a":', "1}"]
    assert wire[-1] == {"type": "RUN_FINISHED", "threadId": "t", "runId": "r", "result": "Two.",
                        "usage": [{"inputTokens": 4, "outputTokens": 2, "totalTokens": 6}]}
    messages = msgspec.to_builtins(enc.messages())
    assert [m["role"] for m in messages] == ["assistant", "tool", "assistant"]
    assert messages[0]["toolCalls"][0]["function"] == {"name": "wc", "arguments": '{"a":1}'}


def test_suspends_become_interrupts_and_frontend_calls_pending() -> None:
    enc = AgUiEncoder(thread_id="t", run_id="r")
    enc.start()
    _tool_turn(enc)
    enc.feed(ApprovalRequestedEvent(call_id="c1", tool="wc", arguments='{"a":1}'))
    finished = _wire(enc.finish())[-1]
    assert finished["outcome"] == {"type": "interrupt", "interrupts": [
        {"id": "approval-c1", "reason": "approval", "message": "approve wc?",
         "toolCallId": "c1"}]}

    enc = AgUiEncoder(thread_id="t", run_id="r")
    enc.start()
    _tool_turn(enc)
    enc.feed(ToolFinishedEvent(call=ToolCall(id="c1", name="wc", arguments='{"a":1}'),
                               outcome=ToolSuspend(mode="resuming_later")))
    assert _wire(enc.finish())[-1]["outcome"] == {"type": "success",
                                                  "pendingToolCallIds": ["c1"]}


def test_a_reset_is_taken_back_with_a_messages_snapshot() -> None:
    enc = AgUiEncoder(thread_id="t", run_id="r")
    out = [*enc.start(),
           *enc.feed(TurnTextEvent(turn_id="x", epoch=0, seq=0, text="Partial"), turn_index=0),
           *enc.feed(TurnResetEvent(turn_id="x", epoch=1, seq=1, reason="fallback"),
                     turn_index=0),
           *enc.feed(TurnTextEvent(turn_id="x", epoch=1, seq=2, text="Full."), turn_index=0),
           *enc.finish()]
    wire = _wire(out)
    check_sequence(wire)
    snapshot = next(e for e in wire if e["type"] == "MESSAGES_SNAPSHOT")
    assert snapshot["messages"] == []  # the retracted text is gone from what the client holds
    starts = [e["messageId"] for e in wire if e["type"] == "TEXT_MESSAGE_START"]
    assert len(set(starts)) == 2  # the retry writes a new message, never appends to the old one
    assert [m.content for m in enc.messages()] == ["Full."]  # type: ignore[union-attr]


def test_a_turn_started_again_is_taken_back_with_a_messages_snapshot() -> None:
    enc = AgUiEncoder(thread_id="t", run_id="r")
    out = [*enc.start(), *enc.feed(TurnStartEvent(), turn_index=0),
           *enc.feed(TextEvent(content="Partial"), turn_index=0),
           *enc.feed(TurnStartEvent(), turn_index=0),  # a route's fallback took the turn over
           *enc.feed(TextEvent(content="Full."), turn_index=0), *enc.finish()]
    wire = _wire(out)
    check_sequence(wire)
    assert [e["type"] for e in wire].count("STEP_STARTED") == 1
    assert next(e for e in wire if e["type"] == "MESSAGES_SNAPSHOT")["messages"] == []
    assert [m.content for m in enc.messages()] == ["Full."]  # type: ignore[union-attr]


def test_state_cancel_and_error() -> None:
    enc = AgUiEncoder(thread_id="t", run_id="r")
    enc.start()
    assert _wire(enc.feed(StateSnapshotEvent(state={"a": 1}))) == [
        {"type": "STATE_SNAPSHOT", "snapshot": {"a": 1}}]
    assert _wire(enc.feed(StateDeltaEvent(patch=({"op": "add", "path": "/b", "value": 2},)))) == [
        {"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/b", "value": 2}]}]
    assert _wire(enc.abort())[-1]["outcome"] == {"type": "cancelled"}
    enc = AgUiEncoder(thread_id="t", run_id="r")
    enc.start()
    assert _wire(enc.fail("ProviderError: down", "provider")) == [
        {"type": "RUN_ERROR", "message": "ProviderError: down", "code": "provider"}]
