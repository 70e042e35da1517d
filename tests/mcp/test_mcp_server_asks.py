"""What bindloop's MCP server expects of and offers a 2026-07-28 client beyond plain calls: a tool
asking the client for input of its own choosing (``ctx.ask``: elicitation, sampling, roots —
Multi Round-Trip Requests), per-tool required client capabilities (-32021), ``x-mcp-header``
arguments mirrored in ``Mcp-Param-*`` headers (-32020), the client's declared capabilities on the
tool's context, and ``initialize`` as a removed method in the stateless form. On the server
core (no I/O), then once over HTTP through ``McpServerApp`` under uvicorn."""

from __future__ import annotations

import base64
from typing import Annotated, Any

import httpx
import msgspec
import pytest
from hypothesis import given, settings, strategies as st

from bindloop.contracts import ToolResult, ToolSuspend
from bindloop.errors import UsageError
from bindloop.hosts.mcp.server import McpServerApp
from bindloop.mcp.server import McpCall, McpReply, McpServer, mcp_param_headers
from bindloop.tools import Tool, define_tool

from test_mcp_server import serve

pytestmark = pytest.mark.anyio

KEY = b"0123456789abcdef-asks-key"
V = "2026-07-28"
ALL_CAPS: dict[str, Any] = {"elicitation": {}, "sampling": {}, "roots": {}}


class NoArgs(msgspec.Struct):
    pass


class Trip(msgspec.Struct):
    region: Annotated[str, msgspec.Meta(extra_json_schema={"x-mcp-header": "Region"})]
    priority: Annotated[int, msgspec.Meta(extra_json_schema={"x-mcp-header": "Priority"})]
    urgent: Annotated[bool | None, msgspec.Meta(extra_json_schema={"x-mcp-header": "Urgent"})] \
        = None
    query: str = ""


