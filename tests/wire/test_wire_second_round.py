"""Issue 23: real traffic the first round decoded wrong (sources in tests/fixtures/README.md).

Every stream is decoded whole, one byte at a time and at seeded random cuts, and must give the
same turn each way. Expectations for ``realwire_*`` recordings are read off the recording with
the standard-library ``json`` module, which shares no code with the adapters."""

from __future__ import annotations

import json
import random
from typing import Any

import msgspec
import pytest

from bindloop.completion import collect_turn
from bindloop.contracts import (
    ModelTurnResult,
    RunStats,
    TurnUsage,
    UsageIteration,
    accumulate_run,
    accumulate_turn,
)
from bindloop.wire import create_wire_adapter
from bindloop.wire._stream import decode_stream  # the test helper of this area

from .wire_fixtures import fixture

STREAMS = [
    ("anthropic", "stream_message_start_tool_use.sse"),
    ("anthropic", "stream_tool_input_in_block_start.sse"),
    ("anthropic", "stream_compaction_usage.sse"),
    ("gemini", "stream_partial_args_nested.sse"),
    ("gemini", "realwire_stream_partial_args_tool_calls.sse"),
    ("openai_chat", "realwire_stream_openrouter_cached.sse"),
    ("openai_responses", "realwire_stream_reasoning_tool_usage.sse"),
]


def _chunkings(blob: bytes) -> list[tuple[str, list[bytes]]]:
    out = [("whole", [blob]), ("1 byte", [blob[i:i + 1] for i in range(len(blob))])]
    for seed in range(3):
        rng = random.Random(seed)
        cuts = sorted(rng.sample(range(1, len(blob)), min(len(blob) - 1, rng.randint(1, 40))))
        bounds = [0, *cuts, len(blob)]
        out.append((f"random {seed}", [blob[a:b] for a, b in zip(bounds, bounds[1:])]))
    return out


def turn_of(wire: str, name: str) -> ModelTurnResult:
    """The turn, after checking every chunking decodes to it."""
    blob = fixture(wire, name)
    turns = {how: collect_turn(decode_stream(create_wire_adapter(wire), chunks))
             for how, chunks in _chunkings(blob)}
    first = turns["whole"]
    for how, turn in turns.items():
        assert turn == first, how
    return first


@pytest.mark.parametrize(("wire", "name"), STREAMS)
def test_every_chunking_gives_the_same_turn(wire: str, name: str) -> None:
    assert turn_of(wire, name).finish_reason is not None


def _payloads(wire: str, name: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in fixture(wire, name).decode().splitlines()
            if line.startswith("data: ") and line[6:].strip() != "[DONE]"]


# -- class 1: content whole in message_start --------------------------------------------------------

