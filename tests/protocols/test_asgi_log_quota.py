"""One run's log is bounded (``ChatApp(max_log_bytes=)``): a run that streams without end is
stopped once its frames reach the quota, its stream ends with the protocol's error (``log_full``
and the run's id), its log keeps what it logged (a resume reads it to that error), the host's
log says why, and the app goes on serving -- in memory and in every shared log store, over real
HTTP (uvicorn on 127.0.0.1), with scripted runners and with the agent runner over a real wire
model. :func:`drive_run`'s quota is held to its bound by a property."""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.completion import TextEvent
from bindloop.hosts import create_model
from bindloop.hosts.chat.agent import agent_runner
from bindloop.hosts.asgi.chat import ChatApp
from bindloop.hosts.chat.run import AgUiFrames, ChatInput, Emit, UiFrames, drive_run
from bindloop.hosts.chat.errors import error_text
from bindloop.hosts.chat.quota import DEFAULT_MAX_LOG_BYTES, LogFullError, LogQuota
from bindloop.protocols import AgUiEncoder, UIStreamEncoder, encode_ui_chunk
from bindloop.testing import final_answer
from harness.fixtures.provider_replies import sse_event
from harness.fixtures.scripted_server import ScriptedProviderServer, ScriptedReply, turn_reply
from log_stores import STORES, LogStore

QUOTA = 40_000
WORD = "x" * 1_000  # each text delta: a frame of about 1 KiB


def _chat(chat_id: str, text: str) -> dict[str, Any]:
    return {"id": chat_id, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]}


