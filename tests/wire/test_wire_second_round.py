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
from bindloop.wire import AnthropicAdapter, create_wire_adapter
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


# -- class 4: Responses items and events bindloop does not model ------------------------------------

from bindloop.contracts import (  # noqa: E402
    AssistantMessage,
    ProviderItemPart,
    TextPart,
    ToolMessage,
    UserMessage,
)
from bindloop.wire import WireDecodeError, WireOptions, WireRequestError  # noqa: E402

_PROVIDER_RUN = {"tool_search_call", "tool_search_output", "shell_call", "custom_tool_call",
                 "mcp_approval_request"}


def test_provider_run_items_are_typed_opaque_parts_next_to_the_function_call() -> None:
    turn = turn_of("openai_responses", "stream_provider_items.sse")
    assert {p.kind for p in turn.provider_items} == _PROVIDER_RUN
    assert all(p.wire == "openai_responses" and p.id for p in turn.provider_items)
    assert [c.name for c in turn.tool_calls] == ["get_forecast"]  # not lost to a bad item
    # A non-string field on an unmodelled item (tool_search_call.arguments is an object) is kept.
    search = next(p for p in turn.provider_items if p.kind == "tool_search_call")
    assert json.loads(search.data)["arguments"] == {"query": "weather forecast", "limit": 3}


def test_a_whole_response_keeps_each_items_bytes() -> None:
    body = fixture("openai_responses", "response_provider_items.json")
    turn = create_wire_adapter("openai_responses").parse_response(body)
    items = json.loads(body)["output"]
    assert [p.kind for p in turn.provider_items] == [
        i["type"] for i in items if i["type"] in _PROVIDER_RUN]
    for part in turn.provider_items:
        assert part.data.encode() in body  # the item's own bytes, not a re-encoding
    assert [c.name for c in turn.tool_calls] == ["get_forecast"]


@pytest.mark.parametrize("source", ["stream_provider_items.sse", "response_provider_items.json"])
def test_provider_items_round_trip_to_the_same_wire_and_nowhere_else(source: str) -> None:
    adapter = create_wire_adapter("openai_responses")
    blob = fixture("openai_responses", source)
    turn = (adapter.parse_response(blob) if source.endswith(".json")
            else turn_of("openai_responses", source))
    history = [UserMessage(content="plan my trip"), turn.to_message(),
               ToolMessage(tool_call_id=turn.tool_calls[0].id, content="sunny")]
    body = adapter.build_request(history, (), WireOptions(model="gpt-x")).body
    for part in turn.provider_items:
        assert part.data.encode() in body  # byte for byte, as received
    sent = json.loads(body)["input"]
    kinds = [i.get("type") for i in sent]
    assert kinds.index("tool_search_call") < kinds.index("function_call")
    # Another wire's request leaves the items out instead of failing.
    for wire in ("openai_chat", "anthropic", "gemini"):
        other = create_wire_adapter(wire).build_request(history, (), WireOptions(model="m")).body
        assert b"tool_search_call" not in other and b"shell_call" not in other


def test_a_provider_item_that_is_not_json_is_refused_when_sent() -> None:
    bad = AssistantMessage(content=(ProviderItemPart(wire="openai_responses", kind="shell_call",
                                                     data="{not json"), TextPart(text="x")))
    with pytest.raises(WireRequestError, match="shell_call"):
        create_wire_adapter("openai_responses").build_request(
            [UserMessage(content="hi"), bad], (), WireOptions(model="m"))


def test_provider_item_parts_survive_the_stored_forms() -> None:
    from bindloop.contracts import (
        decode_messages,
        encode_messages,
        message_from_openai,
        message_to_openai,
    )

    part = ProviderItemPart(wire="openai_responses", kind="shell_call", id="sh_1",
                            data='{"type":"shell_call","id":"sh_1"}')
    message = AssistantMessage(content=(part, TextPart(text="done")))
    assert decode_messages(encode_messages([message])) == [message]
    assert message_from_openai(message_to_openai(message)) == message


