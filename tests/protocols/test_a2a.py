"""A2A 1.0, the pure parts and the server's front door: the task encoder (text as streamed
artifacts, approvals and questions as input-required, failure, cancel, retraction), the run
recorder (the run as canonical messages, in order whatever order its events came in), the reading
of a reply, the JSON-RPC envelope, and -- as properties -- no body, however malformed, gets a 500,
a traceback or a value of the request echoed back."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from protocol_helpers import feed_all, run_events

from bindloop.agent.events import (
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    ToolCallDoneEvent,
    ToolFinishedEvent,
    TurnDoneEvent,
    TurnStartEvent,
)
from bindloop.completion import TextEvent, ToolCallChunk, ToolCallEvent
from bindloop.contracts import (
    AssistantMessage,
    ToolCall,
    ToolError,
    ToolMessage,
    ToolResult,
    ToolSuspend,
)
from bindloop.clock import iso_timestamp
from bindloop.hosts.a2a.server import A2aServer
from bindloop.hosts.chat.run import ChatInput, Emit
from bindloop.protocols.a2a import (
    A2A_METHODS,
    A2aErrorCode,
    A2aMessage,
    A2aPart,
    A2aPending,
    A2aRpcError,
    A2aSendMessageRequest,
    A2aTaskEncoder,
    RunRecorder,
    a2a_reply,
    decode_a2a_call,
    decode_a2a_params,
    encode_a2a_error,
)
from bindloop.textstream import TurnResetEvent

CALL = ToolCall(id="c1", name="delete_note", arguments='{"title": "groceries"}')


def _run(encoder: A2aTaskEncoder, events: list[tuple[int | None, Any]]) -> list[Any]:
    out = encoder.start()
    for turn, event in events:
        out += encoder.feed(event, turn_index=turn)
    return out


def _approval(call: ToolCall = CALL) -> ApprovalRequestedEvent:
    return ApprovalRequestedEvent(call_id=call.id, tool=call.name, arguments=call.arguments)


# -- the encoder ------------------------------------------------------------------------------------

def test_text_is_one_streamed_artifact_per_part_and_the_run_completes() -> None:
    enc = A2aTaskEncoder("t1", "ctx", now=lambda: "2026-01-01T00:00:00.000Z")
    out = _run(enc, [(0, TextEvent(content="Hel")), (0, TextEvent(content="lo")),
                     (0, TurnDoneEvent(finish_reason="stop"))]) + enc.finish()
    assert out[0].status_update.status.state == "TASK_STATE_WORKING"
    arts = [u.artifact_update for u in out if u.artifact_update is not None]
    assert [(a.artifact.artifact_id, a.append, a.last_chunk, a.artifact.parts[0].text)
            for a in arts] == [("t1-text1", False, False, "Hel"), ("t1-text1", True, False, "lo"),
                               ("t1-text1", True, True, "")]
    assert out[-1].status_update.status.state == "TASK_STATE_COMPLETED"
    assert out[-1].status_update.status.timestamp == "2026-01-01T00:00:00.000Z"
    assert enc.state == "TASK_STATE_COMPLETED" and enc.pending() == ()


def test_an_approval_held_until_its_call_is_complete_ends_input_required() -> None:
    enc = A2aTaskEncoder("t1", "ctx")
    # the outcome arrives before the call's turn is read (the stream is read behind the loop)
    out = _run(enc, [(None, _approval()), (0, ToolCallDoneEvent(tool_call=CALL)),
                     (0, TurnDoneEvent(finish_reason="tool_calls"))]) + enc.finish()
    status = out[-1].status_update.status
    assert status.state == "TASK_STATE_INPUT_REQUIRED"
    assert enc.pending() == (A2aPending(kind="approval", id="approval-c1", tool_call_id="c1",
                                        tool_name="delete_note", arguments=CALL.arguments),)
    assert status.message is not None and status.message.role == "ROLE_AGENT"
    assert [p.data for p in status.message.parts[1:]] == [
        {"kind": "approval", "id": "approval-c1", "toolCallId": "c1", "toolName": "delete_note",
         "arguments": {"title": "groceries"}}]


def test_a_question_ends_input_required_and_an_answered_call_is_not_pending() -> None:
    other = ToolCall(id="c2", name="ask", arguments="{}")
    enc = A2aTaskEncoder("t1", "ctx")
    out = _run(enc, [(0, ToolCallDoneEvent(tool_call=CALL)), (0, ToolCallDoneEvent(tool_call=other)),
                     (None, ToolFinishedEvent(call=CALL, outcome=ToolResult(content="ok"))),
                     (None, ToolFinishedEvent(call=other, outcome=ToolSuspend(
                         mode="waiting_for_reply", detail="Which city?")))]) + enc.finish()
    assert [p.kind for p in enc.pending()] == ["question"]
    assert out[-1].status_update.status.message.parts[0].text == "Which city?"


def test_failure_and_abort_end_failed_and_canceled() -> None:
    failed = A2aTaskEncoder("t", "c")
    out = failed.start() + failed.fail("the model call failed [ref t]")
    assert out[-1].status_update.status.state == "TASK_STATE_FAILED"
    assert out[-1].status_update.status.message.parts[0].text == "the model call failed [ref t]"
    aborted = A2aTaskEncoder("t", "c")
    out = _run(aborted, [(0, TextEvent(content="x"))]) + aborted.abort()
    assert out[-2].artifact_update.last_chunk  # the open artifact is closed first
    assert out[-1].status_update.status.state == "TASK_STATE_CANCELED"


def test_a_retracted_attempt_replaces_its_artifact_with_nothing() -> None:
    enc = A2aTaskEncoder("t", "c")
    out = _run(enc, [(0, TextEvent(content="wrong")),
                     (0, TurnResetEvent(turn_id="x", epoch=1, seq=0, reason="retry")),
                     (0, TextEvent(content="right"))])
    arts = [u.artifact_update for u in out if u.artifact_update is not None]
    assert [(a.artifact.artifact_id, a.append, a.artifact.parts[0].text) for a in arts] == [
        ("t-text1", False, "wrong"), ("t-text1", False, ""), ("t-text2", False, "right")]


def _surviving_text(events: list[tuple[int | None, Any]]) -> str:
    """The run's text less what a turn started again took back (the attempt it replaced)."""
    kept: list[str] = []
    attempt: list[str] = []
    step: int | None = None
    for turn, event in events:
        if isinstance(event, TurnStartEvent):
            if turn == step:
                attempt = []  # another attempt takes the turn over
            else:
                kept += attempt
                attempt, step = [], turn
            continue
        if turn is not None and (step is None or turn > step):
            kept += attempt
            attempt, step = [], turn
        if isinstance(event, TextEvent):
            attempt.append(event.content)
    return "".join(kept + attempt)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(run_events())