def test_a_tool_use_in_message_start_is_a_call_with_its_finish_reason() -> None:
    start = _payloads("anthropic", "stream_message_start_tool_use.sse")[0]["message"]
    block = start["content"][0]
    turn = turn_of("anthropic", "stream_message_start_tool_use.sse")
    assert [(c.id, c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        (block["id"], block["name"], block["input"])]
    assert turn.finish_reason == "tool_calls"  # the loop waits for the tool result, not "done"


def test_message_start_content_does_not_double_a_block_streamed_after_it() -> None:
    def sse(obj: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    blob = b"".join([
        sse({"type": "message_start", "message": {"model": "m", "content": [
            {"type": "text", "text": "Let me run that. "},
            {"type": "tool_use", "id": "toolu_a", "name": "f", "input": {"x": 1}}],
            "usage": {"input_tokens": 9}}}),
        sse({"type": "content_block_start", "index": 2,
             "content_block": {"type": "tool_use", "id": "toolu_b", "name": "g", "input": {}}}),
        sse({"type": "content_block_delta", "index": 2,
             "delta": {"type": "input_json_delta", "partial_json": '{"y": 2}'}}),
        sse({"type": "content_block_stop", "index": 2}),
        sse({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
             "usage": {"output_tokens": 5}}),
        sse({"type": "message_stop"}),
    ])
    turn = collect_turn(decode_stream(create_wire_adapter("anthropic"), [blob]))
    assert turn.text == "Let me run that. "
    assert [(c.id, c.arguments) for c in turn.tool_calls] == [
        ("toolu_a", '{"x":1}'), ("toolu_b", '{"y": 2}')]
    assert turn.usage == TurnUsage(input_tokens=9, output_tokens=5)


# -- class 2: tool input whole in content_block_start -----------------------------------------------

def test_a_tool_input_sent_whole_on_block_start_is_kept() -> None:
    starts = [p["content_block"] for p in _payloads("anthropic", "stream_tool_input_in_block_start.sse")
              if p["type"] == "content_block_start" and p["content_block"]["type"] == "tool_use"]
    turn = turn_of("anthropic", "stream_tool_input_in_block_start.sse")
    assert json.loads(turn.tool_calls[0].arguments) == starts[0]["input"] != {}
    assert json.loads(turn.tool_calls[1].arguments) == {"tz": "Europe/Paris"}  # the deltas win


# -- class 3: usage with server-side compaction -----------------------------------------------------

def test_compaction_usage_is_what_the_provider_bills_with_the_split_kept() -> None:
    last = _payloads("anthropic", "stream_compaction_usage.sse")[-2]["usage"]
    passes = last["iterations"]
    turn = turn_of("anthropic", "stream_compaction_usage.sse")
    assert turn.usage.input_tokens == sum(p["input_tokens"] for p in passes) == 60_997
    assert turn.usage.output_tokens == sum(p["output_tokens"] for p in passes)
    assert [(i.kind, i.input_tokens) for i in turn.usage.iterations] == [
        (p["type"], p["input_tokens"]) for p in passes]
    # message_start's input count (60,385) is superseded, not combined by a maximum.
    assert turn.usage.input_tokens != max(last["input_tokens"], 60_385)


def test_a_newer_message_delta_input_count_replaces_message_starts() -> None:
    def sse(obj: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(obj).encode() + b"\n\n"

    blob = b"".join([
        sse({"type": "message_start", "message": {"usage": {
            "input_tokens": 900, "cache_read_input_tokens": 50, "output_tokens": 1}}}),
        sse({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
             "usage": {"input_tokens": 700, "output_tokens": 30}}),
        sse({"type": "message_stop"}),
    ])
    turn = collect_turn(decode_stream(create_wire_adapter("anthropic"), [blob]))
    # Each count as reported last; the cache read (only in message_start) still stands.
    assert turn.usage == TurnUsage(input_tokens=750, output_tokens=30, cached_input_tokens=50)


def test_anthropic_cache_writes_are_a_detail_of_the_input_count() -> None:
    usage = json.loads(fixture("anthropic", "realwire_cache_read_create.json"))["usage"]
    turn = create_wire_adapter("anthropic").parse_response(
        fixture("anthropic", "realwire_cache_read_create.json"))
    assert turn.usage == TurnUsage(
        input_tokens=usage["input_tokens"] + usage["cache_read_input_tokens"]
        + usage["cache_creation_input_tokens"],
        output_tokens=usage["output_tokens"], cached_input_tokens=usage["cache_read_input_tokens"],
        cache_write_tokens=usage["cache_creation_input_tokens"])


# -- class 5: Gemini function-call arguments streamed in pieces -------------------------------------

def test_vertex_partial_args_recording_assembles_every_call() -> None:
    name = "realwire_stream_partial_args_tool_calls.sse"
    calls = [p["functionCall"] for body in _payloads("gemini", name)
             for p in body["candidates"][0]["content"]["parts"] if "functionCall" in p]
    names = [c["name"] for c in calls if "name" in c]
    ids = [a["stringValue"] for c in calls for a in c.get("partialArgs", ()) if a["stringValue"]]
    turn = turn_of("gemini", name)
    assert [c.name for c in turn.tool_calls] == names == ["read_theme", "read_screen",
                                                          "read_screen", "read_screen"]
    assert [json.loads(c.arguments) for c in turn.tool_calls] == [{}] + [{"id": i} for i in ids]
    assert len({c.id for c in turn.tool_calls}) == 4
    assert turn.finish_reason == "tool_calls"


def test_a_streamed_call_left_open_at_the_finish_is_still_emitted() -> None:
    chunks = [
        {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "willContinue": True}}]}}]},
        {"candidates": [{"content": {"parts": [{"functionCall": {"partialArgs": [
            {"jsonPath": "$.items[1]", "stringValue": "b"}, {"jsonPath": "$.items[0]", "stringValue": "a"}],
            "willContinue": True}}]}, "finishReason": "STOP"}]},
    ]
    blob = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    turn = collect_turn(decode_stream(create_wire_adapter("gemini"), [blob]))
    assert [(c.name, json.loads(c.arguments)) for c in turn.tool_calls] == [
        ("f", {"items": ["a", "b"]})]


