"""A2A 1.0 against the official ``a2a-sdk`` (PyPI), over real HTTP (uvicorn on 127.0.0.1): the SDK's
client against bindloop's server (card, streaming and blocking sends, a task's state
transitions, a context's conversation, approvals and questions as ``input-required``, cancel,
typed errors, identities), bindloop's client and tool against the SDK's server, and bindloop's
tool against bindloop's server inside a bindloop agent."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx
import msgspec
import pytest

pytest.importorskip("a2a")

from a2a.client import ClientConfig, create_client  # noqa: E402
from a2a.helpers.proto_helpers import new_task_from_user_message  # noqa: E402
from a2a.server.agent_execution import AgentExecutor, RequestContext  # noqa: E402
from a2a.server.events import EventQueue  # noqa: E402
from a2a.server.request_handlers import DefaultRequestHandler  # noqa: E402
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes  # noqa: E402
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater  # noqa: E402
from a2a.types.a2a_pb2 import (  # noqa: E402
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import (  # noqa: E402
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.struct_pb2 import Value  # noqa: E402
from google.protobuf.json_format import MessageToDict  # noqa: E402
from starlette.applications import Starlette  # noqa: E402

from bindloop.contracts import ToolError, ToolResult, ToolSuspend, UserMessage  # noqa: E402
from bindloop.hosts.a2a.server import A2aServer  # noqa: E402
from bindloop.hosts.a2a.client import A2aClient, a2a_tool  # noqa: E402
from bindloop.hosts.chat.run import ChatInput, Emit  # noqa: E402
from bindloop.hosts.chat.access import ChatRefused, ChatRequest
from bindloop.hosts.chat.agent import agent_runner  # noqa: E402
from bindloop.completion import TextEvent  # noqa: E402
from bindloop.tools import define_tool  # noqa: E402
from bindloop.protocols.a2a import A2aAgentSkill, A2aRpcError  # noqa: E402
from bindloop.testing import (  # noqa: E402
    final_answer,
    scripted_stream_model,
    tool_call,
    tool_call_turn,
)



def _send(text: str = "hi", **fields: Any) -> SendMessageRequest:
    return SendMessageRequest(message=Message(message_id=f"m-{text}", role=Role.ROLE_USER,
                                              parts=[Part(text=text)], **fields))


async def _events(base: str, request: SendMessageRequest, *, streaming: bool = True,
                  headers: dict[str, str] | None = None) -> list[StreamResponse]:
    http = httpx.AsyncClient(headers=headers or {})
    client = await create_client(base, ClientConfig(streaming=streaming, httpx_client=http))
    try:
        return [e async for e in client.send_message(request)]
    finally:
        await client.close()
        await http.aclose()


async def _client(base: str, headers: dict[str, str] | None = None) -> Any:
    return await create_client(base, ClientConfig(
        streaming=False, httpx_client=httpx.AsyncClient(headers=headers or {})))


def _states(events: list[StreamResponse]) -> list[str]:
    out = []
    for e in events:
        if e.HasField("task"):
            out.append(TaskState.Name(e.task.status.state))
        elif e.HasField("status_update"):
            out.append(TaskState.Name(e.status_update.status.state))
    return out


def _task_of(events: list[StreamResponse]) -> Task:
    last = events[-1]
    assert last.HasField("task"), last
    return last.task


def _text(task: Task) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


# -- the SDK's client against bindloop's server ----------------------------------------------------

def test_the_card_names_the_agent_its_skills_and_its_json_rpc_interface(served: Any) -> None:
    model = scripted_stream_model([final_answer("x")])
    app = A2aServer(agent_runner(model), name="greeter", description="Greets people.",
                    skills=[A2aAgentSkill(id="greet", name="Greet", description="Says hello.",
                                          tags=("hello",))])
    with served(app) as base:
        async def main() -> AgentCard:
            async with httpx.AsyncClient() as http:
                from a2a.client import A2ACardResolver
                return await A2ACardResolver(http, base).get_agent_card()

        card = asyncio.run(main())
    assert card.name == "greeter" and card.description == "Greets people."
    assert card.capabilities.streaming is True
    assert [(i.protocol_binding, i.protocol_version, i.url) for i in card.supported_interfaces] \
        == [("JSONRPC", "1.0", base + "/")]
    assert [(s.id, list(s.tags)) for s in card.skills] == [("greet", ["hello"])]


def test_a_streamed_message_is_a_task_from_submitted_through_working_to_completed(served: Any) -> None:
    model = scripted_stream_model([final_answer("Hello there, friend.")], chunk_size=4)
    with served(A2aServer(agent_runner(model), name="a", description="d")) as base:
        events = asyncio.run(_events(base, _send("hi")))

        async def get(task_id: str) -> Task:
            client = await _client(base)
            return await client.get_task(GetTaskRequest(id=task_id))

        task_id = events[0].task.id
        task = asyncio.run(get(task_id))
    assert _states(events) == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING",
                               "TASK_STATE_COMPLETED"]
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert len(chunks) > 2 and not chunks[0].append and all(c.append for c in chunks[1:])
    assert chunks[-1].last_chunk
    assert "".join(p.text for c in chunks for p in c.artifact.parts) == "Hello there, friend."
    assert TaskState.Name(task.status.state) == "TASK_STATE_COMPLETED"
    assert _text(task) == "Hello there, friend."
    assert [m.parts[0].text for m in task.history] == ["hi"]


def test_a_blocking_send_waits_for_the_end_and_a_context_keeps_the_conversation(served: Any) -> None:
    model = scripted_stream_model([final_answer("One."), final_answer("Two.")])
    with served(A2aServer(agent_runner(model), name="a", description="d")) as base:
        first = _task_of(asyncio.run(_events(base, _send("first"), streaming=False)))
        second = _task_of(asyncio.run(_events(base, _send("second", context_id=first.context_id),
                                              streaming=False)))
    assert TaskState.Name(first.status.state) == "TASK_STATE_COMPLETED" and _text(first) == "One."
    assert second.context_id == first.context_id and second.id != first.id
    assert _text(second) == "Two."
    # the second task's model call saw the context's conversation
    seen = model.requests[1].messages
    assert [type(m).__name__ for m in seen][-3:] == ["UserMessage", "AssistantMessage",
                                                   "UserMessage"]
    assert seen[-1].content == "second" and seen[-2].content == "One."


class _World:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    def tools(self) -> list[Any]:
        class Title(msgspec.Struct):
            title: str

        def delete(args: Title, _ctx: object) -> ToolResult:
            self.deleted.append(args.title)
            return ToolResult(content=f"deleted {args.title}")

        def city(_args: Title, _ctx: object) -> ToolSuspend:
            return ToolSuspend(mode="waiting_for_reply", detail="Which city do you mean?")

        return [define_tool(name="delete_note", description="Delete a note.", args=Title,
                            execute=delete),
                define_tool(name="ask_city", description="Ask the user.", args=Title,
                            execute=city)]


def _approval_app(world: _World, *turns: Any) -> A2aServer:
    model = scripted_stream_model(list(turns))
    runner = agent_runner(model, tools=world.tools(), needs_approval=["delete_note"])
    return A2aServer(runner, name="notes", description="Keeps notes.")


def test_an_approval_is_input_required_and_yes_on_the_task_runs_the_call(served: Any) -> None:
    world = _World()
    app = _approval_app(world, tool_call_turn([tool_call("delete_note", {"title": "groceries"},
                                                         id="c1")], text="Deleting."),
                        final_answer("Deleted it."))
    with served(app) as base:
        asked = asyncio.run(_events(base, _send("delete groceries")))
        task_id = asked[0].task.id
        assert world.deleted == []
        assert _states(asked)[-1] == "TASK_STATE_INPUT_REQUIRED"
        status = asked[-1].status_update.status
        data = [MessageToDict(p.data) for p in status.message.parts if p.HasField("data")]
        assert data == [{"kind": "approval", "id": "approval-c1", "toolCallId": "c1",
                         "toolName": "delete_note", "arguments": {"title": "groceries"}}]
        answered = asyncio.run(_events(base, _send("yes", task_id=task_id)))

        async def get() -> Task:
            client = await _client(base)
            return await client.get_task(GetTaskRequest(id=task_id))

        final = asyncio.run(get())
    assert world.deleted == ["groceries"]
    assert _states(answered) == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING",
                                 "TASK_STATE_COMPLETED"]
    assert answered[0].task.id == task_id
    # the second run's artifact adds to the first run's (its ids are its own)
    assert [a.parts[0].text for a in final.artifacts] == ["Deleting.", "Deleted it."]
    assert [m.role for m in final.history] == [Role.ROLE_USER, Role.ROLE_AGENT, Role.ROLE_USER]


def test_a_data_denial_on_the_context_never_runs_the_call_and_the_model_reads_why(served: Any) -> None:
    world = _World()
    model = scripted_stream_model([
        tool_call_turn([tool_call("delete_note", {"title": "groceries"}, id="c1")]),
        final_answer("Kept it.")])
    runner = agent_runner(model, tools=world.tools(), needs_approval=["delete_note"])
    with served(A2aServer(runner, name="notes", description="d")) as base:
        asked = _task_of(asyncio.run(_events(base, _send("delete groceries"), streaming=False)))
        reply = SendMessageRequest(message=Message(
            message_id="m2", role=Role.ROLE_USER, context_id=asked.context_id,
            parts=[Part(data=Value(struct_value=_struct({"approved": False,
                                                          "reason": "keep it"})))]))
        done = _task_of(asyncio.run(_events(base, reply, streaming=False)))
    assert world.deleted == []
    assert done.id == asked.id and TaskState.Name(done.status.state) == "TASK_STATE_COMPLETED"
    denial = model.requests[1].messages[-1]
    assert denial.tool_call_id == "c1" and "keep it" in str(denial.content)


def _struct(value: dict[str, Any]) -> Any:
    from google.protobuf.struct_pb2 import Struct
    s = Struct()
    s.update(value)
    return s


def test_a_question_is_input_required_and_the_reply_is_the_tools_answer(served: Any) -> None:
    world = _World()
    model = scripted_stream_model([
        tool_call_turn([tool_call("ask_city", {"title": "weather"}, id="q1")]),
        final_answer("Sunny in Paris.")])
    runner = agent_runner(model, tools=world.tools())
    with served(A2aServer(runner, name="w", description="d")) as base:
        asked = _task_of(asyncio.run(_events(base, _send("weather?"), streaming=False)))
        assert TaskState.Name(asked.status.state) == "TASK_STATE_INPUT_REQUIRED"
        assert "Which city do you mean?" in asked.status.message.parts[0].text
        done = _task_of(asyncio.run(_events(base, _send("Paris", task_id=asked.id),
                                            streaming=False)))
    assert _text(done) == "Sunny in Paris."
    answer = model.requests[1].messages[-1]
    assert answer.tool_call_id == "q1" and answer.content == "Paris"


class _Slow:
    """A runner that streams one word and then waits until cancelled (or released)."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()

    async def __call__(self, chat: ChatInput, emit: Emit) -> Any:
        emit(0, TextEvent(content="working"))
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            self.cancelled.set()
            raise