def test_property_artifacts_carry_exactly_the_runs_text(events: list[tuple[int, Any]]) -> None:
    enc = A2aTaskEncoder("t", "c")
    out = enc.start() + feed_all(enc, events) + enc.finish()
    artifacts: dict[str, str] = {}
    for u in out:
        if u.artifact_update is not None:
            art = u.artifact_update
            text = "".join(p.text or "" for p in art.artifact.parts)
            if art.append:
                assert art.artifact.artifact_id in artifacts  # appends follow an opening
                artifacts[art.artifact.artifact_id] += text
            else:
                artifacts[art.artifact.artifact_id] = text
    assert "".join(artifacts.values()) == _surviving_text(events)
    states = [u.status_update.status.state for u in out if u.status_update is not None]
    asked = {e.call_id for _, e in events if isinstance(e, ApprovalRequestedEvent)}
    assert {p.tool_call_id for p in enc.pending()} <= asked
    assert states == ["TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED" if enc.pending()
                      else "TASK_STATE_COMPLETED"]
    json.loads(msgspec.json.encode(out))  # all of it is JSON


# -- the recorder -----------------------------------------------------------------------------------

def test_the_recorder_orders_outcomes_after_their_turn_whenever_they_came() -> None:
    rec = RunRecorder()
    second = ToolCall(id="c2", name="word_count", arguments="{}")
    for event in [ToolFinishedEvent(call=second, outcome=ToolError(error="boom")),
                  TurnStartEvent(), TextEvent(content="Let me."),
                  ToolCallEvent(tool_call=ToolCallChunk(index=0, id="c1", name="delete_note")),
                  ToolCallDoneEvent(tool_call=CALL), ToolCallDoneEvent(tool_call=second),
                  TurnDoneEvent(finish_reason="tool_calls"), _approval(),
                  ApprovalDecidedEvent(call_id="zz", approved=False)]:
        rec.feed(event)
    messages = rec.messages()
    assert isinstance(messages[0], AssistantMessage)
    assert [c.id for c in messages[0].tool_calls] == ["c1", "c2"]
    assert messages[1] == ToolMessage(tool_call_id="c2", name="word_count", is_error=True,
                                      content=messages[1].content)
    assert len(messages) == 2  # c1 waits on its approval: no answer yet


