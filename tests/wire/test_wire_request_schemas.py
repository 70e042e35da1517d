"""Every request body the four wires build is one the provider's published request types accept
— or the build raises a typed :class:`~bindloop.wire.WireRequestError` that names the field.

The references, none written here: the official SDKs' request types (openai
``CompletionCreateParams`` / ``ResponseCreateParams``, anthropic ``MessageCreateParams``) made
strict for pydantic (``wire_strict_types``: ``extra="forbid"``, ``strict=True``, ``Iterable`` as
``list``); for Gemini, google-genai's ``Content`` / ``Tool`` / ``ToolConfig`` /
``GenerationConfig`` (which forbid unknown fields) under the documented top-level keys of
``models.generateContent``. Constraints the types do not carry are checked from the providers'
documentation: tool-name patterns, call ids (Chat: at most 40 characters, the API's 400;
Responses ``call_id``: at most 64, the spec), Anthropic's
refusal of blank text blocks (and of ``cache_control`` on them) and its ``tool_use`` id pattern.

Input: any transcript of :mod:`bindloop.testing.strategies` (every content part, reasoning,
files by URL, id or bytes of any media type), tools named anything, and any option set."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindloop.contracts import AssistantMessage, Message, ToolDefinition, ToolMessage
from bindloop.testing.strategies import transcripts
from bindloop.wire import (
    WIRE_NAMES,
    CachePolicy,
    ForcedTool,
    JsonSchemaFormat,
    ReasoningOptions,
    WireOptions,
    WireRequestError,
    create_wire_adapter,
)

from .wire_strict_types import strict_adapter

anthropic_params = pytest.importorskip("anthropic.types.message_create_params")
chat_params = pytest.importorskip("openai.types.chat.completion_create_params")
responses_params = pytest.importorskip("openai.types.responses.response_create_params")
genai = pytest.importorskip("google.genai.types")

_SDK = {
    "openai_chat": (chat_params.CompletionCreateParamsNonStreaming,
                    chat_params.CompletionCreateParamsStreaming),
    "openai_responses": (responses_params.ResponseCreateParamsNonStreaming,
                         responses_params.ResponseCreateParamsStreaming),
    "anthropic": (anthropic_params.MessageCreateParamsNonStreaming,
                  anthropic_params.MessageCreateParamsStreaming),
}
_OPENAI_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_GEMINI_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}")
# The v1beta REST reference of models.generateContent: the request body's fields.
_GEMINI_KEYS = frozenset({"contents", "tools", "toolConfig", "safetySettings",
                          "systemInstruction", "generationConfig", "cachedContent"})


def _problems(wire: str, body: dict[str, Any], stream: bool) -> list[str]:
    """What the references refuse in ``body`` (empty: accepted)."""
    out: list[str] = []
    if wire == "gemini":
        out += [f"unknown top-level field {k!r}" for k in body if k not in _GEMINI_KEYS]
        checks: list[tuple[str, Any, Any]] = [("systemInstruction", genai.Content,
                                               body.get("systemInstruction"))]
        checks += [(f"contents[{i}]", genai.Content, c) for i, c in enumerate(body["contents"])]
        checks += [(f"tools[{i}]", genai.Tool, t) for i, t in enumerate(body.get("tools", ()))]
        checks += [("toolConfig", genai.ToolConfig, body.get("toolConfig")),
                   ("generationConfig", genai.GenerationConfig, body.get("generationConfig"))]
        for where, model, value in checks:
            if value is None:
                continue
            try:
                model.model_validate(value)
            except Exception as exc:  # noqa: BLE001 - pydantic's ValidationError, reported
                out.append(f"{where}: {str(exc)[:400]}")
    else:
        try:
            strict_adapter(_SDK[wire][1 if stream else 0]).validate_python(body)
        except Exception as exc:  # noqa: BLE001
            out.append(str(exc)[:600])
    out += _documented(wire, body)
    return out


def _documented(wire: str, body: dict[str, Any]) -> list[str]:
    """The documented constraints the request types do not carry."""
    out: list[str] = []
    if wire == "openai_chat":
        names = [t["function"]["name"] for t in body.get("tools", ())]
        names += [c["function"]["name"] for m in body["messages"] for c in m.get("tool_calls", ())]
        out += [f"tool name {n!r}" for n in names if not _OPENAI_NAME.fullmatch(n)]
        ids = [c["id"] for m in body["messages"] for c in m.get("tool_calls", ())]
        ids += [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
        out += [f"tool call id of {len(i)} characters" for i in ids if len(i) > 40]
    elif wire == "openai_responses":
        names = [t["name"] for t in body.get("tools", ())]
        names += [i["name"] for i in body["input"] if i.get("type") == "function_call"]
        out += [f"tool name {n!r}" for n in names if not _OPENAI_NAME.fullmatch(n)]
        out += [f"call_id of {len(i['call_id'])} characters" for i in body["input"]
                if "call_id" in i and not 1 <= len(i["call_id"]) <= 64]
    elif wire == "anthropic":
        names = [t["name"] for t in body.get("tools", ())]
        blocks = [b for m in body["messages"] for b in m["content"]]
        for b in list(blocks):
            if b["type"] == "tool_result" and isinstance(b.get("content"), list):
                blocks += b["content"]
            elif b["type"] == "tool_result" and isinstance(b.get("content"), str):
                blocks.append({"type": "text", "text": b["content"]})
        names += [b["name"] for b in blocks if b["type"] == "tool_use"]
        out += [f"tool name {n!r}" for n in names if not _OPENAI_NAME.fullmatch(n)]
        out += [f"blank text block {b!r}" for b in [*blocks, *body.get("system", ())]
                if b["type"] == "text" and not b["text"].strip()]
        out += [f"tool_use id {b['id']!r}" for b in blocks
                if b["type"] == "tool_use" and not re.fullmatch(r"[a-zA-Z0-9_-]+", b["id"])]
        if not body["messages"]:
            out.append("no messages")
    else:
        names = [f["name"] for t in body.get("tools", ()) for f in t["functionDeclarations"]]
        names += [p[k]["name"] for c in body["contents"] for p in c["parts"]
                  for k in ("functionCall", "functionResponse") if k in p]
        out += [f"tool name {n!r}" for n in names if not _GEMINI_NAME.fullmatch(n)]
    return out


_NAME = st.one_of(st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True),
                  st.sampled_from(["ns:tool", "has space", "slash/name", "mcp__fs__read.file",
                                   "x" * 80, "9lives", "日本語"]),
                  st.text(max_size=20))
TOOLS = st.lists(st.builds(ToolDefinition, name=_NAME, description=st.sampled_from(["", "d"]),
                           strict=st.sampled_from([None, True])),
                 max_size=3, unique_by=lambda t: t.name)
_FORMAT = JsonSchemaFormat(name="answer", schema={
    "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
    "additionalProperties": False})


@st.composite
def options(draw: st.DrawFn, tools: list[ToolDefinition]) -> WireOptions:
    choices: list[Any] = [None, "auto", "none", "required"]
    choices += [ForcedTool(name=t.name) for t in tools]
    return WireOptions(
        model="model-x", stream=draw(st.booleans()),
        max_tokens=draw(st.none() | st.integers(1, 8192)),
        temperature=draw(st.none() | st.sampled_from([0.0, 0.7])),
        top_p=draw(st.none() | st.just(0.9)),
        stop=draw(st.sampled_from([(), ("END",)])),
        tool_choice=draw(st.sampled_from(choices)),
        parallel_tool_calls=draw(st.sampled_from([None, True, False])),
        response_format=draw(st.sampled_from([None, _FORMAT])),
        reasoning=draw(st.sampled_from([
            None, ReasoningOptions(effort="minimal"), ReasoningOptions(effort="medium"),
            ReasoningOptions(effort="high", summary="auto"),
            ReasoningOptions(budget_tokens=2048, include_thoughts=False)])),
        cache=draw(st.sampled_from([None, CachePolicy(), CachePolicy(key="k", retention="24h"),
                                    CachePolicy(turns=1, ttl="1h")])),
    )


# Call ids as other providers and gateways mint them (a mixed-route history).
_ID_STYLES = [lambda i: i, lambda i: f"functions.lookup:{i}", lambda i: "toolu_" + "x" * 70 + i,
              lambda i: f"call|{i}"]


def _reid(messages: list[Message], style: Any) -> list[Message]:
    replace = msgspec.structs.replace
    out: list[Message] = []
    for m in messages:
        if isinstance(m, AssistantMessage) and m.tool_calls:
            m = replace(m, tool_calls=tuple(replace(c, id=style(c.id)) for c in m.tool_calls))
        elif isinstance(m, ToolMessage):
            m = replace(m, tool_call_id=style(m.tool_call_id))
        out.append(m)
    return out


def _blanked(messages: list[Message], which: set[int], blank: str) -> list[Message]:
    """Some messages' text content made blank (empty or whitespace only), as a tool that printed
    nothing or a user who sent a newline leaves it."""
    replace = msgspec.structs.replace
    return [replace(m, content=blank) if i in which and isinstance(m.content, str) else m
            for i, m in enumerate(messages)]


@st.composite
def requests(draw: st.DrawFn) -> tuple[list[Message], list[ToolDefinition], WireOptions]:
    tools = draw(TOOLS)
    messages = _reid(draw(transcripts()), draw(st.sampled_from(_ID_STYLES)))
    which = draw(st.sets(st.integers(0, max(len(messages) - 1, 0)), max_size=3))
    messages = _blanked(messages, which, draw(st.sampled_from(["", " ", "\n\t"])))
    return messages, tools, draw(options(tools))


# The fields a typed refusal names (an option, or a part of the transcript by where it sits).
_NAMED = re.compile(r"temperature|top_p|stop|parallel|media_type|mimeType|content\[|messages|"
                    r"file part|file_id|image part|url|surrogate|tool result|tools|"
                    r"FilePart|ImagePart|ProviderItemPart|assistant message|system message")


@pytest.mark.parametrize("wire", WIRE_NAMES)
@given(request=requests())
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_body_validates_against_the_providers_request_types(
        wire: str, request: tuple[list[Message], list[ToolDefinition], WireOptions]) -> None:
    messages, tools, opts = request
    try:
        built = create_wire_adapter(wire).build_request(messages, tools, opts)
    except WireRequestError as exc:
        assert _NAMED.search(str(exc)), f"a refusal must name the field: {exc}"
        return
    body = msgspec.json.decode(built.body)
    assert _problems(wire, body, opts.stream) == []


@pytest.mark.parametrize("wire", WIRE_NAMES)
def test_the_checks_can_fail(wire: str) -> None:
    """The reference refuses what a provider refuses: an unknown key, a bad tool name."""
    built = create_wire_adapter(wire).build_request(
        [msgspec.convert({"role": "user", "content": "hi"}, type=Message)],
        [ToolDefinition(name="ok")], WireOptions(model="m"))
    body = msgspec.json.decode(built.body)
    assert _problems(wire, body, False) == []
    assert _problems(wire, {**body, "bogus": 1}, False)
    key = "contents" if wire == "gemini" else "input" if wire == "openai_responses" else \
        "messages"
    broken = {**body, key: [{**body[key][0], "bogus": 1}]}
    assert _problems(wire, broken, False)
    tools = msgspec.json.decode(msgspec.json.encode(body["tools"]).replace(b'"ok"', b'"a b"'))
    assert _problems(wire, {**body, "tools": tools}, False)
