"""What real provider recordings (tests/fixtures/*/realwire_*, see tests/fixtures/README.md) must
decode to: server-run tools in an Anthropic stream, Gemini's revised usage snapshots, a chat stream
that ends with an error chunk, Responses errors nested under ``error``, numeric in-stream codes.

Each expected value is read off the recording itself (the text deltas it carries, the usage of its
last chunk), so these tests fail if the decoder drops, invents or re-orders anything."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import pytest

from bindloop.completion import ErrorEvent, TextEvent, ToolCallEvent, UsageEvent, collect_turn
from bindloop.contracts import TurnUsage, UserMessage
from bindloop.routing import AttemptTarget, RouteCursor
from bindloop.wire import (
    HttpRequest,
    IncompleteStreamError,
    ModelAdapter,
    ProviderHttpError,
    WireOptions,
    attempt_error_from,
    create_wire_adapter,
)
from bindloop.wire._stream import decode_stream  # the test helper of this area

from .wire_fixtures import fixture

pytestmark = pytest.mark.anyio


def _data_lines(blob: bytes) -> list[dict[str, object]]:
    out = []
    for line in blob.decode().splitlines():
        if line.startswith("data: ") and line[6:].strip() != "[DONE]":
            out.append(json.loads(line[6:]))
    return out


def _cuts(blob: bytes, size: int) -> list[bytes]:
    return [blob[i:i + size] for i in range(0, len(blob), size)]


# -- 1. Anthropic server-run tools ------------------------------------------------------------------

@pytest.mark.parametrize("size", [1, 7, 4096, 1 << 20])
def test_anthropic_server_tool_stream_keeps_the_text_and_dispatches_nothing(size: int) -> None:
    blob = fixture("anthropic", "realwire_stream_web_search_server_tool.sse")
    payloads = _data_lines(blob)
    server_blocks = [p for p in payloads if p["type"] == "content_block_start"
                     and p["content_block"]["type"] == "server_tool_use"]  # type: ignore[index]
    assert len(server_blocks) == 2  # the recording really uses server tools
    text = "".join(p["delta"]["text"] for p in payloads  # type: ignore[index]
                   if p["type"] == "content_block_delta"
                   and p["delta"]["type"] == "text_delta")  # type: ignore[index]
    text = "".join(p["content_block"].get("text", "")  # type: ignore[union-attr,index]
                   for p in payloads if p["type"] == "content_block_start"
                   and p["content_block"]["type"] == "text") + text  # type: ignore[index]
    events = decode_stream(create_wire_adapter("anthropic"), _cuts(blob, size))
    assert not [e for e in events if isinstance(e, ToolCallEvent)]
    turn = collect_turn(events)
    assert turn.tool_calls == ()
    assert turn.finish_reason == "stop"
    # Every text fragment the model streamed, none lost (block-start texts are empty here).
    assert turn.text is not None and sorted(turn.text) == sorted(text)
    assert "".join(e.content for e in events if isinstance(e, TextEvent)) == turn.text


def test_anthropic_client_tool_next_to_a_server_tool_is_still_a_call() -> None:
    def sse(obj: dict[str, object]) -> bytes:
        return b"event: x\ndata: " + json.dumps(obj).encode() + b"\n\n"

    blob = b"".join([
        sse({"type": "message_start", "message": {"model": "m", "usage": {"input_tokens": 5}}}),
        sse({"type": "content_block_start", "index": 0, "content_block": {
            "type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}}),
        sse({"type": "content_block_delta", "index": 0,
             "delta": {"type": "input_json_delta", "partial_json": '{"query":"x"}'}}),
        sse({"type": "content_block_stop", "index": 0}),
        sse({"type": "content_block_start", "index": 1, "content_block": {
            "type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []}}),
        sse({"type": "content_block_stop", "index": 1}),
        sse({"type": "content_block_start", "index": 2, "content_block": {
            "type": "tool_use", "id": "toolu_2", "name": "lookup", "input": {}}}),
        sse({"type": "content_block_delta", "index": 2,
             "delta": {"type": "input_json_delta", "partial_json": '{"id":7}'}}),
        sse({"type": "content_block_stop", "index": 2}),
        sse({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
             "usage": {"output_tokens": 9}}),
        sse({"type": "message_stop"}),
    ])
    turn = collect_turn(decode_stream(create_wire_adapter("anthropic"), [blob]))
    assert [(c.id, c.name, c.arguments) for c in turn.tool_calls] == [
        ("toolu_2", "lookup", '{"id":7}')]


# -- 2. Gemini usage snapshots ----------------------------------------------------------------------

def test_gemini_final_usage_snapshot_wins_even_when_the_prompt_count_drops() -> None:
    blob = fixture("gemini", "realwire_stream_text.sse")
    metas = [p["usageMetadata"] for p in _data_lines(blob) if "usageMetadata" in p]
    assert metas[0]["promptTokenCount"] > metas[-1]["promptTokenCount"]  # type: ignore[index]
    last = metas[-1]
    turn = collect_turn(decode_stream(create_wire_adapter("gemini"), _cuts(blob, 64)))
    assert turn.usage == TurnUsage(input_tokens=last["promptTokenCount"],  # type: ignore[index]
                                   output_tokens=last["candidatesTokenCount"])  # type: ignore[index]
    assert turn.usage.input_tokens + turn.usage.output_tokens == last["totalTokenCount"]  # type: ignore[index]


def test_usage_snapshots_replace_and_partial_usage_merges() -> None:
    early = TurnUsage(input_tokens=15, output_tokens=0)
    final = TurnUsage(input_tokens=13, output_tokens=8)
    assert collect_turn([UsageEvent(usage=early, snapshot=True),
                         UsageEvent(usage=final, snapshot=True)]).usage == final
    # Partial reports (input first, output at the end) still combine field-wise.
    assert collect_turn([UsageEvent(usage=early), UsageEvent(usage=TurnUsage(output_tokens=8))]
                        ).usage == TurnUsage(input_tokens=15, output_tokens=8)


# -- 3 and 5. A chat stream that ends with an error chunk; numeric codes ----------------------------

def test_chat_stream_error_chunk_is_the_outcome_and_its_numeric_code_is_a_client_error() -> None:
    blob = fixture("openai_chat", "realwire_stream_openrouter_error.sse")
    events = decode_stream(create_wire_adapter("openai_chat"), _cuts(blob, 50))
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and events[-1] is errors[0]  # nothing after the error
    error = errors[0].error
    assert isinstance(error, ProviderHttpError)
    assert error.provider_message == "Token limit reached"
    assert error.error_code == "400"
    assert error.category == "invalid_request"  # by the number: not retried like a 5xx
    with pytest.raises(ProviderHttpError, match="Token limit reached"):
        collect_turn(events)


def test_chat_stream_closed_right_after_an_error_chunk_reports_the_error_not_truncation() -> None:
    blob = fixture("openai_chat", "realwire_stream_openrouter_error.sse")
    payloads = _data_lines(blob)
    # The gateway's reasoning chunk, then its error chunk, then the connection closes: no finish
    # reason and no [DONE] ever arrive.
    first = next(p for p in payloads if "error" not in p)
    first["choices"][0]["finish_reason"] = None  # type: ignore[index]
    error = next(p for p in payloads if "error" in p)
    cut = b"".join(b"data: " + json.dumps(p).encode() + b"\n\n" for p in (first, error))
    events = decode_stream(create_wire_adapter("openai_chat"), [cut])  # end() does not raise
    with pytest.raises(ProviderHttpError) as info:
        collect_turn(events)
    assert not isinstance(info.value, IncompleteStreamError)
    # Without the error chunk the same cut is a truncated stream.
    with pytest.raises(IncompleteStreamError):
        decode_stream(create_wire_adapter("openai_chat"),
                      [b"data: " + json.dumps(first).encode() + b"\n\n"])


@pytest.mark.parametrize(("code", "category"), [
    (400, "invalid_request"), (401, "auth"), (429, "rate_limited"), (503, "server_error")])
def test_numeric_in_stream_codes_classify_as_their_http_status(code: int, category: str) -> None:
    chunk = {"error": {"code": code, "message": "upstream said no"}}
    events = decode_stream(create_wire_adapter("openai_chat"),
                           [b"data: " + json.dumps(chunk).encode() + b"\n\n"])
    error = events[-1].error  # type: ignore[union-attr]
    assert isinstance(error, ProviderHttpError) and error.category == category
    assert error.status_code is None  # it is still an in-stream error, not a response status


def test_a_numeric_code_that_is_no_http_error_status_stays_a_server_error() -> None:
    for code in (0, 200, 1000, True):
        chunk = {"error": {"code": code, "message": "odd"}}
        events = decode_stream(create_wire_adapter("openai_chat"),
                               [b"data: " + json.dumps(chunk).encode() + b"\n\n"])
        assert events[-1].error.category == "server_error"  # type: ignore[union-attr]


# -- 4. Responses errors nested under "error" -------------------------------------------------------

def test_responses_error_event_nested_under_error_keeps_insufficient_quota() -> None:
    blob = fixture("openai_responses", "realwire_vercel_stream_error.sse")
    events = decode_stream(create_wire_adapter("openai_responses"), _cuts(blob, 333))
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert len(errors) == 1
    error = errors[0].error
    assert isinstance(error, ProviderHttpError)
    assert error.error_code == "insufficient_quota"
    assert error.error_type == "insufficient_quota"
    assert error.category == "auth"  # billing: opens the breaker, as the HTTP 429 body does
    assert error.provider_message.startswith("You exceeded your current quota")
    # The same classification as the non-streamed HTTP error the API sends for it.
    body = fixture("openai_responses", "realwire_err_429_insufficient_quota.json")
    http = create_wire_adapter("openai_responses").classify_error(429, (), body)
    assert (http.category, http.error_code, http.provider_message) == (
        error.category, error.error_code, error.provider_message)


def test_responses_error_event_top_level_shape_is_still_read() -> None:
    event = {"type": "error", "code": "rate_limit_exceeded", "message": "slow down"}
    events = decode_stream(create_wire_adapter("openai_responses"),
                           [b"event: error\ndata: " + json.dumps(event).encode() + b"\n\n"])
    error = events[-1].error  # type: ignore[union-attr]
    assert (error.category, error.provider_message) == ("rate_limited", "slow down")


# -- the same outcomes through a ModelAdapter and routing -------------------------------------------

class _Body:
    status = 200
    headers: Sequence[tuple[str, str]] = ()

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


class _Replay:
    """A transport that replays a recording (the edge of the system under test)."""

    def __init__(self, blob: bytes) -> None:
        self._chunks = _cuts(blob, 100)

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Body]:
        yield _Body(self._chunks)


@pytest.mark.parametrize(("wire", "name", "category"), [
    ("openai_chat", "realwire_stream_openrouter_error.sse", "invalid_request"),
    ("openai_responses", "realwire_vercel_stream_error.sse", "auth"),
])
async def test_recorded_stream_errors_reach_routing_classified(wire: str, name: str,
                                                               category: str) -> None:
    model = ModelAdapter(create_wire_adapter(wire), _Replay(fixture(wire, name)),
                         WireOptions(model="m", stream=True))
    with pytest.raises(ProviderHttpError) as info:
        await model.complete([UserMessage(content="hi")])
    target = AttemptTarget(cursor=RouteCursor(stage=0, candidate=0),
                           provider_id="p", canonical_model_id="m", provider_invocation_model="m")
    assert attempt_error_from(info.value, target).category == category


async def test_server_tool_stream_through_a_model_adapter_is_a_plain_answer() -> None:
    blob = fixture("anthropic", "realwire_stream_web_search_server_tool.sse")
    model = ModelAdapter(create_wire_adapter("anthropic"), _Replay(blob),
                         WireOptions(model="m", stream=True))
    turn = await model.complete([UserMessage(content="news?")])
    assert turn.tool_calls == () and turn.finish_reason == "stop" and turn.text
