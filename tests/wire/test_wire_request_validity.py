"""Requests a provider accepts, for input it would otherwise refuse (issue 36, request side):
tool names outside a wire's pattern, blank Anthropic text, files Anthropic has no block for,
long Responses call ids, compaction blocks without the beta, lone surrogates; usage passes of
another model; Gemini thinking levels. And the other half of the contract: a request of valid
input keeps today's bytes."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.model import ModelRequest
from bindloop import contracts
from bindloop.completion import collect_turn
from bindloop.contracts import (
    AssistantMessage,
    FilePart,
    ImagePart,
    Message,
    ProviderItemPart,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    TurnUsage,
    UsageIteration,
    UserMessage,
    add_usage,
)
from bindloop.errors import UsageError
from bindloop.testing.strategies import transcripts
from bindloop.wire import (
    WIRE_NAMES,
    AnthropicAdapter,
    CachePolicy,
    ForcedTool,
    GeminiAdapter,
    HttpRequest,
    ModelAdapter,
    ReasoningOptions,
    StreamBudgets,
    WireOptions,
    WireRequestError,
    create_wire_adapter,
)
from bindloop.wire._stream import WireStream, decode_stream

_NO_BUDGETS = StreamBudgets(first_token_ms=None, inter_chunk_ms=None, total_ms=None)

PATTERN = {"openai_chat": r"[a-zA-Z0-9_-]{1,64}", "openai_responses": r"[a-zA-Z0-9_-]{1,64}",
           "anthropic": r"[a-zA-Z0-9_-]{1,64}", "gemini": r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}"}
BAD_NAMES = ["ns:tool", "has space", "slash/name", "x" * 70, "9lives", "café", "", "t\udc80x"]


def _body(wire: str, messages: list[Message], tools: list[ToolDefinition] = (),  # type: ignore[assignment]
          options: WireOptions | None = None, adapter: Any = None) -> dict[str, Any]:
    adapter = adapter or create_wire_adapter(wire)
    request = adapter.build_request(messages, tools, options or WireOptions(model="m"))
    return msgspec.json.decode(request.body)  # type: ignore[no-any-return]


def _sent_names(wire: str, body: dict[str, Any]) -> dict[str, list[str]]:
    """Every tool name a body carries, by where it sits."""
    out: dict[str, list[str]] = {"tools": [], "calls": [], "choice": [], "results": []}
    if wire == "openai_chat":
        out["tools"] = [t["function"]["name"] for t in body.get("tools", ())]
        out["calls"] = [c["function"]["name"] for m in body["messages"]
                        for c in m.get("tool_calls", ())]
        choice = body.get("tool_choice")
        out["choice"] = [choice["function"]["name"]] if isinstance(choice, dict) else []
    elif wire == "openai_responses":
        out["tools"] = [t["name"] for t in body.get("tools", ())]
        out["calls"] = [i["name"] for i in body["input"] if i.get("type") == "function_call"]
        choice = body.get("tool_choice")
        out["choice"] = [choice["name"]] if isinstance(choice, dict) else []
    elif wire == "anthropic":
        out["tools"] = [t["name"] for t in body.get("tools", ())]
        out["calls"] = [b["name"] for m in body["messages"] for b in m["content"]
                        if b["type"] == "tool_use"]
        choice = body.get("tool_choice")
        out["choice"] = [choice["name"]] if choice and choice["type"] == "tool" else []
    else:
        out["tools"] = [f["name"] for t in body.get("tools", ()) for f in t["functionDeclarations"]]
        out["calls"] = [p["functionCall"]["name"] for c in body["contents"] for p in c["parts"]
                        if "functionCall" in p]
        out["results"] = [p["functionResponse"]["name"] for c in body["contents"]
                          for p in c["parts"] if "functionResponse" in p]
        config = body.get("toolConfig", {}).get("functionCallingConfig", {})
        out["choice"] = list(config.get("allowedFunctionNames", ()))
    return out


def _history(names: list[str]) -> list[Message]:
    calls = tuple(ToolCall(id=f"call_{i}", name=n, arguments="{}") for i, n in enumerate(names))
    return [UserMessage(content="go"), AssistantMessage(tool_calls=calls),
            *[ToolMessage(tool_call_id=c.id, name=c.name, content="ok") for c in calls],
            UserMessage(content="again")]


# -- C1: tool names -------------------------------------------------------------------------------

@pytest.mark.parametrize("wire", WIRE_NAMES)
def test_names_outside_the_pattern_are_sent_under_a_wire_name_everywhere(wire: str) -> None:
    names = [*BAD_NAMES, "fine_name"]
    tools = [ToolDefinition(name=n) for n in names]
    options = WireOptions(model="m", tool_choice=ForcedTool(name="ns:tool"))
    body = _body(wire, _history(names), tools, options)
    sent = _sent_names(wire, body)
    for where, got in sent.items():
        for name in got:
            assert re.fullmatch(PATTERN[wire], name), (where, name)
    assert len(set(sent["tools"])) == len(names)  # collision-free
    assert sent["calls"] == sent["tools"]  # a call goes by the name its tool is defined under
    if wire == "gemini":
        assert sent["results"] == sent["tools"]
    assert sent["choice"] == [sent["tools"][0]]
    assert "fine_name" in sent["tools"]  # a valid name is sent unchanged
    # Deterministic: another adapter, another turn, the same bytes (prompt caches hold).
    assert _body(wire, _history(names), tools, options) == body


_RESPONSES = {
    "openai_chat": lambda n: {"choices": [{"message": {"tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": n, "arguments": "{}"}}]},
        "finish_reason": "tool_calls"}]},
    "openai_responses": lambda n: {"status": "completed", "output": [
        {"type": "function_call", "call_id": "c1", "name": n, "arguments": "{}"}]},
    "anthropic": lambda n: {"content": [{"type": "tool_use", "id": "c1", "name": n, "input": {}}],
                            "stop_reason": "tool_use"},
    "gemini": lambda n: {"candidates": [{"content": {"role": "model", "parts": [
        {"functionCall": {"id": "c1", "name": n, "args": {}}}]}, "finishReason": "STOP"}]},
}


def _sse(*events: dict[str, Any], done: bool = False) -> bytes:
    out = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return out + (b"data: [DONE]\n\n" if done else b"")


def _stream(wire: str, name: str) -> bytes:
    if wire == "openai_chat":
        return _sse({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": 0, "id": "c1", "function": {"name": name, "arguments": "{}"}}]}}]},
            {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}, done=True)
    if wire == "openai_responses":
        item = {"type": "function_call", "call_id": "c1", "name": name, "arguments": "{}"}
        return _sse({"type": "response.output_item.added", "output_index": 0, "item": item},
                    {"type": "response.output_item.done", "output_index": 0, "item": item},
                    {"type": "response.completed", "response": {"status": "completed"}})
    if wire == "anthropic":
        return _sse({"type": "message_start", "message": {"model": "claude-x"}},
                    {"type": "content_block_start", "index": 0, "content_block": {
                        "type": "tool_use", "id": "c1", "name": name, "input": {}}},
                    {"type": "content_block_stop", "index": 0},
                    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}},
                    {"type": "message_stop"})
    return _sse(_RESPONSES["gemini"](name))


@pytest.mark.parametrize("wire", WIRE_NAMES)
@pytest.mark.parametrize("streamed", [False, True])
def test_calls_in_responses_come_back_under_the_canonical_name(wire: str, streamed: bool) -> None:
    adapter = create_wire_adapter(wire)
    body = _body(wire, [UserMessage(content="go")],
                 [ToolDefinition(name="mcp:fs/read file"), ToolDefinition(name="plain")],
                 adapter=adapter)
    wire_name, plain = _sent_names(wire, body)["tools"]
    assert re.fullmatch(PATTERN[wire], wire_name) and plain == "plain"
    for sent, canonical in ((wire_name, "mcp:fs/read file"), (plain, "plain")):
        if streamed:
            turn = collect_turn(decode_stream(adapter, [_stream(wire, sent)]))
        else:
            turn = adapter.parse_response(json.dumps(_RESPONSES[wire](sent)).encode())
        assert [c.name for c in turn.tool_calls] == [canonical]
    # A name this adapter never sent under a wire name is read as it is.
    assert adapter.parse_response(json.dumps(_RESPONSES[wire]("other_x")).encode()) \
        .tool_calls[0].name == "other_x"


@pytest.mark.parametrize("wire", WIRE_NAMES)
def test_a_decoder_made_before_the_request_still_maps_back(wire: str) -> None:
    adapter = create_wire_adapter(wire)
    decoder = adapter.stream_decoder()
    body = _body(wire, [UserMessage(content="go")], [ToolDefinition(name="a b")], adapter=adapter)
    (sent,) = _sent_names(wire, body)["tools"]
    stream = WireStream(decoder)
    turn = collect_turn([*stream.feed(_stream(wire, sent)), *stream.end()])
    assert [c.name for c in turn.tool_calls] == ["a b"]


@pytest.mark.parametrize("wire", WIRE_NAMES)
def test_the_next_turn_sends_the_mapped_call_under_the_same_wire_name(wire: str) -> None:
    adapter = create_wire_adapter(wire)
    tools = [ToolDefinition(name="ns:tool/x")]
    first = _body(wire, [UserMessage(content="go")], tools, adapter=adapter)
    (wire_name,) = _sent_names(wire, first)["tools"]
    assert wire_name != "ns:tool/x"
    turn = adapter.parse_response(json.dumps(_RESPONSES[wire](wire_name)).encode())
    assert turn.tool_calls[0].name == "ns:tool/x"
    history = [UserMessage(content="go"), turn.to_message(),
               ToolMessage(tool_call_id=turn.tool_calls[0].id, content="done")]
    sent = _sent_names(wire, _body(wire, history, tools, adapter=adapter))
    assert sent["calls"] == [wire_name] and sent["tools"] == [wire_name]


class _Reply:
    def __init__(self, body: bytes, status: int = 200) -> None:
        self.status = status
        self.headers: tuple[tuple[str, str], ...] = ()
        self._body = body

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        yield self._body


class _CallingTransport:
    """A provider that calls the first tool of each request by the name the request sent, and
    refuses a name outside its pattern with a 400, as the real ones do."""

    def __init__(self, wire: str) -> None:
        self.wire = wire

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Reply]:
        name = _sent_names(self.wire, msgspec.json.decode(request.body))["tools"][0]
        if not re.fullmatch(PATTERN[self.wire], name):
            yield _Reply(b'{"error": {"message": "tools.0.name: String should match pattern"}}',
                         status=400)
            return
        yield _Reply(_stream(self.wire, name) if request.stream
                     else json.dumps(_RESPONSES[self.wire](name)).encode())


@pytest.mark.parametrize("wire", WIRE_NAMES)
@pytest.mark.parametrize("stream", [False, True])
def test_a_model_adapter_hands_the_loop_the_canonical_name(wire: str, stream: bool) -> None:
    model = ModelAdapter(create_wire_adapter(wire), _CallingTransport(wire),
                         WireOptions(model="m", stream=stream), budgets=_NO_BUDGETS)
    tools = [ToolDefinition(name="github:create issue")]
    turn = anyio.run(model.complete, [UserMessage(content="go")], ModelRequest(tools=tuple(tools)))
    assert [c.name for c in turn.tool_calls] == ["github:create issue"]


_ANY_NAME = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=150)


@pytest.mark.parametrize("wire", WIRE_NAMES)
@given(names=st.lists(_ANY_NAME, min_size=1, max_size=6, unique=True))
@settings(max_examples=60, deadline=None)
def test_any_names_map_to_distinct_wire_names_that_fit(wire: str, names: list[str]) -> None:
    sent = _sent_names(wire, _body(wire, [UserMessage(content="x")],
                                   [ToolDefinition(name=n) for n in names]))["tools"]
    assert len(sent) == len(set(sent)) == len(names)
    for name, out in zip(names, sent):
        assert re.fullmatch(PATTERN[wire], out)
        if re.fullmatch(PATTERN[wire], name):
            assert out == name


def test_two_names_that_would_go_out_as_one_are_refused() -> None:
    adapter = create_wire_adapter("openai_chat")
    body = _body("openai_chat", [UserMessage(content="x")], [ToolDefinition(name="a:b")],
                 adapter=adapter)
    (wire_name,) = _sent_names("openai_chat", body)["tools"]
    with pytest.raises(WireRequestError, match="rename one"):
        adapter.build_request([UserMessage(content="x")],
                              [ToolDefinition(name="a:b"), ToolDefinition(name=wire_name)],
                              WireOptions(model="m"))


# -- valid input keeps its bytes ------------------------------------------------------------------

_TOOLS = [ToolDefinition(name="get_weather", description="Weather.", parameters={
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    ToolDefinition(name="search-docs_v2", strict=True)]
_MESSAGES: list[Message] = [
    SystemMessage(content="You are terse."),
    UserMessage(content=(TextPart(text="Weather in Paris? See the chart."),
                         ImagePart(data="iVBORw0KGgo=", media_type="image/png"),
                         FilePart(data="JVBERi0xLjQK", media_type="application/pdf",
                                  filename="report.pdf"))),
    AssistantMessage(content=(ReasoningPart(text="Need weather.", provider="anthropic",
                                            signature="sig1"),
                              ReasoningPart(text="plan", provider="openai", id="rs_1",
                                            encrypted_content="enc1"),
                              ReasoningPart(text="g", provider="google", signature="gs"),
                              TextPart(text="Checking.")),
                     tool_calls=(ToolCall(id="call_1", name="get_weather",
                                          arguments='{"city":"Paris"}'),
                                 ToolCall(id="call_2", name="search-docs_v2", arguments="{}"))),
    ToolMessage(tool_call_id="call_1", name="get_weather", content="18C, clear"),
    ToolMessage(tool_call_id="call_2", name="search-docs_v2", content="none", is_error=True),
    AssistantMessage(content="It is 18C and clear."),
    UserMessage(content="And tomorrow?"),
]
_OPTIONS = [
    WireOptions(model="m"),
    WireOptions(model="m", stream=True, max_tokens=512, tool_choice=ForcedTool(name="get_weather"),
                cache=CachePolicy(key="k")),
    WireOptions(model="m", tool_choice="required", reasoning=ReasoningOptions(budget_tokens=1024)),
]
# sha256[:16] of each body as built before names were mapped (main at cc0f757).
_BEFORE = {
    "openai_chat/0": "1a9173a533ae2f96", "openai_chat/1": "b86d954cb3789e65",
    "openai_chat/2": "e028e83304b99f98", "openai_responses/0": "c454d7add3dbde9e",
    "openai_responses/1": "de13a3dcb43befee", "openai_responses/2": "721449c787b1d86e",
    "anthropic/0": "3a233598e9824c68", "anthropic/1": "cf7adc29490be177",
    "anthropic/2": "fd8e4aca6bca288d", "gemini/0": "75c67b6c55d9072c",
    "gemini/1": "bf00d2cd1024c1d7", "gemini/2": "32c8c299e68a1c9a",
}


@pytest.mark.parametrize("key", sorted(_BEFORE))
def test_a_valid_request_keeps_its_bytes(key: str) -> None:
    wire, index = key.split("/")
    body = create_wire_adapter(wire).build_request(_MESSAGES, _TOOLS, _OPTIONS[int(index)]).body
    assert hashlib.sha256(body).hexdigest()[:16] == _BEFORE[key]


@pytest.mark.parametrize("wire", WIRE_NAMES)
@given(messages=transcripts())
@settings(max_examples=60, deadline=None)
def test_valid_names_and_ids_pass_through_unchanged(wire: str, messages: list[Message]) -> None:
    """Names that fit the wire go out as they are, and no wire name is minted for them (the
    strategies' names fit every wire but Gemini, which wants a letter or ``_`` first)."""
    adapter = create_wire_adapter(wire)
    try:
        body = _body(wire, messages, _TOOLS, adapter=adapter)
    except WireRequestError:
        return  # input this wire cannot carry (covered by the schema property)
    sent = _sent_names(wire, body)
    canonical = [c.name for m in messages if isinstance(m, AssistantMessage)
                 for c in m.tool_calls]
    assert sent["tools"] == [t.name for t in _TOOLS]
    fits = [n for n in canonical if re.fullmatch(PATTERN[wire], n)]
    assert sorted(n for n in sent["calls"] if n in fits) == sorted(fits)
    if len(fits) == len(canonical):
        assert sorted(sent["calls"]) == sorted(canonical)
        assert not adapter._names._back  # no wire name was ever minted


# -- C2: blank text on Anthropic ------------------------------------------------------------------

def test_anthropic_leaves_blank_text_out_of_user_turns_and_tool_results() -> None:
    messages: list[Message] = [
        SystemMessage(content="rules"), SystemMessage(content=" \n"),
        UserMessage(content=(TextPart(text="look"), TextPart(text="  \n"), TextPart(text=""))),
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="t"), ToolCall(id="c2", name="t"))),
        ToolMessage(tool_call_id="c1", content="   "),
        ToolMessage(tool_call_id="c2", content=(
            TextPart(text=" "), ImagePart(data="iVBORw0KGgo=", media_type="image/png"))),
        UserMessage(content="\t"),
        AssistantMessage(content=(TextPart(text=" \n"), TextPart(text="fine"))),
        UserMessage(content="next"),
    ]
    body = _body("anthropic", messages, options=WireOptions(model="m", cache=CachePolicy()))
    assert [b["text"] for b in body["system"]] == ["rules"]
    blocks = [b for m in body["messages"] for b in m["content"]]
    texts = [b["text"] for b in blocks if b["type"] == "text"]
    assert texts == ["look", "fine", "next"]
    results = [b for b in blocks if b["type"] == "tool_result"]
    assert "content" not in results[0]  # a blank result goes without content
    assert [c["type"] for c in results[1]["content"]] == ["image"]
    for b in blocks:  # the cache mark never lands on blank text
        if "cache_control" in b and b["type"] == "text":
            assert b["text"].strip()
    marked = [b for b in blocks if "cache_control" in b]
    assert marked and all(b["type"] != "text" or b["text"].strip() for b in marked)


