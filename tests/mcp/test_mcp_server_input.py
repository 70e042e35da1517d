"""bindloop's server asks a 2026-07-28 client for input (Multi Round-Trip Requests): an agent
served as one tool suspends — on a question and then on an approval — and each suspend becomes an
``input_required`` answer with a sealed ``requestState``; the client's re-issued call, with the
user's answer, resumes the agent from its stored checkpoint. Read by bindloop's own client and by
the official Python SDK's ``Client``, against ``McpServerApp`` under uvicorn on 127.0.0.1; forged,
replayed-elsewhere and unanswered states are refused over raw HTTP."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from bindloop.agent import (
    ChatResult,
    create_agent,
    equip_instruction,
    equip_tool,
    prompt_chat,
    resume_chat,
    run_with,
)
from bindloop.agent.approvals import (
    approve,
    deny,
    pending_approvals,
)
from bindloop.contracts import ToolOutcome, ToolResult, ToolSuspend
from bindloop.errors import UsageError
from bindloop.hosts.transports.httpx import HttpxTransport
from bindloop.hosts.mcp.server import McpServerApp
from bindloop.hosts.stores.sqlite import SqliteStore
from bindloop.mcp import McpHttpClient
from bindloop.mcp.server import (
    McpCall,
    McpServer,
    McpToolInput,
)
from bindloop.mcp.server_requests import (
    ElicitationRequest,
    ElicitationResult,
    ServerRequestHandlers,
)
from bindloop.tools import define_tool
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

from test_mcp_server import serve

pytestmark = pytest.mark.anyio

KEY = b"0123456789abcdef-state-key"


class Question(msgspec.Struct):
    question: str


class City(msgspec.Struct):
    city: str


class Start(msgspec.Struct, tag="start"):
    question: str


class Resume(msgspec.Struct, tag="resume"):
    key: str
    action: str
    reply: str | None


class Served:
    """An agent served as one tool (``plan_trip``): it asks the user a question (a suspend) and
    books only with the user's approval; its checkpoints live in a SqliteStore."""

    def __init__(self, db: Path) -> None:
        self._db = db
        self._store: SqliteStore | None = None
        self.booked: list[str] = []
        self.model = scripted_stream_model([
            tool_call_turn([tool_call("ask_human", {"question": "Which city?"}, id="a1")]),
            tool_call_turn([tool_call("book", {"city": "Lisbon"}, id="b1")]),
            final_answer("Booked Lisbon.")])

        async def ask(args: Question, ctx: Any) -> ToolSuspend:
            return ToolSuspend(mode="waiting_for_reply", detail=args.question)

        async def book(args: City, ctx: Any) -> ToolResult:
            self.booked.append(args.city)
            return ToolResult(content=f"booked {args.city}")

        ask_tool = define_tool(name="ask_human", description="Ask the user", args=Question,
                               execute=ask)
        book_tool = define_tool(name="book", description="Book a trip", args=City, execute=book)

        async def handler(props: Start | Resume) -> ChatResult:
            equip_tool(ask_tool)
            equip_tool(book_tool, needs_approval=True)
            if isinstance(props, Start):
                equip_instruction(props.question)
                return await prompt_chat(on_checkpoint=self.store.save_checkpoint)
            cp = self.store.load_checkpoint(props.key)
            assert cp is not None
            waiting = pending_approvals(cp)
            if waiting:
                yes = props.action == "accept" and (props.reply or "").strip().lower() == "yes"
                return await resume_chat(cp, decisions=[
                    approve(waiting[0]) if yes else deny(waiting[0], "the user said no")],
                    on_checkpoint=self.store.save_checkpoint)
            return await resume_chat(cp, reply=props.reply or f"(the user chose {props.action})",
                                     on_checkpoint=self.store.save_checkpoint)

        agent = create_agent(id="planner", handler=handler, model=self.model)

        async def plan(args: Question, ctx: Any) -> ToolOutcome:
            given: McpToolInput | None = getattr(ctx, "input", None)
            props: Start | Resume = Start(question=args.question) if given is None or \
                given.state is None else Resume(key=given.state, action=given.action,
                                                reply=given.reply)
            result = await run_with(agent, initial_props=props, signal=ctx.signal)
            if result.stop_reason != "waiting_for_reply":
                return ToolResult(content=str(result.data))
            cp = result.checkpoint
            assert cp is not None
            question = (f"Approve {result.approvals[0].tool} {result.approvals[0].arguments}? "
                        "(yes/no)" if result.approvals else cp.open_suspends[0].detail)
            return ToolSuspend(mode="waiting_for_reply", detail=question, state=cp.execution_id)

        self.tool = define_tool(name="plan_trip", description="Plan a trip with the user.",
                                args=Question, execute=plan)

    @property
    def store(self) -> SqliteStore:
        # Opened on the server's thread (a SQLite connection stays on the thread that made it).
        if self._store is None:
            self._store = SqliteStore(str(self._db))
        return self._store


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Served, str]]:
    made = Served(tmp_path / "chats.db")
    with serve(McpServerApp([made.tool], name="planner", version="1.0",
                            state_secret=KEY)) as url:
        yield made, url


