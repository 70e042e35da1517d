"""Requests: every body we build validates against the provider's published request schema (the
official SDKs' TypedDicts, generated from the OpenAPI specs), and reading the body back — as the
provider would — preserves text, tool calls, tool results and the reasoning blocks the target
accepts."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.contracts import (
    AssistantMessage,
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from bindloop.transcript import sanitize_history_for_provider
from bindloop.wire import (
    WIRE_NAMES,
    AnthropicAdapter,
    ForcedTool,
    GeminiAdapter,
    JsonSchemaFormat,
    OpenAIChatAdapter,
    OpenAIResponsesAdapter,
    ReasoningOptions,
    WireOptions,
    WireRequestError,
    create_wire_adapter,
)

from .wire_sdk_schema import errors
from .wire_strategies import transcripts

TOOLS = [
    ToolDefinition(name="get_weather", description="Weather for a place.",
                   parameters={"type": "object", "properties": {
                       "location": {"type": ["string", "null"]},
                       "unit": {"type": "string", "enum": ["c", "f"]}},
                       "required": ["location"], "$schema": "x"}),
    ToolDefinition(name="noop", strict=True),
]
_TARGET = {"openai_chat": "openai", "openai_responses": "openai", "anthropic": "anthropic",
           "gemini": "google"}


def _schemas() -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    try:
        from openai.types.chat import completion_create_params as chat
        from openai.types.responses import response_create_params as responses
        out["openai_chat"] = [chat.CompletionCreateParamsNonStreaming,
                              chat.CompletionCreateParamsStreaming]
        out["openai_responses"] = [responses.ResponseCreateParamsNonStreaming,
                                   responses.ResponseCreateParamsStreaming]
    except ImportError:  # pragma: no cover - the SDKs are test dependencies
        pass
    try:
        from anthropic.types import message_create_params as anthropic
        out["anthropic"] = [anthropic.MessageCreateParamsNonStreaming,
                            anthropic.MessageCreateParamsStreaming]
    except ImportError:  # pragma: no cover
        pass
    return out


SCHEMAS = _schemas()
OPTIONS = st.builds(
    WireOptions, model=st.just("model-x"), stream=st.booleans(),
    max_tokens=st.one_of(st.none(), st.integers(1, 4096)),
    tool_choice=st.sampled_from([None, "auto", "none", "required", ForcedTool(name="noop")]),
    response_format=st.sampled_from([None, JsonSchemaFormat(
        name="answer", schema={"type": "object", "properties": {"a": {"type": "string"}},
                               "required": ["a"], "additionalProperties": False})]),
    reasoning=st.sampled_from([None, ReasoningOptions(effort="low"),
                               ReasoningOptions(budget_tokens=2048, summary="auto")]),
)


@pytest.mark.parametrize("wire", sorted(SCHEMAS))
@given(messages=transcripts(), options=OPTIONS)
@settings(max_examples=100, deadline=None)
def test_requests_validate_against_the_published_schema(wire: str, messages: list[Message],
                                                         options: WireOptions) -> None:
    request = create_wire_adapter(wire).build_request(messages, TOOLS, options)
    body = msgspec.json.decode(request.body)
    schema = SCHEMAS[wire][1 if options.stream else 0]
    assert errors(body, schema) == []


def test_schema_checker_can_fail() -> None:
    schema = SCHEMAS["openai_chat"][0]
    assert errors({"model": "m", "messages": [], "bogus": 1}, schema)
    assert errors({"model": "m"}, schema)
    assert errors({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, schema)


# -- the provider's reading of our request ------------------------------------------------------

def _val(arguments: str) -> object:
    return json.loads(arguments)


def expected_flow(messages: list[Message], wire: str) -> list[tuple[Any, ...]]:
    """The conversation as a flat list of facts a provider must see, after the reasoning policy."""
    out: list[tuple[Any, ...]] = []
    for m in sanitize_history_for_provider(messages, _TARGET[wire]):  # type: ignore[arg-type]
        if isinstance(m, SystemMessage):
            if not (wire == "anthropic" and isinstance(m.content, str) and not m.content.strip()):
                out.append(("system", m.content))
        elif isinstance(m, UserMessage):
            parts = (TextPart(text=m.content),) if isinstance(m.content, str) else m.content
            out += [("text", "user", p.text) if isinstance(p, TextPart) else ("image",)
                    for p in parts if not (wire == "anthropic" and _blank(p))]
        elif isinstance(m, AssistantMessage):
            parts = (TextPart(text=m.content),) if isinstance(m.content, str) else (m.content or ())
            for p in parts:
                if isinstance(p, ReasoningPart):
                    fact = _reasoning_fact(p, wire)
                    if fact is not None:
                        out.append(fact)
            text = "".join(p.text for p in parts
                           if isinstance(p, TextPart) and not (wire == "anthropic" and _blank(p)))
            if text:
                out.append(("text", "assistant", text))
            out += [("call", c.id, c.name, _val(c.arguments)) for c in m.tool_calls]
        elif isinstance(m, ToolMessage):
            error = m.is_error if wire in ("anthropic", "gemini") else None
            content = m.content
            if wire == "anthropic" and isinstance(content, str) and not content.strip():
                content = None  # the API refuses blank text: the result goes without content
            out.append(("result", m.tool_call_id, content, error))
    if wire in ("anthropic", "gemini"):  # system is lifted out of the conversation
        out = [f for f in out if f[0] != "system"] + [f for f in out if f[0] == "system"]
    if wire == "anthropic":
        out = _results_lead_user_turns(out)
    return out


def _blank(p: object) -> bool:
    """Text Anthropic refuses as a block (empty or whitespace only), which its wire leaves out."""
    return isinstance(p, TextPart) and not p.text.strip()


def _user_side(fact: tuple[Any, ...]) -> bool:
    return fact[0] in ("result", "image") or fact[:2] == ("text", "user")


def _results_lead_user_turns(facts: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Anthropic merges a run of user-side messages into one user turn, whose tool results must
    come first: within each run, results move to the front, keeping their order."""
    out: list[tuple[Any, ...]] = []
    run: list[tuple[Any, ...]] = []
    for fact in [*facts, ("end",)]:
        if _user_side(fact):
            run.append(fact)
            continue
        out += [f for f in run if f[0] == "result"] + [f for f in run if f[0] != "result"]
        run = []
        if fact != ("end",):
            out.append(fact)
    return out