def test_the_recorder_puts_answers_to_calls_open_before_the_run_first() -> None:
    rec = RunRecorder()
    rec.feed(ApprovalDecidedEvent(call_id="c1", approved=True, arguments=CALL.arguments))
    rec.feed(ToolFinishedEvent(call=CALL, outcome=ToolResult(content="deleted")))
    rec.feed(TurnStartEvent())
    rec.feed(TextEvent(content="Done."))
    rec.feed(TurnDoneEvent(finish_reason="stop"))
    messages = rec.messages(open_calls=(CALL,))
    assert messages[0] == ToolMessage(tool_call_id="c1", content="deleted", name="delete_note")
    assert messages[1] == AssistantMessage(content="Done.")


@settings(max_examples=150)
@given(run_events())
def test_property_the_recorder_never_breaks_a_run_and_answers_follow_their_calls(
        events: list[tuple[int, Any]]) -> None:
    rec = RunRecorder()
    for _, event in events:
        rec.feed(event)
        if isinstance(event, ToolCallDoneEvent):
            rec.feed(ToolFinishedEvent(call=event.tool_call, outcome=ToolResult(content="r")))
    seen: set[str] = set()
    for m in rec.messages():
        if isinstance(m, AssistantMessage):
            seen.update(c.id for c in m.tool_calls)
        else:
            assert isinstance(m, ToolMessage) and m.tool_call_id in seen


# -- replies -------------------------------------------------------------------------------------

APPROVAL = A2aPending(kind="approval", id="approval-c1", tool_call_id="c1",
                      tool_name="delete_note", arguments=CALL.arguments)
QUESTION = A2aPending(kind="question", id="q1", tool_call_id="q1", tool_name="ask",
                      arguments="{}", detail="Which city?")


def _reply(*parts: A2aPart) -> A2aMessage:
    return A2aMessage(message_id="m", role="ROLE_USER", parts=parts)


@pytest.mark.parametrize(("parts", "approved", "reason"), [
    ((A2aPart(text="yes"),), True, None),
    ((A2aPart(text=" Approve. "),), True, None),
    ((A2aPart(text="no"),), False, "no"),
    ((A2aPart(text="hmm, maybe later"),), False, "hmm, maybe later"),  # unclear: a denial
    ((A2aPart(data={"approved": True}),), True, None),
    ((A2aPart(data={"approved": False, "reason": "keep"}),), False, "keep"),
    ((A2aPart(data={"approvals": {"c1": True}}),), True, None),
    ((A2aPart(data={"approvals": {"c1": {"approved": False, "reason": "r"}}}),), False, "r"),
    ((A2aPart(data=None),), False, None),
])
def test_a_reply_decides_an_approval(parts: tuple[A2aPart, ...], approved: bool,
                                     reason: str | None) -> None:
    approvals, answers = a2a_reply(_reply(*parts), [APPROVAL])
    assert answers == ()
    assert [(a.tool_call_id, a.approved, a.reason, a.arguments) for a in approvals] == [
        ("c1", approved, reason, CALL.arguments)]