class Endless:
    """A runner that streams a word at a time without end when asked to go ``forever`` (a model
    that never stops talking), else says one word and finishes; it records being cancelled."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()

    async def __call__(self, chat: ChatInput, emit: Emit) -> Any:
        said = " ".join(str(getattr(m, "content", "")) for m in chat.transcript)
        if "forever" not in said:
            emit(0, TextEvent(content="done"))
            return "done"
        try:
            while True:
                emit(0, TextEvent(content=WORD))
                await anyio.sleep(0)
        except anyio.get_cancelled_exc_class():
            self.cancelled.set()
            raise


def _frames(text: str) -> list[tuple[str | None, str]]:
    """``(id, data)`` of each SSE event."""
    out = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        ident, data = None, ""
        for line in block.split("\n"):
            if line.startswith("id: "):
                ident = line[4:]
            elif line.startswith("data: "):
                data += line[6:]
        out.append((ident, data))
    return out


def _wait(predicate: Any, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.mark.parametrize("log_store", ["memory", *STORES], indirect=True)
def test_a_run_streaming_without_end_is_stopped_at_its_log_quota(
        served: Any, log_store: LogStore, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="bindloop.hosts.asgi.chat")
    logs = log_store.logs()
    runner = Endless()
    with served(ChatApp(runner, logs=logs, max_log_bytes=QUOTA)) as base:
        answer = httpx.post(f"{base}/api/chat", json=_chat("c1", "talk forever"), timeout=60)
        assert answer.status_code == 200
        frames = _frames(answer.text)
        assert frames[-1] == (None, "[DONE]")
        run = str(frames[0][0]).rpartition(":")[0]
        error = msgspec.json.decode(frames[-2][1])
        assert error == {"type": "error",
                         "errorText": f"the run was stopped: log_full [ref {run}]"}
        assert runner.cancelled.wait(30)  # the runner was stopped, not left streaming

        # The log keeps every frame the client got, up to the error; within the quota, plus the
        # batch that reached it and the closing frames.
        _wait(lambda: (r := logs.record(run)) is not None and r.status == "failed",
              "the run's record to end as failed")
        logged = logs.read(run, None)
        assert [f"{run}:{o}" for o, _ in logged[:-1]] == [i for i, _ in frames[:-1]]
        size = sum(len(p) for _, p in logged)
        assert QUOTA <= size <= QUOTA + 2 * len(WORD) + 200

        # A resume from an early frame reads the rest of it, to the same error.
        resumed = httpx.get(f"{base}/api/chat/c1/stream",
                            headers={"last-event-id": f"{run}:3"}, timeout=60)
        assert resumed.status_code == 200
        again = _frames(resumed.text)
        assert again[0][0] == f"{run}:4" and again[-2:] == frames[-2:]

        # The app goes on: the same chat and another one are served.
        for chat_id in ("c1", "c2"):
            ok = httpx.post(f"{base}/api/chat", json=_chat(chat_id, "hello"), timeout=60)
            assert ok.status_code == 200 and '"type":"finish"' in ok.text

    # The host's log says why, under the run's id.
    why = [r for r in caplog.records if r.exc_info and isinstance(r.exc_info[1], LogFullError)]
    assert len(why) == 1 and run in why[0].getMessage()
    assert f"quota is {QUOTA} bytes" in str(why[0].exc_info[1])  # type: ignore[index]


def test_an_ag_ui_run_ends_with_run_error_at_its_quota(
        served: Any) -> None:
    runner = Endless()
    with served(ChatApp(runner, max_log_bytes=QUOTA)) as base:
        body: dict[str, Any] = {"threadId": "t1", "runId": "r1", "messages": [
            {"id": "u1", "role": "user", "content": "talk forever"}], "tools": [],
            "context": [], "state": None, "forwardedProps": {}}
        answer = httpx.post(f"{base}/ag-ui", json=body, timeout=60)
    events = [msgspec.json.decode(d) for _, d in _frames(answer.text)]
    assert events[0]["type"] == "RUN_STARTED"
    assert events[-1] == {"type": "RUN_ERROR",
                          "message": "the run was stopped: log_full [ref r1]"}
    # every text message the client was told of opened is closed before the error
    starts = sum(e["type"] == "TEXT_MESSAGE_START" for e in events)
    assert starts == sum(e["type"] == "TEXT_MESSAGE_END" for e in events) >= 1


def test_the_log_quota_is_a_positive_bound_with_a_default() -> None:
    with pytest.raises(ValueError, match="max_log_bytes"):
        ChatApp(Endless(), max_log_bytes=0)
    with pytest.raises(ValueError, match="max_bytes"):
        LogQuota(0)
    assert DEFAULT_MAX_LOG_BYTES == 8 * 1024 * 1024
    assert error_text(LogFullError(10, 5), "r9") == "the run was stopped: log_full [ref r9]"


class _Scripted:
    """A runner emitting ``sizes`` text deltas of those lengths (checking in with the event loop
    after each), then finishing."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes

    async def __call__(self, chat: ChatInput, emit: Emit) -> Any:
        for size in self.sizes:
            emit(0, TextEvent(content="y" * size))
            await anyio.sleep(0)
        return "ok"


def _ui_frames() -> UiFrames:
    return UiFrames(UIStreamEncoder("m1"))


CHAT = ChatInput(chat_id="c", protocol="ui", transcript=())


@settings(max_examples=80, deadline=None)
@given(sizes=st.lists(st.integers(1, 3_000), max_size=30), max_bytes=st.integers(1, 40_000),
       used=st.integers(0, 20_000), ag_ui=st.booleans())
