"""Scale: agent sessions over several worker processes sharing Postgres (+ Redis for the rate
limit) versus one process on SQLite, in one run.

Every session is a real loop through ``run_from_checkpoint`` with a ``ModelAdapter`` over HTTP to
the scripted OpenAI-chat provider on 127.0.0.1 (SSE): two ``charge`` tool calls, each through an
idempotency receipt (a claim, read only when refused, and a completion), then a final answer —
three model turns, a checkpoint committed at every settled boundary, and every model call admitted by the limit store (a
concurrency slot and a requests-per-minute window, as ``create_limit_middleware`` does). Per configuration it
prints sessions/s, the store time added per turn (p50/p99 over sessions), session wall time, and
store calls and network round trips per turn.

    python bench/scale.py --sessions 1000 --processes 4
"""

from __future__ import annotations

import argparse
import contextvars
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
STEPS = 2
TENANT = "scale"


def responder() -> Any:
    import msgspec

    from bindloop.contracts import (
        ModelTurnResult,
        ToolCall,
        ToolMessage,
        TurnUsage,
        UserMessage,
        messages_from_openai,
    )
    from harness.fixtures.scripted_server import RecordedRequest, ScriptedReply, turn_reply

    def respond(request: RecordedRequest) -> ScriptedReply:
        body = msgspec.json.decode(request.body)
        messages = messages_from_openai(body["messages"])
        first = next(m for m in messages if isinstance(m, UserMessage))
        session = str(first.content).split()[1].rstrip(":")
        done = [m for m in messages if isinstance(m, ToolMessage)]
        usage = TurnUsage(input_tokens=10 * len(messages), output_tokens=7)
        if len(done) < STEPS:
            args = json.dumps({"session": session, "step": len(done)})
            turn = ModelTurnResult(text="charging", usage=usage, tool_calls=(
                ToolCall(id=f"call_{session}_{len(done)}", name="charge", arguments=args),))
        else:
            turn = ModelTurnResult(text=f"session {session} done", usage=usage)
        return turn_reply("openai_chat", turn, stream=True, model=body["model"])

    return respond


SESSION_STORE_S: contextvars.ContextVar[list[float]] = contextvars.ContextVar("store_s")