NAME_FORM = {"method": "elicitation/create", "params": {
    "message": "Your name?", "requestedSchema": {
        "type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}}
SAMPLE = {"method": "sampling/createMessage", "params": {
    "messages": [{"role": "user", "content": {"type": "text", "text": "Greet"}}],
    "maxTokens": 20}}


class Recorder:
    """The tools under test; ``seen`` records the ``ctx.input`` and capabilities of every run."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any, dict[str, Any]]] = []

    def tools(self) -> list[Tool[Any, Any]]:
        async def greet(args: NoArgs, ctx: Any) -> ToolResult | ToolSuspend:
            self.seen.append(("greet", ctx.input, dict(ctx.client_capabilities)))
            if ctx.input is None or ctx.input.state != "asked":
                return ctx.ask({"name": NAME_FORM, "greeting": SAMPLE}, state="asked")
            name = ctx.input.responses["name"]["content"]["name"]
            text = ctx.input.responses["greeting"]["content"]["text"]
            return ToolResult(content=f"{text}, {name}")

        async def summarize(args: NoArgs, ctx: Any) -> ToolResult:
            self.seen.append(("summarize", ctx.input, dict(ctx.client_capabilities)))
            return ToolResult(content="summary")

        async def trip(args: Trip, ctx: Any) -> ToolResult:
            return ToolResult(content=f"{args.region}/{args.priority}/{args.urgent}")

        return [define_tool(name="greet", description="Greets.", args=NoArgs, execute=greet),
                define_tool(name="summarize", description="Summarizes.", args=NoArgs,
                            execute=summarize),
                define_tool(name="trip", description="Plans.", args=Trip, execute=trip)]


def _server(recorder: Recorder) -> McpServer:
    return McpServer(recorder.tools(), state_secret=KEY,
                     required_client_capabilities={"summarize": ("sampling",)})


def _body(method: str, params: dict[str, Any], caps: dict[str, Any] | None = None,
          request_id: int = 1) -> bytes:
    meta = {"io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientCapabilities": ALL_CAPS if caps is None else caps}
    return msgspec.json.encode({"jsonrpc": "2.0", "id": request_id, "method": method,
                                "params": {**params, "_meta": meta}})


def _post(server: McpServer, tool: str, extra: dict[str, Any] | None = None, *,
          caps: dict[str, Any] | None = None, arguments: dict[str, Any] | None = None,
          params: dict[str, str] | None = None) -> McpReply | McpCall:
    body = _body("tools/call", {"name": tool, "arguments": arguments or {}, **(extra or {})},
                 caps)
    return server.post(body, protocol_version=V, method_header="tools/call", name_header=tool,
                       param_headers=params)


async def _run(server: McpServer, decided: McpReply | McpCall) -> dict[str, Any]:
    if isinstance(decided, McpReply):
        assert decided.body is not None
        return dict(msgspec.json.decode(decided.body))
    return dict(msgspec.json.decode(await server.run_call(decided, lambda _: None)))


async def test_a_tool_asks_for_elicitation_and_sampling_and_gets_both_back() -> None:
    recorder = Recorder()
    server = _server(recorder)
    first = (await _run(server, _post(server, "greet")))["result"]
    assert first["resultType"] == "input_required"
    assert first["inputRequests"] == {"name": NAME_FORM, "greeting": SAMPLE}
    state = first["requestState"]
    answers = {"name": {"action": "accept", "content": {"name": "Ada"}},
               "greeting": {"role": "assistant", "model": "m", "stopReason": "endTurn",
                            "content": {"type": "text", "text": "Hello"}},
               "unasked": {"action": "accept", "content": {}}}
    done = (await _run(server, _post(server, "greet", {"requestState": state,
                                                       "inputResponses": answers})))["result"]
    assert done["resultType"] == "complete"
    assert done["content"] == [{"type": "text", "text": "Hello, Ada"}]
    given_input = recorder.seen[-1][1]
    assert given_input.action == "responded" and given_input.state == "asked"
    assert set(given_input.responses) == {"name", "greeting"}  # the unasked key is dropped


async def test_a_missing_response_is_asked_again_without_running_the_tool() -> None:
    recorder = Recorder()
    server = _server(recorder)
    state = (await _run(server, _post(server, "greet")))["result"]["requestState"]
    runs = len(recorder.seen)
    partial = {"name": {"action": "accept", "content": {"name": "Ada"}}, "greeting": "text"}
    again = (await _run(server, _post(server, "greet", {"requestState": state,
                                                        "inputResponses": partial})))["result"]
    assert again["resultType"] == "input_required"
    assert again["inputRequests"] == {"name": NAME_FORM, "greeting": SAMPLE}
    assert len(recorder.seen) == runs
    tampered = await _run(server, _post(server, "greet", {"requestState": state + "x",
                                                          "inputResponses": partial}))
    assert tampered["error"]["code"] == -32602 and len(recorder.seen) == runs


async def test_responses_without_a_request_state_reach_the_tool_with_no_state() -> None:
    recorder = Recorder()
    server = _server(recorder)
    answers = {"name": {"action": "accept", "content": {"name": "Ada"}}, "junk": 3}
    result = (await _run(server, _post(server, "greet", {"inputResponses": answers})))["result"]
    # The tool finds no state of its own, so it asks: an unsealed answer is never mistaken for
    # the reply to a question this server asked.
    assert result["resultType"] == "input_required"
    given_input = recorder.seen[-1][1]
    assert given_input.state is None and given_input.action == "responded"
    assert given_input.responses == {"name": {"action": "accept", "content": {"name": "Ada"}}}


async def test_asking_for_an_undeclared_capability_is_missing_required_client_capability(
        ) -> None:
    recorder = Recorder()
    server = _server(recorder)
    answer = await _run(server, _post(server, "greet", caps={"elicitation": {}}))
    assert answer["error"]["code"] == -32021
    assert answer["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}
    assert recorder.seen[-1][2] == {"elicitation": {}}


async def test_a_tool_needing_a_capability_is_refused_before_it_runs() -> None:
    recorder = Recorder()
    server = _server(recorder)
    refused = _post(server, "summarize", caps={"elicitation": {}})
    assert isinstance(refused, McpReply) and refused.status == 400 and refused.body is not None
    error = msgspec.json.decode(refused.body)["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"sampling": {}}}
    assert recorder.seen == []
    call = _post(server, "summarize", caps={"sampling": {}})
    assert isinstance(call, McpCall)
    assert (await _run(server, call))["result"]["content"][0]["text"] == "summary"
    with pytest.raises(UsageError, match="not served"):
        McpServer(recorder.tools(), required_client_capabilities={"nope": ("sampling",)})
    with pytest.raises(UsageError, match="capability names"):
        McpServer(recorder.tools(), required_client_capabilities={"summarize": ()})
    app = McpServerApp(recorder.tools(), required_client_capabilities={"summarize": "sampling"})
    assert isinstance(_post(app.server, "summarize", caps={}), McpReply)


async def test_a_session_call_sees_the_capabilities_its_initialize_declared() -> None:
    recorder = Recorder()
    server = McpServer(recorder.tools())
    opened = server.post(msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                              "params": {"protocolVersion": "2025-11-25",
                                                         "capabilities": {"roots": {}},
                                                         "clientInfo": {"name": "c",
                                                                        "version": "1"}}}))
    assert isinstance(opened, McpReply) and opened.session_id is not None
    call = server.post(msgspec.json.encode({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                            "params": {"name": "summarize"}}),
                       session_id=opened.session_id, protocol_version="2025-11-25")
    assert isinstance(call, McpCall)
    await _run(server, call)
    assert recorder.seen[-1][2] == {"roots": {}}


async def test_asking_cannot_resume_over_a_2025_session_or_without_a_secret() -> None:
    for server, session in ((_server(Recorder()), True), (McpServer(Recorder().tools()), False)):
        if session:
            opened = server.post(msgspec.json.encode({
                "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": ALL_CAPS}}))
            assert isinstance(opened, McpReply)
            call = server.post(msgspec.json.encode({"jsonrpc": "2.0", "id": 2,
                                                    "method": "tools/call",
                                                    "params": {"name": "greet"}}),
                               session_id=opened.session_id, protocol_version="2025-11-25")
        else:
            call = _post(server, "greet")
        result = (await _run(server, call))["result"]
        assert result["isError"] is True and "inputRequests" not in result


TRIP = {"region": "eu-west", "priority": 3, "query": "hotels"}
TRIP_HEADERS = {"region": "eu-west", "priority": "3"}


def test_x_mcp_header_arguments_must_match_their_headers() -> None:
    server = _server(Recorder())

    def refusal(params: dict[str, str], arguments: dict[str, Any] = TRIP) -> str | None:
        made = _post(server, "trip", arguments=arguments, params=params)
        if isinstance(made, McpCall):
            return None
        assert made.status == 400 and made.body is not None
        error = msgspec.json.decode(made.body)["error"]
        assert error["code"] == -32020
        return str(error["message"])

    b64 = base64.b64encode(b"eu-west").decode()
    assert refusal(TRIP_HEADERS) is None
    assert refusal({**TRIP_HEADERS, "region": f"=?base64?{b64}?="}) is None
    assert refusal({**TRIP_HEADERS, "urgent": "true"}, {**TRIP, "urgent": True}) is None
    assert refusal({**TRIP_HEADERS, "region": " eu-west\t"}) is None  # OWS is not the value
    assert "missing" in (refusal({"priority": "3"}) or "")
    assert "does not match" in (refusal({**TRIP_HEADERS, "region": "us-east"}) or "")
    assert "does not match" in (refusal({**TRIP_HEADERS, "priority": "03"}) or "")
    assert "does not match" in (refusal({**TRIP_HEADERS, "urgent": "True"},
                                        {**TRIP, "urgent": True}) or "")
    assert refusal({**TRIP_HEADERS, "region": "=?base64?ZXUtd2VzdA?="}) is not None  # padding
    assert refusal({**TRIP_HEADERS, "region": "=?base64?ZXUt!!d2VzdA==?="}) is not None
    assert "without its argument" in (refusal({**TRIP_HEADERS, "urgent": "true"}) or "")
    # Without the ?= suffix the value is literal text, compared as is.
    literal = {**TRIP, "region": "=?base64?ZXUtd2VzdA=="}
    assert refusal({**TRIP_HEADERS, "region": "=?base64?ZXUtd2VzdA=="}, literal) is None


@settings(max_examples=60, deadline=None)
@given(value=st.text(min_size=1, max_size=40), other=st.text(min_size=1, max_size=40))
def test_a_base64_header_matches_exactly_its_own_value(value: str, other: str) -> None:
    server = _server(Recorder())
    encoded = "=?base64?" + base64.b64encode(value.encode()).decode() + "?="
    made = _post(server, "trip", arguments={**TRIP, "region": value},
                 params={**TRIP_HEADERS, "region": encoded})
    assert isinstance(made, McpCall)
    if other != value:
        refused = _post(server, "trip", arguments={**TRIP, "region": other},
                        params={**TRIP_HEADERS, "region": encoded})
        assert isinstance(refused, McpReply) and refused.status == 400


def _annotated(*fields: tuple[str, Any, str]) -> Tool[Any, Any]:
    """A tool whose arguments are ``fields``: (name, type, x-mcp-header)."""
    args = msgspec.defstruct("Args", [
        (name, Annotated[kind, msgspec.Meta(extra_json_schema={"x-mcp-header": header})])
        for name, kind, header in fields])
    return define_tool(name="t", description="d", args=args,
                       execute=lambda args, ctx: ToolResult(content="x"))


@pytest.mark.parametrize(("kind", "header", "reason"), [
    (str, "", "not a header name"),
    (str, "My Region", "not a header name"),
    (str, "Region:1", "not a header name"),
    (str, "R\u00e9gion", "not a header name"),
    (str, "Region\t1", "not a header name"),
    (float, "Score", "only for string, integer and boolean"),
    (dict[str, str], "Data", "only for string, integer and boolean"),
    (list[str], "Items", "only for string, integer and boolean"),
    (str | int, "Either", "only for string, integer and boolean"),
])
def test_an_annotation_the_transport_forbids_is_a_usage_error(kind: Any, header: str,
                                                              reason: str) -> None:
    with pytest.raises(UsageError, match=reason):
        McpServer([_annotated(("a", kind, header))])


def test_a_header_named_twice_ignoring_case_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="twice"):
        McpServer([_annotated(("a", str, "Region"), ("b", str, "region"))])
    McpServer([_annotated(("a", str, "Region"), ("b", bool | None, "Verbose"))])


def test_initialize_is_a_removed_method_in_the_stateless_form() -> None:
    server = _server(Recorder())
    removed = server.post(_body("initialize", {}), protocol_version=V,
                          method_header="initialize")
    assert isinstance(removed, McpReply) and removed.status == 404 and removed.body is not None
    assert msgspec.json.decode(removed.body)["error"]["code"] == -32601
    # A handshake (a protocolVersion in its params) still opens a 2025-11-25 session.
    handshake = server.post(_body("initialize", {"protocolVersion": "2025-11-25",
                                                 "capabilities": {}}))
    assert isinstance(handshake, McpReply) and handshake.status == 200
    assert handshake.session_id is not None


def test_ask_refuses_malformed_requests() -> None:
    recorder = Recorder()
    server = _server(recorder)
    call = _post(server, "greet")
    assert isinstance(call, McpCall)
    from bindloop.mcp.server import McpToolContext
    from bindloop.signal import AbortController

    ctx = McpToolContext(tool_name="greet", request_id=1, session_id=None, identity="",
                         signal=AbortController().signal, progress_token=None,
                         emit=lambda _: None)
    for bad in ({}, {"k": {"method": "tools/call", "params": {}}}, {"": NAME_FORM},
                {"k": {"method": "roots/list", "params": []}}):
        with pytest.raises(UsageError):
            ctx.ask(bad)
    with pytest.raises(UsageError):
        ctx.ask({"k": NAME_FORM}, state=3)  # type: ignore[arg-type]


def test_param_header_names_are_the_annotated_ones() -> None:
    assert _server(Recorder()).param_header_names == {"region", "priority", "urgent"}
    assert McpServer([]).param_header_names == frozenset()


def test_mcp_param_headers_reads_the_mcp_param_prefix() -> None:
    assert mcp_param_headers([("mcp-param-region", "eu"), ("mcp-param-", "x"),
                              ("mcp-param-region", "us"), ("mcp-name", "t")]) == {"region": "eu"}


def test_over_http_the_app_checks_param_headers_and_asks_with_sealed_state() -> None:
    recorder = Recorder()
    app = McpServerApp(_server(recorder))
    base = {"content-type": "application/json", "accept": "application/json, text/event-stream",
            "mcp-protocol-version": V, "mcp-method": "tools/call"}
    with serve(app) as url, httpx.Client(timeout=30) as http:
        ok = http.post(url, content=_body("tools/call", {"name": "trip", "arguments": TRIP}),
                       headers={**base, "mcp-name": "trip", "Mcp-Param-Region": "eu-west",
                                "MCP-PARAM-PRIORITY": "3"})
        assert ok.status_code == 200, ok.text
        assert ok.json()["result"]["content"][0]["text"] == "eu-west/3/None"
        bad = http.post(url, content=_body("tools/call", {"name": "trip", "arguments": TRIP}),
                        headers={**base, "mcp-name": "trip", "Mcp-Param-Region": "eu-west"})
        assert bad.status_code == 400 and bad.json()["error"]["code"] == -32020
        asked = http.post(url, content=_body("tools/call", {"name": "greet"}),
                          headers={**base, "mcp-name": "greet"}).json()["result"]
        assert asked["resultType"] == "input_required" and set(asked["inputRequests"]) == {
            "name", "greeting"}
        refused = http.post(url, content=_body("tools/call", {"name": "summarize"}, {}),
                            headers={**base, "mcp-name": "summarize"})
        assert refused.status_code == 400 and refused.json()["error"]["code"] == -32021
