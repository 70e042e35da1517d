"""The binding-neutral A2A task logic (bindloop.protocols._a2a_task) that the ASGI server and the
Worker's route module share: a task folded from its stream equals the task the encoder's run
describes, whatever the chunking; the version check; the user's text of a message."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindloop.agent.events import TurnStartEvent
from bindloop.completion import TextEvent
from bindloop.contracts import AssistantMessage, ToolCall, ToolMessage, UserMessage
from bindloop.protocols.a2a import (
    A2aMessage,
    A2aPart,
    A2aRpcError,
    A2aTask,
    A2aTaskEncoder,
    A2aTaskStatus,
    a2a_agent_card,
    a2a_open_calls,
    a2a_user_content,
    check_a2a_version,
    check_user_message,
    fold_a2a_task,
)


def _run(chunks: list[str]) -> A2aTask:
    encoder = A2aTaskEncoder("t1", "c1", now=lambda: "2026-12-04T00:00:00.000Z")
    task = A2aTask(id="t1", context_id="c1", status=A2aTaskStatus(state="TASK_STATE_SUBMITTED"))
    updates = [*encoder.start(), *encoder.feed(TurnStartEvent(), turn_index=0)]
    for chunk in chunks:
        updates += encoder.feed(TextEvent(content=chunk), turn_index=0)
    updates += encoder.finish()
    for update in updates:
        task = fold_a2a_task(task, update)
    return task


@given(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=20))
def test_a_task_folded_from_its_stream_holds_the_whole_text_once(chunks: list[str]) -> None:
    task = _run(chunks)
    assert task.status.state == "TASK_STATE_COMPLETED"
    assert len(task.artifacts) == 1
    assert [p.text for p in task.artifacts[0].parts] == ["".join(chunks)]


def test_a_status_message_joins_the_history_and_a_whole_task_replaces_it() -> None:
    from bindloop.protocols.a2a import A2aStatusUpdate, A2aStreamResponse

    task = A2aTask(id="t", status=A2aTaskStatus(state="TASK_STATE_WORKING"))
    said = A2aMessage(message_id="m", role="ROLE_AGENT", parts=(A2aPart(text="why?"),))
    asked = fold_a2a_task(task, A2aStreamResponse(status_update=A2aStatusUpdate(
        task_id="t", context_id="c",
        status=A2aTaskStatus(state="TASK_STATE_INPUT_REQUIRED", message=said))))
    assert (asked.status.state, asked.history) == ("TASK_STATE_INPUT_REQUIRED", (said,))
    other = A2aTask(id="u", status=A2aTaskStatus(state="TASK_STATE_COMPLETED"))
    assert fold_a2a_task(asked, A2aStreamResponse(task=other)) == other
    assert fold_a2a_task(asked, A2aStreamResponse(message=said)) == asked


@pytest.mark.parametrize("version", [None, "0.3", "2.0", " 0.9 "])
def test_another_a2a_version_is_refused(version: str | None) -> None:
    with pytest.raises(A2aRpcError) as caught:
        check_a2a_version(version)
    assert caught.value.code == -32009


def test_this_version_passes() -> None:
    check_a2a_version("1.0")
    check_a2a_version(" 1.0 ")


def test_the_users_text_of_a_message() -> None:
    message = A2aMessage(message_id="m", role="ROLE_USER",
                         parts=(A2aPart(text="hi"), A2aPart(data={"n": 1})))
    check_user_message(message)
    assert a2a_user_content(message) == 'hi\n{"n":1}'
    with pytest.raises(A2aRpcError) as caught:
        a2a_user_content(msgspec.structs.replace(message, parts=(A2aPart(url="https://x/y"),)))
    assert caught.value.code == -32005
    with pytest.raises(A2aRpcError) as caught:
        a2a_user_content(msgspec.structs.replace(message, parts=(A2aPart(text="  "),)))
    assert caught.value.code == -32602
    for bad in (msgspec.structs.replace(message, role="ROLE_AGENT"),
                msgspec.structs.replace(message, message_id=""),
                msgspec.structs.replace(message, parts=())):
        with pytest.raises(A2aRpcError):
            check_user_message(bad)


def test_the_open_calls_and_the_card() -> None:
    calls = (ToolCall(id="a", name="x", arguments="{}"), ToolCall(id="b", name="y", arguments="{}"))
    transcript = (UserMessage(content="go"), AssistantMessage(content="", tool_calls=calls),
                  ToolMessage(tool_call_id="a", content="done"))
    assert a2a_open_calls(transcript) == (calls[1],)
    assert a2a_open_calls((UserMessage(content="go"),)) == ()
    card = a2a_agent_card(name="n", description="d", url="https://h/a2a", streaming=False)
    assert card.supported_interfaces[0].url == "https://h/a2a"
    assert card.capabilities.streaming is False and card.skills[0].id == "chat"
