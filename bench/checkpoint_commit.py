"""CPU of a checkpoint commit against the transcript's length.

A run of ``--turns`` tool-calling turns (then a final answer) from a stored checkpoint of N
messages, through ``run_from_checkpoint`` with every settled boundary committed to a
``MemoryCheckpointStore`` (the run's own check of each checkpoint, then the store's encode), and the
same run through ``run_tool_loop`` with no checkpoint. Printed per N:

- commit µs: (checkpointed run − plain run) / commits: what a commit costs on top of the loop,
  the run's start included (once per run, spread over its commits);
- floor µs: encoding each committed checkpoint alone (the bytes a store has to write), per commit;
- commit / floor.

    python bench/checkpoint_commit.py [--ns 10,100,1000] [--turns 20] [--rounds 5]

``--before DIR`` measures a checkout of the base (``DIR/src``) against this one, alternating in
fresh interpreters, and prints both sides' medians and after / before:

    git archive <base> src | tar -x -C /tmp/base && python bench/checkpoint_commit.py --before /tmp/base
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import anyio
import msgspec

from bindloop import (
    AssistantMessage,
    Message,
    ModelTurnResult,
    ToolCall,
    ToolDefinition,
    ToolLoopParams,
    ToolMessage,
    ToolResult,
    UserMessage,
    run_tool_loop,
)
from bindloop.checkpoints import (
    LoopCheckpoint,
    RestoredLoop,
    create_loop_checkpoint,
    loop_state_from_checkpoint,
    run_from_checkpoint,
)
from bindloop.loop import ToolRunner
from bindloop.model import ModelRequest, StreamModel
from bindloop.stores import MemoryCheckpointStore

LOOKUP = ToolDefinition(name="lookup", description="Look a key up.",
                        parameters={"type": "object", "required": ["key"],
                                    "properties": {"key": {"type": "string"}}})
ENCODER = msgspec.json.Encoder(order="deterministic")


def history(n: int) -> list[Message]:
    """A user question, then tool-call turns with their answers, then an answer: n messages."""
    out: list[Message] = [UserMessage(content="look these up, then sum them")]
    i = 0
    while len(out) < n - 1:
        out.append(AssistantMessage(tool_calls=(
            ToolCall(id=f"h{i}", name="lookup", arguments=f'{{"key":"k{i}"}}'),)))
        out.append(ToolMessage(tool_call_id=f"h{i}", content=f"value of k{i}: {i * 7}"))
        i += 1
    out.append(AssistantMessage(content="Here is what I found so far."))
    out.append(UserMessage(content="go on"))
    return out[-n:] if n > 1 else out[:1]


class Scripted(StreamModel):
    """``turns`` tool-calling turns, then an answer (no streaming: the loop's floor)."""

    id = "scripted"

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self.calls = 0

    async def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                       on_event: Any = None, on_reset: Any = None) -> ModelTurnResult:
        self.calls += 1
        if self.calls <= self.turns:
            return ModelTurnResult(tool_calls=(ToolCall(
                id=f"c{self.calls}", name="lookup", arguments=f'{{"key":"n{self.calls}"}}'),))
        return ModelTurnResult(text="the sum is 42")


def runner() -> ToolRunner:
    return ToolRunner(run_tool_call=lambda call: ToolResult(content=f"value of {call.arguments}"),
                      build_tools=lambda: [LOOKUP])


async def checkpointed(start: LoopCheckpoint, turns: int, commit: Any) -> float:
    def restore(cp: LoopCheckpoint) -> RestoredLoop:
        return RestoredLoop(model=Scripted(turns), runner=runner(),
                            capture_bindings=lambda: cp.bindings)

    began = time.process_time()
    result = await run_from_checkpoint(checkpoint=start, restore=restore, commit=commit)
    spent = time.process_time() - began
    assert result.stop_reason == "done" and result.iterations == turns + 1
    return spent


async def plain(start: LoopCheckpoint, turns: int) -> float:
    state = loop_state_from_checkpoint(start)
    params = ToolLoopParams(state=state, model=Scripted(turns), runner=runner(),
                            max_iterations=start.max_iterations)
    began = time.process_time()
    result = await run_tool_loop(params)
    spent = time.process_time() - began
    assert result.stop_reason == "done" and result.stats.turns == turns + 1
    return spent