def test_anthropic_drops_a_user_message_left_empty_and_refuses_an_empty_request() -> None:
    body = _body("anthropic", [UserMessage(content="hi"), AssistantMessage(content="yo"),
                               UserMessage(content="  "), AssistantMessage(content="more")])
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    assert [b["text"] for b in body["messages"][1]["content"]] == ["yo", "more"]
    with pytest.raises(WireRequestError, match="messages"):
        _body("anthropic", [SystemMessage(content="sys"), UserMessage(content=" ")])


# -- C3: files on Anthropic -----------------------------------------------------------------------

def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_anthropic_sends_each_file_as_the_block_its_media_type_allows() -> None:
    parts = (FilePart(data=_b64(b"%PDF-1.4"), media_type="application/pdf", filename="a.pdf"),
             FilePart(data=_b64("notes: café".encode()), media_type="text/plain",
                      filename="n.txt"),
             FilePart(data="iVBORw0KGgo=", media_type="image/png"),
             FilePart(url="https://example.test/x.png", media_type="image/png"),
             FilePart(url="https://example.test/doc.pdf"),
             FilePart(file_id="file_1"))
    blocks = _body("anthropic", [UserMessage(content=parts)])["messages"][0]["content"]
    assert blocks[0] == {"type": "document", "title": "a.pdf", "source": {
        "type": "base64", "media_type": "application/pdf", "data": _b64(b"%PDF-1.4")}}
    assert blocks[1] == {"type": "document", "title": "n.txt", "source": {
        "type": "text", "media_type": "text/plain", "data": "notes: café"}}
    assert blocks[2] == {"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    assert blocks[3] == {"type": "image", "source": {"type": "url",
                                                     "url": "https://example.test/x.png"}}
    assert blocks[4]["source"] == {"type": "url", "url": "https://example.test/doc.pdf"}
    assert blocks[5]["source"] == {"type": "file", "file_id": "file_1"}