class Timed:
    """Wraps a store: counts calls and the seconds spent awaiting them, in total and for the
    session whose task makes the call (``SESSION_STORE_S``; tasks the loop starts inherit it)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.calls = 0
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        async def timed(*args: Any, **kwargs: Any) -> Any:
            from bindloop._awaitable import resolve

            t0 = time.perf_counter()
            try:
                return await resolve(attr(*args, **kwargs))
            finally:
                spent = time.perf_counter() - t0
                self.seconds += spent
                self.calls += 1
                SESSION_STORE_S.get([0.0])[0] += spent

        return timed


def _open(config: str, addresses: dict[str, str], prefix: str) -> tuple[Any, Any]:
    if config.startswith("sqlite"):
        from bindloop.hosts.stores.sqlite import SqliteStore

        store = SqliteStore(addresses["sqlite"])
        return store, store
    from bindloop.hosts.stores.postgres import PostgresStore
    from bindloop.hosts.stores.redis import RedisStore

    return (PostgresStore(addresses["postgres"], schema=prefix, pool_size=8),
            RedisStore(addresses["redis"], prefix=f"{prefix}:"))


async def worker(config: str, addresses: dict[str, str], prefix: str, first: int, count: int,
                 concurrency: int, base_url: str) -> dict[str, Any]:
    import anyio
    import httpx

    from bindloop.contracts import ToolCall, ToolDefinition, ToolResult, UserMessage
    from bindloop.hosts.transports.httpx import HttpxTransport
    from bindloop.run import (
        ReceiptExecute,
        ReceiptReplay,
        ToolCallReceiptKey,
        decide_tool_call_receipt,
        tool_call_args_hash,
    )
    from bindloop.loop import ToolRunner
    from bindloop.model import StreamModel
    from bindloop.checkpoints import RestoredLoop, create_loop_checkpoint, run_from_checkpoint
    from bindloop.wire import ModelAdapter, OpenAIChatAdapter, WireOptions

    raw_store, raw_limits = _open(config, addresses, prefix)
    store, limits = Timed(raw_store), Timed(raw_limits) if raw_limits is not raw_store else None
    limits = limits or store
    chat = OpenAIChatAdapter()
    client = httpx.AsyncClient(limits=httpx.Limits(max_connections=concurrency + 4))
    model = ModelAdapter(chat, HttpxTransport(base_url, headers=chat.auth_headers("k"),
                                              client=client),
                         WireOptions(model="scripted", stream=True))
    tools = [ToolDefinition(name="charge", description="Charge.", parameters={"type": "object"})]
    per_session: list[tuple[float, float, int]] = []  # (wall s, store s, turns)
    timers: dict[str, float] = {}

    class Limited(StreamModel):
        id = "scripted"

        async def complete(self, *args: Any, **kwargs: Any) -> Any:
            # What create_limit_middleware does around a call: a slot, a window admission, the
            # slot back.
            while not await limits.enter("provider:slots", 10_000):
                await anyio.sleep(0.001)
            try:
                await limits.admit("provider:rpm", 60_000.0, 10**9, 1, time.time() * 1000)
                return await model.complete(*args, **kwargs)
            finally:
                await limits.leave("provider:slots")

    async def charge(call: ToolCall) -> ToolResult:
        args = json.loads(call.arguments)
        key = ToolCallReceiptKey(tenant_id=TENANT, run_id=args["session"], tool_name=call.name,
                                 args_hash=tool_call_args_hash(args))
        attempt = 1
        if not await store.claim(key, 1, 30_000.0):  # a fresh call: claimed in one round trip
            decision = decide_tool_call_receipt(state=await store.read(key), effect="resumable")
            if isinstance(decision, ReceiptReplay):
                return ToolResult(content=str(decision.result))
            assert isinstance(decision, ReceiptExecute)
            assert await store.claim(key, decision.attempt, 30_000.0)
            attempt = decision.attempt
        result = f"charged {args['session']}:{args['step']}"
        assert await store.complete(key, attempt, result)
        return ToolResult(content=result)

    limiter = anyio.CapacityLimiter(concurrency)

    async def one(n: int) -> None:
        async with limiter:
            t0 = time.perf_counter()
            spent = [0.0]
            SESSION_STORE_S.set(spent)
            cp = create_loop_checkpoint(execution_id=f"{prefix}-s{n:05d}", max_iterations=5,
                                        messages=[UserMessage(content=f"session s{n:05d}: go")])
            await store.save(cp)
            result = await run_from_checkpoint(
                checkpoint=cp, commit=store.commit,
                restore=lambda c: RestoredLoop(model=Limited(),
                                               runner=ToolRunner(run_tool_call=charge,
                                                                 build_tools=lambda: tools),
                                               capture_bindings=lambda: c.bindings))
            assert result.stop_reason == "done", result.stop_reason
            per_session.append((time.perf_counter() - t0, spent[0], result.iterations))

    print("ready", flush=True)
    sys.stdin.readline()  # the parent's "go": every worker starts at once
    timers["start"] = time.time()
    async with anyio.create_task_group() as tg:
        for n in range(first, first + count):
            tg.start_soon(one, n)
    timers["end"] = time.time()
    trips = sum(getattr(s, "round_trips", 0) for s in {id(raw_store): raw_store,
                                                       id(raw_limits): raw_limits}.values())
    calls = store.calls + (limits.calls if limits is not store else 0)
    await client.aclose()
    for s in {id(raw_store): raw_store, id(raw_limits): raw_limits}.values():
        closer = getattr(s, "aclose", None)
        if closer is not None:
            await closer()
        else:
            s.close()
    return {"sessions": per_session, "calls": calls, "round_trips": trips, **timers}


def run_config(config: str, processes: int, sessions: int, concurrency: int,
               addresses: dict[str, str], base_url: str) -> dict[str, Any]:
    prefix = f"scale_{config.replace('-', '_').replace('+', '_')}_{os.getpid()}"
    if not config.startswith("sqlite"):
        import anyio

        from bindloop.hosts.stores.postgres import PostgresStore

        async def prepare() -> None:  # the schema once, before the race
            pg = PostgresStore(addresses["postgres"], schema=prefix)
            await pg.load("-")
            await pg.aclose()

        anyio.run(prepare)
    share = sessions // processes
    procs = []
    for i in range(processes):
        count = share if i < processes - 1 else sessions - share * (processes - 1)
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "worker", json.dumps({
                "config": config, "addresses": addresses, "prefix": prefix, "first": i * share,
                "count": count, "concurrency": concurrency, "base_url": base_url})],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    outs = []
    for p in procs:
        out, _ = p.communicate(timeout=1800)
        if p.returncode != 0:
            raise RuntimeError(f"{config} worker failed")
        outs.append(json.loads(out.strip().splitlines()[-1]))
    rows = [s for o in outs for s in o["sessions"]]
    turns = sum(t for _, _, t in rows)
    wall = max(o["end"] for o in outs) - min(o["start"] for o in outs)
    per_turn_ms = sorted(1000 * st / t for _, st, t in rows)
    session_ms = sorted(1000 * w for w, _, _ in rows)

    def pct(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))]

    return {"config": config, "processes": processes, "sessions": len(rows), "turns": turns,
            "sessions_per_s": len(rows) / wall, "store_ms_per_turn_p50": pct(per_turn_ms, 0.5),
            "store_ms_per_turn_p99": pct(per_turn_ms, 0.99),
            "session_ms_p50": statistics.median(session_ms), "session_ms_p99": pct(session_ms, 0.99),
            "calls_per_turn": sum(o["calls"] for o in outs) / turns,
            "round_trips_per_turn": sum(o["round_trips"] for o in outs) / turns}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", nargs="?", default="parent")
    parser.add_argument("spec", nargs="?")
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=32, help="sessions in flight per process")
    args = parser.parse_args()
    if args.mode == "worker":
        import anyio

        spec = json.loads(args.spec)
        out = anyio.run(worker, spec["config"], spec["addresses"], spec["prefix"], spec["first"],
                        spec["count"], spec["concurrency"], spec["base_url"])
        print(json.dumps(out))
        return
    sys.path.insert(0, str(ROOT))
    from harness.fixtures.scripted_server import ScriptedProviderServer
    from harness.fixtures.store_servers import PostgresServer, RedisServer

    pg, rd = PostgresServer(), RedisServer()
    results = []
    with tempfile.TemporaryDirectory(prefix="bindloop-scale-") as tmp:
        try:
            pg.start()
            rd.start()
            addresses = {"postgres": pg.dsn, "redis": rd.url, "sqlite": f"{tmp}/scale.db"}
            with ScriptedProviderServer() as server:
                server.set_responder("openai", responder())
                base_url = server.base_url("openai")
                for config, procs in (("sqlite-1", 1), (f"postgres+redis-{args.processes}",
                                                        args.processes),
                                      (f"sqlite-{args.processes}", args.processes)):
                    if config.startswith("sqlite"):
                        addresses["sqlite"] = f"{tmp}/{config}.db"
                    results.append(run_config(config, procs, args.sessions, args.concurrency,
                                              addresses, base_url))
        finally:
            pg.close()
            rd.close()
    base = results[0]
    print(f"{args.sessions} sessions x {STEPS + 1} model turns, scripted provider over loopback "
          f"HTTP (SSE), {args.concurrency} sessions in flight per process, {os.cpu_count()} cores")
    print(f"{'configuration':<22}{'sessions/s':>11}{'x base':>8}{'store ms/turn p50':>19}"
          f"{'p99':>7}{'session ms p50':>16}{'p99':>7}{'store calls/turn':>18}"
          f"{'net round trips/turn':>22}")
    for r in results:
        print(f"{r['config']:<22}{r['sessions_per_s']:>11.1f}"
              f"{r['sessions_per_s'] / base['sessions_per_s']:>8.2f}"
              f"{r['store_ms_per_turn_p50']:>19.2f}{r['store_ms_per_turn_p99']:>7.2f}"
              f"{r['session_ms_p50']:>16.1f}{r['session_ms_p99']:>7.1f}"
              f"{r['calls_per_turn']:>18.2f}{r['round_trips_per_turn']:>22.2f}")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    main()
