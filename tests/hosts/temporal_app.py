"""The Temporal tests' host side: a scripted model asking for ``BATCH`` charges per turn and a
``charge`` tool whose effect (a ledger row) lands through an idempotency receipt in SQLite,
atomically with the receipt — and a worker process (``python -m tests.hosts.temporal_app ADDRESS
DB TASK_QUEUE DELAY [RAISE_STEP]``) that the tests SIGKILL. Step ``s`` takes
``DELAY * (1 + s % BATCH)`` seconds, so the calls of one batch finish at different moments and a
kill can land between. Step ``RAISE_STEP`` (none by default) records its invocation, a side effect
outside any receipt, and raises: a tool that did something before raising."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

STEPS = 4
BATCH = 2
TURNS = -(-STEPS // BATCH) + 1  # model turns of a run: one per batch, then the answer
TENANT = "temporal-test"


async def scripted_model(messages: Sequence[Any], request: Any) -> Any:
    from bindloop.contracts import ModelTurnResult, ToolCall, ToolMessage, TurnUsage, UserMessage

    first = next(m for m in messages if isinstance(m, UserMessage))
    session = str(first.content).split()[1]
    done = [m for m in messages if isinstance(m, ToolMessage)]
    usage = TurnUsage(input_tokens=10 * len(messages), output_tokens=5)
    if len(done) < STEPS:
        steps = range(len(done), min(STEPS, len(done) + BATCH))
        return ModelTurnResult(text=f"steps {steps.start}-{steps.stop - 1}", usage=usage,
                               tool_calls=tuple(ToolCall(id=f"c{s}", name="charge", arguments=(
                                   json.dumps({"session": session, "step": s}))) for s in steps))
    return ModelTurnResult(text="done: " + "; ".join(str(m.content) for m in done), usage=usage)


RAISED = "card declined: token=s3cret"
"""The message of the raise at ``raise_step`` (a secret the model and the journal must not see)."""


def charge_tool(db: str, delay_s: float = 0.0, raise_step: int | None = None) -> Any:
    """``charge`` through a receipt in the SQLite file ``db`` (ledger written with the receipt);
    step ``raise_step`` raises ``RuntimeError(RAISED)`` after recording its invocation."""
    import anyio

    from bindloop.contracts import ToolCall, ToolResult
    from bindloop.hosts.stores.sqlite import SqliteStore
    from bindloop.run import (
        ReceiptExecute,
        ReceiptReplay,
        ReceiptWait,
        ToolCallReceiptKey,
        decide_tool_call_receipt,
        tool_call_args_hash,
    )

    store = SqliteStore(db)
    store.connection.execute(
        "CREATE TABLE IF NOT EXISTS ledger (session TEXT, step INTEGER, attempt INTEGER)")
    # Every invocation of the tool, outside any receipt: how often a call was run at all.
    store.connection.execute("CREATE TABLE IF NOT EXISTS invocations (session TEXT, step INTEGER)")

    async def charge(call: ToolCall) -> ToolResult:
        args = json.loads(call.arguments)
        store.connection.execute("INSERT INTO invocations VALUES (?, ?)",  # autocommit
                                 (args["session"], args["step"]))
        if args["step"] == raise_step:
            raise RuntimeError(RAISED)
        key = ToolCallReceiptKey(tenant_id=TENANT, run_id=args["session"], tool_name="charge",
                                 args_hash=tool_call_args_hash(args))
        while True:
            decision = decide_tool_call_receipt(state=store.read_sync(key), effect="resumable",
                                                now=store.now)
            if isinstance(decision, ReceiptReplay):
                return ToolResult(content=str(decision.result))
            if isinstance(decision, ReceiptWait):
                await anyio.sleep(0.05)
                continue
            assert isinstance(decision, ReceiptExecute)
            if not store.claim_sync(key, decision.attempt, 1000.0):
                continue
            await anyio.sleep(delay_s * (1 + args["step"] % BATCH))
            result = f"charged {args['session']}:{args['step']}"

            def write(conn: Any, a: dict[str, Any] = args, n: int = decision.attempt) -> None:
                conn.execute("INSERT INTO ledger VALUES (?, ?, ?)", (a["session"], a["step"], n))

            if store.complete_with(key, decision.attempt, result, write):
                return ToolResult(content=result)

    return store, charge


async def serve(address: str, db: str, task_queue: str, delay_s: float,
                raise_step: int | None = None) -> None:
    from datetime import timedelta

    from temporalio.client import Client

    from bindloop.hosts.temporal.workflow import agent_activities, agent_worker
    from bindloop.testing import function_model

    store, charge = charge_tool(db, delay_s, raise_step)
    client = await Client.connect(address)
    # A dead worker's sticky queue is abandoned after 1 s (default 5 s): the test runs faster.
    worker = agent_worker(client, task_queue=task_queue, activities=agent_activities(
        model=function_model(scripted_model), run_tool_call=charge, payloads=store),
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=1))
    print("ready", flush=True)
    await worker.run()


if __name__ == "__main__":
    import asyncio

    asyncio.run(serve(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]),
                      int(sys.argv[5]) if len(sys.argv) > 5 else None))
