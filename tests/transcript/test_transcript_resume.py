from __future__ import annotations

from hypothesis import given, settings

from bindloop.contracts import AssistantMessage, SystemMessage, ToolCall, ToolMessage, UserMessage
from bindloop.transcript import (
    DEFAULT_USER_TAIL_DIRECTIVE,
    classify_resume_state,
    ensure_tool_result_pairing,
    ensure_user_tail,
    filter_unresolved_tool_uses,
)

from .strategies import transcripts

SETTINGS = settings(max_examples=200, deadline=None)


def asst(*ids: str, text: str | None = None) -> AssistantMessage:
    return AssistantMessage(content=text, tool_calls=tuple(ToolCall(id=i, name="t") for i in ids))


def res(id: str) -> ToolMessage:
    return ToolMessage(tool_call_id=id, content="ok")


U = UserMessage(content="go")


def test_drops_turns_whose_every_call_is_unresolved_only() -> None:
    partly = asst("a", "b")
    fully = asst("c", text="reasoning the model wrote")
    text_only = AssistantMessage(content="plain")
    msgs = [U, partly, res("a"), text_only, fully]
    out = filter_unresolved_tool_uses(msgs)
    assert list(out) == [U, partly, res("a"), text_only]
    assert out[1] is partly  # kept whole, never re-id'd


def test_filter_returns_input_when_nothing_dropped() -> None:
    msgs = [U, asst("a"), res("a"), AssistantMessage(content="done")]
    assert filter_unresolved_tool_uses(msgs) is msgs


def test_a_result_anywhere_later_resolves_the_turn() -> None:
    msgs = [U, asst("a"), UserMessage(content="x"), res("a")]
    assert filter_unresolved_tool_uses(msgs) is msgs


def test_classify() -> None:
    assert classify_resume_state([]) == "clean"
    assert classify_resume_state([U]) == "clean"
    assert classify_resume_state([U, asst("a"), res("a")]) == "clean"
    assert classify_resume_state([U, asst("a")]) == "interrupted"
    assert classify_resume_state([U, asst("a", "b"), res("a")]) == "interrupted"
    assert classify_resume_state([U, asst("a"), SystemMessage(content="s")]) == "interrupted"
    assert classify_resume_state([U, AssistantMessage(content="done")]) == "completed"
    assert classify_resume_state([U, AssistantMessage(content="done"),
                                  SystemMessage(content="s")]) == "completed"


def test_filter_then_classify_reads_completed() -> None:
    msgs = [U, AssistantMessage(content="ok"), asst("z")]
    assert classify_resume_state(msgs) == "interrupted"
    assert classify_resume_state(filter_unresolved_tool_uses(msgs)) == "completed"


def test_user_tail() -> None:
    a = AssistantMessage(content="answer")
    assert list(ensure_user_tail([U, a])) == [U, a, UserMessage(content=DEFAULT_USER_TAIL_DIRECTIVE)]
    assert list(ensure_user_tail([U, a], directive="More.")) == [U, a, UserMessage(content="More.")]
    s = SystemMessage(content="s")
    assert list(ensure_user_tail([U, a, s]))[-1] == UserMessage(content=DEFAULT_USER_TAIL_DIRECTIVE)
    for ok in ([], [s], [U], [U, asst("a"), res("a")]):
        assert ensure_user_tail(ok) is ok


def test_pairing_then_user_tail_compose() -> None:
    msgs = [U, asst("a")]
    paired = ensure_tool_result_pairing(msgs)
    assert ensure_user_tail(paired) is paired


@SETTINGS
@given(transcripts())
def test_filter_properties(msgs: list) -> None:
    snapshot = list(msgs)
    out = filter_unresolved_tool_uses(msgs)
    assert msgs == snapshot
    assert filter_unresolved_tool_uses(out) is out
    # Only assistant turns with calls are removed, and order is kept.
    removed = [m for m in msgs if not any(m is o for o in out)]
    assert all(isinstance(m, AssistantMessage) and m.tool_calls for m in removed)
    if out is not msgs:
        assert classify_resume_state(out) != "interrupted" or isinstance(out[-1], ToolMessage) or \
            isinstance(out[-1], SystemMessage)


@SETTINGS
@given(transcripts())
def test_user_tail_properties(msgs: list) -> None:
    out = ensure_user_tail(msgs)
    assert ensure_user_tail(out) is out
    convo = [m for m in out if not isinstance(m, SystemMessage)]
    assert not convo or not isinstance(convo[-1], AssistantMessage)
    assert len(out) - len(msgs) in (0, 1)
    assert all(a is b for a, b in zip(msgs, out))
