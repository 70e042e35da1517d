"""Shared by every test: the Hypothesis profiles, and the Postgres and Redis servers the store tests
use -- started here from the Debian binaries on free 127.0.0.1 ports, or the machine's own when
``BINDLOOP_TEST_POSTGRES_DSN`` / ``BINDLOOP_TEST_REDIS_URL`` name one. Without binaries or a URL
the tests that need a server fail in CI (``make store-servers`` installs them) and skip locally,
naming the make target."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from typing import TypeVar

import pytest
from hypothesis import HealthCheck, settings

from harness.fixtures.store_servers import PostgresServer, RedisServer, postgres_bin, redis_bin

# Local runs hunt with fresh random examples every time. CI replays a fixed, derandomized set so a
# rare counter-example found by chance cannot fail an unrelated submission; anything a local hunt
# finds becomes an explicit regression test.
settings.register_profile(
    "default", max_examples=150, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci", max_examples=150, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("ci" if os.environ.get("CI") else "default")


def _missing(what: str) -> None:
    message = f"{what} is not installed: run `make store-servers` (apt-get) or set its URL"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


_Server = TypeVar("_Server", PostgresServer, RedisServer)


def _server(env: str, installed: object, what: str,
            server: Callable[[], _Server]) -> Iterator[_Server | None]:
    """A server these tests start and close (``None`` when ``env`` names the machine's own)."""
    if os.environ.get(env):
        yield None
        return
    if installed is None:
        _missing(what)
    started = server()
    try:
        started.start()
        yield started
    finally:
        started.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer | None]:
    """The server these tests started (``None`` when the machine's own is used)."""
    yield from _server("BINDLOOP_TEST_POSTGRES_DSN", postgres_bin(), "postgresql",
                       PostgresServer)


@pytest.fixture(scope="session")
def postgres_dsn(postgres_server: PostgresServer | None) -> str:
    return os.environ.get("BINDLOOP_TEST_POSTGRES_DSN") or postgres_server.dsn  # type: ignore[union-attr]


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer | None]:
    yield from _server("BINDLOOP_TEST_REDIS_URL", redis_bin(), "redis-server",
                       RedisServer)


@pytest.fixture(scope="session")
def redis_url(redis_server: RedisServer | None) -> str:
    return os.environ.get("BINDLOOP_TEST_REDIS_URL") or redis_server.url  # type: ignore[union-attr]


@pytest.fixture
def namespace() -> str:
    """A fresh schema name / key prefix per test."""
    return f"t_{uuid.uuid4().hex[:16]}"