def _responses_stream(*events: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


_COMPLETED = {"type": "response.completed", "response": {"status": "completed", "output": []}}


def test_unknown_event_types_are_ignored_whatever_their_fields_hold() -> None:
    blob = _responses_stream(
        {"type": "response.shell_call_output_content.delta", "output_index": "zero",
         "delta": {"stdout": "x"}, "response": [1, 2], "error": "not an object"},
        {"type": "response.future_event", "item": 7, "code": {"nested": True}},
        {"type": "response.output_text.delta", "delta": "hello"},
        _COMPLETED)
    turn = collect_turn(decode_stream(create_wire_adapter("openai_responses"), [blob]))
    assert turn.text == "hello" and turn.finish_reason == "stop"


def test_a_known_event_with_the_wrong_shape_is_still_a_decode_error() -> None:
    blob = _responses_stream({"type": "response.completed", "response": {"usage": "lots"}})
    with pytest.raises(WireDecodeError):
        decode_stream(create_wire_adapter("openai_responses"), [blob])


def test_an_unmodelled_item_of_any_shape_does_not_fail_the_response() -> None:
    weird = {"type": "apply_patch_call", "id": 12, "call_id": ["x"], "operation": {"diff": 1},
             "status": None}
    body = json.dumps({"status": "completed", "output": [
        weird, {"type": "local_shell_call", "id": "lsh_1", "action": {"command": ["ls"]}},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}]}).encode()
    turn = create_wire_adapter("openai_responses").parse_response(body)
    assert [p.kind for p in turn.provider_items] == ["apply_patch_call", "local_shell_call"]
    assert turn.provider_items[0].id is None  # a non-string id is not taken as one
    assert [c.id for c in turn.tool_calls] == ["c1"]


def test_an_anthropic_compaction_block_goes_back_to_anthropic() -> None:
    turn = turn_of("anthropic", "stream_compaction_usage.sse")
    (part,) = turn.provider_items
    history = [UserMessage(content="continue"), turn.to_message(), UserMessage(content="next?")]
    # Compaction is a beta: the block goes back on an adapter that sends the beta header.
    sent = json.loads(AnthropicAdapter(beta=("compact-2026-01-12",)).build_request(
        history, (), WireOptions(model="claude-x")).body)
    assert sent["messages"][1]["content"][0] == json.loads(part.data)
    assert sent["messages"][1]["content"][0]["type"] == "compaction"


@pytest.mark.parametrize("kind", [["response.completed"], {"a": 1}, 7, None])
def test_an_event_whose_type_is_not_a_string_is_a_decode_error(kind: object) -> None:
    # Found by the fuzz target: the fallback for unread event types must not hash the type.
    blob = _responses_stream({"type": kind, "delta": {"x": 1}})
    with pytest.raises(WireDecodeError):
        decode_stream(create_wire_adapter("openai_responses"), [blob])


def test_an_unmodelled_item_that_is_not_utf8_is_a_decode_error() -> None:
    # Found by the fuzz campaign: msgspec spans an unread value without validating its UTF-8.
    body = b'{"status": "completed", "output": [{"type": "shell_call", "x": "\xea\x80"}]}'
    with pytest.raises(WireDecodeError, match="UTF-8"):
        create_wire_adapter("openai_responses").parse_response(body)


def test_an_empty_function_call_with_no_call_open_is_not_a_call() -> None:
    chunks = [{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f"}}]}}]},
              {"candidates": [{"content": {"parts": [{"functionCall": {}}]}},
                              ], "usageMetadata": {"promptTokenCount": 3}},
              {"candidates": [{"content": {"parts": [{"text": ""}]}, "finishReason": "STOP"}]}]
    blob = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
    turn = collect_turn(decode_stream(create_wire_adapter("gemini"), [blob]))
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [("f", "{}")]


def test_a_checkpoint_keeps_provider_items() -> None:
    from bindloop.checkpoints import (
        create_loop_checkpoint,
        parse_loop_checkpoint,
        serialize_loop_checkpoint,
    )

    turn = create_wire_adapter("openai_responses").parse_response(
        fixture("openai_responses", "response_provider_items.json"))
    messages = [UserMessage(content="plan"), turn.to_message(),
                ToolMessage(tool_call_id=turn.tool_calls[0].id, content="sunny")]
    cp = create_loop_checkpoint(execution_id="x", max_iterations=3, messages=messages)
    again = parse_loop_checkpoint(serialize_loop_checkpoint(cp))
    assert again.messages == cp.messages
    assert [p for p in again.messages[1].content or () if isinstance(p, ProviderItemPart)] == list(
        turn.provider_items)
