"""A run live in the app is followed from memory: its streams -- the request's own and a resume
from another connection -- read its frames from the app, not from the store, to its end, and get
exactly the frames the store logged. Real HTTP (uvicorn on
127.0.0.1)."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import httpx
import pytest

from bindloop.completion import TextEvent
from bindloop.hosts.asgi.chat import ChatApp
from bindloop.hosts.chat.run import ChatInput, Emit
from bindloop.stores import MemoryRunLogs
from log_stores import STORES, LogStore

CHAT = {"id": "c1", "trigger": "submit-message", "messages": [
    {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}]}


class Counting:
    """``logs`` with every ``read`` and ``record`` counted (the rest passed through)."""

    def __init__(self, logs: Any) -> None:
        self._logs = logs
        self.reads = 0
        self.records = 0

    def record(self, run_id: str) -> Any:
        self.records += 1
        return self._logs.record(run_id)

    def read(self, run_id: str, after: int | None) -> list[tuple[int, bytes]]:
        self.reads += 1
        result: list[tuple[int, bytes]] = self._logs.read(run_id, after)
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logs, name)


class Paced:
    """Twenty words, one every few milliseconds, the last ones only once ``go`` is set (so a
    second follower joins while the run is live)."""

    def __init__(self) -> None:
        self.go = threading.Event()

    async def __call__(self, chat: ChatInput, emit: Emit) -> Any:
        for n in range(20):
            if n == 10:
                while not self.go.is_set():
                    await anyio.sleep(0.01)
            emit(0, TextEvent(content=f"w{n} "))
            await anyio.sleep(0.005)
        return "done"


def _ids(text: str) -> list[str]:
    return [line[4:] for line in text.splitlines() if line.startswith("id: ")]


@pytest.mark.parametrize("log_store", ["memory", *STORES], indirect=True)
def test_followers_of_a_live_run_read_it_from_memory(served: Any, log_store: LogStore) -> None:
    logs = Counting(log_store.logs() if log_store.kind != "memory" else MemoryRunLogs())
    runner = Paced()
    with served(ChatApp(runner, logs=logs)) as base:
        with httpx.stream("POST", f"{base}/api/chat", json=CHAT, timeout=60) as live:
            chunks = live.iter_text()
            seen = next(chunks)
            while "id: " not in seen:
                seen += next(chunks)
            first = _ids(seen)[0]
            run = first.rpartition(":")[0]
            # A second follower joins while the run is live (it waits at frame ten until the
            # resume's response has begun).
            resumed: list[str] = []
            joined = threading.Event()

            def join() -> None:
                with httpx.stream("GET", f"{base}/api/chat/c1/stream",
                                  headers={"last-event-id": first}, timeout=60) as again:
                    joined.set()
                    resumed.append(again.read().decode())

            joiner = threading.Thread(target=join)
            joiner.start()
            assert joined.wait(60)
            runner.go.set()
            whole = seen + "".join(chunks)
            joiner.join(60)
    app_reads, app_records = logs.reads, logs.records
    logged = logs.read(run, None)
    ids = _ids(whole)
    assert ids == [f"{run}:{o}" for o, _ in logged[:-1]]  # every frame logged, in order
    assert resumed and _ids(resumed[0]) == ids[1:]
    assert whole.count("w19") == 1 and resumed[0].rstrip().endswith("data: [DONE]")
    # No store read, however many frames the run logged: only a record read by the POST (is
    # the run id taken?) and one by the resume (which chat is that run of?).
    assert (app_reads, app_records) == (0, 2)