@pytest.mark.parametrize("part", [
    FilePart(data=_b64(b"PK\x03\x04"), media_type="application/zip"),
    FilePart(data=_b64(b"a,b"), media_type="text/csv"),
    FilePart(data=_b64(b"\xff\xfe"), media_type="text/plain"),  # not UTF-8
    FilePart(url="https://example.test/a.docx", media_type="application/msword"),
    ImagePart(data="AAAA", media_type="image/bmp"),
    ImagePart(data="AAAA", media_type="application/pdf"),
])
def test_anthropic_refuses_a_file_it_has_no_block_for(part: FilePart | ImagePart) -> None:
    with pytest.raises(WireRequestError, match="media_type|UTF-8"):
        _body("anthropic", [UserMessage(content=(part,))])


# -- C4: long Responses call ids ------------------------------------------------------------------

def test_responses_shortens_long_call_ids_alike_for_the_call_and_its_output() -> None:
    long_a, long_b = "x" * 50 + "a" * 30, "x" * 50 + "b" * 30  # same 47-character prefix
    messages: list[Message] = [UserMessage(content="go"), AssistantMessage(tool_calls=(
        ToolCall(id=long_a, name="t"), ToolCall(id=long_b, name="t"),
        ToolCall(id="short", name="t"))),
        ToolMessage(tool_call_id=long_a, content="1"), ToolMessage(tool_call_id=long_b, content="2"),
        ToolMessage(tool_call_id="short", content="3")]
    items = _body("openai_responses", messages)["input"]
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert calls == outputs
    assert all(len(c) <= 64 for c in calls) and len(set(calls)) == 3
    assert calls[2] == "short"
    assert _body("openai_responses", messages)["input"] == items  # deterministic


