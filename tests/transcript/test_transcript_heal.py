from __future__ import annotations

from hypothesis import given, settings

from bindloop.contracts import (
    AssistantMessage,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
    encode_messages,
)
from bindloop.transcript import (
    DEFAULT_USER_TAIL_DIRECTIVE,
    EMPTY_TURN_PLACEHOLDER,
    LEADING_USER_PLACEHOLDER,
    HealIssue,
    lost_result_placeholder,
    normalize_turn_structure,
    validate_and_heal_messages,
)

from .checkers import all_violations, anthropic_violations, gemini_violations, human_messages
from .checkers import openai_chat_violations
from .strategies import transcripts, well_formed_transcripts

SETTINGS = settings(max_examples=200, deadline=None)


def kinds(issues: tuple[HealIssue, ...]) -> list[str]:
    return [i.kind for i in issues]


def test_the_four_documented_problems_are_detected_and_repaired() -> None:
    u = UserMessage(content="go")
    msgs = [
        ToolMessage(tool_call_id="ghost", content="?"),           # orphan result
        u,
        AssistantMessage(tool_calls=(ToolCall(id="a", name="read"),)),  # dangling call
        UserMessage(content="still there?"),
        AssistantMessage(content=""),                              # empty mid-conversation
        UserMessage(content="hello?"),
        AssistantMessage(content="here"),                          # trailing assistant
    ]
    out, issues = validate_and_heal_messages(msgs)
    assert kinds(issues) == ["orphan_tool_result", "dangling_tool_call", "empty_assistant",
                             "trailing_assistant"]
    assert list(out) == [
        u, msgs[2], lost_result_placeholder(ToolCall(id="a", name="read")), msgs[3],
        AssistantMessage(content=EMPTY_TURN_PLACEHOLDER), msgs[5], msgs[6],
        UserMessage(content=DEFAULT_USER_TAIL_DIRECTIVE),
    ]
    assert all_violations(out) == []


def test_colliding_ids_are_reminted_not_stripped() -> None:
    msgs = [
        UserMessage(content="go"),
        AssistantMessage(tool_calls=(ToolCall(id="call_0", name="read"),)),
        ToolMessage(tool_call_id="call_0", content="one"),
        AssistantMessage(tool_calls=(ToolCall(id="call_0", name="read"),)),
        ToolMessage(tool_call_id="call_0", content="two"),
    ]
    out, issues = validate_and_heal_messages(msgs)
    assert kinds(issues) == ["reminted_tool_call_id"]
    assert [m.tool_call_id for m in out if isinstance(m, ToolMessage)] == ["call_0", "call_0_r1"]
    assert [m.content for m in out if isinstance(m, ToolMessage)] == ["one", "two"]


def test_consecutive_assistants_merge_and_leading_assistant_gets_a_user_turn() -> None:
    r = ReasoningPart(text="hmm", provider="anthropic", signature="s")
    msgs = [
        SystemMessage(content="sys"),
        AssistantMessage(content="first"),
        SystemMessage(content="mid"),
        AssistantMessage(content=(r, TextPart(text="second")),
                         tool_calls=(ToolCall(id="x", name="read"),)),
        ToolMessage(tool_call_id="x", content="r"),
    ]
    out, issues = validate_and_heal_messages(msgs)
    assert kinds(issues) == ["merged_assistant_turns", "leading_assistant"]
    assert list(out) == [
        msgs[0],
        UserMessage(content=LEADING_USER_PLACEHOLDER),
        msgs[2],
        AssistantMessage(content=(TextPart(text="first"), r, TextPart(text="second")),
                         tool_calls=msgs[3].tool_calls),  # type: ignore[union-attr]
        msgs[4],
    ]
    assert all_violations(out) == []


def test_empty_assistant_at_either_end_is_dropped_not_filled() -> None:
    u = UserMessage(content="hi")
    out, issues = validate_and_heal_messages([AssistantMessage(), u, AssistantMessage(content=())])
    assert list(out) == [u]
    assert kinds(issues) == ["dropped_empty_assistant", "dropped_empty_assistant"]


def test_only_system_or_empty_input_is_left_alone() -> None:
    empty: list = []
    assert validate_and_heal_messages(empty).messages is empty
    only = [SystemMessage(content="s")]
    assert validate_and_heal_messages(only) == (only, ())


def test_custom_directive_is_used_for_the_tail() -> None:
    out, _ = validate_and_heal_messages([UserMessage(content="q"), AssistantMessage(content="a")],
                                        directive="Go on.")
    assert out[-1] == UserMessage(content="Go on.")


@SETTINGS
@given(transcripts())
def test_healed_output_passes_every_provider_checker(msgs: list) -> None:
    out, issues = validate_and_heal_messages(msgs)
    assert openai_chat_violations(out) == []
    assert anthropic_violations(out) == []
    assert gemini_violations(out) == []
    assert (out is msgs) == (issues == ())


@SETTINGS
@given(transcripts())
def test_healing_is_idempotent_pure_and_keeps_every_human_message(msgs: list) -> None:
    before = encode_messages(msgs)
    snapshot = list(msgs)
    out, _ = validate_and_heal_messages(msgs)
    assert encode_messages(msgs) == before and msgs == snapshot
    again, issues = validate_and_heal_messages(out)
    assert again is out and issues == ()
    # Every user and system message of the input is in the output, by reference and in order.
    kept = [m for m in human_messages(out) if any(m is h for h in msgs)]
    assert len(kept) == len(human_messages(msgs))
    assert all(a is b for a, b in zip(kept, human_messages(msgs), strict=True))


@SETTINGS
@given(well_formed_transcripts())
def test_well_formed_transcripts_pass_through_by_reference(msgs: list) -> None:
    assert all_violations(msgs) == []  # the generator agrees with the oracle
    out, issues = validate_and_heal_messages(msgs)
    assert out is msgs and issues == ()


@SETTINGS
@given(transcripts())
def test_structure_pass_alone_is_idempotent(msgs: list) -> None:
    once = normalize_turn_structure(msgs)
    assert normalize_turn_structure(once) is once


def test_a_finished_history_is_clean_when_not_preparing_a_request() -> None:
    from bindloop.contracts import AssistantMessage, UserMessage
    from bindloop.transcript import validate_and_heal_messages

    history = [UserMessage(content="hi"), AssistantMessage(content="hello")]
    stored = validate_and_heal_messages(history, for_request=False)
    assert stored.issues == () and stored.messages is history
    sending = validate_and_heal_messages(history)
    assert [i.kind for i in sending.issues] == ["trailing_assistant"]
