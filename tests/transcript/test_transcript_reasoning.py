from __future__ import annotations

import pytest
from hypothesis import given, settings

from bindloop.contracts import AssistantMessage, ReasoningPart, TextPart, ToolCall, UserMessage
from bindloop.errors import UsageError
from bindloop.transcript import (
    EMPTY_TURN_PLACEHOLDER,
    REASONING_TARGETS,
    reasoning_wire_action,
    sanitize_history_for_provider,
)

from .checkers import reasoning_blocks
from .strategies import reasoning_parts, transcripts

SETTINGS = settings(max_examples=200, deadline=None)

R = ReasoningPart


@pytest.mark.parametrize(("block", "target", "action"), [
    (R(redacted=True, data="d"), "anthropic", "keep"),
    (R(text="t", provider="openai", signature="s"), "anthropic", "drop"),
    (R(text="t", provider="google", signature="s"), "anthropic", "drop"),
    (R(text="t", provider="google-vertex", signature="s"), "anthropic", "drop"),
    (R(text="t", provider="anthropic"), "anthropic", "drop"),
    (R(text="t"), "anthropic", "drop"),
    (R(text="t", provider="anthropic", signature="s"), "anthropic", "keep"),
    (R(text="t", signature="s"), "anthropic", "keep"),
    (R(redacted=True, data="d"), "openai", "drop"),
    (R(redacted=True, data="d"), "google", "drop"),
    (R(text="t", provider="anthropic", signature="s"), "openai", "drop"),
    (R(text="t", provider="anthropic"), "google", "drop"),
    (R(text="t", provider="openai", encrypted_content="e"), "openai", "keep"),
    (R(text="t", provider="google", signature="s"), "google", "keep"),
    (R(text="t", provider="google", signature="s"), "openai", "strip_signature"),
    (R(text="t", provider="google-vertex", signature="s"), "google", "strip_signature"),
    (R(text="t", provider="openai", encrypted_content="e"), "google", "strip_signature"),
    (R(text="t", signature="s"), "openai", "strip_signature"),
    (R(text="t", signature="s"), "google", "strip_signature"),
    (R(text="t"), "openai", "keep"),
    (R(text="t", provider="deepseek"), "google", "keep"),
])
def test_reasoning_wire_action_table(block: ReasoningPart, target: str, action: str) -> None:
    assert reasoning_wire_action(block, target) == action  # type: ignore[arg-type]


def test_unknown_target_is_a_usage_error() -> None:
    with pytest.raises(UsageError):
        reasoning_wire_action(R(text="t"), "mistral")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        sanitize_history_for_provider([], "mistral")  # type: ignore[arg-type]


def test_sanitize_rewrites_only_changed_turns_and_fills_emptied_ones() -> None:
    u = UserMessage(content="q")
    keep = AssistantMessage(content=(R(text="a", provider="anthropic", signature="s"),
                                     TextPart(text="x")))
    only_foreign = AssistantMessage(content=(R(text="o", provider="openai", signature="s"),))
    with_calls = AssistantMessage(content=(R(text="o", provider="openai", signature="s"),),
                                  tool_calls=(ToolCall(id="c", name="t"),))
    out = sanitize_history_for_provider([u, keep, only_foreign, with_calls], "anthropic")
    assert out[0] is u and out[1] is keep
    assert out[2] == AssistantMessage(content=EMPTY_TURN_PLACEHOLDER)
    assert out[3] == AssistantMessage(content=None, tool_calls=with_calls.tool_calls)


def test_sanitize_strips_signature_but_keeps_text() -> None:
    a = AssistantMessage(content=(R(text="why", provider="google", signature="s", id="r1"),))
    out = sanitize_history_for_provider([a], "openai")
    assert out[0] == AssistantMessage(content=(R(text="why", provider="google", id="r1"),))


@SETTINGS
@given(transcripts(), reasoning_parts())
def test_sanitized_history_only_holds_keep_blocks_and_is_a_fixed_point(msgs: list,
                                                                        _: ReasoningPart) -> None:
    for target in REASONING_TARGETS:
        out = sanitize_history_for_provider(msgs, target)
        assert all(reasoning_wire_action(b, target) == "keep" for b in reasoning_blocks(out))
        assert sanitize_history_for_provider(out, target) is out
        assert len(out) == len(msgs)
        for a, b in zip(msgs, out, strict=True):
            if not isinstance(a, AssistantMessage):
                assert a is b
