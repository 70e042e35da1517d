"""The ASGI host's identity hook and bounds, over real HTTP: a chat belongs to the identity that
started it (another one reads, resumes, stops and reuses nothing of it), runs are capped per
identity and in all (429 + Retry-After), and a body that does not arrive in time gets 408 (stalled
bodies that arrived together each at a deadline of its own)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx
import pytest

from tests.hosts.stalled import stalled_body_deadlines
from bindloop.completion import TextEvent
from bindloop.hosts.asgi.chat import ChatApp
from bindloop.hosts.chat.run import ChatInput, Emit
from bindloop.hosts.chat.access import ChatRefused, ChatRequest, scoped_chat_id

CHAT = {"id": "c1", "trigger": "submit-message", "messages": [
    {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hello"}]}]}


async def bearer(request: ChatRequest) -> str:
    token = request.header("authorization") or ""
    if not token.startswith("Bearer ") or token[7:] not in ("alice", "bob", "carol"):
        raise ChatRefused("a bearer token is needed")
    return token[7:]


def _as(who: str) -> dict[str, str]:
    return {"authorization": f"Bearer {who}"}


class Held:
    """A runner whose runs stay open until released; it records what each run was given."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.seen: list[tuple[str, str]] = []

    async def __call__(self, chat: ChatInput, emit: Emit) -> Any:
        self.seen.append((chat.chat_id, chat.identity))
        emit(0, TextEvent(content=f"for {chat.identity}"))
        while not self.release.is_set():
            await anyio.sleep(0.01)


def test_a_chat_belongs_to_its_identity(served: Any) -> None:
    runner = Held()
    with served(ChatApp(runner, authorize=bearer)) as base:
        assert httpx.post(base + "/api/chat", json=CHAT, timeout=30).status_code == 401
        assert httpx.get(base + "/api/chat/c1/stream", timeout=30).status_code == 401
        with httpx.stream("POST", base + "/api/chat", json=CHAT, headers=_as("alice"),
                          timeout=30) as alice:
            first = next(alice.iter_text())
            event_id = next(line[4:] for line in first.split("\n") if line.startswith("id: "))
            # bob knows the chat id and even alice's event id: he gets nothing of hers
            for headers in (_as("bob"), {**_as("bob"), "last-event-id": event_id}):
                r = httpx.get(base + "/api/chat/c1/stream", headers=headers, timeout=30)
                assert r.status_code == 204 and "alice" not in r.text
            assert httpx.post(base + "/api/chat/c1/stop", headers=_as("bob"),
                              timeout=30).status_code == 409
            # ... and his post of the same id is a chat of his own, beside hers
            with httpx.stream("POST", base + "/api/chat", json=CHAT, headers=_as("bob"),
                              timeout=30) as bob:
                assert "for bob" in next(bob.iter_text())
                # alice still follows her own run
                with httpx.stream("GET", base + "/api/chat/c1/stream", headers=_as("alice"),
                                  timeout=30) as again:
                    assert "for alice" in next(again.iter_text())
                runner.release.set()
            assert "for alice" in first
    assert sorted(runner.seen) == sorted([(scoped_chat_id("alice", "c1"), "alice"),
                                          (scoped_chat_id("bob", "c1"), "bob")])


def test_scoped_ids_never_meet() -> None:
    pairs = [("a:b", "c"), ("a", "b:c"), ("", "a:b:c"), ("1", "1:1"), ("1:1", "1")]
    keys = [scoped_chat_id(i, c) for i, c in pairs]
    assert len(set(keys)) == len(keys)


def test_runs_are_capped_per_identity_and_in_all(served: Any) -> None:
    runner = Held()
    app = ChatApp(runner, authorize=bearer, max_runs=2, max_runs_per_identity=1)
    with served(app) as base:
        with httpx.stream("POST", base + "/api/chat", json=CHAT, headers=_as("alice"),
                          timeout=30) as one:
            next(one.iter_text())
            again = httpx.post(base + "/api/chat", json={**CHAT, "id": "c2"},
                               headers=_as("alice"), timeout=30)
            assert again.status_code == 429 and again.headers["retry-after"] == "1"
            assert again.json()["error"] == "too_many_runs"
            with httpx.stream("POST", base + "/api/chat", json=CHAT, headers=_as("bob"),
                              timeout=30) as two:
                next(two.iter_text())
                full = httpx.post(base + "/api/chat", json=CHAT, headers=_as("carol"),
                                  timeout=30)
                assert full.status_code == 429
                runner.release.set()
        # the runs ended: their places are free again
        deadline = time.monotonic() + 10
        while app._per_identity and time.monotonic() < deadline:
            time.sleep(0.01)
        runner.release.set()
        assert httpx.post(base + "/api/chat", json=CHAT, headers=_as("carol"),
                          timeout=30).status_code == 200


