"""Expected turns for the fixtures of issue 23's classes 1, 2, 3 and 5 (sources in
tests/fixtures/README.md), merged into ``test_wire_fixtures.EXPECTED`` so the split, truncation and
mutation properties there cover them too. Values are written out from reading the payloads."""

from __future__ import annotations

from bindloop.contracts import (
    ModelTurnResult,
    ProviderItemPart,
    ReasoningPart,
    ToolCall,
    TurnUsage,
    UsageIteration,
)


def _compaction(summary: str) -> ProviderItemPart:
    return ProviderItemPart(wire="anthropic", kind="compaction",
                            data='{"type":"compaction","content":"' + summary + '"}')

SECOND_ROUND_EXPECTED: dict[tuple[str, str], ModelTurnResult] = {
    # Class 1: the tool_use and the stop reason arrive whole in message_start, then message_stop.
    ("anthropic", "stream_message_start_tool_use.sse"): ModelTurnResult(
        tool_calls=(ToolCall(id="toolu_01SbnXy8WkUBGxLqg4vT6eZd", name="get_weather",
                             arguments='{"city":"San Francisco"}'),),
        usage=TurnUsage(input_tokens=2045 + 1536, output_tokens=94, cached_input_tokens=1536),
        finish_reason="tool_calls"),
    # Class 2: one input whole on content_block_start (no deltas), one streamed as usual.
    ("anthropic", "stream_tool_input_in_block_start.sse"): ModelTurnResult(
        text="Looking it up.",
        tool_calls=(ToolCall(id="toolu_01Kb2qN4nZ9mDpV7sH3eX8cW", name="get_forecast",
                             arguments='{"city":"Paris","days":3,"units":["celsius"]}'),
                    ToolCall(id="toolu_01Lc3rP5oA0nEqW8tJ4fY9dX", name="get_time",
                             arguments='{"tz": "Europe/Paris"}')),
        usage=TurnUsage(input_tokens=480, output_tokens=71), finish_reason="tool_calls"),
    # Class 3: the bill is the sum of the iterations (60,385 + 612 in, 341 + 47 out), not the
    # field-wise maximum of message_start (60,385) and message_delta (612).
    ("anthropic", "stream_compaction_usage.sse"): ModelTurnResult(
        text="Next, the contact form.",
        usage=TurnUsage(input_tokens=60_997, output_tokens=388, iterations=(
            UsageIteration(kind="compaction", input_tokens=60_385, output_tokens=341),
            UsageIteration(kind="message", input_tokens=612, output_tokens=47))),
        finish_reason="stop",
        provider_items=(_compaction(
            "<summary>The user is building a website; the landing page is done.</summary>"),)),
    ("anthropic", "message_compaction_usage.json"): ModelTurnResult(
        text="Next, the contact form.",
        usage=TurnUsage(input_tokens=203_000, output_tokens=4_500, iterations=(
            UsageIteration(kind="compaction", input_tokens=180_000, output_tokens=3_500),
            UsageIteration(kind="message", input_tokens=23_000, output_tokens=1_000))),
        finish_reason="stop",
        provider_items=(_compaction(
            "<summary>Landing page done; next is the contact form.</summary>"),)),
    # Class 5: Vertex streamFunctionCallArguments, nested paths, array slots, every value kind.
    ("gemini", "stream_partial_args_nested.sse"): ModelTurnResult(
        tool_calls=(ToolCall(
            id="Xk2aaYb7Co-ox_APq6Sz8Ac_0", name="book_trip",
            arguments='{"traveler":{"name":"Ada Lovelace"},"legs":[{"from":"LHR","to":"CDG",'
                      '"seats":2},{"from":"CDG","to":"LHR","seats":1.5}],"refundable":true,'
                      '"notes":null}'),),
        usage=TurnUsage(input_tokens=310, output_tokens=216, reasoning_tokens=120),
        finish_reason="tool_calls"),
}

__all__ = ("SECOND_ROUND_EXPECTED", "ReasoningPart")


def _responses_items(name: str) -> tuple[ProviderItemPart, ...]:
    """The opaque items of a Responses stream, read with the standard-library json module: every
    finished item whose type the canonical turn does not model, as the compact JSON the fixture
    holds."""
    import json

    from .wire_fixtures import fixture

    done = [json.loads(line[6:])["item"] for line in fixture("openai_responses", name).decode()
            .splitlines() if line.startswith('data: {"type":"response.output_item.done"')]
    return tuple(ProviderItemPart(wire="openai_responses", kind=i["type"], id=i["id"],
                                  data=json.dumps(i, separators=(",", ":")))
                 for i in done if i["type"] not in ("message", "function_call", "reasoning"))


SECOND_ROUND_EXPECTED[("openai_responses", "stream_provider_items.sse")] = ModelTurnResult(
    # Class 4: provider-run items are carried opaquely next to an ordinary function call.
    tool_calls=(ToolCall(id="call_fc_9Ls3Jg6Nm2", name="get_forecast",
                         arguments='{"city":"Paris"}'),),
    usage=TurnUsage(input_tokens=1830, output_tokens=212, cached_input_tokens=1024,
                    reasoning_tokens=64),
    finish_reason="tool_calls",
    provider_items=_responses_items("stream_provider_items.sse"))