def test_drive_run_stops_a_run_at_its_quota_and_logs_a_prefix_of_its_frames(
        sizes: list[int], max_bytes: int, used: int, ag_ui: bool) -> None:
    """For any run and quota (``used``: bytes a continuation's replay logged first): the frames
    written are the unbounded run's batches up to the first that reaches the quota (each begun
    under it), then the protocol's error saying ``log_full``; a run that stays under the quota
    is written whole and finishes."""

    def frames() -> Any:
        if ag_ui:
            return AgUiFrames(AgUiEncoder(thread_id="t", run_id="r", messages=()))
        return _ui_frames()

    def describe(exc: Exception) -> str:
        return error_text(exc, "r")

    # What the run logs, batch by batch, and where the quota is reached (if it is).
    model = frames()
    batches = [model.start()] + [model.feed(TextEvent(content="y" * n), 0) for n in sizes]
    total, cut = used, None
    for k, batch in enumerate(batches):
        total += sum(len(p) for p in batch)
        if total >= max_bytes:
            cut = k
            break
    if cut is None:
        expected = [p for b in batches for p in b] + model.finish("ok") + model.close()
    else:
        model = frames()  # an encoder fed just as far, then failed
        kept = [model.start()] + [model.feed(TextEvent(content="y" * n), 0) for n in sizes[:cut]]
        expected = ([p for b in kept for p in b] + model.fail(describe(LogFullError(0, 1)))
                    + model.close())

    out: list[bytes] = []
    quota = LogQuota(max_bytes, used=used)
    status = anyio.run(lambda: drive_run(_Scripted(sizes), CHAT, frames(), out.extend,
                                         quota=quota, describe=describe))
    assert status == ("finished" if cut is None else "failed")
    assert out == expected
    assert quota.reached == (cut is not None)
    if cut is not None:
        assert b"log_full [ref r]" in b"".join(out[-2:])


def test_a_run_whose_replay_filled_its_quota_ends_at_once_without_running() -> None:
    ran: list[int] = []

    async def runner(chat: ChatInput, emit: Emit) -> Any:
        ran.append(1)

    out: list[bytes] = []
    status = anyio.run(lambda: drive_run(runner, CHAT, _ui_frames(), out.extend, resumed=True,
                                         quota=LogQuota(100, used=100)))
    assert status == "failed" and ran == []
    assert out[-1] == b"[DONE]" and b"log_full" in out[-2]
    assert msgspec.json.decode(out[-2]) == msgspec.json.decode(encode_ui_chunk(
        UIStreamEncoder("m1").fail("the run was stopped: log_full")[-1]))


def _endless_provider(_request: Any) -> ScriptedReply:
    """An OpenAI-chat provider whose answer is a million characters, 500 a chunk."""

    def chunk(delta: dict[str, Any] | None, finish: str | None = None) -> bytes:
        return sse_event({"id": "c", "object": "chat.completion.chunk", "created": 0,
                          "model": "m", "choices": [] if delta is None else [
                              {"index": 0, "delta": delta, "finish_reason": finish}]})

    chunks = [chunk({"role": "assistant", "content": ""})]
    chunks += [chunk({"content": "word " * 100}) for _ in range(2_000)]
    chunks += [chunk({}, finish="stop"), sse_event("[DONE]")]
    return ScriptedReply(headers=(("content-type", "text/event-stream"),), chunks=tuple(chunks),
                         delay_s=0.001)


def test_an_agent_whose_model_streams_without_end_is_stopped_at_the_quota(served: Any) -> None:
    """The agent runner over a real wire model (an OpenAI-chat provider on 127.0.0.1 answering
    a million characters): the run is cancelled at the quota, mid model call, and the chat
    takes its next message."""
    provider = ScriptedProviderServer().start()
    provider.set_responder("p", _endless_provider)
    try:
        model = create_model("openai:gpt-4.1-mini", api_key="sk-test",
                             base_url=provider.base_url("p"))
        with served(ChatApp(agent_runner(model), max_log_bytes=QUOTA)) as base:
            answer = httpx.post(f"{base}/api/chat", json=_chat("a1", "talk"), timeout=60)
            frames = _frames(answer.text)
            run = str(frames[0][0]).rpartition(":")[0]
            assert msgspec.json.decode(frames[-2][1]) == {
                "type": "error", "errorText": f"the run was stopped: log_full [ref {run}]"}
            assert QUOTA <= len(answer.text) < QUOTA * 2
            provider.set_responder("p", lambda _request: turn_reply(
                "openai_chat", final_answer("fine"), stream=True))
            again = httpx.post(f"{base}/api/chat", json=_chat("a1", "hello"), timeout=60)
            assert again.status_code == 200 and '"type":"finish"' in again.text
    finally:
        provider.stop()
