"""Layout version 2 (leased concurrency slots): a store written by version 1 is upgraded in
place on open, and its slots work afterwards; SQLite, Postgres and Redis on real servers."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bindloop.hosts.stores.postgres import PostgresStore
from bindloop.hosts.stores.redis import RedisStore
from bindloop.hosts.stores.sqlite import SqliteStore
from bindloop.testing.store_kit import checkpoint_at

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_version_1_sqlite_file_is_upgraded(tmp_path: Path) -> None:
    db = tmp_path / "v1.db"
    store = SqliteStore(db)
    await store.save(checkpoint_at("x", 0))
    store.close()
    with sqlite3.connect(db) as conn:  # what version 1 left: no leases table
        conn.execute("DROP TABLE limit_leases")
        conn.execute("PRAGMA user_version=1")
    store = SqliteStore(db)
    try:
        assert store.connection.execute("PRAGMA user_version").fetchone()[0] == 2
        assert await store.load("x") == checkpoint_at("x", 0)
        assert [await store.enter("k", 1) for _ in range(2)] == [True, False]
    finally:
        store.close()


async def test_a_version_1_postgres_schema_is_upgraded(postgres_dsn: str, namespace: str
                                                       ) -> None:
    store = PostgresStore(postgres_dsn, schema=namespace)
    await store.save(checkpoint_at("x", 0))
    async with store._connection() as conn:  # what version 1 left
        await conn.execute(f"DROP TABLE {namespace}.limit_leases")
        await conn.execute(f"DROP FUNCTION {namespace}.enter_slot")
        await conn.execute(f"UPDATE {namespace}.meta SET value = 1")
    await store.aclose()
    store = PostgresStore(postgres_dsn, schema=namespace)
    try:
        assert [await store.enter("k", 1) for _ in range(2)] == [True, False]
        assert await store.load("x") == checkpoint_at("x", 0)
        async with store._connection() as conn:
            cur = await conn.execute(f"SELECT value FROM {namespace}.meta")
            assert await cur.fetchone() == (2,)
    finally:
        await store.aclose()


async def test_a_version_1_redis_layout_is_upgraded(redis_url: str, namespace: str) -> None:
    prefix = f"{namespace}:"
    store = RedisStore(redis_url, prefix=prefix)
    try:
        await store.client.set(f"{prefix}schema", "1")
        await store.client.set(f"{prefix}ls:k", "1")  # a version-1 slot counter, now unread
        assert [await store.enter("k", 1) for _ in range(2)] == [True, False]
        assert await store.client.get(f"{prefix}schema") == b"2"
    finally:
        await store.aclose()
