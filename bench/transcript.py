"""Benchmark: healing + wire view per turn, at 1k / 10k / 100k messages.

Prints a table: total milliseconds (best of several runs) and microseconds per message, for
(a) the no-change fast path on a valid transcript without markers (input returned by reference),
(b) healing a transcript with defects spread through it, and (c) the wire view of a session whose
first half was compacted twice (one subsumed marker, one active). Run: .venv/bin/python bench/transcript.py
"""

from __future__ import annotations

import time
from collections.abc import Callable

from bindloop.compaction import CompactMarker, wire_view
from bindloop.contracts import AssistantMessage, Message, SystemMessage, ToolCall, ToolMessage
from bindloop.contracts import UserMessage
from bindloop.transcript import validate_and_heal_messages


def valid(n: int) -> list[Message]:
    out: list[Message] = [SystemMessage(content="You are a coding agent.")]
    k = 0
    while len(out) < n:
        out.append(UserMessage(content=f"request {k}: please change file {k}.py"))
        calls = (ToolCall(id=f"c{k}a", name="read", arguments='{"path":"a.py"}'),
                 ToolCall(id=f"c{k}b", name="shell", arguments='{"cmd":"pytest -q"}'))
        out.append(AssistantMessage(content="Let me look.", tool_calls=calls))
        out += [ToolMessage(tool_call_id=c.id, content="x" * 200) for c in calls]
        out.append(AssistantMessage(content=f"Done with {k}."))
        k += 1
    return out[:n] if not isinstance(out[n - 1], AssistantMessage) or not out[n - 1].tool_calls \
        else out[:n - 1]


def damaged(n: int) -> list[Message]:
    msgs = valid(n)
    for i in range(7, len(msgs), 97):  # every ~100 messages: drop a result (dangling + orphan-ish)
        if isinstance(msgs[i], ToolMessage):
            msgs[i] = ToolMessage(tool_call_id="ghost", content="late")
    msgs.append(AssistantMessage(content="trailing"))
    return msgs


def session(n: int) -> list:
    msgs: list = valid(n)
    half = len(msgs) // 2
    m1 = CompactMarker(summary="first", replaces=((1, half // 2),))
    msgs.append(m1)
    m2 = CompactMarker(summary="second", replaces=((half // 2, half), (len(msgs) - 1, len(msgs))))
    msgs.append(m2)
    return msgs


def best_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def main() -> None:
    rows = []
    for n in (1_000, 10_000, 100_000):
        repeat = 20 if n <= 10_000 else 5
        ok = valid(n)
        assert validate_and_heal_messages(ok).messages is ok and wire_view(ok) is ok
        fast = best_ms(lambda: wire_view(validate_and_heal_messages(ok).messages), repeat)
        bad = damaged(n)
        heal = best_ms(lambda: validate_and_heal_messages(bad), repeat)
        sess = session(n)
        view = best_ms(lambda: wire_view(sess), repeat)
        both = best_ms(lambda: validate_and_heal_messages(wire_view(sess)), repeat)
        rows.append((n, fast, heal, view, both))
    head = ("messages", "no-change path", "heal (damaged)", "wire view (2 markers)",
            "wire view + heal")
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for n, *cols in rows:
        cells = [f"{ms:8.2f} ms ({ms * 1000 / n:5.2f} µs/msg)" for ms in cols]
        print(f"| {n:>7,} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
