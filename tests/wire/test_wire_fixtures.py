"""Every recorded or documented payload in tests/fixtures decodes to the turn a reader of the payload
expects; every error body classifies into the routing taxonomy with the provider's own type."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.completion import ErrorEvent, StreamEvent, ToolCallDeltaError, collect_turn
from bindloop.contracts import ModelTurnResult, ReasoningPart, ToolCall, TurnUsage
from bindloop.errors import PromptTooLongError
from bindloop.wire import (
    IncompleteStreamError,
    ProviderHttpError,
    SseError,
    WireDecodeError,
    create_wire_adapter,
)
from bindloop.wire._stream import decode_stream  # the test helper of this area

from .wire_fixtures import fixture, stream_fixtures
from .wire_real_fixtures import REAL_EXPECTED
from .wire_second_round_fixtures import SECOND_ROUND_EXPECTED

ENC = "gAAAAABoISQ24OyVRYbkYfukuDPxsa1ZdcTfxvV8FTIh3fr8nB4m1"

EXPECTED: dict[tuple[str, str], ModelTurnResult] = {
    ("anthropic", "sdk_basic_stream.sse"): ModelTurnResult(
        text="Hello there!", usage=TurnUsage(input_tokens=11, output_tokens=6),
        finish_reason="stop"),
    ("anthropic", "sdk_tool_use_stream.sse"): ModelTurnResult(
        text="I'll check the current weather in Paris for you.",
        tool_calls=(ToolCall(id="toolu_01NRLabsLyVHZPKxbKvkfSMn", name="get_weather",
                             arguments='{"location": "Paris"}'),),
        usage=TurnUsage(input_tokens=377, output_tokens=65), finish_reason="tool_calls"),
    ("anthropic", "thinking_stream.sse"): ModelTurnResult(
        text="27 * 453 = 12,231",
        reasoning=(
            ReasoningPart(text="The user wants 27 * 453. 27 * 453 = 12231.", provider="anthropic",
                          model="claude-sonnet-4-5",
                          signature="EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"),
            ReasoningPart(provider="anthropic", model="claude-sonnet-4-5", redacted=True,
                          data="EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"),
        ),
        # input 52 + 40 cache reads; cached is the cache reads
        usage=TurnUsage(input_tokens=92, output_tokens=120, cached_input_tokens=40),
        finish_reason="stop"),
    ("anthropic", "message_tool_use.json"): ModelTurnResult(
        text="Let me check.",
        tool_calls=(ToolCall(id="toolu_01A09q90qw90lq917835lq9", name="get_weather",
                             arguments='{"location":"San Francisco, CA","unit":"celsius"}'),),
        reasoning=(ReasoningPart(text="I should look the weather up.", provider="anthropic",
                                 model="claude-sonnet-4-5",
                                 signature="WaUjzkypQ2mUEVM36O2TxuC06KN8xyfbJwyem2dw3URve"),),
        usage=TurnUsage(input_tokens=582, output_tokens=91, cached_input_tokens=100,
                        cache_write_tokens=10),
        finish_reason="tool_calls"),
    ("openai_chat", "stream_tool_calls.sse"): ModelTurnResult(
        tool_calls=(ToolCall(id="call_DdmO9pD3xa9XTPNJ32zg2hcA", name="get_weather",
                             arguments='{"location":"Paris, France"}'),
                    ToolCall(id="call_ABCDEF0123456789abcdefgh", name="get_time",
                             arguments='{"tz":"Europe/Paris"}')),
        usage=TurnUsage(input_tokens=82, output_tokens=47, cached_input_tokens=64),
        finish_reason="tool_calls"),
    ("openai_chat", "stream_text_usage.sse"): ModelTurnResult(
        text="Hello! How can I assist you today? é😀",
        usage=TurnUsage(input_tokens=19, output_tokens=10), finish_reason="stop"),
    ("openai_chat", "stream_refusal.sse"): ModelTurnResult(
        text="I'm sorry, I can't help with that.", finish_reason="content_filter"),
    ("openai_chat", "completion_tool_call.json"): ModelTurnResult(
        tool_calls=(ToolCall(id="call_abc123", name="get_current_weather",
                             arguments='{\n"location": "Boston, MA"\n}'),),
        usage=TurnUsage(input_tokens=82, output_tokens=17), finish_reason="tool_calls"),
    ("openai_responses", "stream_reasoning_function_call.sse"): ModelTurnResult(
        tool_calls=(ToolCall(id="call_8h1Q7bL0ZTm3mY5d2Qx3g1Sa", name="get_weather",
                             arguments='{"location":"Paris, France"}'),),
        reasoning=(ReasoningPart(
            text="**Checking the weather**\n\nThe user asks about Paris. I'll call get_weather.",
            provider="openai", model="o4-mini-2025-04-16", encrypted_content=ENC,
            id="rs_67c9fdd0e88481909a2b6c30a8f5b4c2"),),
        usage=TurnUsage(input_tokens=312, output_tokens=141, cached_input_tokens=256,
                        reasoning_tokens=128),
        finish_reason="tool_calls"),
    ("openai_responses", "stream_text_incomplete.sse"): ModelTurnResult(
        text="Hi there!", usage=TurnUsage(input_tokens=9, output_tokens=16),
        finish_reason="length"),
    ("openai_responses", "response_reasoning_text.json"): ModelTurnResult(
        text="Hello! How can I help?",
        reasoning=(ReasoningPart(text="Simple greeting.", provider="openai",
                                 model="o4-mini-2025-04-16", encrypted_content=ENC,
                                 id="rs_67c9fdd0e88481909a2b6c30a8f5b4c2"),),
        usage=TurnUsage(input_tokens=36, output_tokens=87, reasoning_tokens=64), finish_reason="stop"),
    ("gemini", "stream_thought_function_call.sse"): ModelTurnResult(
        text="Checking ",
        tool_calls=(ToolCall(id="Ma4qaPbQBo2qz7IP6a2b4AE_0", name="get_weather",
                             arguments='{"location":"Paris"}'),),
        reasoning=(ReasoningPart(text="**Planning**\nNeed weather.", provider="google",
                                 model="gemini-2.5-flash"),
                   ReasoningPart(provider="google", model="gemini-2.5-flash",
                                 signature="CiQB0e2Kb7kZ1pD9sX2Vf0m1wq3E")),
        # output counts thoughts: 17 candidates + 29 thoughts
        usage=TurnUsage(input_tokens=61, output_tokens=46, cached_input_tokens=32,
                        reasoning_tokens=29),
        finish_reason="tool_calls"),
    ("gemini", "stream_text.sse"): ModelTurnResult(
        text="The capital of France is Paris.", usage=TurnUsage(input_tokens=8, output_tokens=8),
        finish_reason="stop"),
    ("gemini", "response_function_calls.json"): ModelTurnResult(
        tool_calls=(ToolCall(id="fc-1", name="get_weather", arguments='{"location":"Boston"}'),
                    ToolCall(id="resp-g1_1", name="get_time", arguments="{}")),
        usage=TurnUsage(input_tokens=120, output_tokens=24), finish_reason="tool_calls"),
    ("gemini", "response_max_tokens.json"): ModelTurnResult(
        text="Partial answer", usage=TurnUsage(input_tokens=5, output_tokens=4),
        finish_reason="length"),
}
# Payloads published by the providers or their SDKs' test suites (tests/fixtures/README.md);
# merged here so the split, truncation and mutation properties below cover them as well.
EXPECTED.update(REAL_EXPECTED)
EXPECTED.update(SECOND_ROUND_EXPECTED)  # issue 23's reconstructed shapes


def _stream_events(wire: str, data: bytes, cuts: list[int] | None = None) -> list[StreamEvent]:
    points = sorted({c % (len(data) + 1) for c in cuts or []})
    bounds = [0, *points, len(data)]
    return decode_stream(create_wire_adapter(wire),
                         [data[a:b] for a, b in zip(bounds, bounds[1:])])


@pytest.mark.parametrize(("wire", "name"), sorted(EXPECTED), ids=lambda v: str(v))
def test_fixture_decodes_to_expected_turn(wire: str, name: str) -> None:
    data = fixture(wire, name)
    if name.endswith(".sse"):
        turn = collect_turn(_stream_events(wire, data))
    else:
        turn = create_wire_adapter(wire).parse_response(data)
    assert turn == EXPECTED[(wire, name)]


def test_every_fixture_has_an_expectation_or_is_an_error_case() -> None:
    for wire, name in stream_fixtures():
        # realwire_* recordings: their expectations are read off the recording itself, in
        # test_wire_recorded_traffic.py.
        assert ((wire, name) in EXPECTED or "error" in name or "failed" in name
                or name.startswith("realwire_"))


@pytest.mark.parametrize(("wire", "name", "category", "kind"), [
    ("anthropic", "error_overloaded_stream.sse", "server_error", "overloaded_error"),
    ("openai_responses", "stream_failed.sse", "server_error", None),
])
def test_stream_error_events_are_classified(wire: str, name: str, category: str,
                                            kind: str | None) -> None:
    events = _stream_events(wire, fixture(wire, name))
    errors = [e.error for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and isinstance(errors[0], ProviderHttpError)
    assert errors[0].category == category and errors[0].status_code is None
    assert errors[0].error_type == kind
    with pytest.raises(ProviderHttpError):
        collect_turn(events)


@pytest.mark.parametrize(("wire", "name", "status", "headers", "category", "kind", "retry",
                          "too_long"), [
    ("anthropic", "error_overloaded.json", 529, [], "server_error", "overloaded_error", None, False),
    ("anthropic", "error_prompt_too_long.json", 400, [], "context_length",
     "invalid_request_error", None, True),
    ("anthropic", "error_rate_limit.json", 429, [("Retry-After", "20")], "rate_limited",
     "rate_limit_error", 20_000.0, False),
    ("openai_chat", "error_context_length.json", 400, [], "context_length",
     "invalid_request_error", None, True),
    ("openai_chat", "error_rate_limit.json", 429, [("retry-after-ms", "1560")], "rate_limited",
     "tokens", 1560.0, False),
    ("openai_chat", "error_invalid_api_key.json", 401, [], "auth", "invalid_request_error", None,
     False),
    ("openai_responses", "error_context_length.json", 400, [], "context_length",
     "invalid_request_error", None, True),
    ("gemini", "error_resource_exhausted.json", 429, [], "rate_limited", "RESOURCE_EXHAUSTED",
     31_000.0, False),
    ("gemini", "error_prompt_too_long.json", 400, [], "context_length", "INVALID_ARGUMENT", None,
     True),
    ("gemini", "error_unavailable.json", 503, [], "server_error", "UNAVAILABLE", None, False),
])
def test_error_bodies_classify(wire: str, name: str, status: int, headers: list[tuple[str, str]],
                               category: str, kind: str, retry: float | None,
                               too_long: bool) -> None:
    err = create_wire_adapter(wire).classify_error(status, headers, fixture(wire, name))
    assert err.category == category
    assert err.error_type == kind
    assert err.status_code == status
    assert err.retry_after_ms == retry
    assert isinstance(err, PromptTooLongError) is too_long


@pytest.mark.parametrize("wire", ["openai_chat", "openai_responses", "anthropic", "gemini"])
def test_non_json_error_bodies_fall_back_to_status(wire: str) -> None:
    err = create_wire_adapter(wire).classify_error(502, {"Retry-After": "3"}, b"<html>bad</html>")
    assert err.category == "server_error" and err.retry_after_ms == 3000.0
    assert "<html>bad</html>" in str(err)
    assert create_wire_adapter(wire).classify_error(404, (), b"").category == "model_not_found"


_SPLITTABLE = sorted(k for k in EXPECTED if k[1].endswith(".sse"))


@given(st.sampled_from(_SPLITTABLE), st.lists(st.integers(0, 10_000), max_size=20))
@settings(max_examples=150, deadline=None)
def test_any_split_of_a_capture_gives_the_same_events(key: tuple[str, str],
                                                      cuts: list[int]) -> None:
    wire, name = key
    data = fixture(wire, name)
    assert _stream_events(wire, data, cuts) == _stream_events(wire, data)


def test_splits_inside_multibyte_characters_and_crlf_are_covered() -> None:
    data = fixture("openai_chat", "stream_text_usage.sse")
    emoji = data.index("😀".encode())
    whole = _stream_events("openai_chat", data)
    for cut in range(emoji, emoji + 4):
        assert _stream_events("openai_chat", data, [cut]) == whole
    gem = fixture("gemini", "stream_text.sse")
    cr = gem.index(b"\r\n")
    assert _stream_events("gemini", gem, [cr + 1]) == _stream_events("gemini", gem)


DOCUMENTED = (WireDecodeError, SseError, ToolCallDeltaError, ProviderHttpError)


@given(st.sampled_from(stream_fixtures()), st.data())
@settings(max_examples=200, deadline=None)
def test_mutated_captures_raise_only_documented_errors(key: tuple[str, str],
                                                       data: st.DataObject) -> None:
    wire, name = key
    raw = bytearray(fixture(wire, name))
    for _ in range(data.draw(st.integers(1, 6))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        i = data.draw(st.integers(0, max(0, len(raw) - 1)))
        if op == "flip" and raw:
            raw[i] = data.draw(st.integers(0, 255))
        elif op == "cut":
            del raw[i:i + data.draw(st.integers(1, 40))]
        else:
            raw[i:i] = data.draw(st.binary(max_size=20))
    try:
        collect_turn(_stream_events(wire, bytes(raw), [len(raw) // 3]))
    except DOCUMENTED:
        pass


@given(st.sampled_from(["openai_chat", "openai_responses", "anthropic", "gemini"]),
       st.binary(max_size=300))
@settings(max_examples=150, deadline=None)
def test_random_bytes_raise_only_documented_errors(wire: str, data: bytes) -> None:
    try:
        collect_turn(_stream_events(wire, data))
    except DOCUMENTED:
        pass
    try:
        create_wire_adapter(wire).parse_response(data)
    except DOCUMENTED:
        pass
    assert isinstance(create_wire_adapter(wire).classify_error(500, (), data), ProviderHttpError)


_TERMINAL = {
    "anthropic": (b'"message_stop"',),
    "openai_chat": (b'"finish_reason":"',),
    "openai_responses": (b'"response.completed"', b'"response.incomplete"'),
    "gemini": (b'"finishReason"',),
}


def test_truncated_streams_are_incomplete_not_silent() -> None:
    for wire, name in _SPLITTABLE:
        data = fixture(wire, name)
        marker = _TERMINAL[wire]
        at = min(i for m in marker if (i := data.find(m)) >= 0)
        cut = data.rfind(b"data:", 0, at)  # drop the terminal event and everything after it
        with pytest.raises(IncompleteStreamError):
            _stream_events(wire, data[:cut])