def test_a_reply_answers_questions_by_text_or_per_call_data() -> None:
    _, answers = a2a_reply(_reply(A2aPart(text="Paris")), [QUESTION])
    assert answers == (ToolMessage(tool_call_id="q1", content="Paris", name="ask"),)
    _, answers = a2a_reply(_reply(A2aPart(data={"answers": {"q1": {"city": "Oslo"}}})),
                           [QUESTION])
    assert answers[0].content == '{"city":"Oslo"}'


# -- the envelope ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "code"), [
    (b"{", A2aErrorCode.PARSE_ERROR),
    (b"[]", A2aErrorCode.INVALID_REQUEST),
    (b'"x"', A2aErrorCode.INVALID_REQUEST),
    (b'{"jsonrpc": "1.0", "id": 1, "method": "GetTask"}', A2aErrorCode.INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": true, "method": "GetTask"}', A2aErrorCode.INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": 1}', A2aErrorCode.INVALID_REQUEST),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": [1]}',
     A2aErrorCode.INVALID_PARAMS),
    (b"[" * 100 + b"]" * 100, A2aErrorCode.INVALID_REQUEST),
])
def test_a_body_that_is_not_one_request_is_a_typed_error(body: bytes, code: int) -> None:
    with pytest.raises(A2aRpcError) as caught:
        decode_a2a_call(body)
    assert caught.value.code == code


def test_params_errors_name_the_path_never_the_value() -> None:
    with pytest.raises(A2aRpcError) as caught:
        decode_a2a_params({"message": {"messageId": "SECRET-VALUE", "role": "ROLE_BOSS",
                                       "parts": []}}, A2aSendMessageRequest)
    assert caught.value.code == A2aErrorCode.INVALID_PARAMS
    assert "$.message.role" in caught.value.message and "SECRET" not in caught.value.message
    assert "ROLE_BOSS" not in caught.value.message
    error = json.loads(encode_a2a_error(3, A2aRpcError(A2aErrorCode.TASK_NOT_FOUND, "gone")))
    assert error == {"jsonrpc": "2.0", "id": 3, "error": {"code": -32001, "message": "gone", "data": [
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND",
         "domain": "a2a-protocol.org"}]}}


def test_timestamps_are_utc_with_milliseconds() -> None:
    assert iso_timestamp(1_700_000_000_123) == "2023-11-14T22:13:20.123Z"


# -- the server's front door, in process --------------------------------------------------------

async def _quick(chat: ChatInput, emit: Emit) -> Any:
    emit(0, TextEvent(content="ok"))


@asynccontextmanager
async def _running(app: A2aServer) -> AsyncIterator[A2aServer]:
    to_app, from_test = anyio.create_memory_object_stream[dict[str, Any]](4)
    to_test, from_app = anyio.create_memory_object_stream[dict[str, Any]](4)

    async def send(message: dict[str, Any]) -> None:
        await to_test.send(message)

    async with anyio.create_task_group() as tg:
        tg.start_soon(app, {"type": "lifespan"}, from_test.receive, send)
        await to_app.send({"type": "lifespan.startup"})
        assert (await from_app.receive())["type"] == "lifespan.startup.complete"
        yield app
        await to_app.send({"type": "lifespan.shutdown"})
        assert (await from_app.receive())["type"] == "lifespan.shutdown.complete"


async def _post(app: A2aServer, body: bytes, headers: list[tuple[bytes, bytes]] | None = None
                ) -> tuple[int, bytes]:
    sent: list[dict[str, Any]] = []
    given_body = [False]

    async def receive() -> dict[str, Any]:
        if not given_body[0]:
            given_body[0] = True
            return {"type": "http.request", "body": body, "more_body": False}
        await anyio.sleep(3600)
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/", "query_string": b"",
             "headers": headers if headers is not None else [(b"a2a-version", b"1.0")]}
    with anyio.fail_after(10):
        await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=3), max_leaves=12)
