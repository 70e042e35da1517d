"""The AI SDK UI message stream encoder: chunk order the SDK's reader accepts, steps per turn,
held tool outputs, resets, usage, and stable bytes."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.agent import (
    create_agent,
    equip_instruction,
    equip_tool,
    on_stream,
    prompt_chat,
)
from bindloop.agent.events import (
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    ToolCallDoneEvent,
    ToolFinishedEvent,
    ToolStartedEvent,
    TurnStartEvent,
)
from bindloop.completion import FinishEvent, TextEvent, ToolCallChunk, ToolCallEvent, UsageEvent
from bindloop.textstream import TurnResetEvent, TurnTextEvent
from bindloop.contracts import ToolCall, ToolError, ToolResult, ToolSuspend, TurnUsage
from bindloop.errors import ProtocolError
from bindloop.tools import define_tool
from bindloop.protocols import (
    DataEvent,
    UIStreamEncoder,
    agent_event_input,
    encode_ui_chunk,
    ui_chunk_types,
)
from protocol_helpers import agent_kind, feed_all, run_events

from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn


def _wire(chunks: list[Any]) -> list[dict[str, Any]]:
    return [msgspec.json.decode(encode_ui_chunk(c)) for c in chunks]


def check_well_formed(chunks: list[dict[str, Any]]) -> dict[str, str]:
    """What the AI SDK's processUIMessageStream requires (it throws otherwise), and the text each
    part ends with: deltas only inside their part, steps balanced, outputs after their input."""
    open_text: set[str] = set()
    open_reasoning: set[str] = set()
    texts: dict[str, str] = {}
    calls: dict[str, str] = {}
    in_step = False
    assert chunks[0]["type"] == "start"
    assert chunks[-1]["type"] in ("finish", "abort", "error")
    for c in chunks[1:-1]:
        kind = c["type"]
        if kind == "start-step":
            assert not in_step
            in_step = True
        elif kind == "finish-step":
            assert in_step and not open_text and not open_reasoning
            in_step = False
        elif kind == "text-start":
            assert in_step and c["id"] not in texts
            open_text.add(c["id"])
            texts[c["id"]] = ""
        elif kind == "text-delta":
            assert c["id"] in open_text
            texts[c["id"]] += c["delta"]
        elif kind == "text-end":
            open_text.remove(c["id"])
        elif kind == "reasoning-start":
            open_reasoning.add(c["id"])
            texts[c["id"]] = ""
        elif kind == "reasoning-delta":
            assert c["id"] in open_reasoning
            texts[c["id"]] += c["delta"]
        elif kind == "reasoning-end":
            open_reasoning.remove(c["id"])
        elif kind == "tool-input-start":
            calls[c["toolCallId"]] = "streaming"
        elif kind == "tool-input-delta":
            assert calls[c["toolCallId"]] == "streaming"
        elif kind in ("tool-input-available", "tool-input-error"):
            assert c["toolCallId"] in calls
            calls[c["toolCallId"]] = "available"
        elif kind in ("tool-output-available", "tool-output-error", "tool-output-denied",
                      "tool-approval-request"):
            assert calls.get(c["toolCallId"]) == "available", c
    assert not in_step and not open_text and not open_reasoning
    return texts


def _run_agent(turns: list[Any]) -> list[dict[str, Any]]:
    """A real prompt_chat over a scripted model, its on_stream events and tool outcomes encoded."""
    model = scripted_stream_model(turns, chunk_size=3)
    encoder = UIStreamEncoder("m")
    chunks = encoder.start()

    async def words(args: Any, _ctx: object) -> ToolResult:
        return ToolResult(content=str(len(args.text.split())))  # reported by the run's stream

    class Text(msgspec.Struct):
        text: str

    tool = define_tool(name="wc", description="count", args=Text, execute=words)

    async def forward(stream: Any) -> None:
        async for event in stream:
            turn, item = agent_event_input(event)
            chunks.extend(encoder.feed(item, turn_index=turn))

    async def handler(_: None) -> Any:
        equip_tool(tool)
        equip_instruction("count a b c")
        on_stream(forward)
        return await prompt_chat()

    anyio.run(create_agent(id="t", handler=handler, model=model), None)
    chunks.extend(encoder.finish())
    return _wire(chunks)


def test_a_real_agent_run_encodes_into_well_formed_steps() -> None:
    wire = _run_agent([
        tool_call_turn([tool_call("wc", {"text": "a b c"})], text="Let me count."),
        final_answer("Three words.", usage=TurnUsage(input_tokens=10, output_tokens=3)),
    ])
    texts = check_well_formed(wire)
    kinds = [c["type"] for c in wire]
    assert kinds.count("start-step") == 2 == kinds.count("finish-step")
    assert sorted(texts.values()) == ["Let me count.", "Three words."]
    output = next(c for c in wire if c["type"] == "tool-output-available")
    assert output["output"] == "3"
    available = next(c for c in wire if c["type"] == "tool-input-available")
    assert available["input"] == {"text": "a b c"}
    # the tool's output lands in its own step, before that step's finish
    assert kinds.index("tool-output-available") < kinds.index("finish-step")
    assert wire[-1]["messageMetadata"]["usage"]["inputTokens"] == 10
    assert wire[-1]["finishReason"] == "stop"


@settings(max_examples=200, deadline=None)
@given(run_events())
def test_any_event_sequence_encodes_well_formed_and_keeps_every_text_byte(
        events: list[Any]) -> None:
    enc = UIStreamEncoder("m")
    wire = _wire([*enc.start(), *feed_all(enc, events), *enc.finish()])
    texts = check_well_formed(wire)
    shown = "".join(texts[c["id"]] for c in wire if c["type"] == "text-start")
    assert shown == "".join(e.content for _, e in events if isinstance(e, TextEvent))


def test_a_tool_output_reported_before_its_call_is_held_until_input_available() -> None:
    enc = UIStreamEncoder("m")
    chunks = enc.start()
    chunks += enc.feed(ToolCallEvent(tool_call=ToolCallChunk(index=0, id="c1", name="t",
                                                             arguments="{}")), turn_index=0)
    early = enc.feed(ToolFinishedEvent(call=ToolCall(id="c1", name="t"),
                                       outcome=ToolResult(content="ok")))
    assert early == []  # the call is not available yet: a client would refuse the output
    chunks += early
    chunks += enc.feed(agent_kind(ToolCallDoneEvent, 0, tool_call=ToolCall(id="c1", name="t")),
                       turn_index=0)
    chunks += enc.finish()
    kinds = [c["type"] for c in _wire(chunks)]
    assert kinds.index("tool-input-available") + 1 == kinds.index("tool-output-available")


def _call(call_id: str) -> ToolCall:
    return ToolCall(id=call_id, name="t", arguments="{}")


def test_outcomes_map_to_their_chunks() -> None:
    """What a complete call came to, as the run reports it: an approved call, a call starting and
    a fatal raise (no outcome: the run's end tells it) show nothing."""
    enc = UIStreamEncoder("m", known_calls=["a", "b", "c", "d", "e", "f", "g"])
    enc.start()
    got = _wire([
        *enc.feed(ToolFinishedEvent(call=_call("a"), outcome=ToolError(error="boom"))),
        *enc.feed(ApprovalRequestedEvent(call_id="b", tool="t", arguments="{}")),
        *enc.feed(ToolFinishedEvent(call=_call("c"), outcome=ToolSuspend(
            mode="waiting_for_reply", detail="Which city?"))),
        *enc.feed(ToolFinishedEvent(call=_call("d"), outcome=ToolSuspend(mode="resuming_later"))),
        *enc.feed(ApprovalDecidedEvent(call_id="e", approved=False, reason="no")),
        *enc.feed(ApprovalDecidedEvent(call_id="f", approved=True, arguments="{}")),
        *enc.feed(ToolStartedEvent(call=_call("f"))),
        *enc.feed(ToolFinishedEvent(call=_call("g"), outcome=None)),
        *enc.feed(DataEvent(name="weather", id="w1", data={"c": 21}, transient=True)),
    ])
    assert got == [
        {"type": "tool-output-error", "toolCallId": "a", "errorText": "boom"},
        # the approval request's reason (AI SDK 7 shows it as approval.requestReason)
        {"type": "tool-approval-request", "approvalId": "approval-b", "toolCallId": "b",
         "reason": "approve t?"},
        {"type": "data-bindloop-suspend", "id": "c",
         "data": {"toolCallId": "c", "mode": "waiting_for_reply", "detail": "Which city?"}},
        {"type": "tool-output-denied", "toolCallId": "e"},
        {"type": "data-weather", "id": "w1", "data": {"c": 21}, "transient": True},
    ]


def test_a_turn_started_again_is_a_reset() -> None:
    """A route's fallback takes a turn over after its text was shown (a second ``turn_start`` of
    the same turn): the text is retracted as a reset's, and the takeover's call fragments start
    afresh instead of joining the failed attempt's."""
    enc = UIStreamEncoder("m")
    chunks = enc.start()
    for event in (TurnStartEvent(), TextEvent(content="Primary wor"),
                  ToolCallEvent(tool_call=ToolCallChunk(index=0, id="p1", name="t",
                                                        arguments='{"q":')),
                  TurnStartEvent(), TextEvent(content="Backup answer."),
                  ToolCallEvent(tool_call=ToolCallChunk(index=0, id="b1", name="t",
                                                        arguments='{"q":1}')),
                  ToolCallDoneEvent(tool_call=ToolCall(id="b1", name="t", arguments='{"q":1}')),
                  TurnStartEvent()):
        chunks += enc.feed(event, turn_index=0)
    chunks += enc.finish()
    wire = _wire(chunks)
    assert [c["type"] for c in wire].count("start-step") == 1
    reset = [c for c in wire if c["type"] == "data-bindloop-reset"]
    assert [r["data"] for r in reset] == [
        {"turnId": "m-turn0", "epoch": 1, "reason": "attempt_failed", "retracted": 1},
        {"turnId": "m-turn0", "epoch": 2, "reason": "attempt_failed", "retracted": 1}]
    deltas = [c["inputTextDelta"] for c in wire if c["type"] == "tool-input-delta"]
    assert deltas == ['{"q":', '{"q":1}']  # the takeover's arguments, not glued onto the first
    # The failed attempt's call is closed as abandoned; the takeover's completes.
    assert [(c["type"], c["toolCallId"]) for c in wire if c["type"].startswith("tool-input-")
            and c["type"] not in ("tool-input-delta",)] == [
        ("tool-input-start", "p1"), ("tool-input-error", "p1"), ("tool-input-start", "b1"),
        ("tool-input-available", "b1")]
    texts = check_well_formed(wire)
    assert sorted(texts.values()) == ["Backup answer.", "Primary wor"]


def test_a_reset_ends_the_attempts_text_and_names_it_retracted() -> None:
    enc = UIStreamEncoder("m")
    chunks = enc.start()
    chunks += enc.feed(TurnTextEvent(turn_id="t", epoch=0, seq=0, text="Partial"), turn_index=0)
    chunks += enc.feed(TurnResetEvent(turn_id="t", epoch=1, seq=1, reason="fallback"),
                       turn_index=0)
    chunks += enc.feed(TurnTextEvent(turn_id="t", epoch=1, seq=2, text="Full answer."),
                       turn_index=0)
    chunks += enc.finish()
    wire = _wire(chunks)
    texts = check_well_formed(wire)
    reset = next(c for c in wire if c["type"] == "data-bindloop-reset")
    assert reset["data"] == {"turnId": "t", "epoch": 1, "reason": "fallback", "retracted": 1}
    order = [c["id"] for c in wire if c["type"] == "text-start"]
    assert [texts[i] for i in order] == ["Partial", "Full answer."]
    reset_at = wire.index(reset)
    assert wire.index({"type": "text-end", "id": order[0]}) < reset_at < wire.index(
        {"type": "text-start", "id": order[1]})


def test_for_ai_sdk_7_a_reset_is_its_reset_step_inside_the_step() -> None:
    enc = UIStreamEncoder("m", ai_sdk=7)
    chunks = enc.start()
    chunks += enc.feed(TurnTextEvent(turn_id="t", epoch=0, seq=0, text="Partial"), turn_index=0)
    chunks += enc.feed(TurnResetEvent(turn_id="t", epoch=1, seq=1, reason="fallback"),
                       turn_index=0)
    chunks += enc.feed(TurnTextEvent(turn_id="t", epoch=1, seq=2, text="Full answer."),
                       turn_index=0)
    chunks += enc.finish()
    wire = _wire(chunks)
    assert [c["type"] for c in wire] == [
        "start", "start-step", "text-start", "text-delta", "text-end", "reset-step",
        "text-start", "text-delta", "text-end", "finish-step", "finish"]
    assert {c["type"] for c in wire} - {"start", "finish"} <= set(ui_chunk_types(7))
    assert "reset-step" not in ui_chunk_types(6)
    # A reset before anything of this response opens its step first: 7 removes the parts after
    # the last step-start, which would otherwise be a continued message's earlier step.
    enc = UIStreamEncoder("m", ai_sdk=7)
    enc.start()
    early = _wire(enc.feed(TurnResetEvent(turn_id="t", epoch=1, seq=0, reason="fallback"),
                           turn_index=0))
    assert [c["type"] for c in early] == ["start-step", "reset-step"]
    with pytest.raises(ProtocolError):
        UIStreamEncoder("m", ai_sdk=8)


def test_usage_folds_per_turn_and_sums_over_turns() -> None:
    enc = UIStreamEncoder("m")
    enc.start()
    enc.feed(UsageEvent(usage=TurnUsage(input_tokens=5)), turn_index=0)
    enc.feed(UsageEvent(usage=TurnUsage(input_tokens=5, output_tokens=2)), turn_index=0)  # repeat
    enc.feed(FinishEvent(finish_reason="tool_calls",
                         usage=TurnUsage(input_tokens=7, output_tokens=1)), turn_index=1)
    finish = _wire(enc.finish())[-1]
    assert finish["messageMetadata"]["usage"] == {"inputTokens": 12, "outputTokens": 3,
                                                  "totalTokens": 15}
    assert finish["finishReason"] == "tool-calls"


def test_the_bytes_are_stable() -> None:
    enc = UIStreamEncoder("m1")
    chunks = [*enc.start(), *enc.feed(TextEvent(content="hi \u00e9\"\n"), turn_index=0),
              *enc.abort("stopped")]
    assert b"".join(encode_ui_chunk(c) + b"\n" for c in chunks) == (
        b'{"type":"start","messageId":"m1"}\n{"type":"start-step"}\n'
        b'{"type":"text-start","id":"m1-text1"}\n'
        b'{"type":"text-delta","id":"m1-text1","delta":"hi \xc3\xa9\\"\\n"}\n'
        b'{"type":"text-end","id":"m1-text1"}\n{"type":"finish-step"}\n'
        b'{"type":"abort","reason":"stopped"}\n')


def test_calls_out_of_order_are_refused() -> None:
    enc = UIStreamEncoder("m")
    with pytest.raises(ProtocolError):
        enc.feed(TextEvent(content="x"))
    enc.start()
    with pytest.raises(ProtocolError):
        enc.start()
    enc.fail("RuntimeError: down")
    with pytest.raises(ProtocolError):
        enc.feed(TextEvent(content="x"))
    with pytest.raises(ProtocolError):
        UIStreamEncoder("")


def test_every_fixed_chunk_type_is_one_the_sdk_schema_names() -> None:
    # The AI SDK v6 uiMessageChunkSchema's literal types (node_modules/ai/dist/index.mjs).
    sdk = {"text-start", "text-delta", "text-end", "error", "tool-input-start",
           "tool-input-delta", "tool-input-available", "tool-input-error",
           "tool-approval-request", "tool-output-available", "tool-output-error",
           "tool-output-denied", "reasoning-start", "reasoning-delta", "reasoning-end",
           "source-url", "source-document", "file", "start-step", "finish-step", "start",
           "finish", "abort", "message-metadata"}
    assert set(ui_chunk_types()) <= sdk


def test_every_event_a_real_agent_emits_passes_the_one_adapter() -> None:
    """Whatever shape the agent's events have, agent_event_input turns each into a turn index and
    a kind the encoders read (never an agent-only wrapper they would silently skip)."""
    import typing

    from bindloop.protocols import EncoderInput

    kinds = tuple(t for t in typing.get_args(EncoderInput))
    model = scripted_stream_model([tool_call_turn([tool_call("wc", {"text": "a"})], text="Hm."),
                                   final_answer("One.")], chunk_size=2)
    seen: list[Any] = []

    class Text(msgspec.Struct):
        text: str

    tool = define_tool(name="wc", description="count", args=Text,
                       execute=lambda a, c: ToolResult(content="1"))

    async def forward(stream: Any) -> None:
        async for event in stream:
            seen.append(agent_event_input(event))

    async def handler(_: None) -> Any:
        equip_tool(tool)
        equip_instruction("count a")
        on_stream(forward)
        return await prompt_chat()

    anyio.run(create_agent(id="t", handler=handler, model=model), None)
    assert seen and all(isinstance(item, kinds) for _, item in seen)
    turned = [turn for turn, _ in seen if turn is not None]
    assert turned == sorted(turned)
    assert set(turned) == {0, 1}
    assert any(isinstance(item, TurnStartEvent) for _, item in seen)
    assert any(isinstance(item, ToolCallDoneEvent) for _, item in seen)
    # The tool's events belong to no turn of their own: they never open a step.
    tools = [(turn, type(item)) for turn, item in seen
             if isinstance(item, (ToolStartedEvent, ToolFinishedEvent))]
    assert tools == [(None, ToolStartedEvent), (None, ToolFinishedEvent)]


_REPORTS = st.lists(st.tuples(
    st.integers(0, 2), st.booleans(),
    st.builds(TurnUsage, input_tokens=st.integers(0, 50), output_tokens=st.integers(0, 50),
              cached_input_tokens=st.integers(0, 9), reasoning_tokens=st.integers(0, 9),
              cache_write_tokens=st.integers(0, 9))), max_size=8)


@settings(max_examples=150, deadline=None)
@given(_REPORTS)
def test_a_runs_usage_is_each_turns_own_fold_summed_with_every_detail(
        reports: list[tuple[int, bool, TurnUsage]]) -> None:
    """Both encoders report what the turns' own folds (``collect_turn``) give, summed over the
    turns with ``add_usage``: cache reads, cache writes and reasoning included."""
    from functools import reduce

    from bindloop.completion import collect_turn
    from bindloop.contracts import add_usage
    from bindloop.protocols import AgUiEncoder

    ui, ag = UIStreamEncoder("m"), AgUiEncoder(thread_id="t", run_id="r")
    ui.start()
    ag.start()
    per_turn: dict[int, list[UsageEvent]] = {}
    step = 0
    for turn, snapshot, usage in reports:
        event = UsageEvent(usage=usage, snapshot=snapshot)
        step = max(step, turn)  # a step only moves on: a late report belongs to the open one
        per_turn.setdefault(step, []).append(event)
        ui.feed(event, turn_index=turn)
        ag.feed(event, turn_index=turn)
    expected = reduce(add_usage, (collect_turn(events).usage for events in per_turn.values()),
                      TurnUsage())
    assert ui.usage() == expected and ag.usage() == expected
    meta = _wire(ui.finish())[-1]["messageMetadata"]["usage"]
    assert meta["inputTokens"] == expected.input_tokens
    assert meta.get("inputTokenDetails", {}).get("cacheWriteTokens", 0) == \
        expected.cache_write_tokens
    assert meta.get("outputTokenDetails", {}).get("reasoningTokens", 0) == \
        expected.reasoning_tokens
    finished = msgspec.to_builtins(ag.finish()[-1])["usage"][0]
    assert finished.get("cacheWriteInputTokens", 0) == expected.cache_write_tokens
    assert finished.get("reasoningTokens", 0) == expected.reasoning_tokens
    assert finished.get("cachedInputTokens", 0) == expected.cached_input_tokens


def test_usage_details_reach_the_ui_metadata_in_the_ai_sdk_names() -> None:
    enc = UIStreamEncoder("m")
    enc.start()
    enc.feed(UsageEvent(usage=TurnUsage(input_tokens=20, output_tokens=9, cached_input_tokens=6,
                                        cache_write_tokens=4, reasoning_tokens=5)), turn_index=0)
    assert _wire(enc.finish())[-1]["messageMetadata"]["usage"] == {
        "inputTokens": 20, "outputTokens": 9, "totalTokens": 29, "cachedInputTokens": 6,
        "reasoningTokens": 5, "inputTokenDetails": {"cacheReadTokens": 6, "cacheWriteTokens": 4},
        "outputTokenDetails": {"reasoningTokens": 5}}