def test_anthropic_sends_other_providers_call_ids_under_plain_ones() -> None:
    odd = ["functions.get_weather:0", "call|7", "a" * 10]
    messages: list[Message] = [UserMessage(content="go"), AssistantMessage(tool_calls=tuple(
        ToolCall(id=i, name="t") for i in odd)),
        *[ToolMessage(tool_call_id=i, content="r") for i in odd]]
    blocks = [b for m in _body("anthropic", messages)["messages"] for b in m["content"]]
    uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
    assert uses == results and len(set(uses)) == 3
    assert all(re.fullmatch(r"[a-zA-Z0-9_-]+", i) for i in uses)
    assert uses[2] == "a" * 10


def test_chat_shortens_call_ids_over_40_alike_for_the_call_and_its_result() -> None:
    long_a, long_b = "toolu_" + "a" * 40, "toolu_" + "b" * 40
    messages: list[Message] = [UserMessage(content="go"), AssistantMessage(tool_calls=(
        ToolCall(id=long_a, name="t"), ToolCall(id=long_b, name="t"),
        ToolCall(id="call_abc", name="t"))),
        *[ToolMessage(tool_call_id=i, content="r") for i in (long_a, long_b, "call_abc")]]
    sent = _body("openai_chat", messages)["messages"]
    calls = [c["id"] for c in sent[1]["tool_calls"]]
    results = [m["tool_call_id"] for m in sent[2:]]
    assert calls == results and len(set(calls)) == 3
    assert all(len(c) <= 40 for c in calls) and calls[2] == "call_abc"