def test_a_body_that_does_not_arrive_in_time_gets_408(served: Any) -> None:
    with served(ChatApp(Held(), body_timeout_s=0.5)) as base:
        url = urlsplit(base)
        with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
            sock.sendall(b"POST /api/chat HTTP/1.1\r\nhost: x\r\ncontent-type: application/json"
                         b"\r\ncontent-length: 1000\r\n\r\n{\"id\":")
            started = time.monotonic()
            answer = sock.recv(4096)
            assert answer.startswith(b"HTTP/1.1 408")
            assert time.monotonic() - started < 5


def test_stalled_bodies_that_arrived_together_time_out_at_deadlines_of_their_own(
        served: Any) -> None:
    """A crowd of stalled bodies is not refused in one instant: each request's 408 names its
    own deadline, none past ``body_timeout_s`` nor under three quarters of it."""
    with served(ChatApp(Held(), body_timeout_s=2.0)) as base:
        deadlines = stalled_body_deadlines(urlsplit(base).port or 80, (
            b"POST /api/chat HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: 1000\r\n\r\n{\"id\":"))
    assert all(1.5 <= d <= 2.0 for d in deadlines), deadlines
    assert len(set(deadlines)) == 4, deadlines


def test_a_caller_at_its_bound_is_refused_before_its_body_is_read(served: Any) -> None:
    """The 429 comes at once, before the body: a stalled or huge body of a caller with no room
    left costs the host no read (the body here never arrives)."""
    runner = Held()
    with served(ChatApp(runner, authorize=bearer, max_runs_per_identity=1,
                        body_timeout_s=20)) as base:
        url = urlsplit(base)
        with httpx.stream("POST", base + "/api/chat", json=CHAT, headers=_as("alice"),
                          timeout=30) as one:
            next(one.iter_text())
            with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
                sock.sendall(b"POST /ag-ui HTTP/1.1\r\nhost: x\r\nauthorization: Bearer alice"
                             b"\r\ncontent-type: application/json\r\ncontent-length: 1048000"
                             b"\r\n\r\n{")
                answer = sock.recv(4096)
            assert answer.startswith(b"HTTP/1.1 429"), answer[:80]
            assert b"retry-after: 1" in answer.lower()
            runner.release.set()


@pytest.mark.parametrize("status", [200, 500])
def test_chat_refused_takes_401_or_403_only(status: int) -> None:
    with pytest.raises(ValueError):
        ChatRefused(status=status)


def _large_chat(chat_id: str) -> dict[str, Any]:
    return {"id": chat_id, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "x" * 100_000}]}]}


def test_large_bodies_are_bounded_from_admission_until_their_runs_end(served: Any) -> None:
    """``max_large_bodies=1``: while one request with a body over 64 KiB runs, another large one
    is a 429 ``too_many_large_requests`` -- at once when it declares its length (the body is
    never read), after the read when it is sent chunked -- and a small one is served; once the
    large run ends, a large request is served again."""
    from bindloop.hosts.asgi.chat import LARGE_BODY

    runner = Held()
    with served(ChatApp(runner, authorize=bearer, max_large_bodies=1, body_timeout_s=20)) as base:
        url = urlsplit(base)
        with httpx.stream("POST", base + "/api/chat", json=_large_chat("big"),
                          headers=_as("alice"), timeout=30) as big:
            next(big.iter_text())  # its run is going on, holding the one slot
            with socket.create_connection((url.hostname, url.port), timeout=10) as sock:
                sock.sendall(b"POST /ag-ui HTTP/1.1\r\nhost: x\r\nauthorization: Bearer bob"
                             b"\r\ncontent-type: application/json\r\ncontent-length: %d"
                             b"\r\n\r\n{" % (LARGE_BODY + 1))
                answer = b""
                while b"}" not in answer.partition(b"\r\n\r\n")[2]:  # the head, then the JSON
                    got = sock.recv(4096)
                    assert got, answer
                    answer += got
            assert answer.startswith(b"HTTP/1.1 429"), answer[:80]
            assert b"too_many_large_requests" in answer and b"retry-after: 1" in answer.lower()
            assert b"content-length:" in answer.lower()  # no chunk framing on a refusal
            body = httpx.Request("POST", "/", json=_large_chat("chunked")).read()

            def chunks() -> Any:
                for i in range(0, len(body), 16_384):
                    yield body[i:i + 16_384]

            chunked = httpx.post(base + "/api/chat", content=chunks(), timeout=30,
                                 headers={**_as("bob"), "content-type": "application/json"})
            assert (chunked.status_code, chunked.json()["error"]) == (
                429, "too_many_large_requests")
            runner.release.set()  # from here on every run ends at once
            small = httpx.post(base + "/api/chat", json=CHAT, headers=_as("carol"), timeout=30)
            assert small.status_code == 200
        deadline = time.monotonic() + 30  # the big run ends and gives its slot back
        while (again := httpx.post(base + "/api/chat", json=_large_chat("again"),
                                   headers=_as("bob"), timeout=30)).status_code == 429:
            assert time.monotonic() < deadline, again.text
            time.sleep(0.05)
        assert again.status_code == 200
        assert [seen for seen in runner.seen if seen[0].endswith("chunked")] == []
