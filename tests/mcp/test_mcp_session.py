"""The pure session machine, without any I/O: handshake, ids, responses, notifications, cancellation,
and properties over arbitrary server input."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from hypothesis import given, strategies as st

from bindloop.errors import ProtocolError, UsageError
from bindloop.mcp import (
    CallToolResult,
    McpProtocolError,
    McpVersionError,
    PROTOCOL_VERSIONS,
)
from bindloop.mcp.session import (
    McpClientSession,
    McpProgress,
    McpDiscarded,
    McpRequestFailed,
    McpResponse,
    McpServerNotification,
    McpToolListChanged,
)
from bindloop.testing import stepping_clock


def init_answer(request_id: Any, version: str = PROTOCOL_VERSIONS[0]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {
        "protocolVersion": version, "capabilities": {}, "serverInfo": {"name": "s"}}}).encode()


def ready(**options: Any) -> McpClientSession:
    session = McpClientSession(server="srv", **options)
    out = session.initialize()
    session.receive(init_answer(out.request_id))
    session.take_outgoing()
    return session


def test_handshake_sends_the_preferred_revision_then_initialized() -> None:
    session = McpClientSession(server="srv", client_info=None)
    out = session.initialize()
    body = json.loads(out.body)
    assert body == {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bindloop", "version": "0.1.0"}}}
    assert session.phase == "initializing"
    with pytest.raises(ProtocolError, match="initialize first"):
        session.list_tools()
    [event] = session.receive(init_answer(1, "2025-03-26"))
    assert isinstance(event, McpResponse) and session.phase == "ready"
    assert session.protocol_version == "2025-03-26"
    [initialized] = session.take_outgoing()
    assert json.loads(initialized.body) == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert session.take_outgoing() == []
    with pytest.raises(ProtocolError, match="twice"):
        session.initialize()


def test_an_unknown_revision_closes_the_session_naming_both_sides() -> None:
    session = McpClientSession(server="srv", protocol_versions=("2025-06-18",))
    out = session.initialize()
    with pytest.raises(McpVersionError) as caught:
        session.receive(init_answer(out.request_id, "2024-01-01"))
    assert caught.value.offered == "2024-01-01" and caught.value.supported == ("2025-06-18",)
    assert session.phase == "closed" and session.take_outgoing() == []


def test_ids_and_clock_are_injected_and_elapsed_time_is_measured() -> None:
    ids = iter(["a", "b", "c"])
    session = ready(ids=lambda: next(ids), now=stepping_clock(0, 5))
    out = session.call_tool("t", {"x": 1}, progress=True)
    assert json.loads(out.body)["params"] == {"name": "t", "arguments": {"x": 1},
                                              "_meta": {"progressToken": "b"}}
    [event] = session.receive(b'{"jsonrpc":"2.0","id":"b","result":{"content":[]}}')
    assert isinstance(event, McpResponse) and event.elapsed_ms == 5.0
    assert isinstance(event.result, CallToolResult)


def test_a_repeated_id_from_the_port_is_a_usage_error() -> None:
    session = ready(ids=lambda: 7)
    session.ping()  # 7 again, but the initialize request that had it is answered: fine
    with pytest.raises(UsageError, match="twice"):
        session.ping()  # 7 is still pending


def test_error_answers_progress_list_changed_and_other_notifications() -> None:
    session = ready()
    out = session.call_tool("t", {})
    events = session.receive(json.dumps([
        {"jsonrpc": "2.0", "method": "notifications/progress",
         "params": {"progressToken": out.request_id, "progress": 1, "total": 4, "message": "m"}},
        {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"},
        {"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info"}},
        {"jsonrpc": "2.0", "id": out.request_id, "error": {"code": -32602, "message": "bad"}},
    ]).encode())
    progress, changed, note, failed = events
    assert progress == McpProgress(progress_token=out.request_id, progress=1.0, total=4.0,
                                   message="m")
    assert isinstance(changed, McpToolListChanged) and session.tools_stale
    assert isinstance(note, McpServerNotification) and note.method == "notifications/message"
    assert isinstance(failed, McpRequestFailed) and failed.error.code == -32602
    assert "MCP server 'srv': tools/call failed with JSON-RPC error -32602: bad" == str(failed.error)
    session.mark_tools_fresh()
    assert not session.tools_stale


def test_server_requests_are_answered_ping_yes_everything_else_method_not_found() -> None:
    session = ready()
    assert session.receive(b'{"jsonrpc":"2.0","id":"p","method":"ping"}') == []
    assert session.receive(b'{"jsonrpc":"2.0","id":9,"method":"roots/list"}') == []
    pong, refusal = (json.loads(o.body) for o in session.take_outgoing())
    assert pong == {"jsonrpc": "2.0", "id": "p", "result": {}}
    assert refusal["id"] == 9 and refusal["error"]["code"] == -32601


def test_cancel_forgets_the_request_and_a_late_answer_is_dropped() -> None:
    session = ready()
    out = session.call_tool("t", {})
    note = session.cancel(out.request_id, "stop")
    assert note is not None and json.loads(note.body) == {
        "jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": out.request_id, "reason": "stop"}}
    assert session.cancel(out.request_id) is None
    assert session.pending() == ()
    late = json.dumps({"jsonrpc": "2.0", "id": out.request_id, "result": {}}).encode()
    assert session.receive(late) == []
    [stray] = session.receive(b'{"jsonrpc":"2.0","id":12345,"result":{}}')
    assert isinstance(stray, McpDiscarded) and stray.request_id == 12345
    assert "never sent" in stray.reason


def test_a_stray_or_duplicate_answer_in_a_batch_costs_nothing() -> None:
    """An id never sent, the same id twice, a malformed member: each is reported as discarded
    and the valid answers beside them still reach their requests."""
    session = ready()
    first, second = session.ping(), session.call_tool("t", {})
    batch = [{"jsonrpc": "2.0", "id": 999, "result": {}},
             {"jsonrpc": "2.0", "id": first.request_id, "result": {}},
             {"jsonrpc": "2.0", "id": first.request_id, "result": {}},
             "not a message",
             {"jsonrpc": "2.0", "id": second.request_id, "result": {"content": []}}]
    events = session.receive(msgspec.json.encode(batch))
    answered = [e.request_id for e in events if isinstance(e, McpResponse)]
    discarded = [e for e in events if isinstance(e, McpDiscarded)]
    assert answered == [first.request_id, second.request_id]
    assert [d.request_id for d in discarded] == [999, first.request_id, None]
    assert session.pending() == ()


def test_initialize_is_never_cancelled_by_notification() -> None:
    session = McpClientSession(server="srv")
    out = session.initialize()
    assert session.cancel(out.request_id) is None and session.phase == "closed"


def test_a_malformed_answer_leaves_the_request_pending() -> None:
    session = ready()
    out = session.ping()
    with pytest.raises(McpProtocolError, match="neither result nor error"):
        session.receive(json.dumps({"jsonrpc": "2.0", "id": out.request_id}).encode())
    assert session.pending() == (out.request_id,)


def test_close_drops_everything_pending() -> None:
    session = ready()
    out = session.ping()
    session.close()
    assert session.phase == "closed" and session.pending() == ()
    assert session.receive(json.dumps({"jsonrpc": "2.0", "id": out.request_id,
                                       "result": {}}).encode()) == []
    with pytest.raises(ProtocolError):
        session.ping()


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "code",
                         "message", "progressToken", "progress", "x"]), inner, max_size=5),
    max_leaves=20)


@given(st.one_of(json_values.map(lambda v: msgspec.json.encode(v)), st.binary(max_size=40)))
def test_arbitrary_server_input_never_crashes_the_machine(data: bytes) -> None:
    """Whatever arrives, the machine returns events or raises McpProtocolError — and stays usable."""
    session = ready()
    out = session.ping()
    try:
        session.receive(data)
    except McpProtocolError as exc:
        assert exc.server == "srv"
    if out.request_id in session.pending():
        [event] = session.receive(json.dumps({"jsonrpc": "2.0", "id": out.request_id,
                                              "result": {}}).encode())
        assert isinstance(event, (McpResponse, McpRequestFailed))


@given(st.permutations(range(6)))
def test_answers_in_any_order_reach_their_requests(order: list[int]) -> None:
    session = ready()
    outs = [session.call_tool(f"t{i}", {"i": i}) for i in range(6)]
    for i in order:
        body = {"jsonrpc": "2.0", "id": outs[i].request_id,
                "result": {"content": [{"type": "text", "text": str(i)}]}}
        [event] = session.receive(json.dumps(body).encode())
        assert isinstance(event, McpResponse) and event.request_id == outs[i].request_id
        assert event.result.content[0]["text"] == str(i)
    assert session.pending() == ()


def test_forgotten_ids_are_bounded() -> None:
    session = ready()
    first = session.ping()
    session.cancel(first.request_id)
    for _ in range(5000):
        session.cancel(session.ping().request_id)
    late = json.dumps({"jsonrpc": "2.0", "id": first.request_id, "result": {}}).encode()
    [stray] = session.receive(late)  # long forgotten: treated as never sent
    assert isinstance(stray, McpDiscarded)
    recent = session.ping()
    session.cancel(recent.request_id)
    assert session.receive(json.dumps({"jsonrpc": "2.0", "id": recent.request_id,
                                       "result": {}}).encode()) == []


@given(st.lists(json_values, max_size=6), st.integers(min_value=0, max_value=6))
def test_a_valid_answer_survives_any_junk_beside_it_in_a_batch(junk: list[Any], at: int) -> None:
    """Whatever else a batch holds (stray ids, repeats, malformed members), the answer in it
    reaches its request and nothing is raised."""
    session = ready()
    out = session.ping()
    answer = {"jsonrpc": "2.0", "id": out.request_id, "result": {}}
    junk = [j for j in junk if not (isinstance(j, dict) and j.get("id") == out.request_id)]
    batch = [*junk[:at], answer, *junk[at:]]
    if len(batch) == 1:
        batch.append({"jsonrpc": "2.0", "method": "notifications/message"})
    events = session.receive(msgspec.json.encode(batch))
    assert any(isinstance(e, McpResponse) and e.request_id == out.request_id for e in events)
    assert out.request_id not in session.pending()