# -- C5: compaction blocks need the beta ----------------------------------------------------------

def test_a_compaction_block_goes_back_only_with_the_compaction_beta() -> None:
    block = {"type": "compaction", "content": "<summary>so far</summary>"}
    history: list[Message] = [
        UserMessage(content="hi"),
        AssistantMessage(content=(ProviderItemPart(wire="anthropic", kind="compaction",
                                                   data=json.dumps(block)),
                                  TextPart(text="ok"))),
        UserMessage(content="next")]

    def kinds(adapter: AnthropicAdapter) -> list[str]:
        return [b["type"] for b in _body("anthropic", history, adapter=adapter)
                ["messages"][1]["content"]]

    assert kinds(AnthropicAdapter()) == ["text"]
    assert kinds(AnthropicAdapter(beta=("compact-2026-01-12",))) == ["compaction", "text"]


# -- lone surrogates ------------------------------------------------------------------------------

@pytest.mark.parametrize("wire", WIRE_NAMES)
def test_a_lone_surrogate_is_a_typed_error_naming_where_it_sits(wire: str) -> None:
    with pytest.raises(WireRequestError, match=r"lone surrogate") as caught:
        _body(wire, [UserMessage(content="hi \udc80")])
    assert "content" in str(caught.value) or "text" in str(caught.value)
    history: list[Message] = [
        UserMessage(content="hi"),
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="t", arguments='{"a": "\ud800"}'),)),
        ToolMessage(tool_call_id="c1", name="t", content="ok")]
    with pytest.raises(WireRequestError, match=r"(arguments|_raw_arguments).*lone surrogate"):
        _body(wire, history)


