"""CPU of a checkpoint commit against the transcript's length.

A run of ``--turns`` tool-calling turns (then a final answer) from a stored checkpoint of N
messages, through ``run_from_checkpoint`` with every settled boundary committed to a
``MemoryCheckpointStore`` (the run's own check of each checkpoint, then the store's encode), and the
same run through ``run_tool_loop`` with no checkpoint. Printed per N:

- commit µs: (checkpointed run − plain run) / commits: what a commit costs on top of the loop,
  the run's start included (once per run, spread over its commits);
- floor µs: encoding each committed checkpoint alone (the bytes a store has to write), per commit;
- commit / floor.

    python bench/checkpoint_commit.py [--ns 10,100,1000] [--turns 20] [--repeats 7]

``--sessions N`` measures soak-shaped sessions instead (``bench/soak.py``'s bindloop side without
the network): each creates a checkpoint of one user message, saves it to a ``SqliteStore`` (a file
in a temporary directory), loads it and runs it through ``run_from_checkpoint`` (two tool turns and
an answer: three commits), against the same runs through ``run_tool_loop``; first one session after
another, then all N at once with every model call awaiting 20 times (what a session keeps alive
across its awaits is then what the cyclic collector walks). It prints the checkpoint path's CPU per
session and, at once, the collector's share:

    python bench/checkpoint_commit.py --sessions 3000 [--before DIR]

``--before DIR`` measures a checkout of the base (``DIR/src``) against this one, alternating in
fresh interpreters, and prints both sides' medians and after / before:

    git archive <base> src | tar -x -C /tmp/base && python bench/checkpoint_commit.py --before /tmp/base
"""

from __future__ import annotations

import argparse
import gc
import tempfile
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
from bindloop import ToolLoopState
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


class Awaiting(Scripted):
    """:class:`Scripted`, awaiting 20 times per call (a stream's reads), so sessions interleave."""

    async def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                       on_event: Any = None, on_reset: Any = None) -> ModelTurnResult:
        for _ in range(20):
            await anyio.sleep(0)
        return await super().complete(messages, request)


class GcClock:
    """CPU the cyclic collector takes while installed (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.collections = 0
        self._began = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.process_time()
        else:
            self.cpu += time.process_time() - self._began
            self.collections += 1


async def sessions_run(count: int, store_them: bool, together: bool) -> tuple[float, float, int]:
    """CPU seconds and collector seconds and collections for ``count`` soak-shaped sessions."""
    from bindloop.hosts.stores.sqlite import SqliteStore

    model_type = Awaiting if together else Scripted
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(os.path.join(tmp, "checkpoints.sqlite"))

        def restore(cp: LoopCheckpoint) -> RestoredLoop:
            return RestoredLoop(model=model_type(2), runner=runner(),
                                capture_bindings=lambda: cp.bindings)

        async def one(n: int) -> None:
            first = UserMessage(content=f"session s{n:05d} look up")
            if store_them:
                made = create_loop_checkpoint(execution_id=f"s{n:05d}", messages=[first],
                                              max_iterations=4)
                store.save_checkpoint(made)
                loaded = store.load_checkpoint(made.execution_id)
                assert loaded is not None
                result: Any = await run_from_checkpoint(checkpoint=loaded, restore=restore,
                                                        commit=store.commit)
            else:
                result = await run_tool_loop(ToolLoopParams(
                    state=ToolLoopState(messages=[first]), model=model_type(2), runner=runner(),
                    max_iterations=4))
            assert result.stop_reason == "done"

        clock = GcClock()
        gc.collect()
        gc.callbacks.append(clock)
        began = time.process_time()
        try:
            if together:
                async with anyio.create_task_group() as tg:
                    for n in range(count):
                        tg.start_soon(one, n)
            else:
                for n in range(count):
                    await one(n)
        finally:
            spent = time.process_time() - began
            gc.callbacks.remove(clock)
            store.close()
    return spent, clock.cpu, clock.collections


def measure_sessions(count: int, rounds: int) -> dict[str, float]:
    """Per session, median over ``rounds``: the checkpoint path's CPU (store − no store), one
    after another and all at once, and the collector's share at once."""
    out: dict[str, list[float]] = {}
    for _ in range(rounds):
        for together in (False, True):
            stored = anyio.run(sessions_run, count, True, together)
            plain_run = anyio.run(sessions_run, count, False, together)
            key = "together" if together else "serial"
            out.setdefault(f"{key}_us", []).append((stored[0] - plain_run[0]) / count * 1e6)
            if together:
                out.setdefault("gc_us", []).append((stored[1] - plain_run[1]) / count * 1e6)
                out.setdefault("collections", []).append(stored[2] - plain_run[2])
    return {k: statistics.median(v) for k, v in out.items()}


def measure(ns: list[int], turns: int, repeats: int) -> list[dict[str, float]]:
    return [anyio.run(one_n, n, turns, repeats) for n in ns]


def sessions_side_by_side(before_dir: str, count: int, rounds: int) -> int:
    here = os.path.abspath(__file__)
    sides = (("before", os.path.join(os.path.abspath(before_dir), "src")),
             ("after", os.path.join(os.path.dirname(os.path.dirname(here)), "src")))
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for _ in range(rounds):
        for label, src in sides:
            proc = subprocess.run([sys.executable, here, "--json", "--sessions", str(count),
                                   "--rounds", "1"], capture_output=True, text=True, check=True,
                                  env={**os.environ, "PYTHONPATH": src})
            runs[label].append(json.loads(proc.stdout))
    print(f"checkpoint CPU µs per session ({count} sessions), each round's figure, before | after")
    for key, what in (("serial_us", "one after another"), ("together_us", "all at once"),
                      ("gc_us", "  of which the collector"), ("collections", "  extra collections")):
        print(f"{what:<26}" + "  ".join(f"{r[key]:7.0f}" for r in runs["before"]) + "  |  "
              + "  ".join(f"{r[key]:7.0f}" for r in runs["after"]))
    return 0


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
    parser.add_argument("--sessions", type=int, default=0,
                        help="measure this many soak-shaped sessions instead (see above)")
    args = parser.parse_args(argv)
    if args.sessions:
        if args.before:
            return sessions_side_by_side(args.before, args.sessions, args.rounds)
        figures = measure_sessions(args.sessions, args.rounds)
        if args.json:
            print(json.dumps(figures))
            return 0
        print(f"checkpoint CPU µs per session ({args.sessions} sessions, median of {args.rounds}): "
              f"one after another {figures['serial_us']:.0f}, all at once "
              f"{figures['together_us']:.0f} (the collector {figures['gc_us']:.0f}, "
              f"{figures['collections']:.0f} more collections)")
        return 0
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