@pytest.mark.parametrize("path", ["id", "$", "$..x", "$.a[99999999]", "$" + ".a" * 65])
def test_an_unusable_argument_path_is_a_wire_decode_error(path: str) -> None:
    from bindloop.wire import WireDecodeError

    body = {"candidates": [{"content": {"parts": [{"functionCall": {
        "name": "f", "willContinue": True,
        "partialArgs": [{"jsonPath": path, "stringValue": "x"}]}}]}}]}
    with pytest.raises(WireDecodeError):
        decode_stream(create_wire_adapter("gemini"), [b"data: " + json.dumps(body).encode() + b"\n\n"])


# -- issue 20 item 15: usage details on every wire ---------------------------------------------------

def test_openrouter_reasoning_and_cached_tokens_are_read() -> None:
    usage = [p["usage"] for p in _payloads("openai_chat", "realwire_stream_openrouter_cached.sse")
             if p.get("usage")][-1]
    turn = turn_of("openai_chat", "realwire_stream_openrouter_cached.sse")
    assert turn.usage.reasoning_tokens == usage["completion_tokens_details"]["reasoning_tokens"] > 0
    assert turn.usage.cached_input_tokens == usage["prompt_tokens_details"]["cached_tokens"] > 0


def test_responses_reasoning_tokens_are_read() -> None:
    done = [p for p in _payloads("openai_responses", "realwire_stream_reasoning_tool_usage.sse")
            if p["type"] == "response.completed"][0]["response"]["usage"]
    turn = turn_of("openai_responses", "realwire_stream_reasoning_tool_usage.sse")
    assert turn.usage.reasoning_tokens == done["output_tokens_details"]["reasoning_tokens"] > 0
    assert turn.usage.output_tokens == done["output_tokens"]


def test_gemini_thought_tokens_are_the_reasoning_detail_of_the_output() -> None:
    turn = turn_of("gemini", "stream_partial_args_nested.sse")
    assert turn.usage.reasoning_tokens == 120 and turn.usage.output_tokens == 96 + 120


def test_run_stats_fold_the_details_and_encode_as_before_when_they_are_zero() -> None:
    plain = accumulate_turn(RunStats(), TurnUsage(input_tokens=10, output_tokens=5))
    assert b"reasoning_tokens" not in msgspec.json.encode(plain)
    assert msgspec.json.encode(RunStats()) == (
        b'{"turns":0,"tool_calls":0,"input_tokens":0,"output_tokens":0,"cached_input_tokens":0,'
        b'"cost":0,"model_ms":0.0,"tool_ms":0.0,"tools":{}}')
    one = TurnUsage(input_tokens=100, output_tokens=40, cached_input_tokens=60,
                    reasoning_tokens=30, cache_write_tokens=20,
                    iterations=(UsageIteration(kind="message", input_tokens=100),))
    stats = accumulate_run(accumulate_turn(RunStats(), one), accumulate_turn(RunStats(), one))
    assert (stats.reasoning_tokens, stats.cache_write_tokens, stats.cached_input_tokens) == (
        60, 40, 120)
    assert msgspec.json.decode(msgspec.json.encode(stats), type=RunStats) == stats


@pytest.mark.anyio
async def test_a_runs_stats_carry_the_usage_details() -> None:
    from bindloop.loop import run_tool_loop
    from bindloop.testing import final_answer, loop_harness, tool_call, tool_call_turn

    detailed = TurnUsage(input_tokens=50, output_tokens=20, cached_input_tokens=10,
                         reasoning_tokens=15, cache_write_tokens=5)
    first = msgspec.structs.replace(tool_call_turn([tool_call("lookup", id="c1")]), usage=detailed)
    h = loop_harness([first, final_answer("done", usage=detailed)])
    result = await run_tool_loop(h.params)
    assert (result.stats.reasoning_tokens, result.stats.cache_write_tokens) == (30, 10)
