"""A receipt's claim or completion cut on real Postgres and Redis, inside a tool, with the **default**
settings (nothing wired to ``is_fatal_tool_error``): the store error stops the run, the run resumes
from its last committed checkpoint, and the ledger holds every effect exactly once — 0 lost, 0
duplicated — while the model never reads a store error (docs/scale.md, "A deploy of several
workers"). The connection is cut by closing its socket through the loopback proxy, before the
statement reaches the server or after (the write landed, its answer was lost)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

import anyio
import pytest

from bindloop import ModelTurnResult, ToolCall, ToolMessage, ToolResult, UserMessage
from bindloop.contracts import content_text
from bindloop.hosts.stores.postgres import PostgresStore
from bindloop.hosts.stores.redis import RedisStore
from bindloop.run import (
    ReceiptExecute,
    ReceiptReplay,
    ReceiptWait,
    ToolCallReceiptKey,
    decide_tool_call_receipt,
    tool_call_args_hash,
)
from bindloop.checkpoints import (
    RestoredLoop,
    create_loop_checkpoint,
    run_from_checkpoint,
)
from bindloop.stores import (
    CheckpointConflictError,
    StoreError,
)

from .proxy import CuttingProxy
from bindloop.loop import ToolRunner
from bindloop.testing import function_model

pytestmark = pytest.mark.anyio
STEPS = 3
SESSIONS = 4
LEASE_MS = 150.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def respond(messages: Sequence[Any], request: Any) -> ModelTurnResult:
    """Deterministic in the transcript: a resumed session is asked the same turn again."""
    session = str(messages[0].content).split()[1]
    done = [m for m in messages if isinstance(m, ToolMessage)]
    if len(done) < STEPS:
        step = len(done)
        args = json.dumps({"session": session, "step": step})
        return ModelTurnResult(text=f"step {step}", tool_calls=(
            ToolCall(id=f"c_{session}_{step}", name="charge", arguments=args),))
    return ModelTurnResult(text="done: " + "; ".join(content_text(m.content) for m in done))


class Ledger:
    """The effect, written in the receipt's own transaction (Postgres: ``complete_with``'s
    effect on its connection; Redis: ``complete_with``'s outbox list, in the same script)."""

    def __init__(self, store: Any, namespace: str, direct: str) -> None:
        self.store, self.namespace, self.direct = store, namespace, direct

    async def create(self) -> None:
        if isinstance(self.store, PostgresStore):
            import psycopg

            async with await psycopg.AsyncConnection.connect(self.direct,
                                                             autocommit=True) as conn:
                await conn.execute(f"CREATE TABLE {self.namespace}.ledger (session text, "
                                   "step int)")

    async def complete(self, key: ToolCallReceiptKey, attempt: int, result: str,
                       session: str, step: int) -> bool:
        if isinstance(self.store, RedisStore):
            return await self.store.complete_with(key, attempt, result,
                                                  outbox=("ledger", f"{session}:{step}".encode()))

        async def effect(conn: Any) -> None:
            await conn.execute(f"INSERT INTO {self.namespace}.ledger VALUES (%s, %s)",
                               (session, step))

        return bool(await self.store.complete_with(key, attempt, result, effect))

    async def rows(self) -> list[tuple[str, int]]:
        if isinstance(self.store, RedisStore):
            found = [v.decode().split(":") for v in await self.store.outbox("ledger")]
            return sorted((a, int(b)) for a, b in found)
        import psycopg

        async with await psycopg.AsyncConnection.connect(self.direct, autocommit=True) as conn:
            rows = await (await conn.execute(
                f"SELECT session, step FROM {self.namespace}.ledger ORDER BY 1, 2")).fetchall()
        return [(str(a), int(b)) for a, b in rows]


def charging_tool(store: Any, ledger: Ledger) -> Any:
    async def charge(call: ToolCall) -> ToolResult:
        args = json.loads(call.arguments)
        key = ToolCallReceiptKey(tenant_id="t", run_id=args["session"], tool_name=call.name,
                                 args_hash=tool_call_args_hash(args))
        while True:
            decision = decide_tool_call_receipt(state=await store.read(key), effect="resumable",
                                                now=store.now)
            if isinstance(decision, ReceiptReplay):
                return ToolResult(content=str(decision.result))
            if isinstance(decision, ReceiptWait):
                await anyio.sleep(max(0.0, decision.lease_expires_at_ms - store.now()) / 1000)
                continue
            assert isinstance(decision, ReceiptExecute), decision
            if not await store.claim(key, decision.attempt, LEASE_MS):
                continue
            result = f"charged {args['session']}:{args['step']}"
            if await ledger.complete(key, decision.attempt, result, args["session"],
                                     args["step"]):
                return ToolResult(content=result)

    return charge


