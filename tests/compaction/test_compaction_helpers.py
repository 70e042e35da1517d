from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.compaction import (
    DedupRule,
    FallbackProvider,
    FallbackTarget,
    GeometricThinkingDecay,
    StepThinkingDecay,
    ToolCallDedup,
    UnknownProviderError,
    canonicalize_shell_command,
    estimate_tokens,
    format_token_summary,
    resolve_fallback_chain,
    thinking_budget,
    utf8_byte_length,
)
from bindloop.contracts import RunStats, ToolCall, ToolMessage, TurnUsage
from bindloop.errors import UsageError


def test_utf8_byte_length() -> None:
    assert utf8_byte_length("abc") == 3
    assert utf8_byte_length("é€🙂") == 2 + 3 + 4
    assert utf8_byte_length("\ud83d\ude42") == 4        # a surrogate pair is one 4-byte sequence
    assert utf8_byte_length("\ud83d") == 3              # a lone surrogate
    assert utf8_byte_length("a\ud83d\ude42\ud83d") == 1 + 4 + 3


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_utf8_byte_length_matches_the_encoder_on_well_formed_text(text: str) -> None:
    assert utf8_byte_length(text) == len(text.encode("utf-8"))


def test_estimate_tokens_uses_utf16_length() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("🙂🙂") == 1  # 4 UTF-16 units


def test_format_token_summary() -> None:
    assert format_token_summary(TurnUsage(input_tokens=52413, cached_input_tokens=50000,
                                          output_tokens=4075)) == "in 52413 (cache 50000) / 4075 out"
    assert format_token_summary(RunStats(input_tokens=5, output_tokens=2)) == "in 5 / 2 out"


@pytest.mark.parametrize(("raw", "canon"), [
    ("cd /repo && npm test", "npm test"),
    ("cd '/my repo';  npm   test ", "npm test"),
    ("npm run dev & sleep 2 ; curl localhost:3000", "npm run dev"),
    ("make serve ; sleep 1 && curl -s x", "make serve"),
    ("  ls\t-la  ", "ls -la"),
    ("echo cd /x && y", "echo cd /x && y"),
])
def test_canonicalize_shell_command(raw: str, canon: str) -> None:
    assert canonicalize_shell_command(raw) == canon
    assert canonicalize_shell_command(canon) == canon


def test_thinking_decay() -> None:
    g = GeometricThinkingDecay(budget=8000, after_turn=2, factor=0.5, floor=1000)
    assert [thinking_budget(g, t) for t in range(1, 7)] == [8000, 8000, 4000, 2000, 1000, 1000]
    s = StepThinkingDecay(budget=8000, after_turn=2, floor=1024)
    budgets = [thinking_budget(s, t) for t in range(1, 50)]
    assert budgets[:2] == [8000, 8000] and set(budgets[2:]) == {1024}
    assert len({b for b in budgets}) == 2  # exactly one change per run
    with pytest.raises(UsageError):
        thinking_budget(s, 0)
    with pytest.raises(UsageError):
        thinking_budget(GeometricThinkingDecay(budget=10, after_turn=0, factor=1.5), 3)
    assert thinking_budget(GeometricThinkingDecay(budget=10, after_turn=0, factor=1.0), 10**7) == 10


PROVIDERS = [FallbackProvider(name="anthropic", default_model="claude"),
             FallbackProvider(name="openai", default_model="gpt")]


def test_fallback_chain() -> None:
    T = FallbackTarget
    assert resolve_fallback_chain(PROVIDERS) == (T(provider="anthropic", model="claude"),
                                                 T(provider="openai", model="gpt"))
    assert resolve_fallback_chain(PROVIDERS, "m") == (T(provider="anthropic", model="m"),
                                                      T(provider="openai", model="m"))
    chain = resolve_fallback_chain(PROVIDERS, [T(provider="openai", model="gpt"), "gpt",
                                               T(model="x")])
    assert chain == (T(provider="openai", model="gpt"), T(provider="anthropic", model="gpt"),
                     T(provider="anthropic", model="x"), T(provider="openai", model="x"))
    with pytest.raises(UnknownProviderError):
        resolve_fallback_chain(PROVIDERS, [T(provider="mistral", model="m")])
    with pytest.raises(UnknownProviderError):
        resolve_fallback_chain([FallbackProvider(name="a"), FallbackProvider(name="a")], "m")
    with pytest.raises(UnknownProviderError):
        resolve_fallback_chain([FallbackProvider(name=""), FallbackProvider(name="b")], "m")
    with pytest.raises(UsageError):
        resolve_fallback_chain([FallbackProvider(name="")])
    assert resolve_fallback_chain([FallbackProvider(name="")], "m") == (T(provider="", model="m"),)


def call(id: str, args: str = "{}", name: str = "shell") -> ToolCall:
    return ToolCall(id=id, name=name, arguments=args)


def res(id: str, text: str) -> ToolMessage:
    return ToolMessage(tool_call_id=id, content=text)


def test_dedup_replay() -> None:
    d = ToolCallDedup({"shell": lambda c: c.arguments})
    assert d.check(call("1")).action == "run"
    d.record(call("1"), res("1", "out"))
    v = d.check(call("2"))
    assert v.action == "replay" and v.message == res("2", "out") and v.count == 2
    assert d.check(call("3", '{"x":1}')).action == "run"   # a different input resets
    assert d.check(call("4", '{"x":1}')).action == "run"   # nothing recorded for it yet
    assert d.check(call("5", name="other")).action == "run"


def test_dedup_block_after_is_sticky_until_input_changes() -> None:
    rule = DedupRule(hasher=lambda c: c.arguments, mode="block-after", threshold=3,
                     reason=lambda c, n: f"{n} identical {c.name!r} calls")
    d = ToolCallDedup({"shell": rule})
    assert d.check(call("1")).action == "run"
    d.record(call("1"), res("1", "out"))
    assert d.check(call("2")).action == "replay"
    blocked = d.check(call("3"))
    assert blocked.action == "block" and blocked.count == 3 and blocked.message is not None
    assert blocked.message.is_error and "Blocked: 3 identical 'shell' calls" in str(
        blocked.message.content)
    assert d.check(call("4")).action == "block"
    assert d.check(call("5", '{"y":2}')).action == "run"
    assert d.check(call("6")).action == "run"  # count restarted


def test_dedup_opt_out_and_bad_rules() -> None:
    d = ToolCallDedup({"shell": lambda c: None})
    assert d.check(call("1")) == d.check(call("2"))
    assert d.check(call("1")).action == "run"
    with pytest.raises(UsageError):
        DedupRule(hasher=lambda c: "k", threshold=0)
