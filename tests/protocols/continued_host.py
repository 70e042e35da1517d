"""A protocol host process for the continuation tests: ``ChatApp`` under uvicorn on 127.0.0.1,
its run logs in a SQLite file (or Postgres, or Redis), its model an OpenAI-chat provider at a
URL, its tools recording each call that ran in a file (one line each, across processes).

    python tests/protocols/continued_host.py PORT_FILE DB PROVIDER_URL RAN_FILE [--lease-ms N]
        [--store sqlite|postgres|redis --where DSN_OR_URL --namespace NAME]
        [--receipts] [--receipt-lease-ms N] [--die-in TOOL] [--die-after TOOL]
        [--shared-approvals]

``--store``: where the run logs are -- the SQLite file DB (the default), or the Postgres server
at the DSN ``--where`` (schema ``--namespace``), or the Redis server at the URL ``--where`` (key
prefix ``--namespace:``).
``--receipts``: tool calls go through receipts in a ``SqliteStore`` on the file DB.
``--shared-approvals``: the calls waiting for approval are recorded in the run logs' store too.
``--die-in TOOL``: the process kills itself with SIGKILL while TOOL runs (its effect recorded
in RAN_FILE, its outcome nowhere). ``--die-after TOOL``: right after TOOL's receipt recorded its
outcome, before the save that follows: a process lost at the worst moment.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
from pathlib import Path
from typing import Any

import msgspec
import uvicorn

from bindloop.contracts import ToolResult
from bindloop.hosts import create_model
from bindloop.hosts.chat.agent import agent_runner
from bindloop.hosts.asgi.approvals import SqlitePendingApprovals
from bindloop.hosts.asgi.chat import ChatApp
from bindloop.hosts.asgi.run_logs import SqliteRunLogs
from bindloop.hosts.stores.postgres_chat import PostgresPendingApprovals, PostgresRunLogs
from bindloop.hosts.stores.redis_chat import RedisPendingApprovals, RedisRunLogs
from bindloop.hosts.stores.sqlite import SqliteStore
from bindloop.tools import define_tool
from bindloop.run import ToolCallReceiptKey


class Words(msgspec.Struct, frozen=True):
    text: str


class Note(msgspec.Struct, frozen=True):
    title: str


class DyingStore(SqliteStore):
    """Receipts that kill this process once ``tool``'s outcome is recorded."""

    def __init__(self, path: str, tool: str | None) -> None:
        super().__init__(path)
        self.tool = tool

    async def complete(self, key: ToolCallReceiptKey, attempt: int, result: Any) -> bool:
        landed = await super().complete(key, attempt, result)
        if key.tool_name == self.tool:
            os.kill(os.getpid(), signal.SIGKILL)
        return landed


def tools(ran_file: str, die_in: str | None) -> list[Any]:
    def ran(name: str, args: msgspec.Struct) -> None:
        with open(ran_file, "a") as f:
            f.write(f"{name} {msgspec.json.encode(args).decode()}\n")
            f.flush()
            os.fsync(f.fileno())
        if name == die_in:
            os.kill(os.getpid(), signal.SIGKILL)

    def count(args: Words, _ctx: object) -> ToolResult:
        ran("word_count", args)
        return ToolResult(content=str(len(args.text.split())))

    def delete(args: Note, _ctx: object) -> ToolResult:
        ran("delete_note", args)
        return ToolResult(content=f"deleted {args.title!r}")

    return [define_tool(name="word_count", description="Count the words in a text.", args=Words,
                        execute=count),
            define_tool(name="delete_note", description="Delete a note by title.", args=Note,
                        execute=delete)]


def stores(kind: str, db: str, where: str, namespace: str) -> tuple[Any, Any]:
    """The run logs and the pending approvals of ``kind``."""
    if kind == "postgres":
        return (PostgresRunLogs(where, schema=namespace),
                PostgresPendingApprovals(where, schema=namespace))
    if kind == "redis":
        return (RedisRunLogs(where, prefix=f"{namespace}:"),
                RedisPendingApprovals(where, prefix=f"{namespace}:"))
    return SqliteRunLogs(db), SqlitePendingApprovals(db)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port_file", help="where the port it listens on is written, once it "
                                          "listens (the host picks a free one itself)")
    parser.add_argument("db")
    parser.add_argument("provider")
    parser.add_argument("ran_file")
    parser.add_argument("--lease-ms", type=float, default=1000)
    parser.add_argument("--receipts", action="store_true")
    parser.add_argument("--receipt-lease-ms", type=float, default=10_000)
    parser.add_argument("--die-in", default=None)
    parser.add_argument("--die-after", default=None)
    parser.add_argument("--shared-approvals", action="store_true")
    parser.add_argument("--store", choices=("sqlite", "postgres", "redis"), default="sqlite")
    parser.add_argument("--where", default="")
    parser.add_argument("--namespace", default="")
    args = parser.parse_args()
    logs, approvals = stores(args.store, args.db, args.where, args.namespace)
    model = create_model("openai:scripted-model", base_url=args.provider, api_key="sk-test")
    receipts = DyingStore(args.db, args.die_after) if args.receipts else None
    extra: dict[str, Any] = {}
    if args.shared_approvals:
        extra["approvals"] = approvals
    runner = agent_runner(model, tools=tools(args.ran_file, args.die_in),
                          needs_approval=["delete_note"], receipts=receipts,
                          receipt_lease_ms=args.receipt_lease_ms, **extra)
    app = ChatApp(runner, logs=logs, lease_ms=args.lease_ms)
    # The host binds a free port itself and says which: a port picked by the parent and bound
    # here later could be taken in between (by any socket's ephemeral port).
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    Path(args.port_file + ".part").write_text(str(sock.getsockname()[1]))
    os.replace(args.port_file + ".part", args.port_file)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


if __name__ == "__main__":
    main()
