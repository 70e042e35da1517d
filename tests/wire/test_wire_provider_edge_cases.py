"""Provider edge cases each wire must get right: Responses arguments that arrive only in done
events, Anthropic tool results ordered before user text, tool_choice only with tools, quota vs rate
limit, index-less tool-call deltas, Gemini function responses and merged thoughts. Each test pins a
way a request could be refused or a reply lose data."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest

from bindloop.completion import StreamEvent, ToolCallDeltaError, collect_turn
from bindloop.contracts import (
    AssistantMessage,
    Message,
    ReasoningPart,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from bindloop.routing.failures import failure_disposition
from bindloop.wire import (
    AnthropicAdapter,
    GeminiAdapter,
    OpenAIChatAdapter,
    OpenAIResponsesAdapter,
    WireOptions,
    WireRequestError,
    create_wire_adapter,
)
from bindloop.wire._stream import decode_stream  # the test helper of this area


def _sse(*events: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)


def _stream(wire: str, data: bytes) -> list[StreamEvent]:
    return decode_stream(create_wire_adapter(wire), [data])


def _body(wire: str, messages: list[Message], options: WireOptions,
          tools: Any = ()) -> dict[str, Any]:
    req = create_wire_adapter(wire).build_request(messages, tools, options)
    return msgspec.json.decode(req.body)  # type: ignore[no-any-return]


# -- S2: Responses function_call arguments that arrive only whole ------------------------------

_CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup"}
_ARGS = '{"q":"paris","n":2}'
_CREATED = {"type": "response.created", "response": {"model": "gpt-x"}}
_COMPLETED = {"type": "response.completed", "response": {"status": "completed"}}


def test_responses_arguments_only_in_output_item_done_are_kept() -> None:
    data = _sse(_CREATED,
                {"type": "response.output_item.added", "output_index": 0,
                 "item": {**_CALL, "arguments": ""}},
                {"type": "response.output_item.done", "output_index": 0,
                 "item": {**_CALL, "arguments": _ARGS}},
                _COMPLETED)
    turn = collect_turn(_stream("openai_responses", data))
    assert turn.tool_calls == (ToolCall(id="call_1", name="lookup", arguments=_ARGS),)
    assert turn.finish_reason == "tool_calls"


def test_responses_arguments_only_in_arguments_done_are_kept_once() -> None:
    data = _sse(_CREATED,
                {"type": "response.output_item.added", "output_index": 0,
                 "item": {**_CALL, "arguments": ""}},
                {"type": "response.function_call_arguments.done", "output_index": 0,
                 "item_id": "fc_1", "arguments": _ARGS},
                {"type": "response.output_item.done", "output_index": 0,
                 "item": {**_CALL, "arguments": _ARGS}},
                _COMPLETED)
    turn = collect_turn(_stream("openai_responses", data))
    assert turn.tool_calls == (ToolCall(id="call_1", name="lookup", arguments=_ARGS),)


def test_responses_streamed_arguments_are_not_repeated_by_the_done_events() -> None:
    data = _sse(_CREATED,
                {"type": "response.output_item.added", "output_index": 1,
                 "item": {**_CALL, "arguments": ""}},
                {"type": "response.function_call_arguments.delta", "output_index": 1,
                 "delta": _ARGS[:7]},
                {"type": "response.function_call_arguments.delta", "output_index": 1,
                 "delta": _ARGS[7:]},
                {"type": "response.function_call_arguments.done", "output_index": 1,
                 "arguments": _ARGS},
                {"type": "response.output_item.done", "output_index": 1,
                 "item": {**_CALL, "arguments": _ARGS}},
                _COMPLETED)
    turn = collect_turn(_stream("openai_responses", data))
    assert turn.tool_calls == (ToolCall(id="call_1", name="lookup", arguments=_ARGS),)


def test_responses_arguments_on_the_added_item_are_not_repeated() -> None:
    data = _sse(_CREATED,
                {"type": "response.output_item.added", "output_index": 0,
                 "item": {**_CALL, "arguments": _ARGS}},
                {"type": "response.output_item.done", "output_index": 0,
                 "item": {**_CALL, "arguments": _ARGS}},
                _COMPLETED)
    turn = collect_turn(_stream("openai_responses", data))
    assert turn.tool_calls == (ToolCall(id="call_1", name="lookup", arguments=_ARGS),)


def test_responses_call_first_seen_at_done_is_kept_whole() -> None:
    data = _sse(_CREATED,
                {"type": "response.output_item.done", "output_index": 0,
                 "item": {**_CALL, "arguments": _ARGS}},
                _COMPLETED)
    turn = collect_turn(_stream("openai_responses", data))
    assert turn.tool_calls == (ToolCall(id="call_1", name="lookup", arguments=_ARGS),)
    assert turn.finish_reason == "tool_calls"


# -- S3: Anthropic tool_result blocks lead their user turn -------------------------------------

def test_anthropic_tool_results_come_before_user_text_in_a_merged_turn() -> None:
    messages: list[Message] = [
        UserMessage(content="weather?"),
        AssistantMessage(tool_calls=(ToolCall(id="t1", name="w", arguments="{}"),
                                     ToolCall(id="t2", name="w", arguments="{}"))),
        ToolMessage(tool_call_id="t1", content="sunny"),
        UserMessage(content="also: hurry"),
        ToolMessage(tool_call_id="t2", content="rain"),
        UserMessage(content="thanks"),
    ]
    body = _body("anthropic", messages, WireOptions(model="m"))
    turn = body["messages"][2]
    assert turn["role"] == "user"
    assert [(b["type"], b.get("tool_use_id") or b.get("text")) for b in turn["content"]] == [
        ("tool_result", "t1"), ("tool_result", "t2"), ("text", "also: hurry"), ("text", "thanks")]


# -- S4: no tool_choice without tools -----------------------------------------------------------

@pytest.mark.parametrize("choice", ["auto", "none", "required"])
def test_no_tool_choice_is_sent_without_tools(choice: str) -> None:
    messages: list[Message] = [UserMessage(content="hi")]
    options = WireOptions(model="m", tool_choice=choice, parallel_tool_calls=True)  # type: ignore[arg-type]
    chat = _body("openai_chat", messages, options)
    assert "tool_choice" not in chat and "parallel_tool_calls" not in chat
    responses = _body("openai_responses", messages, options)
    assert "tool_choice" not in responses and "parallel_tool_calls" not in responses
    gemini = _body("gemini", messages, options)
    assert "toolConfig" not in gemini


def test_tool_choice_is_still_sent_with_tools() -> None:
    tools = [ToolDefinition(name="f")]
    options = WireOptions(model="m", tool_choice="required")
    messages: list[Message] = [UserMessage(content="hi")]
    assert _body("openai_chat", messages, options, tools)["tool_choice"] == "required"
    assert _body("openai_responses", messages, options, tools)["tool_choice"] == "required"
    assert _body("gemini", messages, options, tools)["toolConfig"] == {
        "functionCallingConfig": {"mode": "ANY"}}


# -- S8: insufficient_quota is an account problem, not a transient rate limit --------------------

@pytest.mark.parametrize("wire", ["openai_chat", "openai_responses"])
def test_insufficient_quota_opens_the_breaker_and_traverses(wire: str) -> None:
    body = json.dumps({"error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota", "param": None, "code": "insufficient_quota"}}).encode()
    err = create_wire_adapter(wire).classify_error(429, (), body)
    assert err.category == "auth"
    assert err.error_code == "insufficient_quota"
    disposition = failure_disposition("auth")
    assert (disposition.action, disposition.breaker) == ("traverse", "open")


def test_rate_limit_exceeded_stays_a_rate_limit() -> None:
    body = b'{"error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}}'
    assert OpenAIChatAdapter().classify_error(429, (), body).category == "rate_limited"


# -- chat tool-call deltas without an index ---------------------------------------------------

def _chat_chunk(tool_calls: list[dict[str, Any]] | None = None,
                finish: str | None = None) -> dict[str, Any]:
    delta: dict[str, Any] = {"tool_calls": tool_calls} if tool_calls is not None else {}
    return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _fn(name: str | None = None, arguments: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if name is not None:
        out["name"] = name
    if arguments is not None:
        out["arguments"] = arguments
    return out


def test_indexless_deltas_with_distinct_ids_in_one_chunk_are_placed_by_position() -> None:
    data = _sse(_chat_chunk([{"id": "a", "function": _fn("f", "{}")},
                             {"id": "b", "function": _fn("g", '{"x":1}')}]),
                _chat_chunk(finish="tool_calls")) + b"data: [DONE]\n\n"
    turn = collect_turn(_stream("openai_chat", data))
    assert turn.tool_calls == (ToolCall(id="a", name="f", arguments="{}"),
                               ToolCall(id="b", name="g", arguments='{"x":1}'))


def test_indexless_deltas_with_distinct_ids_across_chunks_are_two_calls() -> None:
    data = _sse(_chat_chunk([{"id": "a", "function": _fn("f", "{}")}]),
                _chat_chunk([{"id": "b", "function": _fn("g", "{}")}]),
                _chat_chunk([{"id": "a", "function": _fn(arguments="")}]),
                _chat_chunk(finish="tool_calls")) + b"data: [DONE]\n\n"
    turn = collect_turn(_stream("openai_chat", data))
    assert turn.tool_calls == (ToolCall(id="a", name="f", arguments="{}"),
                               ToolCall(id="b", name="g", arguments="{}"))


def test_indexless_delta_without_an_id_is_refused_not_merged() -> None:
    data = _sse(_chat_chunk([{"id": "a", "function": _fn("f", "{}")}]),
                _chat_chunk([{"function": _fn("g", "{}")}]),
                _chat_chunk(finish="tool_calls")) + b"data: [DONE]\n\n"
    with pytest.raises(ToolCallDeltaError):
        collect_turn(_stream("openai_chat", data))


def test_indexed_deltas_are_unchanged() -> None:
    data = _sse(_chat_chunk([{"index": 0, "id": "a", "function": _fn("f", '{"x"')}]),
                _chat_chunk([{"index": 0, "function": _fn(arguments=":1}")}]),
                _chat_chunk(finish="tool_calls")) + b"data: [DONE]\n\n"
    turn = collect_turn(_stream("openai_chat", data))
    assert turn.tool_calls == (ToolCall(id="a", name="f", arguments='{"x":1}'),)


# -- Gemini -----------------------------------------------------------------------------------

def test_gemini_function_response_uses_the_documented_output_and_error_keys() -> None:
    messages: list[Message] = [
        UserMessage(content="go"),
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="f", arguments="{}"),
                                     ToolCall(id="c2", name="f", arguments="{}"))),
        ToolMessage(tool_call_id="c1", content="fine"),
        ToolMessage(tool_call_id="c2", content="boom", is_error=True),
    ]
    parts = _body("gemini", messages, WireOptions(model="g"))["contents"][2]["parts"]
    assert [p["functionResponse"]["response"] for p in parts] == [{"output": "fine"},
                                                                  {"error": "boom"}]


def test_gemini_parallel_tool_calls_true_is_its_default_and_false_is_refused() -> None:
    tools = [ToolDefinition(name="f")]
    messages: list[Message] = [UserMessage(content="hi")]
    body = _body("gemini", messages, WireOptions(model="g", parallel_tool_calls=True), tools)
    assert "parallel_tool_calls" not in json.dumps(body)
    with pytest.raises(WireRequestError):
        GeminiAdapter().build_request(messages, tools,
                                      WireOptions(model="g", parallel_tool_calls=False))


def _gemini_chunk(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    return {"candidates": [cand], "modelVersion": "gemini-x", "responseId": "r1"}


def _google(text: str = "", signature: str | None = None) -> ReasoningPart:
    return ReasoningPart(text=text, provider="google", model="gemini-x", signature=signature)


def test_gemini_consecutive_streamed_thought_parts_merge_into_one_block() -> None:
    data = _sse(_gemini_chunk([{"text": "**Plan**\n", "thought": True}]),
                _gemini_chunk([{"text": "more thinking", "thought": True}]),
                _gemini_chunk([{"text": "answer"}], finish="STOP"))
    turn = collect_turn(_stream("gemini", data))
    assert turn.reasoning == (_google("**Plan**\nmore thinking"),)
    assert turn.text == "answer"


def test_gemini_thought_merge_keeps_one_signature_per_block() -> None:
    data = _sse(_gemini_chunk([{"text": "a", "thought": True}]),
                _gemini_chunk([{"text": "b", "thought": True, "thoughtSignature": "s1"}]),
                _gemini_chunk([{"text": "c", "thought": True}]),
                _gemini_chunk([{"text": "answer"}]),
                _gemini_chunk([{"text": "d", "thought": True}], finish="STOP"))
    turn = collect_turn(_stream("gemini", data))
    # A signed block is sealed: the next thought starts a new one; an answer part in between
    # also separates blocks.
    assert turn.reasoning == (_google("ab", "s1"), _google("c"), _google("d"))


def test_gemini_whole_body_and_stream_fold_thoughts_alike() -> None:
    parts: list[dict[str, Any]] = [
        {"text": "x", "thought": True}, {"text": "y", "thought": True},
        {"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "sig"}]
    body = json.dumps(_gemini_chunk(parts, finish="STOP")).encode()
    whole = GeminiAdapter().parse_response(body)
    assert whole.reasoning == (_google("xy"), _google(signature="sig"))
    streamed = collect_turn(_stream("gemini", _sse(*(_gemini_chunk([p]) for p in parts[:2]),
                                                    _gemini_chunk(parts[2:], finish="STOP"))))
    assert streamed.reasoning == whole.reasoning


def test_anthropic_adapter_is_the_one_reordering() -> None:
    # The OpenAI wires keep the transcript order (their tool messages are separate messages).
    messages: list[Message] = [
        UserMessage(content="q"),
        AssistantMessage(tool_calls=(ToolCall(id="t1", name="w", arguments="{}"),)),
        UserMessage(content="between"),
        ToolMessage(tool_call_id="t1", content="r"),
    ]
    anthropic = AnthropicAdapter().build_request(messages, (), WireOptions(model="m"))
    blocks = msgspec.json.decode(anthropic.body)["messages"][2]["content"]
    assert [b["type"] for b in blocks] == ["tool_result", "text"]
    responses = msgspec.json.decode(OpenAIResponsesAdapter().build_request(
        messages, (), WireOptions(model="m")).body)["input"]
    assert [i.get("type", i.get("role")) for i in responses] == [
        "user", "function_call", "user", "function_call_output"]