def _reasoning_fact(p: ReasoningPart, wire: str) -> tuple[Any, ...] | None:
    if wire == "openai_chat":
        return None
    if wire == "openai_responses":
        # The item id is part of the fact: without it the provider cannot continue the reasoning.
        return (("reasoning", p.text, p.encrypted_content, p.id) if p.id and p.encrypted_content
                else None)
    if wire == "anthropic":
        return ("redacted", p.data) if p.redacted else ("reasoning", p.text, p.signature)
    return ("reasoning", p.text, p.signature) if p.text else ("signature", p.signature)


def echo(wire: str, body: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Read a request body back into the same facts, the way the provider interprets it."""
    out: list[tuple[Any, ...]] = []
    if wire == "openai_chat":
        for m in body["messages"]:
            if m["role"] == "system":
                out.append(("system", m["content"]))
            elif m["role"] == "user":
                c = m["content"]
                out += [("text", "user", c)] if isinstance(c, str) else [
                    ("text", "user", p["text"]) if p["type"] == "text" else ("image",) for p in c]
            elif m["role"] == "assistant":
                if m.get("content"):
                    out.append(("text", "assistant", m["content"]))
                out += [("call", c["id"], c["function"]["name"], _val(c["function"]["arguments"]))
                        for c in m.get("tool_calls", ())]
            else:
                out.append(("result", m["tool_call_id"], m["content"], None))
    elif wire == "openai_responses":
        for item in body["input"]:
            kind = item.get("type")
            if kind == "reasoning":
                out.append(("reasoning", "".join(s["text"] for s in item["summary"]),
                            item.get("encrypted_content"), item["id"]))
            elif kind == "function_call":
                out.append(("call", item["call_id"], item["name"], _val(item["arguments"])))
            elif kind == "function_call_output":
                out.append(("result", item["call_id"], item["output"], None))
            elif item["role"] == "system":
                out.append(("system", item["content"]))
            else:
                c = item["content"]
                out += [("text", item["role"], c)] if isinstance(c, str) else [
                    ("text", "user", p["text"]) if p["type"] == "input_text" else ("image",)
                    for p in c]
    elif wire == "anthropic":
        for m in body["messages"]:
            for b in m["content"]:
                t = b["type"]
                if t == "text":
                    out.append(("text", m["role"], b["text"]))
                elif t == "image":
                    out.append(("image",))
                elif t == "thinking":
                    out.append(("reasoning", b["thinking"], b["signature"]))
                elif t == "redacted_thinking":
                    out.append(("redacted", b["data"]))
                elif t == "tool_use":
                    out.append(("call", b["id"], b["name"], b["input"]))
                elif t == "tool_result":
                    out.append(("result", b["tool_use_id"], b.get("content"),
                                b.get("is_error", False)))
        out += [("system", s["text"]) for s in body.get("system", ())]
    else:
        for c in body["contents"]:
            role = "user" if c["role"] == "user" else "assistant"
            texts = [p for p in c["parts"] if "text" in p and not p.get("thought") and p["text"]]
            signatures = [p["thoughtSignature"] for p in c["parts"]
                          if "thoughtSignature" in p and not p.get("thought")]
            for p in c["parts"]:
                if p.get("thought"):
                    out.append(("reasoning", p["text"], p.get("thoughtSignature")))
            out += [("signature", s) for s in signatures]
            if role == "assistant" and texts:
                out.append(("text", role, "".join(p["text"] for p in texts)))
            for p in c["parts"]:
                if role == "user" and "text" in p:
                    out.append(("text", "user", p["text"]))
                elif "inlineData" in p:
                    out.append(("image",))
                elif "functionCall" in p:
                    fc = p["functionCall"]
                    out.append(("call", fc["id"], fc["name"], fc["args"]))
                elif "functionResponse" in p:
                    fr = p["functionResponse"]
                    key = "error" if "error" in fr["response"] else "output"
                    out.append(("result", fr["id"], fr["response"][key], key == "error"))
        out += [("system", s["text"]) for s in body.get("systemInstruction", {}).get("parts", ())]
    return out


@pytest.mark.parametrize("wire", WIRE_NAMES)
@given(messages=transcripts())
@settings(max_examples=120, deadline=None)
def test_provider_reads_back_what_we_sent(wire: str, messages: list[Message]) -> None:
    body = msgspec.json.decode(create_wire_adapter(wire).build_request(
        messages, TOOLS, WireOptions(model="m")).body)
    got, want = echo(wire, body), expected_flow(messages, wire)
    if wire == "gemini":
        # Signature-only blocks are reattached to the turn's first call: compare them as a set.
        assert sorted(f for f in got if f[0] == "signature") == \
            sorted(f for f in want if f[0] == "signature")
        got = [f for f in got if f[0] != "signature"]
        want = [f for f in want if f[0] != "signature"]
    assert got == want


@given(messages=transcripts())
@settings(max_examples=120, deadline=None)
def test_anthropic_user_turns_open_with_their_tool_results(messages: list[Message]) -> None:
    """The Messages API refuses a user turn in which a tool_result follows other content; the
    transcripts include user text sent between a tool_use and its result, which lands there."""
    body = msgspec.json.decode(AnthropicAdapter().build_request(
        messages, TOOLS, WireOptions(model="m")).body)
    for turn in body["messages"]:
        kinds = [b["type"] for b in turn["content"]]
        if turn["role"] == "user" and "tool_result" in kinds:
            first_other = next((i for i, k in enumerate(kinds) if k != "tool_result"), len(kinds))
            assert "tool_result" not in kinds[first_other:], kinds


# -- wire-specific shapes -----------------------------------------------------------------------

CONVERSATION: list[Message] = [
    SystemMessage(content="sys one"),
    UserMessage(content="weather in Paris and the time?"),
    AssistantMessage(content=(
        ReasoningPart(text="think", provider="anthropic", signature="sigA"),
        ReasoningPart(text="foreign", provider="openai", encrypted_content="enc", id="rs_1"),
        TextPart(text="checking"),
    ), tool_calls=(ToolCall(id="c1", name="get_weather", arguments='{"location":"Paris"}'),
                   ToolCall(id="c2", name="noop", arguments="{}"))),
    ToolMessage(tool_call_id="c1", content="sunny"),
    ToolMessage(tool_call_id="c2", content="boom", is_error=True),
    UserMessage(content="thanks"),
    SystemMessage(content="sys two"),
]


def _body(adapter: Any, options: WireOptions | None = None) -> dict[str, Any]:
    req = adapter.build_request(CONVERSATION, TOOLS, options or WireOptions(model="m"))
    assert all(k.lower() not in ("authorization", "x-api-key", "x-goog-api-key")
               for k, _ in req.headers)
    return msgspec.json.decode(req.body)  # type: ignore[no-any-return]


def test_anthropic_lifts_system_groups_results_and_keeps_only_its_own_signatures() -> None:
    body = _body(AnthropicAdapter())
    assert body["system"] == [{"type": "text", "text": "sys one"},
                              {"type": "text", "text": "sys two"}]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assistant = body["messages"][1]["content"]
    assert assistant[0] == {"type": "thinking", "thinking": "think", "signature": "sigA"}
    assert [b["type"] for b in assistant] == ["thinking", "text", "tool_use", "tool_use"]
    results = body["messages"][2]["content"]
    assert [b["type"] for b in results] == ["tool_result", "tool_result", "text"]
    assert results[1]["is_error"] is True and "is_error" not in results[0]
    assert body["max_tokens"] == 4096
    headers = dict(AnthropicAdapter().build_request(CONVERSATION, TOOLS,
                                                    WireOptions(model="m")).headers)
    assert headers["anthropic-version"] == "2023-06-01"


def test_anthropic_tool_choice_and_thinking_options() -> None:
    body = _body(AnthropicAdapter(), WireOptions(
        model="m", tool_choice="required", parallel_tool_calls=False,
        reasoning=ReasoningOptions(budget_tokens=5000)))
    assert body["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 5000}
    with pytest.raises(WireRequestError):
        _body(AnthropicAdapter(), WireOptions(model="m", temperature=0.2))


def test_gemini_contents_system_instruction_and_function_responses() -> None:
    body = _body(GeminiAdapter(), WireOptions(model="gemini-x", tool_choice=ForcedTool(name="noop"),
                                              response_format=JsonSchemaFormat(
                                                  name="a", schema={"type": "object", "properties": {
                                                      "v": {"const": "x"},
                                                      "w": {"anyOf": [{"type": "string"},
                                                                      {"type": "null"}]}},
                                                      "additionalProperties": False})))
    assert body["systemInstruction"] == {"parts": [{"text": "sys one"}, {"text": "sys two"}]}
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    model = body["contents"][1]["parts"]
    # The Anthropic-signed block is dropped; the OpenAI one keeps its text, not its token.
    assert model[0] == {"text": "foreign", "thought": True}
    assert model[1] == {"text": "checking"}
    assert model[2]["functionCall"] == {"id": "c1", "name": "get_weather",
                                        "args": {"location": "Paris"}}
    responses = body["contents"][2]["parts"]
    assert responses[0]["functionResponse"] == {"id": "c1", "name": "get_weather",
                                                "response": {"output": "sunny"}}
    assert responses[1]["functionResponse"]["response"] == {"error": "boom"}
    decl = body["tools"][0]["functionDeclarations"]
    assert decl[0]["parameters"]["properties"]["location"] == {"type": "string", "nullable": True}
    assert "$schema" not in json.dumps(decl)
    assert body["toolConfig"] == {"functionCallingConfig": {"mode": "ANY",
                                                            "allowedFunctionNames": ["noop"]}}
    schema = body["generationConfig"]["responseSchema"]
    assert schema == {"type": "object", "properties": {"v": {"enum": ["x"]},
                                                       "w": {"type": "string", "nullable": True}}}
    req = GeminiAdapter().build_request(CONVERSATION, TOOLS, WireOptions(model="g", stream=True))
    assert req.path == "/v1beta/models/g:streamGenerateContent?alt=sse"


def test_gemini_signature_only_block_rides_on_the_first_call() -> None:
    messages: list[Message] = [
        UserMessage(content="x"),
        AssistantMessage(content=(ReasoningPart(provider="google", signature="g1"),),
                         tool_calls=(ToolCall(id="a", name="f"), ToolCall(id="b", name="f"))),
        ToolMessage(tool_call_id="a", content="1"), ToolMessage(tool_call_id="b", content="2"),
    ]
    body = msgspec.json.decode(GeminiAdapter().build_request(messages, [], WireOptions(model="g")).body)
    parts = body["contents"][1]["parts"]
    assert parts[0]["thoughtSignature"] == "g1" and "thoughtSignature" not in parts[1]


def test_responses_sends_reasoning_items_with_encrypted_content_only() -> None:
    body = _body(OpenAIResponsesAdapter(), WireOptions(
        model="o", reasoning=ReasoningOptions(effort="high", summary="auto")))
    kinds = [i.get("type", i.get("role")) for i in body["input"]]
    assert kinds == ["system", "user", "reasoning", "assistant", "function_call", "function_call",
                     "function_call_output", "function_call_output", "user", "system"]
    assert body["input"][2] == {"type": "reasoning", "id": "rs_1",
                                "summary": [{"type": "summary_text", "text": "foreign"}],
                                "encrypted_content": "enc"}
    assert body["include"] == ["reasoning.encrypted_content"] and body["store"] is False
    with pytest.raises(WireRequestError):
        _body(OpenAIResponsesAdapter(), WireOptions(model="o", stop=("x",)))


def test_chat_streaming_asks_for_usage_and_maps_options() -> None:
    body = _body(OpenAIChatAdapter(max_tokens_field="max_tokens"), WireOptions(
        model="g", stream=True, max_tokens=9, tool_choice=ForcedTool(name="noop"),
        parallel_tool_calls=False, stop=("END",), extra_body={"seed": 7}))
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 9 and body["stop"] == ["END"] and body["seed"] == 7
    assert body["tool_choice"] == {"type": "function", "function": {"name": "noop"}}
    assert body["tools"][1]["function"]["strict"] is True
    # reasoning blocks have no place on the chat wire
    assert "think" not in json.dumps(body)


def test_request_bytes_are_stable() -> None:
    for wire in WIRE_NAMES:
        a = create_wire_adapter(wire).build_request(CONVERSATION, TOOLS, WireOptions(model="m"))
        b = create_wire_adapter(wire).build_request(list(CONVERSATION), list(TOOLS),
                                                    WireOptions(model="m"))
        assert a.body == b.body


@pytest.mark.parametrize("wire", WIRE_NAMES)
def test_unencodable_parts_raise_typed_errors(wire: str) -> None:
    bad: list[Message] = [UserMessage(content=(ImagePart(),))]
    with pytest.raises(WireRequestError):
        create_wire_adapter(wire).build_request(bad, [], WireOptions(model="m"))


def test_files_per_wire() -> None:
    msgs: list[Message] = [UserMessage(content=(FilePart(data="JVBE", media_type="application/pdf",
                                                         filename="a.pdf"),))]
    chat = msgspec.json.decode(OpenAIChatAdapter().build_request(msgs, [], WireOptions(model="m")).body)
    assert chat["messages"][0]["content"][0] == {
        "type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE",
                                 "filename": "a.pdf"}}
    anth = msgspec.json.decode(AnthropicAdapter().build_request(msgs, [], WireOptions(model="m")).body)
    assert anth["messages"][0]["content"][0]["source"] == {
        "type": "base64", "media_type": "application/pdf", "data": "JVBE"}
