"""The crash test's backends: one store per kind (SQLite file, Postgres schema, Redis prefix) with
the ``charge`` effect's ledger written atomically with the receipt that completes it.

Every backend gives the same async surface to the harness: checkpoints (``load`` / ``save`` /
``commit``), receipts (``read`` / ``claim``), ``complete_charge`` (the receipt and the ledger row in
one transaction or script), ``once_charge`` (the same without a claim before it:
``complete_once``), and, for the parent, ``ledger()``.
"""

from __future__ import annotations

import json
from typing import Any

from bindloop.run import ToolCallReceiptKey

BACKENDS = ("sqlite", "postgres", "redis")


class CrashBackend:
    def __init__(self, kind: str, target: str, namespace: str) -> None:
        self.kind = kind
        if kind == "sqlite":
            from bindloop.hosts.stores.sqlite import SqliteStore

            self.store: Any = SqliteStore(target)
        elif kind == "postgres":
            from bindloop.hosts.stores.postgres import PostgresStore

            self.store = PostgresStore(target, schema=namespace)
        elif kind == "redis":
            from bindloop.hosts.stores.redis import RedisStore

            self.store = RedisStore(target, prefix=f"{namespace}:")
        else:
            raise ValueError(f"unknown backend {kind!r}")
        self.namespace = namespace
        self.now = self.store.now
        self.load, self.save, self.commit = self.store.load, self.store.save, self.store.commit
        self.read, self.claim = self.store.read, self.store.claim

    async def prepare(self) -> None:
        """Create the ledger (once, in the parent, before any child runs)."""
        if self.kind == "sqlite":
            self.store.connection.execute(
                "CREATE TABLE IF NOT EXISTS ledger (session TEXT, step INTEGER, attempt INTEGER)")
        elif self.kind == "postgres":
            await self.store.load("-")  # creates the schema

            async def create(conn: Any) -> None:
                await conn.execute(f"CREATE TABLE IF NOT EXISTS {self.namespace}.ledger "
                                   "(session text, step integer, attempt integer)")

            await self.store._op("prepare", create)

    async def complete_charge(self, key: ToolCallReceiptKey, attempt: int, result: str,
                              session: str, step: int) -> bool:
        if self.kind == "sqlite":
            def write(db: Any) -> None:
                db.execute("INSERT INTO ledger VALUES (?, ?, ?)", (session, step, attempt))

            return bool(self.store.complete_with(key, attempt, result, write))
        if self.kind == "postgres":
            async def effect(conn: Any) -> None:
                await conn.execute(f"INSERT INTO {self.namespace}.ledger VALUES (%s, %s, %s)",
                                   (session, step, attempt))

            return bool(await self.store.complete_with(key, attempt, result, effect))
        row = json.dumps([session, step, attempt]).encode()
        return bool(await self.store.complete_with(key, attempt, result, outbox=("ledger", row)))

    async def once_charge(self, key: ToolCallReceiptKey, result: str, session: str,
                          step: int) -> Any:
        """``complete_once``: the receipt completed by attempt 1 and its ledger row in one write,
        or the receipt that already exists (nothing written)."""
        if self.kind == "sqlite":
            def write(db: Any) -> None:
                db.execute("INSERT INTO ledger VALUES (?, ?, 1)", (session, step))

            return await self.store.complete_once(key, result, write)
        if self.kind == "postgres":
            return await self.store.complete_once(key, result, [(
                f"INSERT INTO {self.namespace}.ledger VALUES (%s, %s, 1)", (session, step))])
        row = json.dumps([session, step, 1]).encode()
        return await self.store.complete_once(key, result, outbox=("ledger", row))

    async def ledger(self) -> list[tuple[str, int, int]]:
        if self.kind == "sqlite":
            return [tuple(r) for r in self.store.connection.execute("SELECT * FROM ledger")]  # type: ignore[misc]
        if self.kind == "postgres":
            async def rows(conn: Any) -> list[tuple[str, int, int]]:
                cur = await conn.execute(f"SELECT * FROM {self.namespace}.ledger")
                return [tuple(r) for r in await cur.fetchall()]

            return list(await self.store._op("ledger", rows))
        return [tuple(json.loads(v)) for v in await self.store.outbox("ledger")]

    async def aclose(self) -> None:
        if self.kind == "sqlite":
            self.store.close()
        else:
            await self.store.aclose()
