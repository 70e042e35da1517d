"""A receipt's claim or completion cut on real Postgres, inside a tool, with the **default**
settings (nothing wired to ``is_fatal_tool_error``): the store error stops the run, the run resumes
from its last committed checkpoint, and the ledger holds every effect exactly once — 0 lost, 0
duplicated — while the model never reads a store error (docs/scale.md, "A deploy of several
workers"). The connection is cut by closing its socket through the loopback proxy, before the
statement reaches the server or after (the write landed, its answer was lost)."""

from __future__ import annotations

import json
from typing import Any, Literal

import anyio
import pytest

from bindloop import ModelTurnResult, ToolCall, ToolMessage, ToolResult, UserMessage
from bindloop.contracts import content_text
from bindloop.hosts.postgres_store import PostgresStore
from bindloop.run import (
    ReceiptExecute,
    ReceiptReplay,
    ReceiptWait,
    ToolCallReceiptKey,
    decide_tool_call_receipt,
    tool_call_args_hash,
)
from bindloop.session import (
    CheckpointConflictError,
    RestoredLoop,
    StoreError,
    create_loop_checkpoint,
    run_from_checkpoint,
)

from .proxy import CuttingProxy

pytestmark = pytest.mark.anyio
STEPS = 3
SESSIONS = 4
LEASE_MS = 150.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _port(dsn: str) -> int:
    return int(next(p.split("=")[1] for p in dsn.split() if p.startswith("port=")))


async def model(messages: list[Any], tools: list[Any]) -> ModelTurnResult:
    """Deterministic in the transcript: a resumed session is asked the same turn again."""
    session = str(messages[0].content).split()[1]
    done = [m for m in messages if isinstance(m, ToolMessage)]
    if len(done) < STEPS:
        step = len(done)
        args = json.dumps({"session": session, "step": step})
        return ModelTurnResult(text=f"step {step}", tool_calls=(
            ToolCall(id=f"c_{session}_{step}", name="charge", arguments=args),))
    return ModelTurnResult(text="done: " + "; ".join(content_text(m.content) for m in done))


def charging_tool(store: PostgresStore, schema: str) -> Any:
    async def charge(call: ToolCall) -> ToolResult:
        args = json.loads(call.arguments)
        key = ToolCallReceiptKey(tenant_id="t", run_id=args["session"], tool_name=call.name,
                                 args_hash=tool_call_args_hash(args))

        async def effect(conn: Any) -> None:  # the ledger row, in the receipt's transaction
            await conn.execute(f"INSERT INTO {schema}.ledger VALUES (%s, %s)",
                               (args["session"], args["step"]))

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
            if await store.complete_with(key, decision.attempt, result, effect):
                return ToolResult(content=result)

    return charge


@pytest.mark.parametrize(("marker", "when"), [
    (b"receipts VALUES", "before"),           # the first claim never reaches the server
    (b"receipts VALUES", "after"),            # the first claim lands; its answer is lost
    (b"SET status = 'completed'", "after"),   # the completion's transaction is cut: rolled back
    (b"COMMIT", "after"),                     # a commit lands (a receipt's or a checkpoint's),
                                              # its answer is lost
])
async def test_cut_receipt_connections_lose_and_duplicate_no_effect_with_the_defaults(
        postgres_dsn: str, namespace: str, marker: bytes,
        when: Literal["before", "after"]) -> None:
    proxy = CuttingProxy(_port(postgres_dsn))
    parts = [p for p in postgres_dsn.split() if not p.startswith("port=")]
    store = PostgresStore(" ".join([*parts, f"port={proxy.port}"]), schema=namespace)
    stops: list[StoreError] = []
    try:
        await store.save(create_loop_checkpoint(execution_id="warm", max_iterations=1,
                                                messages=[UserMessage(content="warm")]))
        import psycopg

        async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as conn:
            await conn.execute(f"CREATE TABLE {namespace}.ledger (session text, step int)")
        charge = charging_tool(store, namespace)
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
                        restore=lambda c: RestoredLoop(call_model=model, run_tool_call=charge,
                                                       capture_bindings=lambda: c.bindings))
                except StoreError as exc:  # stopped: the next "request" resumes it
                    stops.append(exc)
                except CheckpointConflictError:  # pragma: no cover - one worker per session here
                    raise
            raise AssertionError(f"{ident} did not finish")

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                for n in range(SESSIONS):
                    tg.start_soon(one, n)
        async with await psycopg.AsyncConnection.connect(postgres_dsn, autocommit=True) as conn:
            rows = await (await conn.execute(
                f"SELECT session, step FROM {namespace}.ledger ORDER BY 1, 2")).fetchall()
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
