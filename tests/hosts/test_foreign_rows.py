"""A checkpoint row copied under another conversation's key is refused on load, by every store
(the body names its own execution id), and a checkpoint dict with a lone surrogate in a
wrong-typed field is a CheckpointFormatError, never a bare UnicodeEncodeError."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, strategies as st

from bindloop.contracts import UserMessage
from bindloop.checkpoints import (
    CheckpointFormatError,
    create_loop_checkpoint,
    parse_loop_checkpoint,
    serialize_loop_checkpoint,
)
from bindloop.stores import MemoryCheckpointStore

ALICE = create_loop_checkpoint(execution_id="alice-1", messages=[UserMessage(content="secret")],
                               max_iterations=4)


def _refused(load: Any) -> None:
    with pytest.raises(CheckpointFormatError) as info:
        anyio.run(load, "bob-1")
    assert info.value.field == "execution_id"
    assert "secret" not in str(info.value)


def test_sqlite_refuses_a_copied_row(tmp_path: Path) -> None:
    from bindloop.hosts.stores.sqlite import SqliteStore

    store = SqliteStore(tmp_path / "s.db")
    store.save_checkpoint(ALICE)
    db = sqlite3.connect(tmp_path / "s.db")
    with db:
        db.execute("INSERT INTO checkpoints (execution_id, revision, body) SELECT 'bob-1', "
                   "revision, body FROM checkpoints WHERE execution_id = 'alice-1'")
    db.close()
    _refused(store.load)
    assert anyio.run(store.load, "alice-1") == ALICE


def test_the_in_memory_reference_store_refuses_a_copied_row() -> None:
    store = MemoryCheckpointStore()
    anyio.run(store.save, ALICE)
    store.rows["bob-1"] = store.rows["alice-1"]
    _refused(store.load)


def test_postgres_refuses_a_copied_row(postgres_dsn: str, namespace: str) -> None:
    import psycopg

    from bindloop.hosts.stores.postgres import PostgresStore

    async def main() -> None:
        store = PostgresStore(postgres_dsn, schema=namespace)
        try:
            await store.save(ALICE)
            with psycopg.connect(postgres_dsn) as conn:
                conn.execute(f"INSERT INTO {namespace}.checkpoints (execution_id, revision, body) "
                             f"SELECT 'bob-1', revision, body FROM {namespace}.checkpoints "
                             "WHERE execution_id = 'alice-1'")
            with pytest.raises(CheckpointFormatError):
                await store.load("bob-1")
            assert await store.load("alice-1") == ALICE
        finally:
            await store.aclose()

    anyio.run(main)


def test_redis_refuses_a_copied_row(redis_url: str, namespace: str) -> None:
    import redis

    from bindloop.hosts.stores.redis import RedisStore

    async def main() -> None:
        store = RedisStore(redis_url, prefix=f"{namespace}:")
        try:
            await store.save(ALICE)
            raw = redis.Redis.from_url(redis_url)
            raw.hset(f"{namespace}:cp:bob-1", mapping=raw.hgetall(f"{namespace}:cp:alice-1"))
            raw.close()
            with pytest.raises(CheckpointFormatError):
                await store.load("bob-1")
            assert await store.load("alice-1") == ALICE
        finally:
            await store.aclose()

    anyio.run(main)


_FIELDS = [k for k in msgspec.json.decode(serialize_loop_checkpoint(ALICE)) if k != "version"]


@given(st.sampled_from(_FIELDS), st.sampled_from(["\ud800", ["\udfff"], {"\ud800": 1},
                                                   {"role": "user", "content": 5, "x": "\ud800"}]))
def test_a_lone_surrogate_anywhere_in_a_dict_is_a_format_error(field: str, bad: Any) -> None:
    body = msgspec.json.decode(serialize_loop_checkpoint(ALICE))
    body[field] = bad
    with pytest.raises(CheckpointFormatError) as info:
        parse_loop_checkpoint(body)
    assert field in str(info.value) or "surrogate" in str(info.value)
