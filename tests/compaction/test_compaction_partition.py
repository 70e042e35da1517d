from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.compaction import (
    CompactInvalidInputError,
    FromScope,
    TailScope,
    UpToScope,
    partition_for_compaction,
    round_starts,
    shrink_for_prompt_too_long,
    strip_attachments,
)
from bindloop.contracts import (
    AssistantMessage,
    FilePart,
    ImagePart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
    encode_message,
)

from transcript.checkers import openai_chat_violations
from transcript.strategies import transcripts, well_formed_transcripts

SETTINGS = settings(max_examples=150, deadline=None)

U = UserMessage(content="q")
A_CALL = AssistantMessage(tool_calls=(ToolCall(id="x", name="t"),))
T = ToolMessage(tool_call_id="x", content="r")
A = AssistantMessage(content="a")


def test_full_and_tail_and_snapping() -> None:
    msgs = [U, A_CALL, T, A, U]
    p = partition_for_compaction(msgs, "full")
    assert (p.start, p.stop, list(p.tail)) == (0, 5, [])
    p = partition_for_compaction(msgs, TailScope(keep_turns=3))  # cut would fall on T: snap to A_CALL
    assert (p.start, p.stop) == (0, 1)
    assert p.tail[0] is A_CALL and p.to_summarize[0] is U


def test_tail_counts_turns_not_messages() -> None:
    # Turns: U | A | U | A_CALL+T | A  — a tool block belongs to its assistant turn.
    msgs = [U, A, U, A_CALL, T, A]
    p = partition_for_compaction(msgs, TailScope(keep_turns=3))
    assert (p.start, p.stop) == (0, 2) and list(p.tail) == [U, A_CALL, T, A]
    p = partition_for_compaction(msgs, TailScope(keep_turns=2))
    assert list(p.tail) == [A_CALL, T, A]
    with pytest.raises(CompactInvalidInputError, match="5 turns"):
        partition_for_compaction(msgs, TailScope(keep_turns=5))


def test_tail_keeping_zero_turns_summarizes_everything() -> None:
    msgs = [U, A_CALL, T]
    p = partition_for_compaction(msgs, TailScope(keep_turns=0))
    assert (p.start, p.stop, list(p.tail)) == (0, 3, [])


@pytest.mark.parametrize("keep", [True, False, 1.5, "2", None])
def test_tail_keep_turns_must_be_an_int(keep: object) -> None:
    with pytest.raises(CompactInvalidInputError, match="keep_turns"):
        partition_for_compaction([U, A, U, A], TailScope(keep_turns=keep))  # type: ignore[arg-type]


@SETTINGS
@given(well_formed_transcripts(max_rounds=6), st.integers(0, 12))
def test_tail_keeps_exactly_k_turns_and_whole_tool_blocks(msgs: list, keep: int) -> None:
    turns = sum(isinstance(m, (UserMessage, AssistantMessage)) for m in msgs)
    try:
        p = partition_for_compaction(msgs, TailScope(keep_turns=keep))
    except CompactInvalidInputError as exc:
        assert (keep > 0 and keep >= turns) or "text-bearing" in str(exc) or not msgs
        return
    assert keep < turns or keep == 0
    assert sum(isinstance(m, (UserMessage, AssistantMessage)) for m in p.tail) == keep
    assert not p.tail or isinstance(p.tail[0], (UserMessage, AssistantMessage))


def test_from_and_up_to_keep_tool_blocks_whole() -> None:
    msgs = [U, A_CALL, T, A, U]
    p = partition_for_compaction(msgs, FromScope(index=2))
    assert (p.start, p.stop) == (1, 5) and list(p.head) == [U]
    p = partition_for_compaction(msgs, UpToScope(index=1))
    assert (p.start, p.stop) == (0, 3) and list(p.tail) == [A, U]


@pytest.mark.parametrize(("msgs", "scope"), [
    ([], "full"),
    ([U, A], TailScope(keep_turns=2)),
    ([U, A], TailScope(keep_turns=-1)),
    ([U, A], FromScope(index=2)),
    ([U, A], UpToScope(index=-1)),
    ([SystemMessage(content="s"), UserMessage(content=""), A], UpToScope(index=1)),
    ([A_CALL, T, U], TailScope(keep_turns=2)),
])
def test_degenerate_inputs_raise_before_any_call(msgs: list, scope: object) -> None:
    with pytest.raises(CompactInvalidInputError):
        partition_for_compaction(msgs, scope)  # type: ignore[arg-type]


def size(msgs: object) -> int:
    return sum(len(encode_message(m)) for m in msgs)  # type: ignore[attr-defined]


@SETTINGS
@given(well_formed_transcripts(max_rounds=6))
def test_shrink_halves_or_stops_at_one_round_and_keeps_pairs(msgs: list) -> None:
    out = shrink_for_prompt_too_long(msgs)
    if len(round_starts(msgs)) <= 1:
        assert out is msgs
        return
    assert msgs[len(msgs) - len(out):] == list(out)          # a suffix
    assert len(out) < len(msgs)                              # at least one round dropped
    assert size(out) * 2 <= size(msgs) or len(round_starts(out)) == 1
    assert not isinstance(out[0], ToolMessage)
    pairing = [e for e in openai_chat_violations(out) if "not preceded" in e or "not answered" in e]
    assert pairing == []


@SETTINGS
@given(transcripts())
def test_shrink_never_starts_inside_a_tool_block(msgs: list) -> None:
    out = shrink_for_prompt_too_long(msgs)
    if out is not msgs and out:
        first = len(msgs) - len(out)
        assert not isinstance(msgs[first], ToolMessage)


def test_strip_attachments() -> None:
    img = ImagePart(url="u")
    doc = FilePart(file_id="f")
    msgs = [UserMessage(content=(TextPart(text="see"), img)),
            ToolMessage(tool_call_id="x", content=(doc,)), A]
    out = strip_attachments(msgs)
    assert out[0] == UserMessage(content=(TextPart(text="see"), TextPart(text="[image]")))
    assert out[1] == ToolMessage(tool_call_id="x", content=(TextPart(text="[document]"),))
    assert out[2] is A
    assert strip_attachments(out) is out
    assert msgs[0].content[1] is img  # input untouched
