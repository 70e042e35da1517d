"""The OpenAI-chat request form (``message_to_openai_request``) beside the stored form
(``message_to_openai``): one codec, two shapes that differ only where the API does. The wire sends
exactly the codec's request form."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindloop.contracts import (
    AssistantMessage,
    FilePart,
    ImagePart,
    Message,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
    content_text,
    message_to_openai,
)
from bindloop.wire import message_to_openai_request
from bindloop.errors import TranscriptFormatError
from bindloop.testing.strategies import messages
from bindloop.wire import OpenAIChatAdapter, WireOptions, WireRequestError


def _non_text_parts(m: Message) -> list[object]:
    content = m.content
    if content is None or isinstance(content, str):
        return []
    return [p for p in content if not isinstance(p, (TextPart, ReasoningPart))]


def _mentions_reasoning(value: Any) -> bool:
    if isinstance(value, dict):
        return value.get("type") == "reasoning" or any(_mentions_reasoning(v) for v in value.values())
    if isinstance(value, list):
        return any(_mentions_reasoning(v) for v in value)
    return False


@given(messages())
def test_request_form_keeps_role_text_and_calls_of_the_stored_form(m: Message) -> None:
    try:
        request = message_to_openai_request(m)
    except TranscriptFormatError as exc:
        # Refused only for content the request cannot carry, and the error says where.
        assert _non_text_parts(m), exc
        return
    stored = message_to_openai(m) if not _non_text_parts(m) else None
    assert request["role"] == {"system": "system", "user": "user", "assistant": "assistant",
                               "tool": "tool"}[type(m).__name__.removesuffix("Message").lower()]
    assert not _mentions_reasoning(request)  # the request has no field for reasoning
    if isinstance(m, (SystemMessage, ToolMessage)):
        assert request["content"] == content_text(m.content)
    if isinstance(m, ToolMessage):
        assert request["tool_call_id"] == m.tool_call_id and set(request) == {
            "role", "tool_call_id", "content"}  # no name, no is_error on the request
    if isinstance(m, AssistantMessage):
        text = content_text(m.content)
        assert request["content"] == (None if not text and m.tool_calls else text)
        if stored is not None:
            assert request.get("tool_calls") == stored.get("tool_calls")
    if isinstance(m, UserMessage) and isinstance(m.content, str):
        assert request["content"] == m.content
    if isinstance(m, UserMessage) and stored is not None and not isinstance(m.content, str):
        # Text parts are encoded exactly as the stored form encodes them, reasoning left out.
        assert request["content"] == [d for d in stored["content"] if d["type"] != "reasoning"]
    msgspec.json.encode(request)  # always JSON


@pytest.mark.parametrize("message, where", [
    (SystemMessage(content=(ImagePart(url="https://x/i.png"),)), "a system message"),
    (ToolMessage(tool_call_id="c", content=(ImagePart(url="https://x/i.png"),)), "a tool result"),
    (AssistantMessage(content=(FilePart(file_id="f"),)), "an assistant message"),
])
def test_non_text_content_where_only_text_goes_is_refused_naming_the_place(
        message: Message, where: str) -> None:
    with pytest.raises(TranscriptFormatError, match=where):
        message_to_openai_request(message)


def test_user_media_in_the_request_form() -> None:
    m = UserMessage(content=(
        TextPart(text="look"),
        ReasoningPart(text="private", provider="anthropic"),
        ImagePart(data="AAAA", media_type="image/png", detail="low"),
        FilePart(file_id="file-1", filename="ignored.pdf"),
        FilePart(data="JVBE", media_type="application/pdf", filename="a.pdf"),
    ), name="ana")
    assert message_to_openai_request(m) == {"role": "user", "name": "ana", "content": [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
        {"type": "file", "file": {"file_id": "file-1"}},  # by id, or by bytes: never both
        {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE",
                                  "filename": "a.pdf"}},
    ]}
    with pytest.raises(TranscriptFormatError, match="media_type.*or pass a file_id"):
        message_to_openai_request(UserMessage(content=(FilePart(data="JVBE"),)))


@given(st.lists(messages(), min_size=1, max_size=6))
def test_the_wire_sends_the_codecs_request_form(msgs: list[Message]) -> None:
    # Without reasoning parts the history the wire prepares is the transcript itself.
    plain = [m for m in msgs if not any(isinstance(p, ReasoningPart) for p in (
        () if m.content is None or isinstance(m.content, str) else m.content))]
    adapter = OpenAIChatAdapter()
    try:
        expected = [message_to_openai_request(m) for m in plain]
    except TranscriptFormatError as exc:
        with pytest.raises(WireRequestError) as info:
            adapter.build_request(plain, [], WireOptions(model="m"))
        assert str(info.value) == str(exc)
        return
    body = msgspec.json.decode(adapter.build_request(plain, [], WireOptions(model="m")).body)
    assert body["messages"] == expected


def test_an_assistant_turn_that_only_called_tools_sends_null_content() -> None:
    m = AssistantMessage(tool_calls=(ToolCall(id="c1", name="add", arguments='{"a":1}'),))
    assert message_to_openai_request(m) == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a":1}'}}]}
