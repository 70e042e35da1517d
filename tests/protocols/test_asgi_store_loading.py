"""A Redis server still loading its dataset (``LOADING``, after a restart) is a store that cannot
answer yet: every route of the chat host answers 503 ``store_unavailable`` with ``Retry-After``
(never a 500, never the server's text), no call waits the load out, and once the data is loaded
the host serves again. Against a real ``redis-server`` slowed down while it loads (Redis's own
``key-load-delay`` hook), and at the protocol edge (a proxy answering ``LOADING`` to every
command) for the routes that read an existing chat."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from bindloop.completion import TextEvent
from bindloop.hosts.asgi.chat import ChatApp
from bindloop.hosts.chat.run import ChatInput, Emit
from harness.fixtures.store_servers import RedisServer, redis_bin
from log_stores import LogStore
from tests.hosts.proxy import CuttingProxy

CHAT = {"id": "c1", "trigger": "submit-message", "messages": [
    {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}]}
AG_UI: dict[str, Any] = {"threadId": "t1", "runId": "r1", "messages": [
    {"id": "u1", "role": "user", "content": "hello"}], "tools": [], "context": [],
    "state": None, "forwardedProps": {}}
ROUTES = [("POST", "/api/chat", CHAT), ("POST", "/ag-ui", AG_UI),
          ("GET", "/api/chat/c1/stream", None), ("GET", "/ag-ui/t1/stream", None),
          ("POST", "/api/chat/c1/stop", None), ("DELETE", "/api/chat/c1", None),
          ("DELETE", "/ag-ui/t1", None)]


async def say_hi(chat: ChatInput, emit: Emit) -> Any:
    emit(0, TextEvent(content="hi"))
    return "hi"


def _each_route_is_unavailable(base: str) -> None:
    for method, path, body in ROUTES:
        answer = httpx.request(method, base + path, json=body, timeout=30)
        assert answer.status_code == 503, (method, path, answer.status_code, answer.text)
        assert answer.json()["error"] == "store_unavailable"
        assert answer.headers["retry-after"] == "1"
        assert "LOADING" not in answer.text and "redis" not in answer.text.lower()


def _loading(client: Any) -> bool:
    import redis

    try:
        client.ping()
    except redis.exceptions.BusyLoadingError:
        return True
    return False


@pytest.fixture
def slow_loading_redis() -> Iterator[RedisServer]:
    """A ``redis-server`` of this test's own (it is restarted), its append-only file holding
    20,000 keys in its RDB base."""
    if redis_bin() is None:
        pytest.skip("redis-server is not installed (make store-servers)")
    import redis

    server = RedisServer()
    server.start()
    try:
        client = redis.Redis.from_url(server.url)
        client.eval("for i = 1, 20000 do redis.call('SET', 'fill:' .. i, i) end return 1", 0)
        client.bgrewriteaof()
        deadline = time.monotonic() + 60
        while True:
            info = client.info("persistence")
            if not (info["aof_rewrite_in_progress"] or info["aof_rewrite_scheduled"]):
                break
            assert time.monotonic() < deadline, "the append-only file was never rewritten"
            time.sleep(0.02)
        client.close()
        yield server
    finally:
        server.close()


def test_a_redis_loading_its_dataset_is_a_503_on_every_route(
        served: Any, slow_loading_redis: RedisServer) -> None:
    import redis

    server = slow_loading_redis
    store = LogStore("redis", server.url, f"t_{uuid.uuid4().hex[:16]}")
    probe = redis.Redis.from_url(server.url)
    try:
        with served(ChatApp(say_hi, logs=store.logs())) as base:
            first = httpx.post(f"{base}/api/chat", json=CHAT, timeout=30)
            assert first.status_code == 200 and '"type":"finish"' in first.text
            # Restarted, it loads 20,000 keys at 1 ms each: about twenty seconds of LOADING (a
            # round of seven requests on a loaded machine takes a few). A round of every route
            # made between two probes that both met LOADING was answered while it loaded.
            server.restart(key_load_delay_us=1000)
            deadline = time.monotonic() + 60
            while not _loading(probe):
                assert time.monotonic() < deadline, "the server never answered LOADING"
                time.sleep(0.01)
            started = time.monotonic()
            _each_route_is_unavailable(base)
            took = time.monotonic() - started
            assert _loading(probe), (
                f"the dataset finished loading within the {took:.1f} s the round took: the "
                "answers may not have met LOADING")
            # Loaded, the host serves again: the chat's next run, and a resume of it.
            deadline = time.monotonic() + 120
            while _loading(probe):
                assert time.monotonic() < deadline, "the server never finished loading"
                time.sleep(0.1)
            again = httpx.post(f"{base}/api/chat", json=CHAT, timeout=30)
            assert again.status_code == 200 and '"type":"finish"' in again.text
            run = next(line[4:] for line in again.text.splitlines() if line.startswith("id: "))
            resumed = httpx.get(f"{base}/api/chat/c1/stream",
                                headers={"last-event-id": run}, timeout=30)
            assert resumed.status_code == 200 and resumed.text.rstrip().endswith("[DONE]")
    finally:
        probe.close()
        store.close()


def test_a_store_answering_loading_is_a_503_on_every_route_at_the_protocol_edge(
        served: Any, redis_url: str) -> None:
    """The same through a proxy that answers ``LOADING`` to every command while it is armed
    (and passes everything through otherwise), with chats of both protocols stored first."""
    proxy = CuttingProxy(int(urlparse(redis_url).port or 6379))
    store = LogStore("redis", f"redis://127.0.0.1:{proxy.port}/0", f"t_{uuid.uuid4().hex[:16]}")
    try:
        with served(ChatApp(say_hi, logs=store.logs())) as base:
            for path, body in (("/api/chat", CHAT), ("/ag-ui", AG_UI)):
                assert httpx.post(base + path, json=body, timeout=30).status_code == 200
            proxy.starting("redis")
            _each_route_is_unavailable(base)
            assert proxy.refusals >= len(ROUTES)
            proxy.starting(None)
            assert httpx.delete(f"{base}/api/chat/c1", timeout=30).status_code == 204
            assert httpx.post(f"{base}/ag-ui", json={**AG_UI, "runId": "r2"},
                              timeout=30).status_code == 200
    finally:
        store.close()
        proxy.close()
