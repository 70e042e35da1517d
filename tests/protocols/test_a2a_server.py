"""bindloop's A2A client against bindloop's A2A server over real HTTP (uvicorn on 127.0.0.1): a
failed run tells the client only its category, the bounds (runs per identity, tasks kept, body
time), ``SubscribeToTask``, ``ListTasks``, ``historyLength``, ``returnImmediately`` with cancel,
and the client's typed errors."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import msgspec
import pytest

from tests.hosts.stalled import stalled_body_deadlines
from bindloop.completion import TextEvent
from bindloop.hosts.a2a.server import A2aServer
from bindloop.hosts.a2a.client import A2aClient, A2aClientError
from bindloop.hosts.chat.run import ChatInput, Emit
from bindloop.protocols.a2a import A2aRpcError


class Held:
    """A runner that says a word, then waits until ``release`` (or its cancel)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    async def __call__(self, chat: ChatInput, emit: Emit) -> Any:
        emit(0, TextEvent(content="started "))
        while not self.release.is_set():
            await anyio.sleep(0.01)
        emit(0, TextEvent(content="done"))


async def _boom(chat: ChatInput, emit: Emit) -> Any:
    emit(0, TextEvent(content="partial"))
    raise RuntimeError("db password is hunter2 at http://10.0.0.7/internal")


async def _echo(chat: ChatInput, emit: Emit) -> Any:
    emit(0, TextEvent(content=f"echo {chat.transcript[-1].content}"))


def test_a_failed_run_is_failed_with_its_category_never_its_exception(served: Any) -> None:
    with served(A2aServer(_boom, name="b", description="d")) as base:
        async def main() -> Any:
            async with A2aClient(base) as client:
                return await client.send(client.message("go"))

        task = anyio.run(main)
    assert task.status.state == "TASK_STATE_FAILED"
    text = task.status.message.parts[0].text
    assert text == f"the run failed: internal_error [ref {task.id}]"
    assert b"hunter2" not in msgspec.json.encode(task) and b"10.0.0.7" not in msgspec.json.encode(task)


def test_runs_per_identity_are_bounded_and_subscribe_follows_a_running_task(served: Any) -> None:
    held = Held()
    app = A2aServer(held, name="h", description="d", max_runs_per_identity=1)
    with served(app) as base:
        async def main() -> tuple[Any, Any, list[Any], Any]:
            async with A2aClient(base) as client:
                first = await client.send(client.message("one"), return_immediately=True)
                try:
                    await client.send(client.message("two"))
                    refused: Any = None
                except A2aRpcError as exc:
                    refused = exc
                events: list[Any] = []

                async for event in client.subscribe(first.id):
                    events.append(msgspec.to_builtins(event))
                    held.release.set()  # subscribed (the task came first): let the run end
                done = await client.get_task(first.id)
                return first, refused, events, done

        first, refused, events, done = anyio.run(main)
    assert first.status.state in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    assert refused is not None and refused.code == -32603 and "too many runs" in refused.message
    assert "task" in events[0] and events[0]["task"]["id"] == first.id
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done.status.state == "TASK_STATE_COMPLETED"
    assert [p.text for a in done.artifacts for p in a.parts] == ["started done"]


def test_return_immediately_then_cancel_through_the_client(served: Any) -> None:
    held = Held()
    with served(A2aServer(held, name="h", description="d")) as base:
        async def main() -> tuple[Any, Any]:
            async with A2aClient(base) as client:
                task = await client.send(client.message("x"), return_immediately=True)
                await anyio.sleep(0.1)
                canceled = await client.cancel_task(task.id)
                try:
                    await client.cancel_task(task.id)
                except A2aRpcError as exc:
                    return canceled, exc
            raise AssertionError("a second cancel was accepted")

        canceled, again = anyio.run(main)
    assert canceled.status.state == "TASK_STATE_CANCELED"
    assert again.code == -32002 and again.reason == "TASK_NOT_CANCELABLE"


def test_list_tasks_history_length_and_the_oldest_tasks_forgotten(served: Any) -> None:
    with served(A2aServer(_echo, name="e", description="d", max_tasks=2)) as base:
        async def main() -> tuple[list[Any], dict[str, Any], Any, Any]:
            async with A2aClient(base) as client:
                tasks = [await client.send(client.message(w)) for w in ("a", "b", "c")]
                listed = httpx.post(base + "/", headers={"A2A-Version": "1.0"}, json={
                    "jsonrpc": "2.0", "id": 1, "method": "ListTasks",
                    "params": {"includeArtifacts": True}}).json()["result"]
                short = await client.get_task(tasks[-1].id, history_length=0)
                try:
                    await client.get_task(tasks[0].id)
                    gone: Any = None
                except A2aRpcError as exc:
                    gone = exc
                return tasks, listed, short, gone

        tasks, listed, short, gone = anyio.run(main)
    assert [t["id"] for t in listed["tasks"]] == [tasks[2].id, tasks[1].id]
    assert listed["nextPageToken"] == "" and listed["totalSize"] == 2
    assert listed["tasks"][0]["artifacts"][0]["parts"] == [{"text": "echo c"}]
    assert short.history == () and short.status.state == "TASK_STATE_COMPLETED"
    assert gone is not None and gone.reason == "TASK_NOT_FOUND"