def test_cancel_stops_the_run_and_a_second_cancel_is_not_cancelable(served: Any) -> None:
    slow = _Slow()
    with served(A2aServer(slow, name="s", description="d")) as base:
        async def main() -> tuple[Task, Task, Exception, Exception]:
            client = await _client(base)
            started = [e async for e in client.send_message(SendMessageRequest(
                message=Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="go")]),
                configuration=SendMessageConfiguration(return_immediately=True)))]
            task = started[-1].task
            canceled = await client.cancel_task(CancelTaskRequest(id=task.id))
            got = await client.get_task(GetTaskRequest(id=task.id))
            errors = []
            for call in (client.cancel_task(CancelTaskRequest(id=task.id)),
                         client.get_task(GetTaskRequest(id="nope"))):
                try:
                    await call
                except Exception as exc:  # the SDK's typed errors
                    errors.append(exc)
            return canceled, got, errors[0], errors[1]

        canceled, got, again, missing = asyncio.run(main())
    assert slow.cancelled.is_set()
    assert TaskState.Name(canceled.status.state) == "TASK_STATE_CANCELED"
    assert TaskState.Name(got.status.state) == "TASK_STATE_CANCELED"
    assert isinstance(again, TaskNotCancelableError)
    assert isinstance(missing, TaskNotFoundError)