def _answers(seen: list[str]) -> Any:
    async def elicit(request: ElicitationRequest) -> ElicitationResult:
        seen.append(request.message)
        reply = "Lisbon" if request.message == "Which city?" else "yes"
        return ElicitationResult(action="accept", content={"reply": reply})

    return elicit


async def test_bindloops_client_answers_the_agents_question_and_approval(
        served: tuple[Served, str]) -> None:
    made, url = served
    seen: list[str] = []
    transport = HttpxTransport(url)
    try:
        async with McpHttpClient(transport, server="planner", listen=False,
                                 handlers=ServerRequestHandlers(elicitation=_answers(seen))
                                 ) as client:
            assert client.session.era == "modern"
            result = await client.call_tool("plan_trip", {"question": "Plan a trip"})
    finally:
        await transport.aclose()
    assert not result.is_error and result.content[0]["text"] == "Booked Lisbon."
    assert seen == ["Which city?", 'Approve book {"city":"Lisbon"}? (yes/no)']
    assert made.booked == ["Lisbon"]  # ran once, after the approval


async def test_the_official_sdk_client_answers_through_its_elicitation_callback(
        served: tuple[Served, str]) -> None:
    from mcp import Client
    from mcp.types import ElicitRequestParams, ElicitResult

    made, url = served
    seen: list[str] = []

    async def elicitation(context: Any, params: ElicitRequestParams) -> ElicitResult:
        seen.append(params.message)
        reply = "Lisbon" if params.message == "Which city?" else "no"
        return ElicitResult(action="accept", content={"reply": reply})

    async with Client(url, elicitation_callback=elicitation) as client:
        assert client.protocol_version == "2026-07-28"
        result = await client.call_tool("plan_trip", {"question": "Plan a trip"})
    assert result.content[0].text == "Booked Lisbon."  # type: ignore[union-attr]
    assert seen == ["Which city?", 'Approve book {"city":"Lisbon"}? (yes/no)']
    assert made.booked == []  # denied: the booking never ran


_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
            "mcp-name": "plan_trip"}


async def _post(server: McpServer, extra: dict[str, Any]) -> dict[str, Any]:
    """``plan_trip`` called on the server core (2026-07-28), run when it is a call."""
    reply = server.post(_call(extra), protocol_version="2026-07-28",
                        method_header="tools/call", name_header="plan_trip")
    if isinstance(reply, McpCall):
        reply = msgspec.json.decode(await server.run_call(reply, lambda _: None))
    else:
        reply = msgspec.json.decode(reply.body)
    assert isinstance(reply, dict)
    return reply


