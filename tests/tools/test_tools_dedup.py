"""Tool-call dedup for the dispatcher, and the shell-command key it is usually given."""

from __future__ import annotations

import pytest

from bindloop.contracts import ToolCall, ToolMessage
from bindloop.errors import UsageError
from bindloop.tools import DedupRule, ToolCallDedup, canonicalize_shell_command


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