def _redis_claim_marker() -> bytes:
    import hashlib

    from bindloop.hosts.stores.redis import _CLAIM

    return hashlib.sha1(_CLAIM.encode()).hexdigest().encode()  # EVALSHA names the script


CUTS = [
    # Postgres: the first claim never reaches the server / lands with its answer lost; the
    # completion's transaction cut (rolled back); a COMMIT that lands (a receipt's or a
    # checkpoint's) with its answer lost.
    # (the receipt statements are prepared ones, named in every message that runs them)
    ("postgres", b"bindloop_claim", "before"),
    ("postgres", b"bindloop_claim", "after"),
    ("postgres", b"bindloop_complete", "after"),
    ("postgres", b"COMMIT", "after"),
    # Redis: the claim script and the completion script (with its outbox append), each cut
    # before it reaches the server or after it ran there.
    ("redis", b"claim", "before"),
    ("redis", b"claim", "after"),
    ("redis", b"completed", "before"),
    ("redis", b"completed", "after"),
]


@pytest.mark.parametrize(("kind", "marker", "when"), CUTS)
async def test_cut_receipt_connections_lose_and_duplicate_no_effect_with_the_defaults(
        kind: str, marker: bytes, when: Literal["before", "after"], namespace: str,
        request: pytest.FixtureRequest) -> None:
    if kind == "postgres":
        direct = request.getfixturevalue("postgres_dsn")
        proxy = CuttingProxy.to(direct)
        store: Any = PostgresStore(proxy.via(direct), schema=namespace)
    else:
        direct = request.getfixturevalue("redis_url")
        proxy = CuttingProxy.to(direct)
        store = RedisStore(proxy.via(direct), prefix=f"{namespace}:")
        if marker == b"claim":
            marker = _redis_claim_marker()
    ledger = Ledger(store, namespace, direct)
    stops: list[StoreError] = []
    try:
        await store.save(create_loop_checkpoint(execution_id="warm", max_iterations=1,
                                                messages=[UserMessage(content="warm")]))
        await ledger.create()  # the schema exists once the store saved
        warm = ToolCallReceiptKey(tenant_id="t", run_id="warm", tool_name="w", args_hash="h")
        assert await store.claim(warm, 1, 1000)  # Redis: the scripts are loaded from now on
        assert await ledger.complete(warm, 1, "w", "warm", -1)
        charge = charging_tool(store, ledger)
        proxy.cut_on(marker, when, times=3)

        async def one(n: int) -> None:
            ident = f"s{n}"
            await store.save(create_loop_checkpoint(
                execution_id=ident, max_iterations=STEPS + 2,
                messages=[UserMessage(content=f"session {ident} charge")]))
            for _ in range(20):
                cp = await store.load(ident)
                assert cp is not None
                if cp.status == "finished":
                    return
                try:  # the deploy example's shape, nothing else wired
                    await run_from_checkpoint(
                        checkpoint=cp, commit=store.commit,
                        restore=lambda c: RestoredLoop(
                            model=function_model(respond),
                            capture_bindings=lambda: c.bindings,
                            runner=ToolRunner(run_tool_call=charge),
                        ))
                except StoreError as exc:  # stopped: the next "request" resumes it
                    stops.append(exc)
                except CheckpointConflictError:  # pragma: no cover - one worker per session here
                    raise
            raise AssertionError(f"{ident} did not finish")

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for n in range(SESSIONS):
                    tg.start_soon(one, n)
        rows = [r for r in await ledger.rows() if r[0] != "warm"]
        expected = [(f"s{n}", step) for n in range(SESSIONS) for step in range(STEPS)]
        assert rows == expected  # 0 lost, 0 duplicated
        assert proxy.cuts == 3 and len(stops) >= 1  # the cuts happened and stopped runs
        for n in range(SESSIONS):
            cp = await store.load(f"s{n}")
            assert cp is not None and cp.status == "finished"
            read = [content_text(m.content) for m in cp.messages if isinstance(m, ToolMessage)]
            assert read == [f"charged s{n}:{step}" for step in range(STEPS)]  # no store error
    finally:
        await store.aclose()
        proxy.close()