_PARAMS = st.one_of(_JSON_VALUES, st.fixed_dictionaries({}, optional={
    "id": _JSON_VALUES, "message": st.fixed_dictionaries({}, optional={
        "messageId": _JSON_VALUES, "role": st.sampled_from(["ROLE_USER", "ROLE_AGENT", "x"]),
        "parts": st.lists(st.fixed_dictionaries({}, optional={
            "text": _JSON_VALUES, "data": _JSON_VALUES, "url": _JSON_VALUES}), max_size=2),
        "taskId": _JSON_VALUES, "contextId": _JSON_VALUES}),
    "configuration": _JSON_VALUES, "historyLength": _JSON_VALUES}))
_CALLS = st.builds(lambda rid, method, params: {"jsonrpc": "2.0", "id": rid, "method": method,
                                                 "params": params},
                   st.one_of(st.none(), st.integers(), st.text(max_size=6)),
                   st.sampled_from([*A2A_METHODS, "message/send", ""]), _PARAMS)


def _check_answer(status: int, body: bytes, secret: str | None = None) -> None:
    assert status in (200, 400, 413), status
    answer = json.loads(body)
    assert answer["jsonrpc"] == "2.0" and ("result" in answer) != ("error" in answer)
    if "error" in answer:
        assert answer["error"]["code"] in (-32700, -32600, -32601, -32602, -32603, -32001,
                                           -32002, -32003, -32004, -32005, -32009)
        text = answer["error"]["message"]
        assert "Traceback" not in text and "bindloop" not in text
        if secret is not None:
            assert secret not in text


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.binary(max_size=200), _CALLS.map(lambda c: json.dumps(c).encode())))
def test_property_no_body_gets_a_500_or_a_traceback(body: bytes) -> None:
    async def main() -> None:
        async with _running(A2aServer(_quick, name="a", description="d")) as app:
            _check_answer(*await _post(app, body))

    anyio.run(main)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(min_size=6, max_size=12, alphabet="QWXZJKV"))
def test_property_no_error_echoes_a_value_of_the_request(secret: str) -> None:
    calls = [
        {"method": "GetTask", "params": {"id": secret}},
        {"method": "CancelTask", "params": {"id": secret}},
        {"method": "SendMessage", "params": {"message": {"messageId": "m", "role": "ROLE_USER",
                                                          "parts": [{"text": "x"}],
                                                          "taskId": secret}}},
        {"method": "SendMessage", "params": {"message": {"messageId": 7, "role": secret,
                                                          "parts": [{"url": secret}]}}},
        {"method": secret, "params": {}},
    ]

    async def main() -> None:
        async with _running(A2aServer(_quick, name="a", description="d")) as app:
            for call in calls:
                body = json.dumps({"jsonrpc": "2.0", "id": 1, **call}).encode()
                _check_answer(*await _post(app, body), secret=secret)

    anyio.run(main)


def test_an_oversized_body_is_413_before_it_is_read() -> None:
    async def main() -> tuple[int, bytes]:
        async with _running(A2aServer(_quick, name="a", description="d", max_body=100)) as app:
            return await _post(app, b"{" + b" " * 200 + b"}",
                               [(b"a2a-version", b"1.0"), (b"content-length", b"202")])

    status, body = anyio.run(main)
    assert status == 413 and json.loads(body)["error"]["code"] == -32600


def test_the_unsupported_methods_say_which_capability_is_missing() -> None:
    async def main() -> list[int]:
        codes = []
        async with _running(A2aServer(_quick, name="a", description="d",
                                      streaming=False)) as app:
            for method in ("CreateTaskPushNotificationConfig", "GetExtendedAgentCard",
                           "SendStreamingMessage", "tasks/get"):
                body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                                   "params": {"message": {"messageId": "m",
                                                          "role": "ROLE_USER",
                                                          "parts": [{"text": "x"}]}}})
                codes.append(json.loads((await _post(app, body.encode()))[1])["error"]["code"])
        return codes

    assert anyio.run(main) == [-32003, -32004, -32004, -32601]


