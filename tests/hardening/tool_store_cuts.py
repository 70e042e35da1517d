"""Store connections cut under tools, measured: ``charge`` effects (3 per session, each through an
idempotency receipt whose completion writes the ledger row in the same transaction or script) on
real Postgres and Redis, the store's connections going through a loopback proxy that keeps cutting
receipt statements and checkpoint commits at random (before they reach the server, or after they
ran there), every session driven like docs/scale.md's deploy example: ``run_from_checkpoint`` and,
on a ``StoreError``, the next "request" resumes from the stored checkpoint.

Each backend runs twice: with the **default** settings (a store error inside a tool ends the run)
and with the former default (``is_fatal_tool_error=lambda e: False``: the model reads the store
error as the tool's error, the session goes on). Prints one line per run: effects, cuts, runs
stopped, sessions finished, lost and duplicated effects.

    python tests/hardening/tool_store_cuts.py --sessions 267 --seed 1
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

import anyio
from bindloop.loop import ToolRunner
from bindloop.testing import function_model

ROOT = Path(__file__).resolve().parents[2]


async def trial(kind: str, direct: str, namespace: str, *, former: bool, seed: int,
                sessions: int) -> dict[str, Any]:
    from bindloop import UserMessage
    from bindloop.hosts.stores.postgres import PostgresStore
    from bindloop.hosts.stores.redis import RedisStore
    from bindloop.run import ToolCallReceiptKey
    from bindloop.checkpoints import (
        RestoredLoop,
        create_loop_checkpoint,
        run_from_checkpoint,
    )
    from bindloop.stores import StoreError
    from tests.hosts import test_store_errors_in_tools as kit
    from tests.hosts.proxy import CuttingProxy

    rng = random.Random(seed)
    proxy = CuttingProxy(kit._port(direct))
    store: Any
    if kind == "postgres":
        parts = [p for p in direct.split() if not p.startswith("port=")]
        store = PostgresStore(" ".join([*parts, f"port={proxy.port}"]), schema=namespace)
        markers = [(b"bindloop_claim", "before"), (b"bindloop_claim", "after"),
                   (b"bindloop_reclaim", "before"), (b"bindloop_complete", "after"),
                   (b"COMMIT", "after")]
    else:
        store = RedisStore(f"redis://127.0.0.1:{proxy.port}/0", prefix=f"{namespace}:")
        claim = kit._redis_claim_marker()
        markers = [(claim, "before"), (claim, "after"), (b"completed", "before"),
                   (b"completed", "after")]
    ledger = kit.Ledger(store, namespace, direct)
    await store.save(create_loop_checkpoint(execution_id="warm", max_iterations=1,
                                            messages=[UserMessage(content="warm")]))
    await ledger.create()
    warm = ToolCallReceiptKey(tenant_id="t", run_id="warm", tool_name="w", args_hash="h")
    assert await store.claim(warm, 1, 1000)  # Redis: the scripts are loaded from now on
    assert await ledger.complete(warm, 1, "w", "warm", -1)
    charge = kit.charging_tool(store, ledger)
    ports: dict[str, Any] = {"is_fatal_tool_error": lambda e: False} if former else {}
    stopped = 0
    running = True

    async def cutter() -> None:
        while running:
            marker, when = rng.choice(markers)
            proxy.cut_on(marker, when)  # type: ignore[arg-type]
            await anyio.sleep(rng.uniform(0.01, 0.06))

    async def session(n: int, limiter: anyio.CapacityLimiter) -> None:
        nonlocal stopped
        ident = f"s{n}"
        async with limiter:
            while True:
                try:
                    await store.save(create_loop_checkpoint(
                        execution_id=ident, max_iterations=kit.STEPS + 2,
                        messages=[UserMessage(content=f"session {ident} charge")]))
                    break
                except StoreError:
                    if await store.load(ident) is not None:
                        break  # it landed; its answer was lost
            while True:
                try:
                    cp = await store.load(ident)
                except StoreError:
                    continue
                assert cp is not None
                if cp.status == "finished":
                    return
                try:
                    await run_from_checkpoint(
                        checkpoint=cp, commit=store.commit,
                        restore=lambda c: RestoredLoop(
                            model=function_model(kit.respond),
                            capture_bindings=lambda: c.bindings,
                            runner=ToolRunner(run_tool_call=charge, **ports),
                        ))
                except StoreError:
                    stopped += 1  # the next request resumes from the stored checkpoint

    started = time.perf_counter()
    async with anyio.create_task_group() as outer:
        outer.start_soon(cutter)
        limiter = anyio.CapacityLimiter(8)
        async with anyio.create_task_group() as tg:
            for n in range(sessions):
                tg.start_soon(session, n, limiter)
        running = False
    proxy.cut_on(b"", "before", times=0)
    counts: dict[tuple[str, int], int] = {}
    for row in await ledger.rows():
        if row[0] != "warm":
            counts[row] = counts.get(row, 0) + 1
    expected = [(f"s{n}", step) for n in range(sessions) for step in range(kit.STEPS)]
    finished = 0
    for n in range(sessions):
        cp = await store.load(f"s{n}")
        finished += cp is not None and cp.status == "finished"
    await store.aclose()
    proxy.close()
    return {"backend": kind, "settings": "former default" if former else "default",
            "effects": len(expected), "cuts": proxy.cuts, "runs stopped": stopped,
            "sessions finished": f"{finished} / {sessions}",
            "lost": sum(1 for e in expected if e not in counts),
            "duplicated": sum(c - 1 for c in counts.values()),
            "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=267)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from harness.fixtures.store_servers import PostgresServer, RedisServer

    postgres, redis = PostgresServer(), RedisServer()
    postgres.start()
    redis.start()
    try:
        for kind, direct in (("postgres", postgres.dsn), ("redis", redis.url)):
            for former in (True, False):
                namespace = f"cuts_{kind}_{int(former)}_{args.seed}"
                print(anyio.run(lambda: trial(kind, direct, namespace, former=former,
                                              seed=args.seed, sessions=args.sessions)),
                      flush=True)
    finally:
        postgres.close()
        redis.close()


if __name__ == "__main__":
    main()