# -- usage: passes of another model ---------------------------------------------------------------

_ADVISED = {
    "model": "claude-sonnet-x", "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "done"}],
    "usage": {"input_tokens": 2000, "output_tokens": 300, "cache_read_input_tokens": 0,
              "cache_creation_input_tokens": 0, "iterations": [
                  {"type": "compaction", "input_tokens": 400, "output_tokens": 100,
                   "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
                  {"type": "message", "input_tokens": 1000, "output_tokens": 50,
                   "cache_read_input_tokens": 10, "cache_creation_input_tokens": 4},
                  {"type": "advisor_message", "model": "claude-opus-4-7", "input_tokens": 2728,
                   "output_tokens": 500, "cache_read_input_tokens": 0,
                   "cache_creation_input_tokens": 0},
                  {"type": "message", "input_tokens": 1000, "output_tokens": 250,
                   "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}]}}


def _advised_usage(streamed: bool) -> TurnUsage:
    adapter = AnthropicAdapter()
    if not streamed:
        return adapter.parse_response(json.dumps(_ADVISED).encode()).usage
    start = {**_ADVISED, "content": [], "stop_reason": None}
    blob = _sse({"type": "message_start", "message": start},
                {"type": "content_block_start", "index": 0,
                 "content_block": {"type": "text", "text": "done"}},
                {"type": "content_block_stop", "index": 0},
                {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                 "usage": _ADVISED["usage"]},
                {"type": "message_stop"})
    return collect_turn(decode_stream(adapter, [blob])).usage


@pytest.mark.parametrize("streamed", [False, True])
def test_an_advisor_pass_is_kept_apart_from_the_executors_totals(streamed: bool) -> None:
    usage = _advised_usage(streamed)
    # The executor's passes (compaction included) are the totals; the advisor's are not.
    assert (usage.input_tokens, usage.output_tokens) == (400 + 1014 + 1000, 100 + 50 + 250)
    assert usage.cached_input_tokens == 10 and usage.cache_write_tokens == 4
    advisor = [p for p in usage.iterations if p.model is not None]
    assert [(p.kind, p.model, p.input_tokens, p.output_tokens) for p in advisor] == \
        [("advisor_message", "claude-opus-4-7", 2728, 500)]
    assert [p.model for p in usage.iterations].count(None) == 3


def test_price_by_model_bills_each_pass_at_its_models_rate() -> None:
    usage = _advised_usage(False)
    price_by_model = contracts.price_by_model

    def rate(per_in: int, per_out: int) -> Any:
        return lambda u: u.input_tokens * per_in + u.output_tokens * per_out

    price = price_by_model(rate(3, 15), {"claude-opus-4-7": rate(5, 25)})
    assert price(usage) == 2414 * 3 + 400 * 15 + 2728 * 5 + 500 * 25
    with pytest.raises(UsageError, match="claude-opus-4-7"):
        price_by_model(rate(3, 15))(usage)
    assert price_by_model(rate(3, 15), default=rate(1, 1))(usage) == \
        2414 * 3 + 400 * 15 + 2728 + 500
    # A call and its retry billed together keep each model's passes apart.
    both = add_usage(usage, usage)
    assert price(both) == 2 * price(usage)


def test_a_pass_naming_the_messages_own_model_is_the_calls_own() -> None:
    body = json.loads(json.dumps(_ADVISED))
    body["usage"]["iterations"][2]["model"] = "claude-sonnet-x"
    usage = AnthropicAdapter().parse_response(json.dumps(body).encode()).usage
    assert usage.input_tokens == 2414 + 2728
    assert all(p.model is None for p in usage.iterations)


def test_usage_iteration_model_is_omitted_from_json_while_unset() -> None:
    assert b"model" not in msgspec.json.encode(UsageIteration(kind="message", input_tokens=1))


# -- Gemini thinking levels -----------------------------------------------------------------------

@pytest.mark.parametrize("effort", ["minimal", "low", "medium", "high"])
def test_gemini_sends_each_thinking_level_as_asked(effort: str) -> None:
    options = WireOptions(model="gemini-3", reasoning=ReasoningOptions(effort=effort))  # type: ignore[arg-type]
    body = _body("gemini", [UserMessage(content="x")], options=options, adapter=GeminiAdapter())
    assert body["generationConfig"]["thinkingConfig"]["thinkingLevel"] == effort
