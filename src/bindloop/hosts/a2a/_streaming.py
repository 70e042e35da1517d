"""The A2A server's streams: a run's updates folded into its task as they come (:class:`Frames`,
the encoder behind :func:`~bindloop.hosts.chat.run.drive_run`), and a task's updates sent as SSE
to a ``SendStreamingMessage`` or ``SubscribeToTask`` client (:func:`stream_task`) until the run
ends or the client goes -- the run goes on without it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio

from bindloop.hosts.a2a._tasks import Task
from bindloop.hosts.asgi.chat import Receive, Send
from bindloop.protocols import EncoderInput
from bindloop.protocols.a2a import (
    A2aStreamResponse,
    A2aTask,
    A2aTaskEncoder,
    RunRecorder,
    encode_a2a_result,
)

__all__ = ("Frames", "stream_task")

_SSE_HEADERS = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
                (b"x-accel-buffering", b"no")]


class Frames:
    """The A2A task encoder behind :func:`~bindloop.hosts.chat.run.drive_run`: each update is
    folded into the task (and its log) as it comes, stamped by ``now_ms``; nothing goes through
    ``write``. ``recorder`` keeps the run's messages for the task's transcript."""

    def __init__(self, task: Task, encoder: A2aTaskEncoder, recorder: RunRecorder,
                 now_ms: Callable[[], float]) -> None:
        self._task = task
        self._now_ms = now_ms
        self.encoder = encoder
        self.recorder = recorder

    def apply(self, updates: list[A2aStreamResponse]) -> list[bytes]:
        now = self._now_ms()
        for update in updates:
            self._task.apply(update, now)
        return []

    def start(self) -> list[bytes]:
        return self.apply(self.encoder.start())

    def feed(self, event: EncoderInput, turn_index: int | None) -> list[bytes]:
        self.recorder.feed(event)
        return self.apply(self.encoder.feed(event, turn_index=turn_index))

    def finish(self, result: Any) -> list[bytes]:
        return self.apply(self.encoder.finish())

    def abort(self) -> list[bytes]:
        return self.apply(self.encoder.abort())

    def fail(self, text: str) -> list[bytes]:
        return self.apply(self.encoder.fail(text))

    def close(self) -> list[bytes]:
        return []


async def stream_task(rid: str | int | None, task: Task, after: int, receive: Receive, send: Send,
                      *, first: A2aTask, begin: Callable[[], None] | None = None) -> None:
    """SSE: ``first`` (the task), then its updates from ``after`` until the run's end;
    ``begin()`` (the run's start) once ``first`` is sent -- or the client gone."""
    task.readers += 1
    try:
        await _tail(rid, task, after, receive, send, first, begin)
    finally:
        task.readers -= 1
        task.trim()


async def _tail(rid: str | int | None, task: Task, after: int, receive: Receive, send: Send,
                first: A2aTask, begin: Callable[[], None] | None) -> None:
    try:
        await send({"type": "http.response.start", "status": 200, "headers": _SSE_HEADERS})
        await _send_sse(send, rid, {"task": first})
    except OSError:
        return  # the client's socket is gone
    finally:
        if begin is not None:
            begin()
    async with anyio.create_task_group() as tg:
        async def watch_disconnect() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            tg.cancel_scope.cancel()  # only this stream: the run goes on

        tg.start_soon(watch_disconnect)
        try:
            while True:
                changed = task.changed
                if after < task.log_end:
                    chunk = task.log[after - task.log_base:]
                    after += len(chunk)
                    await send({"type": "http.response.body", "more_body": True,
                                "body": b"".join(_sse(rid, u) for u in chunk)})
                    continue
                if not task.running:
                    break
                await changed.wait()
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            pass  # the client's socket is gone
        tg.cancel_scope.cancel()


def _sse(rid: str | int | None, update: A2aStreamResponse) -> bytes:
    return b"data: " + encode_a2a_result(rid, update) + b"\n\n"


async def _send_sse(send: Send, rid: str | int | None, result: Any) -> None:
    await send({"type": "http.response.body", "more_body": True,
                "body": b"data: " + encode_a2a_result(rid, result) + b"\n\n"})
