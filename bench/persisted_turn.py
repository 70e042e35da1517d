"""A persisted agent turn on Postgres and Redis: worker CPU, round trips and throughput per turn.

Each session is an agent through ``run_from_checkpoint`` over the public testing kit's scripted
stream model (``bindloop.testing``): ``--steps`` turns that each call one ``charge`` tool, then a
final answer. ``charge`` is a receipt-guarded effect written the way ``docs/run.md`` says, in
one of two patterns (``--pattern``):

- ``once`` (the default, the common case): the effect is a ledger row in the store's own
  database, written with its receipt by ``complete_once`` (Postgres: the host's statement in the
  receipt's pipeline; Redis: the outbox list in the receipt's script; memory: a callback in the
  same step). No claim: a persisted turn is the model turn, one write for the call and its
  effect, and the checkpoint save after the step.
- ``claim``: an effect outside the store (an opaque one, an e-mail sent): a claim of attempt 1
  first (the receipt read and the decision only when that claim is refused), the effect, then the
  receipt completed — a persisted turn is the model turn, the claim, the completion and the save.

A checkpoint is committed at every settled boundary (``store.commit``).

Stores: ``memory`` (the in-memory stores of ``bindloop.stores``: the loop's own cost, the floor),
``postgres`` and ``redis`` (``bindloop.hosts.stores``), the servers started here from the Debian
binaries (Postgres with ``pg_stat_statements`` preloaded). Per store and number of worker
processes (``--processes``, default 1, 2, 4) it prints:

- CPU µs per turn: the worker processes' CPU time (user + system) over the measured sessions,
  divided by their turns (every process's CPU summed);
- round trips per turn, counted by the client (the store's ``round_trips``: network round trips
  it waited for) and by the server: Postgres statements (``pg_stat_statements``, BEGIN/COMMIT
  included), Redis scripts run (``EVALSHA``/``EVAL``) and commands (those run inside scripts
  included), from ``INFO commandstats``;
- sessions/s and turns/s over the wall time of the measured sessions (every process starts at
  once, after a warm-up);
- the wall time from each ``charge`` effect to its completion landing and to the step's checkpoint
  landing (median and p90): with ``--pattern claim``, how long a crash leaves the receipt
  ``running``, and how long it would if the completion rode in the checkpoint's commit
  (docs/performance.md).

    python bench/persisted_turn.py [--sessions 400] [--steps 3] [--concurrency 16]
                                   [--processes 1,2,4] [--stores memory,postgres,redis]
                                   [--pattern once|claim] [--read-first]
                                   [--profile postgres|redis]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TENANT = "bench"
LEASE_MS = 30_000.0
WARMUP_SESSIONS = 20


def open_store(kind: str, address: str, prefix: str) -> Any:
    if kind == "postgres":
        from bindloop.hosts.stores.postgres import PostgresStore

        return PostgresStore(address, schema=prefix, pool_size=8)
    if kind == "redis":
        from bindloop.hosts.stores.redis import RedisStore

        return RedisStore(address, prefix=f"{prefix}:")
    from bindloop.stores import MemoryCheckpointStore, MemoryToolCallReceiptStore

    class MemoryStore(MemoryCheckpointStore, MemoryToolCallReceiptStore):
        def __init__(self) -> None:
            MemoryCheckpointStore.__init__(self)
            self.receipts = MemoryToolCallReceiptStore()
            self.round_trips = 0

        async def read(self, key: Any) -> Any:
            return await self.receipts.read(key)

        async def claim(self, key: Any, attempt: int, lease_ms: float) -> bool:
            return await self.receipts.claim(key, attempt, lease_ms)

        async def complete(self, key: Any, attempt: int, result: Any) -> bool:
            return await self.receipts.complete(key, attempt, result)

        async def fail(self, key: Any, attempt: int, error: str | None) -> bool:
            return await self.receipts.fail(key, attempt, error)

        async def complete_once(self, key: Any, result: Any, effect: Any = None) -> Any:
            return await self.receipts.complete_once(key, result, effect)

    return MemoryStore()


async def worker(spec: dict[str, Any]) -> dict[str, Any]:
    import anyio

    from bindloop.checkpoints import RestoredLoop, create_loop_checkpoint, run_from_checkpoint
    from bindloop.contracts import ToolCall, ToolDefinition, ToolResult, UserMessage
    from bindloop.loop import ToolRunner
    from bindloop.run import (
        ReceiptExecute,
        ReceiptReplay,
        ToolCallReceiptKey,
        decide_tool_call_receipt,
        tool_call_args_hash,
    )
    from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

    steps: int = spec["steps"]
    store = open_store(spec["store"], spec["address"], spec["prefix"])
    tools = [ToolDefinition(name="charge", description="Charge.", parameters={"type": "object"})]
    ledger: set[tuple[str, int]] = set()
    # Wall time from each charge's effect to its completion landing, and to the step's checkpoint
    # landing (the crash windows docs/performance.md compares).
    windows: dict[str, list[float]] = {"complete": [], "save": []}
    effect_done: dict[str, float] = {}

    async def charge_once(call: ToolCall) -> ToolResult:
        # The effect is a ledger row written with the receipt: one write, no claim before it.
        args = json.loads(call.arguments)
        key = ToolCallReceiptKey(tenant_id=TENANT, run_id=args["session"], tool_name=call.name,
                                 args_hash=tool_call_args_hash(args))
        mark = (args["session"], args["step"])
        result = f"charged {args['session']}:{args['step']}"
        if spec["store"] == "postgres":
            found = await store.complete_once(key, result, [(
                f"INSERT INTO {spec['prefix']}.ledger VALUES (%s, %s)", mark)])
        elif spec["store"] == "redis":
            found = await store.complete_once(key, result, outbox=(
                "ledger", json.dumps(mark).encode()))
        else:
            found = await store.complete_once(key, result, lambda: ledger.add(mark))
        if found is not None:  # not in this workload: every call is fresh
            raise AssertionError(f"{mark}: a receipt existed: {found!r}")
        effect_done[args["session"]] = time.perf_counter()  # the effect (and its receipt)
        return ToolResult(content=result)

    async def charge(call: ToolCall) -> ToolResult:
        args = json.loads(call.arguments)
        key = ToolCallReceiptKey(tenant_id=TENANT, run_id=args["session"], tool_name=call.name,
                                 args_hash=tool_call_args_hash(args))
        attempt = 1
        if spec["read_first"]:  # the read, then the claim: one round trip more per call
            decision = decide_tool_call_receipt(state=await store.read(key), effect="resumable")
            assert isinstance(decision, ReceiptExecute), decision
            assert await store.claim(key, decision.attempt, LEASE_MS)
        elif not await store.claim(key, 1, LEASE_MS):  # a fresh call: one round trip
            decision = decide_tool_call_receipt(state=await store.read(key), effect="resumable")
            if isinstance(decision, ReceiptReplay):
                return ToolResult(content=str(decision.result))
            assert isinstance(decision, ReceiptExecute), decision
            assert await store.claim(key, decision.attempt, LEASE_MS)
            attempt = decision.attempt
        mark = (args["session"], args["step"])
        assert mark not in ledger, mark
        ledger.add(mark)
        result = f"charged {args['session']}:{args['step']}"
        done = time.perf_counter()  # the effect
        assert await store.complete(key, attempt, result)
        windows["complete"].append(time.perf_counter() - done)
        effect_done[args["session"]] = done
        return ToolResult(content=result)

    async def commit(cp: Any) -> Any:
        decision = await store.commit(cp)
        done = effect_done.pop(cp.execution_id, None)
        if done is not None:
            windows["save"].append(time.perf_counter() - done)
        return decision

    run_tool_call = charge_once if spec["pattern"] == "once" else charge

    def script(session: str) -> Any:
        return scripted_stream_model(
            [tool_call_turn([tool_call("charge", {"session": session, "step": step})])
             for step in range(steps)] + [final_answer(f"session {session} done")])

    async def one(n: int, limiter: anyio.CapacityLimiter, turns: list[int]) -> None:
        async with limiter:
            session = f"{spec['prefix']}-{n:06d}"
            model = script(session)
            cp = create_loop_checkpoint(execution_id=session, max_iterations=steps + 2,
                                        messages=[UserMessage(content=f"session {session}: go")])
            await store.save(cp)
            result = await run_from_checkpoint(
                checkpoint=cp, commit=commit,
                restore=lambda c: RestoredLoop(model=model,
                                               runner=ToolRunner(run_tool_call=run_tool_call,
                                                                 build_tools=lambda: tools),
                                               capture_bindings=lambda: c.bindings))
            assert result.stop_reason == "done", result.stop_reason
            turns.append(result.iterations)

    async def batch(first: int, count: int) -> int:
        limiter = anyio.CapacityLimiter(spec["concurrency"])
        turns: list[int] = []
        async with anyio.create_task_group() as tg:
            for n in range(first, first + count):
                tg.start_soon(one, n, limiter, turns)
        return sum(turns)

    await batch(spec["first"] + 10**6, WARMUP_SESSIONS)  # connections, prepared statements
    print("ready", flush=True)
    await anyio.to_thread.run_sync(sys.stdin.readline)  # the parent's "go": all start at once
    trips0 = store.round_trips
    for found in windows.values():
        found.clear()
    profiler = None
    if spec.get("profile"):
        import cProfile

        # CPU time, not wall time: on a shared machine a wall-clock profile charges the
        # waits for the server and for other processes to whatever was running.
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
    cpu0, t0 = time.process_time(), time.time()
    turns = await batch(spec["first"], spec["count"])
    cpu, t1 = time.process_time() - cpu0, time.time()
    if profiler is not None:
        import pstats

        profiler.disable()
        pstats.Stats(profiler, stream=sys.stderr).sort_stats("tottime").print_stats(int(spec["profile_rows"]))
    out = {"turns": turns, "sessions": spec["count"], "cpu_s": cpu, "start": t0, "end": t1,
           "windows": windows,
           "round_trips": store.round_trips - trips0}
    closer = getattr(store, "aclose", None)
    if closer is not None:
        await closer()
    return out


class Servers:
    """Postgres (``pg_stat_statements`` preloaded) and Redis, and their statement counters."""

    def __init__(self, kinds: set[str]) -> None:
        sys.path.insert(0, str(ROOT))
        from harness.fixtures.store_servers import PostgresServer, RedisServer

        self.pg = PostgresServer({"shared_preload_libraries": "pg_stat_statements",
                                  "pg_stat_statements.track_utility": "on",
                                  "pg_stat_statements.max": "10000"}) \
            if "postgres" in kinds else None
        self.rd = RedisServer() if "redis" in kinds else None

    def __enter__(self) -> Servers:
        try:
            if self.pg:
                self.pg.start()
                self.sql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            if self.rd:
                self.rd.start()
        except BaseException:
            self.__exit__()  # a server started before the failure is stopped, not left behind
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for server in (self.pg, self.rd):
            if server:
                server.close()

    def address(self, kind: str) -> str:
        if kind == "postgres":
            assert self.pg
            return self.pg.dsn
        if kind == "redis":
            assert self.rd
            return self.rd.url
        return ""

    def sql(self, sql: str) -> list[tuple[Any, ...]]:
        import psycopg

        assert self.pg
        with psycopg.connect(self.pg.dsn, autocommit=True) as conn:
            cur = conn.execute(sql)
            return list(cur.fetchall()) if cur.description else []

    def reset(self, kind: str) -> None:
        if kind == "postgres":
            self.sql("SELECT pg_stat_statements_reset()")
        elif kind == "redis":
            self._redis("CONFIG", "RESETSTAT")

    def counts(self, kind: str) -> dict[str, int]:
        if kind == "postgres":
            rows = self.sql("SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements "
                                "WHERE query NOT ILIKE '%pg_stat_statements%'")
            return {"statements": int(rows[0][0])}
        if kind == "redis":
            stats = self._redis("INFO", "commandstats")
            calls = {name.removeprefix("cmdstat_"): int(fields["calls"])
                     for name, fields in stats.items()}
            scripts = calls.get("evalsha", 0) + calls.get("eval", 0)
            other = sum(n for name, n in calls.items()
                        if name not in ("evalsha", "eval", "info", "config|resetstat"))
            return {"scripts": scripts, "commands": scripts + other}
        return {}

    def _redis(self, *command: str) -> Any:
        import redis

        assert self.rd
        client = redis.Redis.from_url(self.rd.url)
        try:
            return client.execute_command(*command)
        finally:
            client.close()


def run(servers: Servers, kind: str, processes: int, args: argparse.Namespace) -> dict[str, Any]:
    prefix = f"pt_{kind}_{processes}_{os.getpid()}"
    if kind == "postgres" and args.pattern == "once":  # the host's table the effect writes
        servers.sql(f"CREATE SCHEMA {prefix}")
        servers.sql(f"CREATE TABLE {prefix}.ledger (session text, step integer, "
                    "PRIMARY KEY (session, step))")
    share = args.sessions // processes
    procs = []
    for i in range(processes):
        count = share if i < processes - 1 else args.sessions - share * (processes - 1)
        spec = {"store": kind, "address": servers.address(kind), "prefix": prefix,
                "first": i * share, "count": count, "steps": args.steps,
                "concurrency": args.concurrency, "read_first": args.read_first,
                "pattern": args.pattern,
                "profile": args.profile == kind and i == 0,
                "profile_rows": args.profile_rows}
        procs.append(subprocess.Popen([sys.executable, __file__, "worker", json.dumps(spec)],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    for p in procs:
        assert p.stdout is not None
        line = p.stdout.readline().strip()
        if line != "ready":
            p.wait()
            raise RuntimeError(f"{kind} worker did not start (exit {p.returncode})")
    servers.reset(kind)
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=1800)
        if p.returncode != 0:
            raise RuntimeError(f"{kind} worker failed (exit {p.returncode})")
        outs.append(json.loads(out.strip().splitlines()[-1]))
    server = servers.counts(kind)
    turns = sum(o["turns"] for o in outs)
    wall = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    return {"store": kind, "processes": processes, "sessions": sum(o["sessions"] for o in outs),
            "turns": turns, "cpu_us_per_turn": 1e6 * sum(o["cpu_s"] for o in outs) / turns,
            "round_trips_per_turn": sum(o["round_trips"] for o in outs) / turns,
            **{f"{k}_per_turn": v / turns for k, v in server.items()},
            "sessions_per_s": sum(o["sessions"] for o in outs) / wall, "turns_per_s": turns / wall,
            **{f"effect_to_{name}_ms": _median_p90([t for o in outs for t in o["windows"][name]])
               for name in ("complete", "save")}}


def _median_p90(seconds: list[float]) -> list[float]:
    ordered = sorted(seconds) or [0.0]
    return [1e3 * ordered[len(ordered) // 2], 1e3 * ordered[int(0.9 * (len(ordered) - 1))]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", nargs="?", default="parent")
    parser.add_argument("spec", nargs="?")
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--steps", type=int, default=3, help="tool-calling turns per session")
    parser.add_argument("--concurrency", type=int, default=16,
                        help="sessions in flight per process")
    parser.add_argument("--processes", default="1,2,4")
    parser.add_argument("--stores", default="memory,postgres,redis")
    parser.add_argument("--pattern", default="once", choices=("once", "claim"),
                        help="once: charge's effect is a ledger row written with its receipt "
                             "(complete_once); claim: an effect outside the store, so a claim "
                             "before it and a completion after it")
    parser.add_argument("--read-first", action="store_true",
                        help="with --pattern claim: read the receipt before claiming it "
                             "(the older pattern)")
    parser.add_argument("--profile", default="", help="cProfile the first worker of this store "
                                                      "(to stderr)")
    parser.add_argument("--profile-rows", type=int, default=35,
                        help="functions the profile prints")
    parser.add_argument("--json", default="", help="also write the rows to this file")
    args = parser.parse_args()
    if args.mode == "worker":
        import anyio

        print(json.dumps(anyio.run(worker, json.loads(args.spec))))
        return
    kinds = [k for k in args.stores.split(",") if k]
    rows = []
    with Servers(set(kinds)) as servers:
        for kind in kinds:
            for processes in (int(n) for n in args.processes.split(",")):
                rows.append(run(servers, kind, processes, args))
    print(f"{args.sessions} sessions x ({args.steps} tool turns + 1 answer), scripted stream "
          f"model, {args.concurrency} sessions in flight per process, {os.cpu_count()} cores, "
          f"pattern {args.pattern}")
    print("| store | processes | CPU µs/turn | round trips/turn (client) | server per turn "
          "| sessions/s | turns/s |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        server = ", ".join(f"{r[k]:.2f} {k.removesuffix('_per_turn')}" for k in
                           ("statements_per_turn", "scripts_per_turn", "commands_per_turn")
                           if k in r) or "-"
        print(f"| {r['store']} | {r['processes']} | {r['cpu_us_per_turn']:.0f} "
              f"| {r['round_trips_per_turn']:.2f} | {server} | {r['sessions_per_s']:.1f} "
              f"| {r['turns_per_s']:.0f} |")
    print("\nWall time from a charge's effect to its completion landing, and to the step's "
          "checkpoint landing (median / p90, ms; with --pattern once the effect and its "
          "receipt land together):")
    print("| store | processes | effect → completion | effect → checkpoint |")
    print("|---|---|---|---|")
    for r in rows:
        (c50, c90), (s50, s90) = r["effect_to_complete_ms"], r["effect_to_save_ms"]
        complete = f"{c50:.2f} / {c90:.2f}" if args.pattern == "claim" else "0 (one write)"
        print(f"| {r['store']} | {r['processes']} | {complete} | {s50:.2f} / {s90:.2f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    main()