def test_streaming_to_an_ended_task_is_the_agents_typed_error(served: Any) -> None:
    with served(A2aServer(_echo, name="e", description="d")) as base:
        async def main() -> Any:
            async with A2aClient(base) as client:
                task = await client.send(client.message("x"))
                with pytest.raises(A2aRpcError) as caught:
                    async for _ in client.stream(client.message("more", task_id=task.id)):
                        pass
                return caught.value

        error = anyio.run(main)
    assert error.code == -32004 and error.reason == "UNSUPPORTED_OPERATION"


def test_a_client_error_names_the_failure_not_the_url(served: Any) -> None:
    async def missing(chat: ChatInput, emit: Emit) -> Any:
        return None

    with served(A2aServer(missing, name="m", description="d", rpc_path="/rpc")) as base:
        async def main() -> list[Exception]:
            errors: list[Exception] = []
            async with A2aClient(base + "/nowhere") as client:  # no card there
                try:
                    await client.card()
                except A2aClientError as exc:
                    errors.append(exc)
            async with A2aClient(base, max_bytes=10) as client:  # the card is larger
                try:
                    await client.card()
                except A2aClientError as exc:
                    errors.append(exc)
            return errors

        errors = anyio.run(main)
    assert [(e.kind, e.status) for e in errors] == [  # type: ignore[attr-defined]
        ("http_status", 404), ("too_large", None)]
    assert all("127.0.0.1" not in str(e) for e in errors)


def test_a_body_that_does_not_arrive_in_time_gets_408(served: Any) -> None:
    with served(A2aServer(_echo, name="e", description="d", body_timeout_s=0.3)) as base:
        host = urlsplit(base)
        with socket.create_connection((host.hostname, host.port), timeout=10) as sock:
            sock.sendall(b"POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                         b"a2a-version: 1.0\r\ncontent-length: 100\r\n\r\n{")
            start = time.monotonic()
            answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408") and time.monotonic() - start < 5


def test_one_tool_serves_run_after_run_each_on_its_own_event_loop(served: Any) -> None:
    from bindloop.contracts import ToolResult
    from bindloop.hosts.a2a.client import a2a_tool

    with served(A2aServer(_echo, name="e", description="d")) as base:
        tool = a2a_tool(base)  # made once, outside any loop
        for word in ("one", "two", "three"):
            outcome = anyio.run(tool.execute, '{"message": "%s"}' % word, None)
            assert outcome == ToolResult(content=f"echo {word}")


def test_the_tool_streams_from_an_agent_that_streams_and_sends_to_one_that_does_not(
        served: Any) -> None:
    from bindloop.contracts import ToolResult
    from bindloop.hosts.a2a.client import a2a_tool

    seen: list[str] = []

    async def recording(chat: ChatInput, emit: Emit) -> Any:
        seen.append(chat.transcript[-1].content)  # type: ignore[union-attr]
        # 3 s in all, longer than the streaming client's timeout; no silence comes near it
        # (each is 0.6 s: a loaded machine may stretch one, not by the 1.9 s left)
        for word in ("slow ", "a", "n", "sw", "er"):
            emit(0, TextEvent(content=word))
            await anyio.sleep(0.6)

    for streaming in (True, False):
        with served(A2aServer(recording, name="r", description="d",
                              streaming=streaming)) as base:
            client = A2aClient(base, timeout_s=2.5 if streaming else 15)
            outcome = anyio.run(a2a_tool(client).execute, '{"message": "q"}', None)
            assert outcome == ToolResult(content="slow answer"), streaming
    assert seen == ["q", "q"]


def test_a_tasks_update_log_is_dropped_once_no_run_and_no_stream_needs_it(served: Any) -> None:
    app = A2aServer(_echo, name="e", description="d")
    with served(app) as base:
        async def main() -> list[Any]:
            async with A2aClient(base) as client:
                events = [e async for e in client.stream(client.message("x"))]
                await client.send(client.message("y"))
                return events

        events = anyio.run(main)
        logs = [(len(t.log), t.log_base) for t in app._tasks]
    assert len(events) > 3
    assert all(size == 0 and base > 0 for size, base in logs)  # kept: the tasks, not the logs


def test_stalled_bodies_that_arrived_together_time_out_at_deadlines_of_their_own(
        served: Any) -> None:
    """As on the chat host: each stalled body's 408 names its own deadline, all within the last
    quarter of ``body_timeout_s`` -- a crowd is not refused in one instant."""
    with served(A2aServer(_echo, name="e", description="d", body_timeout_s=2.0)) as base:
        deadlines = stalled_body_deadlines(urlsplit(base).port or 80, (
            b"POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"a2a-version: 1.0\r\ncontent-length: 100\r\n\r\n{"))
    assert all(1.5 <= d <= 2.0 for d in deadlines), deadlines
    assert len(set(deadlines)) == 4, deadlines