def _call(extra: dict[str, Any], *, elicitation: bool = True,
          arguments: dict[str, Any] | None = None) -> bytes:
    caps: dict[str, Any] = {"elicitation": {}} if elicitation else {}
    return msgspec.json.encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "plan_trip", "arguments": arguments or {"question": "Plan a trip"}, **extra,
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": caps}}})


async def test_forged_and_moved_states_are_refused_and_a_missing_answer_is_asked_again(
        served: tuple[Served, str]) -> None:
    _, url = served
    async with httpx.AsyncClient() as http:
        first = (await http.post(url, content=_call({}), headers=_HEADERS)).json()["result"]
        assert first["resultType"] == "input_required"
        (asked,) = first["inputRequests"].values()
        assert asked["method"] == "elicitation/create"
        assert asked["params"]["message"] == "Which city?"
        state = first["requestState"]
        answer = {"reply": {"action": "accept", "content": {"reply": "Lisbon"}}}
        payload, _, mac = state.partition(".")
        forged_payload = base64.urlsafe_b64encode(b'{"s":"someone-else"}').decode().rstrip("=")
        cases: dict[str, dict[str, Any]] = {
            "forged": {"requestState": f"{forged_payload}.{mac}", "inputResponses": answer},
            "garbage": {"requestState": "%%%.!!!", "inputResponses": answer},
        }
        for name, extra in cases.items():
            refused = (await http.post(url, content=_call(extra), headers=_HEADERS)).json()
            assert refused["error"]["code"] == -32602, name
            assert "requestState" in refused["error"]["message"], name
            assert state not in str(refused) and payload not in str(refused)
        # The state is ours but the answer is missing or malformed: the question is asked again.
        retries: list[dict[str, Any]] = [
            {"requestState": state, "inputResponses": {}},
            {"requestState": state},
            {"requestState": state,
             "inputResponses": {"reply": {"action": "accept", "content": {}}}}]
        for extra in retries:
            again = (await http.post(url, content=_call(extra), headers=_HEADERS)).json()
            assert again["result"]["resultType"] == "input_required", extra
            (asked_again,) = again["result"]["inputRequests"].values()
            assert asked_again["params"]["message"] == "Which city?"
        moved = (await http.post(url, content=_call(
            {"requestState": state, "inputResponses": answer},
            arguments={"question": "Another trip"}), headers=_HEADERS)).json()
        assert moved["error"]["code"] == -32602  # the state is bound to the call's arguments
        # A client that cannot answer elicitations is not asked: the suspend is an error result.
        mute = (await http.post(url, content=_call({}, elicitation=False),
                                headers=_HEADERS)).json()["result"]
        assert mute["isError"] is True and mute["resultType"] == "complete"


async def test_a_2026_request_without_its_meta_version_is_invalid_params(
        served: tuple[Served, str]) -> None:
    _, url = served
    body = msgspec.json.encode({"jsonrpc": "2.0", "id": 5, "method": "tools/list",
                                "params": {"_meta": {}}})
    async with httpx.AsyncClient() as http:
        refused = await http.post(url, content=body, headers={
            **_HEADERS, "mcp-method": "tools/list"})
    assert refused.status_code == 400
    assert refused.json()["error"]["code"] == -32602
    assert "protocolVersion" in refused.json()["error"]["message"]


def test_a_short_state_secret_is_refused() -> None:
    with pytest.raises(UsageError, match="16 bytes"):
        McpServer([], state_secret=b"short")


