"""Expected turns for the ``real_*`` fixtures: payloads the providers (or their official SDKs' test
suites) published, copied as published (sources in tests/fixtures/README.md).

Short values (ids, names, arguments, token counts, finish reasons) are written out from reading the
payloads. Long opaque values (thought summaries, 2.5 kB thought signatures) are read from the
payload with the standard-library ``json`` module, which shares no code with the adapters, so the
expectation stays independent of the decoder under test.
"""

from __future__ import annotations

import json
from typing import Any

from bindloop.contracts import ModelTurnResult, ReasoningPart, ToolCall, TurnUsage

from .wire_fixtures import fixture


def _gemini_parts(name: str) -> list[dict[str, Any]]:
    """Every part of candidate 0, across all chunks of a stream or the one body."""
    raw = fixture("gemini", name).decode()
    if name.endswith(".sse"):
        bodies = [json.loads(line[len("data: "):]) for line in raw.splitlines()
                  if line.startswith("data: ")]
    else:
        bodies = [json.loads(raw)]
    return [p for b in bodies for p in b["candidates"][0]["content"]["parts"]]


_G_UNARY = _gemini_parts("real_firebase_thinking_function_call.json")
_G_STREAM = _gemini_parts("real_firebase_thinking_function_call_stream.sse")


def _thought(part: dict[str, Any], model: str) -> ReasoningPart:
    assert part["thought"] is True
    return ReasoningPart(text=part["text"], provider="google", model=model)


def _signature(part: dict[str, Any], model: str) -> ReasoningPart:
    assert "functionCall" in part
    return ReasoningPart(provider="google", model=model, signature=part["thoughtSignature"])


REAL_EXPECTED: dict[tuple[str, str], ModelTurnResult] = {
    # openai-python live capture: two parallel calls, arguments split mid-token, usage chunk with
    # empty choices, then [DONE]. No prompt_tokens_details, so nothing cached.
    ("openai_chat", "real_sdk_stream_parallel_tool_calls.sse"): ModelTurnResult(
        tool_calls=(ToolCall(id="call_lQnnsesjFMWMQ5IeWPHzR4th", name="GetWeatherArgs",
                             arguments='{"city": "Edinburgh", "country": "UK", "units": "c"}'),
                    ToolCall(id="call_2xjOUgaCdiwAcl9ZBL9LyMUU", name="get_stock_price",
                             arguments='{"ticker": "AAPL", "exchange": "NASDAQ"}')),
        usage=TurnUsage(input_tokens=149, output_tokens=60), finish_reason="tool_calls"),
    ("openai_chat", "real_sdk_completion_parallel_tool_calls.json"): ModelTurnResult(
        tool_calls=(ToolCall(id="call_fdNz3vOBKYgOIpMdWotB9MjY", name="GetWeatherArgs",
                             arguments='{"city": "Edinburgh", "country": "GB", "units": "c"}'),
                    ToolCall(id="call_h1DWI1POMJLb0KwIyQHWXD4p", name="get_stock_price",
                             arguments='{"ticker": "AAPL", "exchange": "NASDAQ"}')),
        usage=TurnUsage(input_tokens=149, output_tokens=60), finish_reason="tool_calls"),
    ("openai_responses", "real_sdk_response_text.json"): ModelTurnResult(
        text="I can't provide real-time updates, but you can easily check the current weather in "
             "San Francisco using a weather website or app. Typically, San Francisco has cool, "
             "foggy summers and mild winters, so it's good to be prepared for variable weather!",
        usage=TurnUsage(input_tokens=14, output_tokens=50), finish_reason="stop"),
    # Firebase AI Logic test data (Gemini Developer API). The call has no id, so the adapter
    # derives one from responseId; output counts thoughts (8 + 501).
    ("gemini", "real_firebase_thinking_function_call.json"): ModelTurnResult(
        tool_calls=(ToolCall(id="38CHaLjMG6TujrEPtvTiuQk_0", name="now", arguments="{}"),),
        reasoning=(_thought(_G_UNARY[0], "gemini-2.5-pro"),
                   _signature(_G_UNARY[1], "gemini-2.5-pro")),
        usage=TurnUsage(input_tokens=38, output_tokens=509, reasoning_tokens=501), finish_reason="tool_calls"),
    # Two thought-summary chunks (one part each on the wire, consecutive, so one block), then the
    # call carrying the signature; usage is a snapshot, the last one wins: 6 + 168.
    ("gemini", "real_firebase_thinking_function_call_stream.sse"): ModelTurnResult(
        tool_calls=(ToolCall(id="48SHaPHpHKbG-8YPtZCawAk_0", name="now", arguments="{}"),),
        reasoning=(ReasoningPart(text=_G_STREAM[0]["text"] + _G_STREAM[1]["text"],
                                 provider="google", model="gemini-2.5-flash"),
                   _signature(_G_STREAM[2], "gemini-2.5-flash")),
        usage=TurnUsage(input_tokens=38, output_tokens=174, reasoning_tokens=168), finish_reason="tool_calls"),
    # No responseId, no candidate index: index 0 is the default.
    ("gemini", "real_firebase_stream_basic_reply_short.sse"): ModelTurnResult(
        text="The capital of Wyoming is **Cheyenne**.\n",
        usage=TurnUsage(input_tokens=7, output_tokens=10), finish_reason="stop"),
    # Vertex AI body (same GenerateContentResponse schema): implicit cache hit, 15 + 73 thoughts.
    ("gemini", "real_firebase_implicit_caching.json"): ModelTurnResult(
        text="Red Riding Hood is looking for **directions** in the forest.",
        usage=TurnUsage(input_tokens=12013, output_tokens=88, cached_input_tokens=11243,
                        reasoning_tokens=73),
        finish_reason="stop"),
}

# The two exchanges of anthropic/real_sdk_tool_runner_recording.json, in order.
ANTHROPIC_RECORDING_TURNS: tuple[ModelTurnResult, ...] = (
    ModelTurnResult(
        tool_calls=(ToolCall(id="toolu_01A9HHF5Ezy3oBrKmSgfASm9", name="get_weather",
                             arguments='{"location":"San Francisco, CA","units":"f"}'),),
        usage=TurnUsage(input_tokens=656, output_tokens=74), finish_reason="tool_calls"),
    ModelTurnResult(
        text="I apologize, but I'm getting an error when trying to fetch the weather for San "
             "Francisco. This appears to be a temporary issue with the weather service. Could you "
             "try again in a moment, or let me know if you'd like me to attempt to retrieve the "
             "weather for a different location?",
        usage=TurnUsage(input_tokens=760, output_tokens=63), finish_reason="stop"),
)
