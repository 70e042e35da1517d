from __future__ import annotations

from hypothesis import given, settings

from bindloop.contracts import AssistantMessage, ToolCall, ToolMessage, UserMessage
from bindloop.transcript import ensure_tool_result_pairing, remint_colliding_tool_call_ids

from .strategies import transcripts

SETTINGS = settings(max_examples=200, deadline=None)


def asst(*ids: str) -> AssistantMessage:
    return AssistantMessage(tool_calls=tuple(ToolCall(id=i, name="t") for i in ids))


def res(id: str, text: str) -> ToolMessage:
    return ToolMessage(tool_call_id=id, content=text)


def call_ids(msgs) -> list[str]:  # type: ignore[no-untyped-def]
    return [c.id for m in msgs if isinstance(m, AssistantMessage) for c in m.tool_calls]


def test_cross_turn_collision_gets_suffix_on_both_views() -> None:
    msgs = [UserMessage(content="go"), asst("call_0"), res("call_0", "1"), asst("call_0"),
            res("call_0", "2")]
    seen: list[tuple[str, str, int]] = []
    out = remint_colliding_tool_call_ids(msgs, on_remint=lambda o, n, i: seen.append((o, n, i)))
    assert call_ids(out) == ["call_0", "call_0_r1"]
    assert [(m.tool_call_id, m.content) for m in out if isinstance(m, ToolMessage)] == [
        ("call_0", "1"), ("call_0_r1", "2")]
    assert seen == [("call_0", "call_0_r1", 3)]
    assert out[1] is msgs[1] and out[2] is msgs[2]


def test_intra_turn_duplicates_map_to_distinct_ids_positionally() -> None:
    msgs = [asst("x", "x", "x"), res("x", "A"), res("x", "B"), res("x", "C")]
    out = remint_colliding_tool_call_ids(msgs)
    assert call_ids(out) == ["x", "x_r1", "x_r2"]
    assert [(m.tool_call_id, m.content) for m in out if isinstance(m, ToolMessage)] == [
        ("x", "A"), ("x_r1", "B"), ("x_r2", "C")]


def test_fresh_id_skips_ids_used_anywhere_even_later() -> None:
    msgs = [asst("a"), res("a", "1"), asst("a"), res("a", "2"), asst("a_r1"), res("a_r1", "3")]
    out = remint_colliding_tool_call_ids(msgs)
    assert call_ids(out) == ["a", "a_r2", "a_r1"]


def test_no_collision_returns_input() -> None:
    msgs = [asst("a", "b"), res("a", "1"), res("b", "2")]
    assert remint_colliding_tool_call_ids(msgs) is msgs


@SETTINGS
@given(transcripts())
def test_remint_properties(msgs: list) -> None:
    snapshot = list(msgs)
    out = remint_colliding_tool_call_ids(msgs)
    assert msgs == snapshot
    ids = call_ids(out)
    assert len(ids) == len(set(ids))
    assert remint_colliding_tool_call_ids(out) is out
    assert len(out) == len(msgs)
    assert (out is msgs) == (len(call_ids(msgs)) == len(set(call_ids(msgs))))
    # After re-minting, pairing never has to strip a call.
    kinds: list[str] = []
    ensure_tool_result_pairing(out, on_repair=lambda r: kinds.append(r.kind))
    assert "duplicate_tool_call" not in kinds and "reused_tool_call_id" not in kinds
