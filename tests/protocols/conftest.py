"""A real uvicorn server on 127.0.0.1 (a free port) for the protocol host tests."""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from log_stores import STORES, LogStore


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Serve ``app`` under uvicorn on a thread of its own; yields the base URL, stops on exit."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


import pytest  # noqa: E402


@pytest.fixture
def served() -> Any:
    """The :func:`serve` context manager, for tests that start their own app."""
    return serve


@pytest.fixture(params=STORES)
def log_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LogStore]:
    """Each store of run logs the ASGI host can continue runs on, in a fresh namespace: SQLite
    in ``tmp_path``, Postgres and Redis on the test servers (skipped without them, failed in
    CI: see ``tests/conftest.py``). A test may ask for ``memory`` too (indirect
    parametrization)."""
    if request.param == "postgres":
        where = request.getfixturevalue("postgres_dsn")
    elif request.param == "redis":
        where = request.getfixturevalue("redis_url")
    else:  # sqlite (or memory: nowhere)
        where = str(tmp_path)
    store = LogStore(request.param, where, f"t_{uuid.uuid4().hex[:16]}")
    yield store
    store.close()