def test_the_sdk_subscribes_to_a_running_task_and_reads_it_to_its_end(served: Any) -> None:
    release = threading.Event()

    async def held(chat: ChatInput, emit: Emit) -> Any:
        emit(0, TextEvent(content="half "))
        while not release.is_set():
            await anyio.sleep(0.01)
        emit(0, TextEvent(content="whole"))

    with served(A2aServer(held, name="h", description="d")) as base:
        async def main() -> list[StreamResponse]:
            http = httpx.AsyncClient()
            client = await create_client(base, ClientConfig(streaming=True, httpx_client=http))
            started = [e async for e in (await _client(base)).send_message(SendMessageRequest(
                message=Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="go")]),
                configuration=SendMessageConfiguration(return_immediately=True)))]
            task_id = started[-1].task.id
            try:
                events = []
                async for event in client.subscribe(SubscribeToTaskRequest(id=task_id)):
                    events.append(event)
                    release.set()  # subscribed (the task came first): let the run end
                return events
            finally:
                await client.close()
                await http.aclose()

        events = asyncio.run(main())
    assert events[0].HasField("task")
    assert TaskState.Name(events[0].task.status.state) == "TASK_STATE_WORKING"
    assert _states(events)[-1] == "TASK_STATE_COMPLETED"
    assert "whole" in "".join(p.text for e in events if e.HasField("artifact_update")
                              for p in e.artifact_update.artifact.parts)