def test_a_fault_of_the_server_is_internal_error_with_nothing_of_it_shown(
        caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    app = A2aServer(_quick, name="a", description="d")

    def broken(*_: Any) -> Any:
        raise KeyError("/srv/secret/path")

    monkeypatch.setattr(app._tasks, "find", broken)
    body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "GetTask",
                       "params": {"id": "t"}}).encode()

    async def main() -> tuple[int, bytes]:
        async with _running(app) as running:
            return await _post(running, body)

    status, answer = anyio.run(main)
    assert status == 200 and json.loads(answer) == {
        "jsonrpc": "2.0", "id": 9, "error": {"code": -32603, "message": "internal error"}}
    assert "secret" in caplog.text  # the operator has it; the client does not


def test_the_card_says_where_the_json_rpc_interface_is_and_what_the_agent_can() -> None:
    def card_of(app: A2aServer, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b""}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": "/.well-known/agent-card.json",
                 "headers": headers, "scheme": "https", "query_string": b""}
        anyio.run(app, scope, receive, send)
        assert sent[0]["status"] == 200
        return dict(json.loads(sent[1]["body"]))

    hosted = card_of(A2aServer(_quick, name="a", description="d", rpc_path="/a2a"),
                     [(b"host", b"agents.example:8443")])
    assert hosted["supportedInterfaces"] == [{"url": "https://agents.example:8443/a2a",
                                              "protocolBinding": "JSONRPC",
                                              "protocolVersion": "1.0"}]
    assert hosted["skills"] == [{"id": "chat", "name": "a", "description": "d",
                                 "tags": ["chat"]}]
    odd = card_of(A2aServer(_quick, name="a", description="d"),
                  [(b"host", b"evil.example/phish?x=")])  # not a host: the served address
    assert odd["supportedInterfaces"][0]["url"] == "https://localhost/"
    fixed = card_of(A2aServer(_quick, name="a", description="d", streaming=False,
                              url="https://public.example/rpc", version="2.1.0"),
                    [(b"host", b"internal:9000")])
    assert fixed["supportedInterfaces"][0]["url"] == "https://public.example/rpc"
    assert fixed["capabilities"] == {"streaming": False, "pushNotifications": False,
                                     "extendedAgentCard": False}
    assert fixed["version"] == "2.1.0"
    assert fixed["defaultInputModes"] == ["text/plain", "application/json"]


def test_a_denial_ends_nothing_pending_and_the_recorder_keeps_the_refusal() -> None:
    enc = A2aTaskEncoder("t", "c", known_calls=(CALL,))
    rec = RunRecorder()
    denied = ApprovalDecidedEvent(call_id="c1", approved=False, reason="keep it")
    out = enc.start() + enc.feed(denied) + enc.finish()
    rec.feed(denied)
    assert out[-1].status_update.status.state == "TASK_STATE_COMPLETED"
    (refusal,) = rec.messages(open_calls=(CALL,))
    assert isinstance(refusal, ToolMessage) and refusal.is_error and "keep it" in str(
        refusal.content)


def test_a_turn_started_again_retracts_the_failed_attempts_text() -> None:
    enc = A2aTaskEncoder("t", "c")
    out = _run(enc, [(0, TurnStartEvent()), (0, TextEvent(content="half")),
                     (0, TurnStartEvent()), (0, TextEvent(content="whole"))])
    arts = [u.artifact_update for u in out if u.artifact_update is not None]
    assert [(a.artifact.artifact_id, a.append, a.artifact.parts[0].text) for a in arts] == [
        ("t-text1", False, "half"), ("t-text1", False, ""), ("t-text2", False, "whole")]


@given(st.integers(min_value=0, max_value=253_402_300_799_999))
def test_iso_timestamp_agrees_with_datetime_for_every_whole_millisecond(ms: int) -> None:
    """The one RFC 3339 formatter (A2A and MCP tasks) is exact for every millisecond up to 9999."""
    from datetime import datetime, timezone

    expected = datetime.fromtimestamp(ms // 1000, tz=timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"
    assert iso_timestamp(ms) == expected