async def test_a_request_state_past_its_ttl_is_refused_and_never_reaches_the_tool() -> None:
    """A genuine state answered inside ``state_ttl_ms`` resumes the tool; the same answer after
    it is refused as expired (with no part of the state in the message) and the tool is not run."""
    now = [1_000_000.0]
    ran: list[str] = []

    class Ask(msgspec.Struct):
        question: str

    async def ask(args: Ask, ctx: Any) -> ToolOutcome:
        if ctx.input is None:
            return ToolSuspend(mode="waiting_for_reply", detail="Which city?", state="s-1")
        ran.append(ctx.input.reply)
        return ToolResult(content=f"Booked {ctx.input.reply}.")

    server = McpServer([define_tool(name="plan_trip", description="Plan.", args=Ask,
                                    execute=ask)],
                       sessions=False, state_secret=KEY, state_ttl_ms=60_000,
                       clock=lambda: now[0])

    asked = (await _post(server, {}))["result"]
    assert asked["resultType"] == "input_required"
    state = asked["requestState"]
    answer = {"reply": {"action": "accept", "content": {"reply": "Lisbon"}}}
    now[0] += 59_000
    done = await _post(server, {"requestState": state, "inputResponses": answer})
    assert done["result"]["content"][0]["text"] == "Booked Lisbon." and ran == ["Lisbon"]
    now[0] += 2_000  # 61 s after it was issued
    late = await _post(server, {"requestState": state, "inputResponses": answer})
    assert late["error"]["code"] == -32602 and "expired" in late["error"]["message"]
    assert state.split(".")[0] not in str(late) and ran == ["Lisbon"]


def test_a_state_ttl_that_is_not_a_positive_number_is_refused() -> None:
    for ttl in (0, -1, float("nan"), float("inf")):
        with pytest.raises(UsageError, match="state_ttl_ms"):
            McpServer([], state_secret=KEY, state_ttl_ms=ttl)


@pytest.mark.parametrize(("answer", "expected"), [
    ({"action": "accept", "content": {"reply": "Lisbon"}}, (False, "Lisbon")),
    ({"action": "decline"}, (True, "declined")),
    ({"action": "cancel"}, (True, "cancelled")),
])
async def test_a_plain_function_that_suspends_gets_the_users_answer_as_its_result(
        answer: dict[str, Any], expected: tuple[bool, str]) -> None:
    """A tool with no ``ctx`` cannot read ``ctx.input``: re-run on the re-issued call it
    suspends again, and the user's answer is the call's result (the suspend's own contract),
    never the same question asked again. A tool that reads ``ctx.input`` and suspends again
    is asked again (its choice)."""
    runs: list[str] = []

    def plan_trip(question: str) -> ToolSuspend:
        """Ask where to go."""
        runs.append(question)
        return ToolSuspend(mode="waiting_for_reply", detail="Which city?")

    server = McpServer([define_tool(plan_trip)], sessions=False, state_secret=KEY)

    asked = (await _post(server, {}))["result"]
    assert asked["resultType"] == "input_required"
    done = (await _post(server, {"requestState": asked["requestState"],
                        "inputResponses": {"reply": answer}}))["result"]
    error, text = expected
    assert done["resultType"] == "complete" and done.get("isError", False) is error
    assert text in done["content"][0]["text"] and len(runs) == 2


async def test_a_tool_that_reads_its_input_and_suspends_again_is_asked_again() -> None:
    seen: list[Any] = []

    async def ask(args: Question, ctx: Any) -> ToolOutcome:
        seen.append(ctx.input)
        return ToolSuspend(mode="waiting_for_reply", detail="Which city, really?")

    server = McpServer([define_tool(name="plan_trip", description="Plan.", args=Question,
                                    execute=ask)], sessions=False, state_secret=KEY)
    reply = server.post(_call({}), protocol_version="2026-07-28", method_header="tools/call",
                        name_header="plan_trip")
    assert isinstance(reply, McpCall)
    asked = msgspec.json.decode(await server.run_call(reply, lambda _: None))["result"]
    again = server.post(_call({"requestState": asked["requestState"], "inputResponses": {
        "reply": {"action": "accept", "content": {"reply": "Porto"}}}}),
        protocol_version="2026-07-28", method_header="tools/call", name_header="plan_trip")
    assert isinstance(again, McpCall)
    second = msgspec.json.decode(await server.run_call(again, lambda _: None))["result"]
    assert second["resultType"] == "input_required"
    assert seen[0] is None and seen[1].reply == "Porto"
