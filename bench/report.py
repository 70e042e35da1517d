"""``make bench-report``: run the benchmarks and write docs/performance.md with SVG charts.

One run gives every number on the page: per-turn loop overhead vs N for bindloop and each peer
(``bench/loop_overhead.py`` + ``bench/peers.py``, each peer row in its own interpreter), the agent
layer against its floors (``bench/agent.py``'s runners, each in its own interpreter), import
time (``bench/import_time.py``, CPython), and the soak (``bench/soak.py``: throughput, CPU per
streamed token, added latency and peak RSS for bindloop beside pydantic-ai). Charts are drawn with
matplotlib (the ``bench`` extra) from the same figures and written next to the page.

``--only agent`` measures the agent section alone and rewrites just that section of the page
(it names its own run); the rest of the page is left as it is.

    python bench/report.py [--ns 10,100,1000] [--soak-sessions 1000] [--out docs/performance.md]
    python bench/report.py --only agent
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(ROOT / "src"))


def overhead(ns: list[int], max_seconds: float) -> dict[str, list[float | None]]:
    import loop_overhead
    import peers

    out: dict[str, list[float | None]] = {"bindloop": [loop_overhead.measure(n)[0] for n in ns]}
    for name in [*peers.REFERENCE, *peers.PEERS]:
        row = peers.measure_row_isolated(name, ns, max_seconds=max_seconds)
        if row.problem:
            print(f"# {name}: {row.problem}", file=sys.stderr)
            continue
        out[row.label] = [c.us_per_turn for c in row.cells]
    return out


AGENT_RUNNERS = ("bare loop", "bare (stream)", "agent API", "agent (whole)")
AGENT_SECTION = "## Agent layer"


def agent_layer(ns: list[int], rounds: int, budget_s: float) -> dict[str, list[float]]:
    """``bench/agent.py``'s runners, each in a fresh interpreter, interleaved for ``rounds``
    rounds; the median µs/turn over rounds per N."""
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in AGENT_RUNNERS}
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for _ in range(rounds):
        for name in AGENT_RUNNERS:
            proc = subprocess.run(
                [sys.executable, str(BENCH / "agent.py"), "--only", name, "--json", "--ns",
                 ",".join(map(str, ns)), "--budget", str(budget_s)],
                capture_output=True, text=True, env=env, check=True, timeout=1800)
            samples[name].append(json.loads(proc.stdout))
    return {name: [statistics.median(r[str(n)] for r in runs) for n in ns]
            for name, runs in samples.items()}


def agent_lines(ns: list[int], figures: dict[str, list[float]], rounds: int,
                when: str | None = None) -> list[str]:
    stream, bare = figures["agent API"], figures["bare loop"]
    lines = [
        AGENT_SECTION,
        "",
        "`bench/agent.py`: the agent API (`run_with(agent)`, `equip_tool` + `prompt_agent(Final)`, "
        "a structured answer decoded into a Struct) over a scripted model asking for one tool "
        "call per turn for N-1 turns, beside the bare `run_tool_loop` over the same script: "
        "`bare loop` with whole turns, `bare (stream)` folding the same event stream with the "
        "engine's `TurnCollector`. `agent API` streams each turn as events (the one fold); "
        "`agent (whole)` is a model with `complete_turn`. CPU µs per turn, each runner in its "
        f"own interpreter, median of {rounds} interleaved rounds"
        + (f" ({when}; this section was measured alone with `python bench/report.py --only "
           "agent`)" if when else "") + ". Targets: the streamed agent within 1.3x of `bare "
        "(stream)` and within 2.0x of `bare loop`.",
        "",
        "| runner | " + " | ".join(f"N={n} µs/turn" for n in ns) + " |",
        "|---|" + "---:|" * len(ns),
    ]
    for name in AGENT_RUNNERS:
        lines.append(f"| {name} | " + " | ".join(f"{v:,.1f}" for v in figures[name]) + " |")
    lines += [
        "| agent API / bare (stream) | " + " | ".join(
            f"{a / b:.2f}x" for a, b in zip(stream, figures["bare (stream)"])) + " |",
        "| agent API / bare loop | " + " | ".join(f"{a / b:.2f}x" for a, b in zip(stream, bare))
        + " |",
        "| agent (whole) / bare loop | " + " | ".join(
            f"{a / b:.2f}x" for a, b in zip(figures["agent (whole)"], bare)) + " |",
        "",
        "At N=10 the run's fixed cost (the root's task group, the agent's frame and generation, "
        "the prompt's setup) is a large share of each turn; it is spread thin by N=100.",
        "",
    ]
    return lines


def splice_agent_section(page_text: str, lines: list[str]) -> str:
    """``page_text`` with its agent section replaced by ``lines`` (inserted before the import-time
    section when the page has none yet)."""
    section = "\n".join(lines)
    start = page_text.find(AGENT_SECTION + "\n")
    if start < 0:
        at = page_text.find("## Import time")
        at = len(page_text) if at < 0 else at
        return page_text[:at] + section + "\n" + page_text[at:]
    end = page_text.find("\n## ", start + len(AGENT_SECTION))
    end = len(page_text) if end < 0 else end + 1
    return page_text[:start] + section + "\n" + page_text[end:]


def import_times(repeats: int) -> dict[str, float]:
    import import_time

    return import_time.cpython(import_time.PROBE, repeats)


def charts(out_dir: Path, ns: list[int], turns: dict[str, list[float | None]],
           imports: dict[str, float], soak_rows: list[dict[str, Any]]) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "bindloop"  # stable ids, so an unchanged chart diffs clean
    out_dir.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}

    fig, ax = plt.subplots(figsize=(7, 4))
    for name, values in turns.items():
        points = [(n, v) for n, v in zip(ns, values) if v is not None]
        if points:
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name,
                    linewidth=2.5 if name == "bindloop" else 1.5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("turns per run (N)")
    ax.set_ylabel("µs per turn (scripted model, one tool call per turn)")
    ax.set_title("Per-turn harness overhead")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    files["overhead"] = "overhead.svg"
    fig.savefig(out_dir / files["overhead"], format="svg", metadata={"Date": None})
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 3))
    labels = ["msgspec + anyio", "import bindloop", "+ run_tool_loop", "+ every module"]
    values = [imports["deps"], imports["root"], imports["loop"], imports["everything"]]
    ax.barh(labels[::-1], values[::-1], color="#4c72b0")
    for y, v in enumerate(values[::-1]):
        ax.text(v, y, f" {v:.1f} ms", va="center")
    ax.set_xlabel("ms (CPython, median of fresh interpreters)")
    ax.set_title("Import time")
    fig.tight_layout()
    files["imports"] = "import_time.svg"
    fig.savefig(out_dir / files["imports"], format="svg", metadata={"Date": None})
    plt.close(fig)

    if soak_rows:
        names = [r["framework"] for r in soak_rows]
        metrics = [("tokens/s", "tokens_per_s"), ("CPU µs / streamed token", "cpu_us_per_token"),
                   ("peak RSS MiB", "peak_rss_mib")]
        fig, axes = plt.subplots(1, len(metrics), figsize=(9, 3.2))
        for ax, (title, key) in zip(axes, metrics):
            vals = [r[key] or 0 for r in soak_rows]
            ax.bar(names, vals, color=["#4c72b0", "#dd8452", "#55a868"][:len(vals)])
            for x, v in enumerate(vals):
                ax.text(x, v, f"{v:,.0f}" if v >= 10 else f"{v:.1f}", ha="center", va="bottom")
            ax.set_title(title)
        fig.suptitle(f"Soak: {soak_rows[0]['sessions']} concurrent sessions with injected faults")
        fig.tight_layout()
        files["soak"] = "soak.svg"
        fig.savefig(out_dir / files["soak"], format="svg", metadata={"Date": None})
        plt.close(fig)
    return files


def page(ns: list[int], turns: dict[str, list[float | None]], imports: dict[str, float],
         soak_rows: list[dict[str, Any]], soak_lines: list[str], files: dict[str, str],
         img: str, agent: list[str] | None = None) -> str:
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "# Performance",
        "",
        f"Written by `make bench-report` ({when}; Python {platform.python_version()} on "
        f"{platform.machine()}, {platform.system()}). Every figure and chart on this page comes "
        "from that one run; rerun it to refresh them. The machine is a shared 2-core VM, so "
        "compare rows measured in the same run rather than across runs.",
        "",
        "## Per-turn loop overhead",
        "",
        "A scripted model asks for one tool call per turn for N-1 turns and then answers; the tool "
        "adds two numbers. The figure is wall time per turn of the whole run (see "
        "`bench/peers.py` for each framework's fake-model mechanism). Lower is better.",
        "",
        f"![per-turn overhead]({img}/{files['overhead']})",
        "",
        "| harness | " + " | ".join(f"N={n} µs/turn" for n in ns) + " |",
        "|---|" + "---:|" * len(ns),
    ]
    for name, values in turns.items():
        cells = [f"{v:,.1f}" if v is not None else "-" for v in values]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines += ["", *(agent or [])]
    lines += [
        "## Import time",
        "",
        f"![import time]({img}/{files['imports']})",
        "",
        "| msgspec + anyio | import bindloop | + run_tool_loop | + every module |",
        "|---:|---:|---:|---:|",
        f"| {imports['deps']:.1f} ms | {imports['root']:.1f} ms | {imports['loop']:.1f} ms | "
        f"{imports['everything']:.1f} ms |",
        "",
        "bindloop columns are cumulative after the dependencies are loaded.",
        "",
    ]
    if soak_rows:
        lines += [
            "## Soak under faults",
            "",
            "`bench/soak.py`: concurrent tool-using sessions (two model turns, two tool calls, a "
            "30-chunk streamed answer) from a scripted OpenAI-Chat-wire provider in its own process "
            "that injects 5 % 503, 2 % 429 with Retry-After, 2 % mid-stream stalls and 1 % dropped "
            "connections. bindloop recovers through `RoutedModel` fallback over four candidates "
            "with SQLite checkpoints; pydantic-ai through `FallbackModel` and the OpenAI SDK's "
            "retries. CPU is the client process only. Added latency: a fault-free session's wall "
            "time minus the server's scripted send time.",
            "",
            f"![soak]({img}/{files['soak']})",
            "",
            "```",
            *soak_lines,
            "```",
            "",
        ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ns", default="10,100,1000")
    parser.add_argument("--max-seconds", type=float, default=60.0)
    parser.add_argument("--import-repeats", type=int, default=7)
    parser.add_argument("--soak-sessions", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=str(ROOT / "docs" / "performance.md"))
    parser.add_argument("--json", help="also write every figure as JSON here")
    parser.add_argument("--only", choices=["agent"],
                        help="measure one section and rewrite only that section of --out")
    parser.add_argument("--agent-rounds", type=int, default=3)
    parser.add_argument("--agent-budget", type=float, default=1.5)
    args = parser.parse_args()
    ns = [int(x) for x in args.ns.split(",") if x.strip()]
    if args.only == "agent":
        out = Path(args.out)
        figures = agent_layer(ns, args.agent_rounds, args.agent_budget)
        when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
        out.write_text(splice_agent_section(
            out.read_text(), agent_lines(ns, figures, args.agent_rounds, when)))
        print("\n".join(agent_lines(ns, figures, args.agent_rounds, when)))
        return

    import soak

    print("# per-turn overhead ...", file=sys.stderr, flush=True)
    turns = overhead(ns, args.max_seconds)
    print("# agent layer ...", file=sys.stderr, flush=True)
    agent = agent_layer(ns, args.agent_rounds, args.agent_budget)
    print("# import time ...", file=sys.stderr, flush=True)
    imports = import_times(args.import_repeats)
    soak_rows: list[dict[str, Any]] = []
    soak_lines: list[str] = []
    if args.soak_sessions > 0:
        print("# soak ...", file=sys.stderr, flush=True)
        soak_rows = soak.soak(args.soak_sessions, args.seed, peer=True)
        soak_lines = soak.table(soak_rows)
    out = Path(args.out)
    img_dir = out.parent / "performance"
    files = charts(img_dir, ns, turns, imports, soak_rows)
    out.write_text(page(ns, turns, imports, soak_rows, soak_lines, files, img_dir.name,
                        agent_lines(ns, agent, args.agent_rounds)) + "\n")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"ns": ns, "turns": turns, "agent": agent, "imports": imports, "soak": soak_rows},
            indent=2))
    print(out.read_text())


if __name__ == "__main__":
    main()
