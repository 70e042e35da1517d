from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindloop.contracts import (
    AssistantMessage,
    ImagePart,
    ModelTurnResult,
    ReasoningPart,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
    content_text,
    decode_message,
    decode_messages,
    encode_message,
    encode_messages,
    encode_tool_error,
    message_from_openai,
    messages_from_openai,
    messages_to_openai,
    tool_outcome_message,
    ToolError,
    ToolResult,
)
from bindloop.errors import TranscriptFormatError, UsageError
from bindloop.testing.strategies import messages, transcripts


@given(st.lists(messages(), max_size=8))
def test_json_round_trip_is_lossless(msgs: list) -> None:
    data = encode_messages(msgs)
    assert decode_messages(data) == msgs
    assert encode_messages(decode_messages(data)) == data  # stable bytes


@given(messages())
def test_single_message_round_trip(m) -> None:
    assert decode_message(encode_message(m)) == m


@given(transcripts())
def test_openai_dicts_round_trip(msgs: list) -> None:
    dicts = messages_to_openai(msgs)
    assert messages_from_openai(dicts) == msgs
    # what a host stores survives a JSON trip too
    assert messages_from_openai(msgspec.json.decode(msgspec.json.encode(dicts))) == msgs


@given(messages())
def test_openai_dict_round_trip_any_message(m) -> None:
    assert message_from_openai(messages_to_openai([m])[0]) == m


def test_equal_inputs_give_equal_bytes() -> None:
    a = [UserMessage(content="hi"), AssistantMessage(content="yo")]
    b = [UserMessage(content="hi"), AssistantMessage(content="yo")]
    assert encode_messages(a) == encode_messages(b) == (
        b'[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]'
    )


def test_openai_shape() -> None:
    msgs = [
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="add", arguments='{"a":1}'),)),
        ToolMessage(tool_call_id="c1", content="2", name="add"),
    ]
    assert messages_to_openai(msgs) == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a":1}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "2", "name": "add"},
    ]


def test_data_url_image_is_read_back_as_inline_data() -> None:
    m = message_from_openai({"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}}]})
    assert m == UserMessage(content=(ImagePart(data="AAAA", media_type="image/jpeg"),))


def test_developer_role_reads_as_system() -> None:
    m = message_from_openai({"role": "developer", "content": "be brief"})
    assert m.__struct_config__.tag == "system"


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"role": "robot", "content": "x"}, "role"),
        ({"role": "user", "content": 3}, "messages[0].content"),
        ({"role": "assistant", "content": None, "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": "{}"}}]}, "tool_calls[0].id"),
        ({"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}]},
         "arguments"),
        ({"role": "tool", "content": "x"}, "tool_call_id"),
        ({"role": "user", "content": [{"type": "audio"}]}, "unknown content part"),
        ("not a dict", "must be an object"),
    ],
)
def test_bad_openai_input_names_the_field(raw: object, fragment: str) -> None:
    with pytest.raises(TranscriptFormatError) as info:
        messages_from_openai([raw])  # type: ignore[list-item]
    assert fragment in str(info.value)
    assert isinstance(info.value, UsageError)


def test_bad_json_is_a_typed_error() -> None:
    with pytest.raises(TranscriptFormatError):
        decode_messages(b'[{"role":"nobody"}]')
    with pytest.raises(TranscriptFormatError):
        decode_message(b"{")


def test_turn_to_message_places_reasoning_first() -> None:
    r = ReasoningPart(text="think", provider="anthropic", signature="sig")
    turn = ModelTurnResult(text="answer", reasoning=(r,))
    assert turn.to_message() == AssistantMessage(content=(r, TextPart(text="answer")))
    assert ModelTurnResult().to_message() == AssistantMessage(content=None)
    assert content_text(turn.to_message().content) == "answer"


def test_one_error_encoding() -> None:
    assert encode_tool_error("boom", "not_run") == '{"error":"boom","kind":"not_run"}'
    msg = tool_outcome_message("c1", ToolError(error="boom"), "t")
    assert msg.is_error and msg.content == '{"error":"boom","kind":"error"}'
    ok = tool_outcome_message("c1", ToolResult(content="fine"))
    assert not ok.is_error and ok.content == "fine"


@pytest.mark.parametrize(
    ("part", "fragment"),
    [
        (ImagePart(), "exactly one of url / data"),
        (ImagePart(url="https://x.test/i.png", data="AAAA", media_type="image/png"),
         "exactly one of url / data"),
        (ImagePart(data="AAAA"), "needs its media_type"),
        (ImagePart(url="https://x.test/i.png", media_type="image/png"), "cannot carry media_type"),
    ],
)
def test_parts_that_cannot_round_trip_are_refused(part: ImagePart, fragment: str) -> None:
    with pytest.raises(TranscriptFormatError, match=fragment):
        messages_to_openai([UserMessage(content=(part,))])


def test_file_parts_that_cannot_round_trip_are_refused() -> None:
    from bindloop.contracts import FilePart

    for part, fragment in [(FilePart(), "needs a url"), (FilePart(data="AA"), "needs its media_type"),
                           (FilePart(url="https://x", media_type="application/pdf"),
                            "travels only with inline data")]:
        with pytest.raises(TranscriptFormatError, match=fragment):
            messages_to_openai([UserMessage(content=(part,))])
