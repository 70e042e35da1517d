"""Harness overhead per turn: bindloop's loop over a scripted model asking for one ``add`` call per
turn, for N = 10, 100, 1000 turns (flat in N is the target: the loop must not do work that grows with
the transcript). ``--peers`` measures the same workload on pydantic-ai, openai-agents and smolagents
(extra ``bench``) and a bare Python loop, each in its own interpreter, side by side in one table.

    python bench/loop_overhead.py [--ns 10,100,1000] [--peers]

``--before DIR`` measures base against this checkout in one run: each side in a fresh interpreter
with its own ``src`` on the path (and the base's own copy of this file, when the archive has one),
alternating before/after for ``--rounds`` rounds; the median over rounds and after / before are
printed.

    git archive <base> src bench | tar -x -C /tmp/base && python bench/loop_overhead.py --before /tmp/base
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bindloop import (  # noqa: E402
    Message,
    ModelTurnResult,
    ToolCall,
    ToolDefinition,
    ToolLoopParams,
    ToolLoopState,
    ToolOutcome,
    ToolResult,
    UserMessage,
    run_tool_loop,
)
from bindloop.loop import ToolRunner  # noqa: E402
from bindloop.model import ModelRequest, StreamModel  # noqa: E402

_ARGS = msgspec.json.Decoder(dict[str, int])
ADD = ToolDefinition(name="add", description="Add two integers.",
                     parameters={"type": "object", "required": ["a", "b"],
                                 "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}})


def bindloop_run_once(n_turns: int) -> float:
    """One run of ``n_turns`` turns; returns CPU seconds (``process_time``, as every peer row).
    Asserts the workload really happened."""
    added = [0]
    turn = [0]

    class Scripted(StreamModel):
        id = "scripted"

        async def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                           on_event: Any = None, on_reset: Any = None) -> ModelTurnResult:
            turn[0] += 1
            i = turn[0]
            if i < n_turns:
                return ModelTurnResult(tool_calls=(ToolCall(id=f"call_{i}", name="add",
                                                            arguments=f'{{"a":{i},"b":1}}'),))
            return ModelTurnResult(text="done")

    def add(call: ToolCall) -> ToolOutcome:
        args = _ARGS.decode(call.arguments)
        added[0] += 1
        return ToolResult(content=str(args["a"] + args["b"]))

    tools = [ADD]
    state = ToolLoopState(messages=[UserMessage(content="add things")])
    params = ToolLoopParams(state=state, model=Scripted(), max_iterations=n_turns + 1,
                            runner=ToolRunner(run_tool_call=add, build_tools=lambda: tools))

    async def main() -> float:
        started = time.process_time()
        result = await run_tool_loop(params)
        elapsed = time.process_time() - started
        assert result.stop_reason == "done" and result.stats.turns == n_turns
        assert added[0] == n_turns - 1 and len(state.messages) == 1 + 2 * (n_turns - 1) + 1
        return elapsed

    return anyio.run(main)


def measure(n: int, *, budget_s: float = 2.0, max_repeats: int = 200) -> tuple[float, int]:
    """Median µs/turn over as many runs as fit in ``budget_s`` (at least 5)."""
    bindloop_run_once(min(n, 10))  # warm-up
    first = bindloop_run_once(n)
    repeats = max(5, min(max_repeats, int(budget_s / max(first, 1e-9))))
    gc.collect()
    samples = [first] + [bindloop_run_once(n) for _ in range(repeats - 1)]
    return statistics.median(samples) / n * 1e6, len(samples)


def side_by_side(before_dir: str, ns: list[int], rounds: int) -> int:
    """Base (``before_dir/src``, with the base's own ``bench/loop_overhead.py`` when it has one:
    its workload speaks the base's API) and this checkout, alternating in fresh interpreters."""
    here = os.path.abspath(__file__)
    base_script = os.path.join(os.path.abspath(before_dir), "bench", "loop_overhead.py")
    sides = (("before", os.path.join(os.path.abspath(before_dir), "src"),
              base_script if os.path.exists(base_script) else here),
             ("after", os.path.join(os.path.dirname(os.path.dirname(here)), "src"), here))
    samples: dict[str, list[list[float]]] = {"before": [], "after": []}
    for _ in range(rounds):
        for label, src, script in sides:
            proc = subprocess.run([sys.executable, script, "--json", "--ns", ",".join(map(str, ns))],
                                  capture_output=True, text=True, check=True,
                                  env={**os.environ, "PYTHONPATH": src})
            samples[label].append(json.loads(proc.stdout))
    med = {label: [statistics.median(r[i] for r in runs) for i in range(len(ns))]
           for label, runs in samples.items()}
    print(f"µs/turn, median of {rounds} alternating rounds; ratio = after / before")
    print(f"{'N':>6}{'before':>10}{'after':>10}{'ratio':>8}")
    for i, n in enumerate(ns):
        b, a = med["before"][i], med["after"][i]
        print(f"{n:>6}{b:>10.2f}{a:>10.2f}{a / b:>8.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--ns", default="10,100,1000")
    parser.add_argument("--peers", action="store_true",
                        help="also run pydantic-ai, openai-agents, smolagents and a bare loop")
    parser.add_argument("--max-seconds", type=float, default=90.0,
                        help="peers: skip a cell whose first run exceeds this")
    parser.add_argument("--json", action="store_true", help="print only the µs/turn list")
    parser.add_argument("--before", metavar="DIR",
                        help="alternate with a checkout of the base in DIR (its src/)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of every row (--peers) or of each side (--before)")
    args = parser.parse_args(argv)
    ns = [int(x) for x in args.ns.split(",") if x.strip()]
    if args.before:
        return side_by_side(args.before, ns, args.rounds)

    if args.peers:
        return peers_table(ns, rounds=args.rounds, max_seconds=args.max_seconds)
    cells = [measure(n) for n in ns]
    if args.json:
        print(json.dumps([us for us, _ in cells]))
        return 0
    header = ["harness", *(f"N={n} µs/turn" for n in ns), "N=max / N=min"]
    rows = [["bindloop", *(f"{us:,.1f}" for us, _ in cells), f"{cells[-1][0] / cells[0][0]:.2f}×"]]
    _print_table(header, rows)
    print(f"\n(bindloop runs per cell: {', '.join(str(k) for _, k in cells)}; "
          f"python {sys.version.split()[0]}; CPU time)")
    return 0


def peers_table(ns: list[int], *, rounds: int, max_seconds: float) -> int:
    """Every row the same way: each runner (bindloop among them) in a fresh interpreter, CPU time,
    ``rounds`` rounds in turn (so drift hits every row alike); each cell the median of the rounds'
    medians. Then each peer's ratio to bindloop, cell by cell."""
    import peers

    names = [*peers.REFERENCE, *peers.PEERS]
    runs: dict[str, list[Any]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names:
            print(f"# round {r + 1}/{rounds}: {name}", file=sys.stderr, flush=True)
            runs[name].append(peers.measure_row_isolated(name, ns, max_seconds=max_seconds))
    medians: dict[str, list[float | None]] = {}
    labels: dict[str, str] = {}
    problems: dict[str, str] = {}
    for name, rows_of in runs.items():
        ok = [row for row in rows_of if not row.problem]
        labels[name] = (ok or rows_of)[0].label
        if not ok:
            problems[name] = rows_of[0].problem
            continue
        medians[name] = []
        for i in range(len(ns)):
            values = [row.cells[i].us_per_turn for row in ok
                      if i < len(row.cells) and row.cells[i].us_per_turn is not None]
            medians[name].append(statistics.median(values) if values else None)
    header = ["harness", *(f"N={n} µs/turn" for n in ns)]
    table = []
    for name in names:
        if name in problems:
            table.append([labels[name], problems[name], *[""] * (len(ns) - 1)])
        else:
            table.append([labels[name], *("skipped" if v is None else f"{v:,.1f}"
                                          for v in medians[name])])
    print(f"CPU µs per turn, median of {rounds} rounds (each row in a fresh interpreter)")
    _print_table(header, table)
    base = medians.get("bindloop")
    if base is None:
        print(f"\nbindloop's row failed: {problems.get('bindloop', 'no figures')}")
        return 1
    ratios = []
    for name in names:
        if name == "bindloop" or name not in medians:
            continue
        ratios.append([f"{labels[name]} / bindloop", *(
            "" if v is None or b is None else f"{v / b:,.1f}×"
            for v, b in zip(medians[name], base))])
    print("\nratio to bindloop (same rounds, same measure)")
    _print_table(["harness", *(f"N={n}" for n in ns)], ratios)
    print(f"\npython {sys.version.split()[0]}")
    return 0


def _print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    fmt = lambda r: "| " + " | ".join(  # noqa: E731
        [r[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(r[1:], widths[1:]))]) + " |"
    print(fmt(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print(fmt(r))


if __name__ == "__main__":
    sys.exit(main())
