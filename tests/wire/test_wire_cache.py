"""Prompt caching (issue 23, class 7): a ``CachePolicy`` on ``WireOptions`` asks each wire for
caching where it has a control — Anthropic ``cache_control`` breakpoints (never more than the
API's limit), OpenAI ``prompt_cache_key`` / ``prompt_cache_retention``, Gemini ``cachedContent`` —
and request bytes stay stable for equal input, so the provider's cache can hit at all."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from bindloop.contracts import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    TextPart,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from bindloop.errors import UsageError
from bindloop.wire import (
    ANTHROPIC_CACHE_BREAKPOINTS,
    WIRE_NAMES,
    CachePolicy,
    WireOptions,
    create_wire_adapter,
)

from .test_wire_requests import SCHEMAS
from .wire_sdk_schema import errors
from .wire_strategies import transcripts

TOOLS = [
    ToolDefinition(name="search", description="Search the docs.",
                   parameters={"type": "object", "properties": {"q": {"type": "string"}},
                               "required": ["q"]}),
    ToolDefinition(name="read", description="Read a page.",
                   parameters={"type": "object", "properties": {"url": {"type": "string"}}}),
]
POLICIES = st.builds(
    CachePolicy, system=st.booleans(), tools=st.booleans(), turns=st.integers(0, 2),
    ttl=st.sampled_from([None, "5m", "1h"]), key=st.sampled_from([None, "tenant-7"]),
    retention=st.sampled_from([None, "in_memory", "24h"]))


def _marks(value: Any) -> list[dict[str, Any]]:
    """Every ``cache_control`` in a decoded body."""
    if isinstance(value, dict):
        found = [value["cache_control"]] if "cache_control" in value else []
        return found + [m for v in value.values() for m in _marks(v)]
    if isinstance(value, list):
        return [m for v in value for m in _marks(v)]
    return []


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def _body(wire: str, messages: list[Message], policy: CachePolicy | None,
          tools: list[ToolDefinition] = TOOLS, **options: Any) -> dict[str, Any]:
    request = create_wire_adapter(wire).build_request(
        messages, tools, WireOptions(model="m", cache=policy, **options))
    return dict(json.loads(request.body))


SESSION: list[Message] = [
    SystemMessage(content="You answer from the docs."),
    SystemMessage(content="Cite the page you read."),
    UserMessage(content="How do I stream?"),
    AssistantMessage(tool_calls=(ToolCall(id="c1", name="search", arguments='{"q":"stream"}'),)),
    ToolMessage(tool_call_id="c1", content="wire.md#composition"),
    AssistantMessage(tool_calls=(ToolCall(id="c2", name="read", arguments='{"url":"wire.md"}'),)),
    ToolMessage(tool_call_id="c2", content="open_stream() yields events"),
]


def test_anthropic_breakpoints_sit_on_system_tools_and_the_last_user_turns() -> None:
    body = _body("anthropic", SESSION, CachePolicy(ttl="1h"))
    mark = {"type": "ephemeral", "ttl": "1h"}
    assert [b.get("cache_control") for b in body["system"]] == [None, mark]
    assert [t.get("cache_control") for t in body["tools"]] == [None, mark]
    user_turns = [t for t in body["messages"] if t["role"] == "user"]
    assert [t["content"][-1].get("cache_control") for t in user_turns] == [None, mark, mark]
    assert len(_marks(body)) == ANTHROPIC_CACHE_BREAKPOINTS


def test_without_a_policy_nothing_changes() -> None:
    for wire in WIRE_NAMES:
        plain = create_wire_adapter(wire).build_request(SESSION, TOOLS, WireOptions(model="m"))
        assert b"cache" not in plain.body.replace(b"cachedContent", b"")


def test_openai_wires_send_their_explicit_controls() -> None:
    policy = CachePolicy(key="tenant-7", retention="24h")
    for wire in ("openai_chat", "openai_responses"):
        body = _body(wire, SESSION, policy)
        assert (body["prompt_cache_key"], body["prompt_cache_retention"]) == ("tenant-7", "24h")
        assert not _marks(body)
    assert "prompt_cache_key" not in _body("openai_chat", SESSION, CachePolicy())


def test_gemini_cached_content_replaces_what_the_cache_holds() -> None:
    policy = CachePolicy(cached_content="cachedContents/abc123", cached_messages=2)
    body = _body("gemini", SESSION, policy, tool_choice="auto")
    assert body["cachedContent"] == "cachedContents/abc123"
    assert "systemInstruction" not in body and "tools" not in body and "toolConfig" not in body
    # The first two non-system messages are in the cache; the tool result after them still
    # names its call (from the skipped assistant turn).
    assert [c["role"] for c in body["contents"]] == ["user", "model", "user"]
    assert body["contents"][0]["parts"][0]["functionResponse"]["name"] == "search"
    # Without cached_content Gemini's request is as before (implicit caching needs nothing).
    assert "cachedContent" not in _body("gemini", SESSION, CachePolicy())


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"turns": 3}, "at most 4"), ({"turns": -1}, "turns"), ({"turns": True}, "turns"),
    ({"ttl": "2h"}, "ttl"), ({"retention": "forever"}, "retention"), ({"key": ""}, "key"),
    ({"cached_messages": 2}, "cached_content"), ({"system": "yes"}, "system"),
])
def test_a_bad_policy_is_refused_when_built(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(UsageError, match=field):
        CachePolicy(**kwargs)


def test_wire_options_refuses_a_cache_that_is_not_a_policy() -> None:
    with pytest.raises(UsageError, match="cache"):
        WireOptions(model="m", cache={"system": True})  # type: ignore[arg-type]


@given(messages=transcripts(), policy=POLICIES)
@settings(max_examples=100, deadline=None)
def test_anthropic_never_exceeds_the_breakpoint_limit_and_validates(messages: list[Message],
                                                                    policy: CachePolicy) -> None:
    body = _body("anthropic", messages, policy)
    assert len(_marks(body)) <= ANTHROPIC_CACHE_BREAKPOINTS
    # a blank system message sends no system block, so there is nothing to mark
    assert len(_marks(body)) == (policy.system and "system" in body) + policy.tools + min(
        policy.turns, sum(t["role"] == "user" for t in body["messages"]))
    if "anthropic" in SCHEMAS:
        assert errors(body, SCHEMAS["anthropic"][0]) == []


@pytest.mark.parametrize("wire", ["openai_chat", "openai_responses"])
@given(messages=transcripts(), policy=POLICIES)
@settings(max_examples=40, deadline=None)
def test_openai_cache_controls_validate_against_the_sdk(wire: str, messages: list[Message],
                                                        policy: CachePolicy) -> None:
    if wire in SCHEMAS:
        assert errors(_body(wire, messages, policy), SCHEMAS[wire][0]) == []


@pytest.mark.parametrize("wire", WIRE_NAMES)
@given(messages=transcripts(), policy=st.one_of(st.none(), POLICIES))
@settings(max_examples=60, deadline=None)
def test_request_bytes_are_stable_for_equal_input(wire: str, messages: list[Message],
                                                  policy: CachePolicy | None) -> None:
    # An equal transcript built anew (decoded from its own JSON) gives byte-identical requests.
    again = msgspec.json.decode(msgspec.json.encode(messages), type=list[Message])
    options = WireOptions(model="m", cache=policy)
    tools_again = msgspec.json.decode(msgspec.json.encode(TOOLS), type=list[ToolDefinition])
    first = create_wire_adapter(wire).build_request(messages, TOOLS, options).body
    assert first == create_wire_adapter(wire).build_request(again, tools_again, options).body


# A reply of whitespace only is left out of the request (Anthropic refuses blank text blocks), and
# the user turns around it then merge into one: that turn cannot extend the previous request, so
# the property holds for replies with text (docs/wire.md, "Requests every provider accepts").
def _blank(message: Message) -> bool:
    """A user or assistant message with no text but whitespace, and nothing else."""
    if not isinstance(message, (UserMessage, AssistantMessage)):
        return False
    if isinstance(message, AssistantMessage) and message.tool_calls:
        return False
    content = message.content
    if content is None:
        return True
    if isinstance(content, str):
        return content.strip() == ""
    return all(isinstance(p, TextPart) and p.text.strip() == "" for p in content)


@given(messages=transcripts(), policy=POLICIES,
       reply=st.text(min_size=1, max_size=20).filter(lambda t: t.strip() != ""),
       follow_up=st.text(min_size=1, max_size=20))
@example(messages=[SystemMessage(content=" "), UserMessage(content="0")],  # no system block at all
         policy=CachePolicy(system=False, tools=False, turns=0), reply="0", follow_up="0")
@settings(max_examples=100, deadline=None)
def test_the_next_turns_request_extends_this_ones_prefix(messages: list[Message],
                                                         policy: CachePolicy, reply: str,
                                                         follow_up: str) -> None:
    # What a cache keys on, the content before a breakpoint, is unchanged by the turn that
    # follows: this request's messages (marks aside) open the next request's messages.
    assume(not any(_blank(m) for m in messages))  # a blank turn is left out: its neighbours merge
    now = _body("anthropic", messages, policy)
    later = _body("anthropic", [*messages, AssistantMessage(content=reply),
                                UserMessage(content=follow_up)], policy)
    assert _strip(later["messages"][:len(now["messages"])]) == _strip(now["messages"])
    assert later.get("system") == now.get("system") and later.get("tools") == now.get("tools")