async def one_n(n: int, turns: int, repeats: int) -> dict[str, float]:
    commits = turns + 1
    made = create_loop_checkpoint(execution_id="e", messages=history(n),
                                  max_iterations=turns + 2)
    kept: list[LoopCheckpoint] = []

    def keep(cp: LoopCheckpoint) -> str:
        kept.append(cp)
        return "continue"

    load = MemoryCheckpointStore()
    await load.save(made)
    start = await load.load("e")
    assert start is not None
    await checkpointed(start, turns, keep)  # warm-up, and the checkpoints the floor encodes
    assert len(kept) == commits
    with_store: list[float] = []
    without: list[float] = []
    floor: list[float] = []
    gc.collect()
    for _ in range(repeats):
        store = MemoryCheckpointStore()
        await store.save(made)
        start = await store.load("e")
        assert start is not None
        with_store.append(await checkpointed(start, turns, store.commit))
        without.append(await plain(start, turns))
        began = time.process_time()
        for cp in kept:
            ENCODER.encode(cp)
        floor.append(time.process_time() - began)
    commit_us = (statistics.median(with_store) - statistics.median(without)) / commits * 1e6
    floor_us = statistics.median(floor) / commits * 1e6
    return {"n": n, "commit_us": commit_us, "floor_us": floor_us}


def measure(ns: list[int], turns: int, repeats: int) -> list[dict[str, float]]:
    return [anyio.run(one_n, n, turns, repeats) for n in ns]


def side_by_side(before_dir: str, ns: list[int], turns: int, repeats: int, rounds: int) -> int:
    here = os.path.abspath(__file__)
    sides = (("before", os.path.join(os.path.abspath(before_dir), "src")),
             ("after", os.path.join(os.path.dirname(os.path.dirname(here)), "src")))
    runs: dict[str, list[list[dict[str, float]]]] = {"before": [], "after": []}
    for _ in range(rounds):
        for label, src in sides:
            proc = subprocess.run(
                [sys.executable, here, "--json", "--ns", ",".join(map(str, ns)),
                 "--turns", str(turns), "--repeats", str(repeats)],
                capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": src})
            runs[label].append(json.loads(proc.stdout))

    def med(label: str, i: int, key: str) -> float:
        return statistics.median(r[i][key] for r in runs[label])

    print(f"CPU µs per commit ({turns + 1} commits a run), median of {rounds} alternating rounds "
          "in fresh interpreters")
    print(f"{'N':>6}{'before':>10}{'after':>10}{'after/before':>14}{'floor':>9}"
          f"{'before/floor':>14}{'after/floor':>13}")
    for i, n in enumerate(ns):
        b, a, f = med("before", i, "commit_us"), med("after", i, "commit_us"), med("after", i,
                                                                                   "floor_us")
        print(f"{n:>6}{b:>10.1f}{a:>10.1f}{a / b:>13.2f}x{f:>9.1f}{b / f:>13.1f}x{a / f:>12.1f}x")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ns", default="10,100,1000")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=7, help="runs per N (the median is kept)")
    parser.add_argument("--rounds", type=int, default=3, help="--before: alternating rounds")
    parser.add_argument("--before", metavar="DIR", help="alternate with the base's DIR/src")
    parser.add_argument("--json", action="store_true", help="print only the rows, as JSON")
    args = parser.parse_args(argv)
    ns = [int(x) for x in args.ns.split(",") if x.strip()]
    if args.before:
        return side_by_side(args.before, ns, args.turns, args.repeats, args.rounds)
    rows = measure(ns, args.turns, args.repeats)
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"CPU µs per commit ({args.turns + 1} commits a run, median of {args.repeats} runs)")
    print(f"{'N':>6}{'commit':>10}{'floor':>9}{'commit/floor':>14}")
    for row in rows:
        print(f"{row['n']:>6}{row['commit_us']:>10.1f}{row['floor_us']:>9.1f}"
              f"{row['commit_us'] / row['floor_us']:>13.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