def test_a_message_to_an_ended_task_is_unsupported(served: Any) -> None:
    model = scripted_stream_model([final_answer("Done.")])
    with served(A2aServer(agent_runner(model), name="a", description="d")) as base:
        task = _task_of(asyncio.run(_events(base, _send("x"), streaming=False)))
        with pytest.raises(UnsupportedOperationError):
            asyncio.run(_events(base, _send("more", task_id=task.id), streaming=False))


async def _bearer(request: ChatRequest) -> str:
    token = request.header("authorization") or ""
    if token not in ("Bearer alice", "Bearer bob"):
        raise ChatRefused("a bearer token is needed")
    return token[7:]


def test_a_task_belongs_to_its_identity_and_no_token_is_401(served: Any) -> None:
    model = scripted_stream_model([final_answer("For alice.")])
    app = A2aServer(agent_runner(model), name="a", description="d", authorize=_bearer)
    with served(app) as base:
        alice = {"authorization": "Bearer alice"}
        task = _task_of(asyncio.run(_events(base, _send("x"), streaming=False, headers=alice)))

        async def as_(headers: dict[str, str]) -> Any:
            client = await _client(base, headers)
            return await client.get_task(GetTaskRequest(id=task.id))

        assert _text(asyncio.run(as_(alice))) == "For alice."
        with pytest.raises(TaskNotFoundError):
            asyncio.run(as_({"authorization": "Bearer bob"}))
        r = httpx.post(base + "/", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask",
                                         "params": {"id": task.id}},
                       headers={"a2a-version": "1.0"})
        assert r.status_code == 401 and r.json()["error"]["message"] == "a bearer token is needed"
        assert httpx.get(base + "/.well-known/agent-card.json").status_code == 200


def test_without_the_version_header_the_agent_answers_version_not_supported(served: Any) -> None:
    model = scripted_stream_model([final_answer("x")])
    with served(A2aServer(agent_runner(model), name="a", description="d")) as base:
        call = {"jsonrpc": "2.0", "id": 7, "method": "GetTask", "params": {"id": "t"}}
        r = httpx.post(base + "/", json=call)
        assert r.status_code == 200
        assert r.json()["error"]["code"] == -32009 and r.json()["id"] == 7
        ok = httpx.post(base + "/", json=call, headers={"A2A-Version": "1.0"})
        assert ok.json()["error"]["code"] == -32001


# -- bindloop's client against the SDK's server ----------------------------------------------------

