"""Stalled request bodies, as a crowd of slow clients sends them: the deadlines a host's 408s name."""

from __future__ import annotations

import socket
import time


def stalled_body_deadlines(port: int, head: bytes, count: int = 4) -> list[float]:
    """Open ``count`` connections to ``127.0.0.1:port`` together, send ``head`` (a request whose
    body never arrives whole) on each, and return the deadline, in seconds, each one's 408 names
    ("took longer than N s"), in the order the connections were opened. Fails if any connection
    gets anything but a 408."""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(count)]
    try:
        for sock in socks:
            sock.sendall(head)
        deadlines = []
        for sock in socks:
            answer = _answer(sock)
            assert answer.startswith(b"HTTP/1.1 408"), answer[:80]
            seconds = answer.split(b"took longer than ", 1)[1].split(b" s", 1)[0]
            deadlines.append(float(seconds))
        return deadlines
    finally:
        for sock in socks:
            sock.close()


def _answer(sock: socket.socket) -> bytes:
    """All a refused request's connection gets, up to its close or its whole JSON (or 30 s)."""
    got, deadline = b"", time.monotonic() + 30
    while time.monotonic() < deadline and not got.rstrip().endswith(b"}"):
        chunk = sock.recv(4096)
        if not chunk:
            break
        got += chunk
    return got
