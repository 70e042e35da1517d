"""The stores the ASGI host keeps run logs and pending approvals in, for the tests that run on
each of them (the ``log_store`` fixture of this directory's conftest)."""

from __future__ import annotations

import uuid
from typing import Any

STORES = ("sqlite", "postgres", "redis")


class LogStore:
    """Run logs and pending approvals of one kind (``sqlite``, ``postgres``, ``redis``) in one
    namespace (a SQLite file, a Postgres schema, a Redis key prefix): each :meth:`logs` call is
    another connection to the same store, as another process would open. (``memory``: the
    in-process logs, a new one at each call, for the tests that hold every store alike.)"""

    def __init__(self, kind: str, where: str, namespace: str,
                 opened: list[Any] | None = None) -> None:
        self.kind = kind
        self.where = where  # the SQLite directory, the Postgres DSN or the Redis URL
        self.namespace = namespace
        self.opened: list[Any] = [] if opened is None else opened

    def _open(self, store: Any) -> Any:
        self.opened.append(store)
        return store

    def close(self) -> None:
        """Close every connection this store (and its fresh namespaces) opened."""
        while self.opened:
            store = self.opened.pop()
            if hasattr(store, "close"):
                store.close()

    def logs(self, **bounds: Any) -> Any:
        return self._open(self._logs(**bounds))

    def watcher(self, served: Any) -> Any:
        """What a test thread reads the served app's run logs ``served`` through: another
        connection to the store, which sees committed states only -- the app's own connection,
        read from another thread, can show a write half done (one in-process ``memory`` log has
        no other connection: ``served`` itself)."""
        return served if self.kind == "memory" else self.logs()

    def approvals(self, **bounds: Any) -> Any:
        return self._open(self._approvals(**bounds))

    def _logs(self, **bounds: Any) -> Any:
        if self.kind == "memory":
            from bindloop.stores import MemoryRunLogs
            return MemoryRunLogs(**bounds)
        if self.kind == "sqlite":
            from bindloop.hosts.asgi.run_logs import SqliteRunLogs
            return SqliteRunLogs(f"{self.where}/{self.namespace}.db", **bounds)
        if self.kind == "postgres":
            from bindloop.hosts.stores.postgres_chat import PostgresRunLogs
            return PostgresRunLogs(self.where, schema=self.namespace, **bounds)
        from bindloop.hosts.stores.redis_chat import RedisRunLogs
        return RedisRunLogs(self.where, prefix=f"{self.namespace}:", **bounds)

    def _approvals(self, **bounds: Any) -> Any:
        if self.kind == "sqlite":
            from bindloop.hosts.asgi.approvals import SqlitePendingApprovals
            return SqlitePendingApprovals(f"{self.where}/{self.namespace}.db", **bounds)
        if self.kind == "postgres":
            from bindloop.hosts.stores.postgres_chat import PostgresPendingApprovals
            return PostgresPendingApprovals(self.where, schema=self.namespace, **bounds)
        from bindloop.hosts.stores.redis_chat import RedisPendingApprovals
        return RedisPendingApprovals(self.where, prefix=f"{self.namespace}:", **bounds)

    def fresh(self) -> LogStore:
        """The same kind of store in a namespace of its own."""
        return LogStore(self.kind, self.where, f"t_{uuid.uuid4().hex[:16]}", self.opened)

    def args(self) -> list[str]:
        """The store as ``continued_host.py`` reads it."""
        return ["--store", self.kind, "--where", self.where, "--namespace", self.namespace]
