"""A process that holds concurrency slots is SIGKILLed: its slots come back when their lease
ends (SQLite, Postgres and Redis, on real servers), and not before."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from bindloop.hosts.stores.postgres import PostgresStore
from bindloop.hosts.stores.redis import RedisStore
from bindloop.hosts.stores.sqlite import SqliteStore

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
LEASE_MS = 1_500.0

# The holder: takes both slots of "k", says so, then waits to be killed (never leaves).
HOLDER = """
import sys, time, anyio
from tests.hosts.test_slot_leases import open_store
async def main():
    store = open_store(sys.argv[1], sys.argv[2], sys.argv[3])
    assert await store.enter("k", 2) and await store.enter("k", 2)
    print("held", flush=True)
    time.sleep(600)
anyio.run(main)
"""


def open_store(kind: str, where: str, namespace: str) -> Any:
    if kind == "sqlite":
        return SqliteStore(where, slot_lease_ms=LEASE_MS)
    if kind == "postgres":
        return PostgresStore(where, schema=namespace, slot_lease_ms=LEASE_MS)
    return RedisStore(where, prefix=f"{namespace}:", slot_lease_ms=LEASE_MS)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    kind = str(request.param)
    if kind == "sqlite":
        return kind, str(tmp_path / "slots.db")
    return kind, str(request.getfixturevalue("postgres_dsn" if kind == "postgres"
                                             else "redis_url"))


async def test_a_killed_holders_slots_come_back_after_the_lease(
        where: tuple[str, str], namespace: str) -> None:
    kind, location = where
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, kind, location, namespace],
                              cwd=ROOT, stdout=subprocess.PIPE, text=True)
    store = open_store(kind, location, namespace)
    try:
        # connected (a key of its own) before the holder's lease starts to count down
        assert await store.enter("warm", 1)
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        killed = time.monotonic()
        holder.kill()  # SIGKILL: no leave, no renewal, ever
        holder.wait()
        assert await store.enter("k", 2) is False  # the dead holder's slots still stand
        taken = 0
        while taken < 2:  # each lapses a lease after the holder took it
            if await store.enter("k", 2):
                taken += 1
                continue
            assert time.monotonic() - killed < 20, f"{2 - taken} slot(s) never came back"
            await anyio.sleep(0.05)
        waited = (time.monotonic() - killed) * 1000
        assert await store.enter("k", 2) is False  # both are ours now
        assert waited < LEASE_MS + 8_000, waited  # a loaded machine polls late, never early
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        closer = getattr(store, "aclose", None)
        if closer is not None:
            await closer()
        else:
            store.close()