class _SdkAgent(AgentExecutor):
    """An a2a-sdk agent: echoes in upper case as an artifact; ``ask`` asks for input first;
    ``fail`` fails."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if context.current_task is None:
            assert context.message is not None
            await event_queue.enqueue_event(new_task_from_user_message(context.message))
        await updater.start_work()
        if text == "fail":
            await updater.failed(updater.new_agent_message([Part(text="no can do")]))
            return
        if text == "ask":
            await updater.requires_input(updater.new_agent_message([Part(text="Which one?")]))
            return
        await updater.add_artifact([Part(text=text.upper())], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise UnsupportedOperationError()


@contextmanager
def _sdk_server(served: Any) -> Iterator[str]:
    holder: dict[str, str] = {}

    class Late:  # the card's URL is known once the port is
        async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "lifespan":  # the SDK's app needs none
                while (await receive())["type"] != "lifespan.shutdown":
                    await send({"type": "lifespan.startup.complete"})
                await send({"type": "lifespan.shutdown.complete"})
                return
            await holder["app"](scope, receive, send)  # type: ignore[operator]

    late = Late()
    with served(late) as base:
        card = AgentCard(name="echo", description="Echoes.", version="1.0.0",
                         capabilities=AgentCapabilities(streaming=True),
                         default_input_modes=["text/plain"], default_output_modes=["text/plain"],
                         supported_interfaces=[AgentInterface(
                             url=base + "/rpc", protocol_binding="JSONRPC",
                             protocol_version="1.0")])
        handler = DefaultRequestHandler(agent_executor=_SdkAgent(),
                                        task_store=InMemoryTaskStore(), agent_card=card)
        holder["app"] = Starlette(routes=[*create_agent_card_routes(card),
                                          *create_jsonrpc_routes(handler, "/rpc")])  # type: ignore[assignment]
        yield base


def test_bindloops_client_and_tool_against_the_sdks_server(served: Any) -> None:
    with _sdk_server(served) as base:
        async def main() -> dict[str, Any]:
            out: dict[str, Any] = {}
            async with A2aClient(base) as client:
                out["card"] = (await client.card()).name
                task = await client.send(client.message("hello"))
                out["task"] = task
                out["events"] = [e async for e in client.stream(client.message("streamed"))]
                try:
                    await client.get_task("missing")
                except A2aRpcError as exc:
                    out["missing"] = exc
            tool = a2a_tool(base, name="echo")
            out["ok"] = await tool.execute('{"message": "shout"}', None)
            out["ask"] = await tool.execute('{"message": "ask"}', None)
            out["fail"] = await tool.execute('{"message": "fail"}', None)
            return out

        out = asyncio.run(main())
    assert out["card"] == "echo"
    task = out["task"]
    assert task.status.state == "TASK_STATE_COMPLETED"
    assert [p.text for a in task.artifacts for p in a.parts] == ["HELLO"]
    kinds = [next(k for k in ("task", "status_update", "artifact_update", "message")
                  if getattr(e, k) is not None) for e in out["events"]]
    assert kinds[0] == "task" and "artifact_update" in kinds
    assert out["events"][-1].status_update.status.state == "TASK_STATE_COMPLETED"
    assert out["missing"].code == -32001 and out["missing"].reason == "TASK_NOT_FOUND"
    assert out["ok"] == ToolResult(content="SHOUT")
    assert isinstance(out["ask"], ToolResult)
    assert out["ask"].content.startswith("input required (task_id=")
    assert "Which one?" in out["ask"].content
    assert isinstance(out["fail"], ToolError) and "FAILED" in out["fail"].error
    assert "no can do" in out["fail"].error


def test_the_tool_reads_an_unreachable_agent_as_a_tool_error_without_its_url(served: Any) -> None:
    async def main() -> Any:
        return await a2a_tool("http://127.0.0.1:9", name="gone").execute(
            '{"message": "hi"}', None)

    outcome = asyncio.run(main())
    assert isinstance(outcome, ToolError) and "could not be reached" in outcome.error
    assert "127.0.0.1" not in outcome.error


# -- bindloop's tool against bindloop's server, inside a bindloop agent ---------------------------

def test_a_bindloop_agent_asks_a_bindloop_a2a_agent_through_the_tool(served: Any) -> None:
    child = scripted_stream_model([final_answer("Paris is the capital.")])
    with served(A2aServer(agent_runner(child), name="geo", description="Geography.")) as base:
        ask = a2a_tool(base, name="ask_geo")
        parent = scripted_stream_model([
            tool_call_turn([tool_call("ask_geo", {"message": "capital of France?"}, id="a1")]),
            final_answer("The child says: Paris.")])
        parent_app = A2aServer(agent_runner(parent, tools=[ask]), name="p", description="d")
        with served(parent_app) as parent_base:
            async def main() -> tuple[Any, list[Any]]:
                async with A2aClient(parent_base) as client:
                    events = [e async for e in client.stream(client.message("France?"))]
                    task = await client.get_task(events[0].task.id)
                return task, events

            task, events = asyncio.run(main())
    assert child.requests[0].messages[-1] == UserMessage(content="capital of France?")
    answer = parent.requests[1].messages[-1]
    assert answer.tool_call_id == "a1" and answer.content == "Paris is the capital."
    assert task.status.state == "TASK_STATE_COMPLETED"
    assert [p.text for a in task.artifacts for p in a.parts] == ["The child says: Paris."]
    assert events[-1].status_update.status.state == "TASK_STATE_COMPLETED"




def test_the_docs_page_runs_as_written(capsys: Any) -> None:
    import re
    import textwrap
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "a2a.md").read_text()
    blocks = [textwrap.dedent(b) for b in re.findall(r"```python\n(.*?)```", text, re.S)]
    namespace: dict[str, Any] = {}
    try:
        for block in blocks:
            exec(compile(block, "a2a.md", "exec"), namespace)
    finally:
        if "server" in namespace:
            namespace["server"].should_exit = True
    assert capsys.readouterr().out.splitlines() == [
        "geo",
        "TASK_STATE_COMPLETED Paris is the capital of France.",
        "TASK_STATE_COMPLETED About 2.1 million people.",
        "ask_geo ['message', 'task_id']",
    ]
