"""Request bodies into the canonical transcript: the AI SDK's UI messages (steps, tool states,
approvals) and AG-UI's RunAgentInput; bounded before parsing, bad shapes refused by field."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.contracts import (
    AssistantMessage,
    JsonBoundsError,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from bindloop.protocols import (
    ProtocolRequestError,
    ToolApproval,
    decode_run_agent_input,
    decode_ui_chat_request,
)


def _body(messages: list[dict[str, object]], **extra: object) -> bytes:
    return msgspec.json.encode({"id": "chat-1", "trigger": "submit-message", "messages": messages,
                                **extra})


def test_ui_messages_fold_into_steps_with_their_tool_answers() -> None:
    body = _body([
        {"id": "s", "role": "system", "parts": [{"type": "text", "text": "Be brief."}]},
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi "},
                                              {"type": "text", "text": "there"}]},
        {"id": "a", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "reasoning", "text": "think"},
            {"type": "text", "text": "Counting."},
            {"type": "tool-wc", "toolCallId": "c1", "state": "output-available",
             "input": {"text": "a b"}, "output": "2"},
            {"type": "dynamic-tool", "toolName": "geo", "toolCallId": "c2",
             "state": "output-error", "input": {}, "errorText": "no fix"},
            {"type": "data-weather", "data": {"c": 1}},
            {"type": "step-start"},
            {"type": "tool-del", "toolCallId": "c3", "state": "output-denied", "input": {},
             "approval": {"id": "ap3", "approved": False, "reason": "keep it"}},
            {"type": "tool-del", "toolCallId": "c4", "state": "input-streaming"},
            {"type": "step-start"},
            {"type": "text", "text": "Done."},
        ]},
    ], messageId="m9", extraField=1)
    req = decode_ui_chat_request(body)
    assert req.id == "chat-1" and req.message_id == "m9" and req.body == {"extraField": 1}
    assert req.continues == "a"  # the last message is the assistant's: the response goes on with it
    assert req.transcript == (
        SystemMessage(content="Be brief."),
        UserMessage(content="hi there"),
        AssistantMessage(content=(ReasoningPart(text="think"), TextPart(text="Counting.")),
                         tool_calls=(ToolCall(id="c1", name="wc", arguments='{"text":"a b"}'),
                                     ToolCall(id="c2", name="geo", arguments="{}"))),
        ToolMessage(tool_call_id="c1", name="wc", content="2"),
        ToolMessage(tool_call_id="c2", name="geo", is_error=True,
                    content='{"error":"no fix","kind":"error"}'),
        AssistantMessage(tool_calls=(ToolCall(id="c3", name="del", arguments="{}"),)),
        ToolMessage(tool_call_id="c3", name="del", is_error=True,
                    content='{"error":"keep it","kind":"denied"}'),
        AssistantMessage(content="Done."),
    )


def test_an_approval_answer_is_reported_and_its_call_left_for_the_host() -> None:
    req = decode_ui_chat_request(_body([
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "delete x"}]},
        {"id": "a", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "tool-delete_note", "toolCallId": "c1", "state": "approval-responded",
             "input": {"title": "x"}, "approval": {"id": "ap1", "approved": True}}]},
    ]))
    assert req.approvals == (ToolApproval(approval_id="ap1", tool_call_id="c1",
                                          tool_name="delete_note", arguments='{"title":"x"}',
                                          approved=True),)
    assert isinstance(req.transcript[-1], AssistantMessage)  # no answer yet: the host runs it


def test_an_ai_sdk_7_approval_keeps_its_request_reason_apart_from_the_answer() -> None:
    # AI SDK 7 carries the request's reason back as approval.requestReason (and may add
    # isAutomatic, signature): the answer's own reason is approval.reason alone.
    approval = {"id": "ap1", "approved": False, "requestReason": "approve delete_note?",
                "isAutomatic": False, "signature": "sig"}
    req = decode_ui_chat_request(_body([
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "delete x"}]},
        {"id": "a", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "tool-delete_note", "toolCallId": "c1", "state": "approval-responded",
             "input": {"title": "x"}, "approval": approval}]},
    ]))
    assert req.approvals == (ToolApproval(approval_id="ap1", tool_call_id="c1",
                                          tool_name="delete_note", arguments='{"title":"x"}',
                                          approved=False),)


def test_an_ai_sdk_7_steering_message_is_a_user_message_between_the_steps() -> None:
    req = decode_ui_chat_request(_body([
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "count a b"}]},
        {"id": "a", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "tool-wc", "toolCallId": "c1", "state": "output-available",
             "input": {"text": "a b"}, "output": "2"},
            {"type": "steering-message", "id": "s1", "parts": [
                {"type": "text", "text": "also c"}]},
            {"type": "step-start"},
            {"type": "text", "text": "3 with c."}]},
    ]))
    assert req.transcript == (
        UserMessage(content="count a b"),
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="wc", arguments='{"text":"a b"}'),)),
        ToolMessage(tool_call_id="c1", name="wc", content="2"),
        UserMessage(content="also c"),
        AssistantMessage(content="3 with c."),
    )
    with pytest.raises(ProtocolRequestError) as info:
        decode_ui_chat_request(_body([{"id": "a", "role": "assistant", "parts": [
            {"type": "steering-message", "id": "s1", "parts": [{"type": "tool-x"}]}]}]))
    assert info.value.field == "messages[0].parts[0].parts"


@pytest.mark.parametrize(("part", "arguments"), [
    ({"input": '{"text": "a b'}, '{"text": "a b'),         # AI SDK 7: input keeps the raw text
    ({"rawInput": '{"text": "a b'}, '{"text": "a b'),      # AI SDK 6: rawInput keeps it
    ({}, "{}"),                                            # neither: nothing to restore
    ({"input": {"text": "a b"}}, '{"text":"a b"}'),        # it parsed, then the tool failed
])
def test_a_call_that_failed_before_it_ran_keeps_the_models_arguments(
        part: dict[str, object], arguments: str) -> None:
    req = decode_ui_chat_request(_body([
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "count"}]},
        {"id": "a", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "tool-wc", "toolCallId": "c1", "state": "output-error",
             "errorText": "not JSON", **part}]},
    ]))
    call = req.transcript[1]
    assert isinstance(call, AssistantMessage)
    assert call.tool_calls == (ToolCall(id="c1", name="wc", arguments=arguments),)


def test_user_files_become_image_and_file_parts() -> None:
    req = decode_ui_chat_request(_body([{"id": "u", "role": "user", "parts": [
        {"type": "text", "text": "see"},
        {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,AA=="},
        {"type": "file", "mediaType": "application/pdf", "url": "https://x/y.pdf",
         "filename": "y.pdf"}]}]))
    content = req.transcript[0].content
    assert isinstance(content, tuple) and [type(p).__name__ for p in content] == [
        "TextPart", "ImagePart", "FilePart"]


@pytest.mark.parametrize(("messages", "field"), [
    ("nope", "messages"),
    ([{"id": "u", "role": "robot", "parts": []}], "messages[0].role"),
    ([{"id": "u", "role": "user", "parts": [{"type": "text", "text": 3}]}],
     "messages[0].parts[0].text"),
    ([{"id": "u", "role": "user"}], "messages[0].parts"),
    ([{"role": "user", "parts": []}], "messages[0].id"),
    ([{"id": "a", "role": "assistant", "parts": [
        {"type": "tool-x", "toolCallId": "c", "state": "approval-responded", "input": {}}]}],
     "messages[0].parts[0].approval"),
])
def test_bad_ui_shapes_are_refused_by_field(messages: object, field: str) -> None:
    with pytest.raises(ProtocolRequestError) as info:
        decode_ui_chat_request(msgspec.json.encode({"id": "c", "messages": messages}))
    assert info.value.field == field


def test_bodies_are_bounded_before_they_are_parsed() -> None:
    deep = b'{"id":"c","messages":' + b"[" * 20_000 + b"]" * 20_000 + b"}"
    with pytest.raises(JsonBoundsError) as info:
        decode_ui_chat_request(deep)
    assert info.value.reason == "too_deep"
    with pytest.raises(JsonBoundsError) as info:
        decode_run_agent_input(deep)
    assert info.value.reason == "too_deep"
    with pytest.raises(JsonBoundsError) as info:
        decode_ui_chat_request(_body([]), max_bytes=10)
    assert info.value.reason == "too_large"


def test_run_agent_input_decodes_messages_tools_state_and_resume() -> None:
    run = decode_run_agent_input(msgspec.json.encode({
        "threadId": "t", "runId": "r", "state": {"theme": "dark"}, "forwardedProps": {},
        "messages": [
            {"id": "d", "role": "developer", "content": "Be brief."},
            {"id": "u", "role": "user", "content": [
                {"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "url", "value": "https://x/a.png"}}]},
            {"id": "a", "role": "assistant", "content": "ok", "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "wc", "arguments": "{}"}}]},
            {"id": "tm", "role": "tool", "toolCallId": "c1", "content": "2"},
            {"id": "rm", "role": "reasoning", "content": "hidden"},
            {"id": "t2", "role": "tool", "toolCallId": "c9", "content": "", "error": "broke"},
        ],
        "tools": [{"name": "pick", "description": "pick one",
                   "parameters": {"type": "object", "properties": {}}}],
        "context": [{"description": "tz", "value": "UTC"}],
        "resume": [{"interruptId": "approval-c1", "status": "resolved",
                    "payload": {"approved": True}}],
    }))
    assert run.thread_id == "t" and run.state == {"theme": "dark"}
    assert run.context == (("tz", "UTC"),)
    assert run.tools == (ToolDefinition(name="pick", description="pick one",
                                        parameters={"type": "object", "properties": {}}),)
    assert run.resume[0].interrupt_id == "approval-c1" and run.resume[0].payload == {
        "approved": True}
    roles = [type(m).__name__ for m in run.transcript]
    assert roles == ["SystemMessage", "UserMessage", "AssistantMessage", "ToolMessage",
                     "ToolMessage"]
    assert run.transcript[2] == AssistantMessage(
        content="ok", tool_calls=(ToolCall(id="c1", name="wc", arguments="{}"),))
    assert run.transcript[3] == ToolMessage(tool_call_id="c1", name="wc", content="2")
    assert run.transcript[4] == ToolMessage(tool_call_id="c9", is_error=True,
                                            content='{"error":"broke","kind":"error"}')


def test_a_bad_run_agent_input_names_the_path() -> None:
    with pytest.raises(ProtocolRequestError) as info:
        decode_run_agent_input(b'{"threadId":"t","runId":"r","messages":[{"id":"u","role":"user"}]}')
    assert info.value.field.startswith("$.messages[0]")
    with pytest.raises(ProtocolRequestError):
        decode_run_agent_input(b'{"threadId":"","runId":"r","messages":[]}')


_KEYS = st.sampled_from(["id", "role", "parts", "type", "text", "state", "toolCallId", "input",
                         "output", "errorText", "approval", "approved", "reason", "mediaType",
                         "url", "toolName", "messages", "trigger", "messageId", "threadId",
                         "runId", "content", "toolCalls", "function", "name", "arguments",
                         "tools", "resume", "interruptId", "status", "payload", "source",
                         "value", "error", "description", "parameters"])
_LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from([
    "user", "assistant", "system", "tool", "developer", "reasoning", "text", "file", "step-start",
    "tool-x", "dynamic-tool", "output-available", "output-error", "output-denied",
    "approval-responded", "input-streaming", "image/png", "function", "resolved", "url", "c1",
    ""]))
_JSONISH = st.recursive(_LEAVES, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(_KEYS, inner, max_size=6)), max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(_KEYS, _JSONISH, max_size=6))
def test_any_body_decodes_or_is_refused_with_a_typed_error(body: dict[str, object]) -> None:
    raw = msgspec.json.encode(body)
    for decode in (decode_ui_chat_request, decode_run_agent_input):
        try:
            decode(raw)
        except (ProtocolRequestError, JsonBoundsError):
            pass


_PART = st.fixed_dictionaries({"type": st.sampled_from([
    "text", "reasoning", "file", "step-start", "tool-x", "dynamic-tool", "data-y", "source-url"])},
    optional={k: _JSONISH for k in ["text", "state", "toolCallId", "input", "output",
                                      "errorText", "approval", "mediaType", "url", "toolName",
                                      "filename"]})
_UI_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system"]), "parts": st.lists(_PART, max_size=5)},
    optional={"id": st.one_of(st.text(max_size=3), _LEAVES)})
_AG_MESSAGE = st.fixed_dictionaries(
    {"id": st.text(max_size=3), "role": st.sampled_from(
        ["user", "assistant", "system", "developer", "tool", "reasoning", "activity"])},
    optional={k: _JSONISH for k in ["content", "toolCalls", "toolCallId", "error", "name"]})


@settings(max_examples=120, deadline=None)
@given(st.lists(_UI_MESSAGE, max_size=3), st.lists(_AG_MESSAGE, max_size=3))
def test_protocol_shaped_bodies_decode_or_are_refused_by_field(
        ui: list[dict[str, object]], ag: list[dict[str, object]]) -> None:
    for decode, body in ((decode_ui_chat_request, {"id": "c", "messages": ui}),
                         (decode_run_agent_input, {"threadId": "t", "runId": "r", "messages": ag})):
        try:
            decode(msgspec.json.encode(body))
        except ProtocolRequestError as exc:
            assert exc.field
