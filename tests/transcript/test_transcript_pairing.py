from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings

from bindloop.contracts import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    encode_messages,
    tool_error_message,
)
from bindloop.errors import TranscriptFormatError
from bindloop.transcript import (
    LOST_TOOL_RESULT_ERROR,
    PairingRepair,
    ToolPairingError,
    ensure_tool_result_pairing,
    lost_result_placeholder,
)

from .checkers import openai_chat_violations
from .strategies import transcripts, well_formed_transcripts

SETTINGS = settings(max_examples=200, deadline=None)


def call(id: str, name: str = "read") -> ToolCall:
    return ToolCall(id=id, name=name)


def asst(*ids: str, text: str | None = None) -> AssistantMessage:
    return AssistantMessage(content=text, tool_calls=tuple(call(i) for i in ids))


def res(id: str, text: str = "ok") -> ToolMessage:
    return ToolMessage(tool_call_id=id, content=text)


def run(msgs: list) -> tuple[object, list[PairingRepair]]:
    seen: list[PairingRepair] = []
    out = ensure_tool_result_pairing(msgs, on_repair=seen.append)
    return out, seen


def test_dangling_call_gets_the_shared_error_placeholder() -> None:
    u = UserMessage(content="go")
    msgs = [u, asst("a", "b"), res("a")]
    out, repairs = run(msgs)
    assert list(out) == [u, msgs[1], msgs[2], tool_error_message("b", LOST_TOOL_RESULT_ERROR,
                                                                 "error", "read")]
    assert repairs == [PairingRepair(kind="dangling_tool_call", tool_call_id="b", index=1)]
    assert out[3] == lost_result_placeholder(call("b"))
    assert out[3].is_error  # type: ignore[union-attr]


def test_result_two_messages_downstream_is_non_adjacent_and_its_call_is_patched() -> None:
    msgs = [UserMessage(content="go"), asst("a"), UserMessage(content="hm"), res("a")]
    out, repairs = run(msgs)
    assert [r.kind for r in repairs] == ["dangling_tool_call", "non_adjacent_tool_result"]
    assert list(out) == [msgs[0], msgs[1], lost_result_placeholder(call("a")), msgs[2]]


def test_orphan_duplicate_and_reused_ids_are_classified() -> None:
    msgs = [
        res("zzz"),                            # orphan: no call anywhere
        UserMessage(content="go"),
        asst("a", "a"),                        # intra-turn duplicate
        res("a"), res("a"),                    # second is a duplicate result
        asst("a"),                             # reuses an id from an earlier turn
        res("a"),
    ]
    out, repairs = run(msgs)
    kinds = [(r.kind, r.index) for r in repairs]
    assert ("orphan_tool_result", 0) in kinds
    assert ("duplicate_tool_call", 2) in kinds
    assert ("duplicate_tool_result", 4) in kinds
    assert ("reused_tool_call_id", 5) in kinds
    assert ("non_adjacent_tool_result", 6) in kinds
    # The reused-id turn lost its only call; its result went with it.
    assert out[-1] == AssistantMessage(content=None, tool_calls=())


def test_system_message_between_call_and_result_breaks_adjacency() -> None:
    msgs = [UserMessage(content="go"), asst("a"), SystemMessage(content="s"), res("a")]
    out, repairs = run(msgs)
    assert [r.kind for r in repairs] == ["dangling_tool_call", "non_adjacent_tool_result"]
    assert list(out)[:3] == [msgs[0], msgs[1], lost_result_placeholder(call("a"))]


def test_strict_raises_with_every_violation_and_reports_them() -> None:
    msgs = [UserMessage(content="go"), asst("a", "b")]
    seen: list[PairingRepair] = []
    with pytest.raises(ToolPairingError) as info:
        ensure_tool_result_pairing(msgs, strict=True, on_repair=seen.append)
    assert isinstance(info.value, TranscriptFormatError)
    assert [r.tool_call_id for r in info.value.repairs] == ["a", "b"]
    assert list(info.value.repairs) == seen


def test_strict_passes_a_valid_transcript_through_by_reference() -> None:
    msgs = [UserMessage(content="go"), asst("a"), res("a")]
    assert ensure_tool_result_pairing(msgs, strict=True) is msgs


@SETTINGS
@given(well_formed_transcripts())
def test_valid_transcripts_come_back_by_reference(msgs: list) -> None:
    seen: list[PairingRepair] = []
    assert ensure_tool_result_pairing(msgs, on_repair=seen.append) is msgs
    assert seen == []


@SETTINGS
@given(transcripts())
def test_pairing_output_satisfies_adjacency_is_idempotent_and_pure(msgs: list) -> None:
    before = encode_messages(msgs)
    snapshot = list(msgs)
    out = ensure_tool_result_pairing(msgs)
    assert encode_messages(msgs) == before and msgs == snapshot  # input untouched
    pairing_errs = [e for e in openai_chat_violations(out)
                    if "neither content" not in e and "ends on an assistant" not in e]
    assert pairing_errs == []
    again: list[PairingRepair] = []
    assert ensure_tool_result_pairing(out, on_repair=again.append) is out
    assert again == []


@SETTINGS
@given(transcripts())
def test_every_call_kept_by_pairing_is_answered_exactly_once(msgs: list) -> None:
    out = ensure_tool_result_pairing(msgs)
    results = [m.tool_call_id for m in out if isinstance(m, ToolMessage)]
    calls = [c.id for m in out if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert sorted(results) == sorted(calls)
    assert len(set(calls)) == len(calls)


@SETTINGS
@given(transcripts())
def test_untouched_messages_pass_through_by_reference(msgs: list) -> None:
    out = ensure_tool_result_pairing(msgs)
    ids_in = {id(m) for m in msgs}
    for m in out:
        if not isinstance(m, (AssistantMessage, ToolMessage)):
            assert id(m) in ids_in


def test_placeholder_struct_is_frozen_and_encoded_once() -> None:
    p = lost_result_placeholder(call("x", "shell"))
    assert msgspec.json.decode(p.content) == {"error": LOST_TOOL_RESULT_ERROR, "kind": "error"}
    assert p.name == "shell"
