"""``make bench-report``: run the benchmarks and write docs/performance.md with SVG charts.

One run gives every number on the page: per-turn loop overhead vs N for bindloop and each peer
(``bench/loop_overhead.py`` + ``bench/peers.py``, each peer row in its own interpreter), the agent
layer against its floors (``bench/agent.py``'s runners, each in its own interpreter), import
time (``bench/import_time.py``, CPython), one streamed turn's calls and CPU per chunk
(``bench/stream_calls.py``), and the soak (``bench/soak.py``: throughput, CPU per streamed token,
added latency and peak RSS for bindloop beside the bare reader and pydantic-ai). Charts are drawn
with matplotlib (the ``bench`` extra) from the same figures and written next to the page.

``--only soak`` (or ``agent``, ``stream``, ``overhead``, ``imports``, ``hashing``; comma-separated) reruns just those
sections and replaces them in the existing page, each marked with its own date (``make soak``
does this for the soak).

    python bench/report.py [--ns 10,100,1000] [--soak-sessions 1000] [--out docs/performance.md]
                           [--only agent,soak]
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
        "`agent (whole)` is a model whose own `complete` returns whole turns. CPU µs per turn, each runner in its "
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
        "At N=10 the run's fixed cost (`run_with`, the agent's frame and generation, the "
        "prompt's ports; on asyncio no task group unless a stream consumer is equipped) is a "
        "large share of each turn; it is spread thin by N=100.",
        "",
    ]
    return lines


HASHING_SECTION = "## Snapshot and trace hashing"


def hashing_figures(rounds: int, budget_s: float) -> dict[str, dict[str, list[float]]]:
    """``bench/hashing.py --json`` in ``rounds`` fresh interpreters; the median of each cell."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    runs = [json.loads(subprocess.run(
        [sys.executable, str(BENCH / "hashing.py"), "--json", "--budget", str(budget_s)],
        capture_output=True, text=True, env=env, check=True, timeout=1800).stdout)
        for _ in range(rounds)]
    return {part: {key: [statistics.median(r[part][key][i] for r in runs)
                         for i in range(len(cells))]
                   for key, cells in runs[0][part].items()}
            for part in runs[0]}


def section_hashing(fig: dict[str, dict[str, list[float]]], rounds: int,
                    alone: bool = False) -> list[str]:
    lines = [
        HASHING_SECTION,
        "",
        *_refreshed(alone, "hashing"),
        "`bench/hashing.py`: the agent (`equip_tool` + `prompt_agent(Final)`) over a scripted "
        "model streaming one tool call per turn, with `run_with(enable_snapshot=True)` (each model "
        "call hashed and journaled, as a trace or a replay hashes it) and without, interleaved "
        "repeat by repeat in one process, the young generations collected (untimed) before "
        "each run; CPU µs per turn, the median of "
        f"{rounds} fresh interpreters per cell. *In a prompt*: one prompt of N turns, its "
        "transcript growing to about 2N messages. *Prompt start*: a run whose root calls the "
        "agent twice over H stored messages (`equip_history`, 4 turns each); the second prompt's "
        "history is the first's plus its exchange. Target: a snapshotted turn <= 1.2x a plain one.",
        "",
        "| in a prompt | plain | snapshot | snapshot / plain | snapshot + dump | "
        "+ dump / plain |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for n, (plain, snap, dumped) in fig["in_prompt"].items():
        lines.append(f"| N={int(n):,} (~{2 * int(n):,} msgs) | {plain:,.1f} | {snap:,.1f} | "
                     f"{snap / plain:.2f}x | {dumped:,.1f} | {dumped / plain:.2f}x |")
    lines += [
        "",
        "| prompt start | first prompt: plain | snapshot | ratio | second prompt: plain | "
        "snapshot | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for h, (p1, s1, p2, s2) in fig["prompt_start"].items():
        lines.append(f"| H={int(h):,} | {p1:,.1f} | {s1:,.1f} | {s1 / p1:.2f}x | {p2:,.1f} | "
                     f"{s2:,.1f} | {s2 / p2:.2f}x |")
    lines += [
        "",
        "Before the hashing was made incremental across prompts (commit 3ebbf09, measured "
        "2026-12-04 with this benchmark, before and after alternating in fresh interpreters, "
        "median of 3 rounds on a loaded machine) a snapshotted turn cost 2.3-3.1x a plain one "
        "inside a prompt (after: 1.5-1.9x), and over 5,000 stored messages the first prompt cost "
        "17.5x and the second 22.8x (after: 5.7x and 1.5x): every message was encoded by the "
        "pure-Python `canonical_json` (about 12 µs) at every prompt start. Now a message made of "
        "strings, booleans and nulls is msgspec's sorted encoding (about 1 µs, the same bytes, "
        "checked by a property test; the tool definitions, schema and tool choice likewise when "
        "they hold no float, about 8 µs a tool instead of 30), and a run keeps the canonical "
        "bytes and hash states it "
        "computed, so a new prompt resumes from the prefix it shares with a transcript hashed "
        "before; hash values are unchanged (docs/agent.md, \"Prompt hashes\"). Per turn inside a "
        "prompt the cost is flat from 10 to 5,000 messages; a later prompt grows with H only "
        "through the identity comparison of the lists (about 30 ns a message). A run's first "
        "prompt over a history it has never hashed (decoded from a store per request) still "
        "encodes each stored message once.",
        "",
        "A call's hash is computed when something reads it: a replay's check, a trace, a "
        "stream consumer's done event at once; a journal alone when the snapshot is taken "
        "(`dump_snapshot`, the *snapshot + dump* column, which computes every call's hash as the "
        "eager hash did). Until then a call keeps only its place in the run's transcript (the "
        "messages by reference, its count and payload suffix in the trail's lists); a new "
        "prompt looks for the prefix it shares with a transcript hashed before when its first "
        "hash is read, and resumes from a call not hashed yet or a hashed mark. A run journaled "
        "and not otherwise watched awaits the model's own fold under one frame that journals "
        "the turn (placing the call on the trail then), and calls a tool without middleware "
        "directly (its outcome journaled when the body returns); the journal only appends (the "
        "turn, the call's trail and index, the outcome with its call id), and the turns and "
        "outcomes it keeps are not tracked by the cyclic collector. What is left per turn "
        "(about 1.7-1.9 µs on a 9.6 µs turn at N >= 500 on a quiet machine, measured by "
        "stubbing each part out; *Snapshot and trace hashing, taken apart*): the frame around "
        "the tool body and the outcome's appends (about 0.6-0.9 µs), the frame around the fold "
        "and the turn's record (about 0.35), the call's place in the trail, and about 0.3 µs of "
        "the next turn's objects coming from fresh memory while the journal keeps the old ones.",
        "",
    ]
    return lines


def import_times(repeats: int) -> dict[str, float]:
    import import_time

    return import_time.cpython(import_time.PROBE, repeats)


def stream_turn(chunks: int) -> dict[str, dict[str, Any]]:
    import stream_calls

    return {wire: stream_calls.measure(wire, chunks, 0, True) for wire in ("openai_chat", "anthropic")}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "bindloop"  # stable ids, so an unchanged chart diffs clean
    return plt


def _save(plt: Any, fig: Any, out_dir: Path, name: str) -> str:
    out_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_dir / name, format="svg", metadata={"Date": None})
    plt.close(fig)
    return name


def chart_overhead(out_dir: Path, ns: list[int], turns: dict[str, list[float | None]]) -> str:
    plt = _pyplot()
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
    return _save(plt, fig, out_dir, "overhead.svg")


def chart_imports(out_dir: Path, imports: dict[str, float]) -> str:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3))
    labels = ["msgspec + anyio", "import bindloop", "+ run_tool_loop", "+ every module"]
    values = [imports["deps"], imports["root"], imports["loop"], imports["everything"]]
    ax.barh(labels[::-1], values[::-1], color="#4c72b0")
    for y, v in enumerate(values[::-1]):
        ax.text(v, y, f" {v:.1f} ms", va="center")
    ax.set_xlabel("ms (CPython, median of fresh interpreters)")
    ax.set_title("Import time")
    fig.tight_layout()
    return _save(plt, fig, out_dir, "import_time.svg")


def chart_soak(out_dir: Path, soak_rows: list[dict[str, Any]]) -> str:
    plt = _pyplot()
    names = [r["framework"] for r in soak_rows]
    metrics = [("tokens/s", "tokens_per_s"), ("CPU µs / streamed token", "cpu_us_per_token"),
               ("peak RSS MiB", "peak_rss_mib")]
    fig, axes = plt.subplots(1, len(metrics), figsize=(9.5, 3.2))
    for ax, (title, key) in zip(axes, metrics):
        vals = [r[key] or 0 for r in soak_rows]
        ax.bar(names, vals, color=["#4c72b0", "#8c8c8c", "#dd8452"][:len(vals)])
        for x, v in enumerate(vals):
            ax.text(x, v, f"{v:,.0f}" if v >= 10 else f"{v:.1f}", ha="center", va="bottom")
        ax.set_title(title)
        ax.tick_params(axis="x", labelsize=8)
    fig.suptitle(f"Soak: {soak_rows[0]['sessions']} concurrent sessions with injected faults")
    fig.tight_layout()
    return _save(plt, fig, out_dir, "soak.svg")


def _when() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def header() -> list[str]:
    return [
        "# Performance",
        "",
        f"Written by `make bench-report` ({_when()}; Python {platform.python_version()} on "
        f"{platform.machine()}, {platform.system()}). Every figure and chart on this page comes "
        "from that one run, except a section marked as refreshed on its own; rerun it to refresh "
        "them. The machine is a shared 2-core VM, so compare rows measured in the same run rather "
        "than across runs.",
        "",
    ]


def _load() -> str:
    """The machine's load as a section is written: a ratio read under load reads low (the
    baselines slow down more than bindloop's fixed work), so each figure says how busy it was."""
    return f"1-minute load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"


def _refreshed(alone: bool, section: str) -> list[str]:
    return ([f"Refreshed on its own by `python bench/report.py --only {section}` ({_when()}; "
             f"Python {platform.python_version()}; {_load()} as it was written)."
             + (" `make soak` runs this." if section == "soak" else ""), ""] if alone else [])


def section_overhead(ns: list[int], turns: dict[str, list[float | None]], chart: str,
                     alone: bool = False) -> list[str]:
    lines = [
        "## Per-turn loop overhead",
        "",
        *_refreshed(alone, "overhead"),
        "A scripted model asks for one tool call per turn for N-1 turns and then answers; the tool "
        "adds two numbers. The figure is wall time per turn of the whole run (see "
        "`bench/peers.py` for each framework's fake-model mechanism). Lower is better.",
        "",
        f"![per-turn overhead]({chart})",
        "",
        "| harness | " + " | ".join(f"N={n} µs/turn" for n in ns) + " |",
        "|---|" + "---:|" * len(ns),
    ]
    for name, values in turns.items():
        cells = [f"{v:,.1f}" if v is not None else "-" for v in values]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines + [""]


def section_imports(imports: dict[str, float], chart: str, alone: bool = False) -> list[str]:
    return [
        "## Import time",
        "",
        *_refreshed(alone, "imports"),
        f"![import time]({chart})",
        "",
        "| msgspec + anyio | import bindloop | + run_tool_loop | + every module |",
        "|---:|---:|---:|---:|",
        f"| {imports['deps']:.1f} ms | {imports['root']:.1f} ms | {imports['loop']:.1f} ms | "
        f"{imports['everything']:.1f} ms |",
        "",
        "bindloop columns are cumulative after the dependencies are loaded.",
        "",
    ]


def section_stream(stream: dict[str, dict[str, Any]], chunks: int,
                   alone: bool = False) -> list[str]:
    lines = [
        "## A streamed turn, per chunk",
        "",
        *_refreshed(alone, "stream"),
        f"`bench/stream_calls.py`: one `ModelAdapter.complete()` over an in-memory transport "
        f"that yields {chunks:,} one-token SSE chunks, default watchdog budgets, on asyncio, each "
        "read giving the event loop a turn (as a socket read does). Calls are Python function "
        "calls (`sys.setprofile`) per chunk, by where the function lives; CPU is process time per "
        "token, best of 5. `--baseline CHECKOUT` prints another checkout beside it (before issue "
        "19's work, commit 03529a6, a streamed turn made 30.1 bindloop calls per chunk on either "
        "wire).",
        "",
        "| wire | bindloop calls / chunk | wire | watchdog | signal | clock | fold | "
        "anyio + event loop | CPU µs / token |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for wire, row in stream.items():
        per = row["per_chunk"]
        cells = [row["total_per_chunk"], *(per.get(k, 0.0) for k in
                 ("wire", "watchdog", "signal", "clock", "fold/other")),
                 per.get("anyio", 0.0) + per.get("event loop", 0.0)]
        lines.append(f"| {wire} | " + " | ".join(f"{c:.1f}" for c in cells)
                     + f" | {row['cpu_us_per_token']:.2f} |")
    return lines + [""]


def section_soak(soak_rows: list[dict[str, Any]], soak_lines: list[str], chart: str,
                 alone: bool = False) -> list[str]:
    import soak

    ratio = soak.cpu_ratio(soak_rows)
    bindloop, bare = soak_rows[0], soak_rows[1]
    summary = (
        f"Harness CPU per streamed token under {bindloop['sessions']:,} concurrent sessions "
        f"({bindloop['tokens']:,} tokens each side): bindloop {bindloop['cpu_us_per_token']:.1f} "
        f"µs, the bare reader {bare['cpu_us_per_token']:.1f} µs, **{ratio:.2f}×** "
        "(issue 31's target: within 1.25×)." if ratio is not None else
        "The bare reader or bindloop streamed no tokens: no CPU ratio.")
    light = [r for r in bindloop.get("no_store_rounds") or [] if r["ratio"] is not None]
    if light:
        summary += (
            " Like for like — bindloop with the same routed model and loop but no checkpoint "
            "store, a failed session run again from its start, as the bare reader does — each "
            "round: " + ", ".join(f"{r['cpu_us_per_token']:.1f} µs, **{r['ratio']:.2f}×**"
                                  for r in light)
            + " (the target is within 1.25×).")
    split_lines: list[str] = []
    ours, floor = bindloop.get("split"), bare.get("split")
    if ours and floor:
        per_chunk = ours["us_per_extra_token"] / floor["us_per_extra_token"]
        split_lines = [
            f"Where it goes, from a second run of both with longer answers "
            f"({ours['long_tokens']:,} tokens): one more streamed chunk costs bindloop "
            f"{ours['us_per_extra_token']:.1f} µs and the bare reader "
            f"{floor['us_per_extra_token']:.1f} µs ({per_chunk:.2f}×); a session costs "
            f"{ours['ms_per_session']:.2f} ms and {floor['ms_per_session']:.2f} ms besides its "
            "chunks (bindloop's: building each request, the route, the checkpoints committed to "
            "SQLite, the watchdog's task and cancel scopes per call); the longer runs made "
            f"{ours['long_requests']:,} and {floor['long_requests']:,} requests.",
            "",
        ]
    return [
        "## Soak under faults",
        "",
        *_refreshed(alone, "soak"),
        "`bench/soak.py`: concurrent tool-using sessions (two model turns, two tool calls, a "
        "30-chunk streamed answer) from a scripted OpenAI-Chat-wire provider in its own process "
        "that injects 5 % 503, 2 % 429 with Retry-After, 2 % mid-stream stalls and 1 % dropped "
        "connections. bindloop recovers through `RoutedModel` fallback over four candidates "
        "with SQLite checkpoints; pydantic-ai through `FallbackModel` and the OpenAI SDK's "
        "retries. The **bare reader** (`bench/soak_bare.py`) is the floor any Python client pays "
        "for the same sessions from the same server: httpx with a 2 s read timeout, the body "
        "split into lines, each `data:` payload decoded by msgspec into a Struct of the fields it "
        "uses, the next prefix on a failure; no transcript, checkpoint, routing table or "
        "watchdog: the SQLite checkpoints (a load and a commit per turn) are work it does not "
        "do, so each round also runs bindloop without a store (`--no-store`), the like-for-like "
        "figure. Both sides open a connection per request. CPU is the client process's (user + "
        "system) while the sessions run, over the streamed tokens the provider reported; the "
        "server is another process. Added latency: a fault-free session's wall time minus the "
        "server's scripted send time.",
        "",
        summary,
        "",
        *split_lines,
        "Most of either side's CPU is httpx, httpcore, h11 and the event loop (a cProfile of "
        "either side shows it). On this shared 2-core machine the ratio moves between runs; "
        "`bench/soak.py --rounds N` alternates the two sides and reports every round, and "
        "`--long-answer CHUNKS` runs both again with longer answers to split each side's CPU "
        "into a per-chunk and a per-session part (which holds only while both keep up with the "
        "server).",
        "",
        f"![soak]({chart})",
        "",
        "```",
        *soak_lines,
        "```",
        "",
    ]


def _sections(text: str) -> list[tuple[str, list[str]]]:
    """The page as (heading, lines) pieces; the header's heading is ``""``."""
    out: list[tuple[str, list[str]]] = [("", [])]
    for line in text.splitlines():
        if line.startswith("## "):
            out.append((line, []))
        out[-1][1].append(line)
    return out


# The page's sections in order (a section refreshed alone into a page without it goes in its place).
HEADINGS = ("## Per-turn loop overhead", AGENT_SECTION, "## Import time",
            "## A streamed turn, per chunk", "## Soak under faults", HASHING_SECTION)


def splice(page: str, replaced: list[list[str]]) -> str:
    """``page`` with each section of ``replaced`` (lines, heading first) put in place of the
    section of that heading, or inserted where :data:`HEADINGS` orders it."""
    pieces = _sections(page)
    for lines in replaced:
        heading = lines[0]
        headings = [h for h, _ in pieces]
        if heading in headings:
            pieces[headings.index(heading)] = (heading, lines)
            continue
        rank = HEADINGS.index(heading)
        at = next((i for i, h in enumerate(headings)
                   if h in HEADINGS and HEADINGS.index(h) > rank), len(pieces))
        pieces.insert(at, (heading, lines))
    return "\n".join(line for _, lines in pieces for line in lines).rstrip("\n") + "\n"


SECTIONS = ("overhead", "agent", "imports", "stream", "soak", "hashing")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ns", default="10,100,1000")
    parser.add_argument("--max-seconds", type=float, default=60.0)
    parser.add_argument("--import-repeats", type=int, default=7)
    parser.add_argument("--stream-chunks", type=int, default=2000)
    parser.add_argument("--soak-sessions", type=int, default=1000)
    parser.add_argument("--soak-rounds", type=int, default=1)
    parser.add_argument("--soak-long-answer", type=int, default=0,
                        help="answer chunks of a second soak run that splits CPU into per-chunk "
                             "and per-session parts (0: none)")
    parser.add_argument("--no-peer", action="store_true", help="the soak without pydantic-ai")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", help=f"comma-separated sections to rerun: {', '.join(SECTIONS)}")
    parser.add_argument("--out", default=str(ROOT / "docs" / "performance.md"))
    parser.add_argument("--json", help="also write every figure as JSON here")
    parser.add_argument("--agent-rounds", type=int, default=3)
    parser.add_argument("--agent-budget", type=float, default=1.5)
    args = parser.parse_args()
    ns = [int(x) for x in args.ns.split(",") if x.strip()]
    only = SECTIONS if args.only is None else tuple(x.strip() for x in args.only.split(","))
    if unknown := set(only) - set(SECTIONS):
        parser.error(f"unknown section(s) {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    if "soak" in only and args.soak_sessions <= 0:
        only = tuple(x for x in only if x != "soak")
    alone = args.only is not None
    out = Path(args.out)
    img_dir = out.parent / "performance"
    img = img_dir.name
    figures: dict[str, Any] = {}
    sections: list[list[str]] = []
    if "overhead" in only:
        print("# per-turn overhead ...", file=sys.stderr, flush=True)
        turns = figures["turns"] = overhead(ns, args.max_seconds)
        figures["ns"] = ns
        chart = chart_overhead(img_dir, ns, turns)
        sections.append(section_overhead(ns, turns, f"{img}/{chart}", alone))
    if "agent" in only:
        print("# agent layer ...", file=sys.stderr, flush=True)
        agent = figures["agent"] = agent_layer(ns, args.agent_rounds, args.agent_budget)
        sections.append(agent_lines(ns, agent, args.agent_rounds, _when() if alone else None))
    if "imports" in only:
        print("# import time ...", file=sys.stderr, flush=True)
        imports = figures["imports"] = import_times(args.import_repeats)
        chart = chart_imports(img_dir, imports)
        sections.append(section_imports(imports, f"{img}/{chart}", alone))
    if "stream" in only:
        print("# a streamed turn, per chunk ...", file=sys.stderr, flush=True)
        stream = figures["stream"] = stream_turn(args.stream_chunks)
        sections.append(section_stream(stream, args.stream_chunks, alone))
    if "hashing" in only:
        print("# snapshot and trace hashing ...", file=sys.stderr, flush=True)
        hashing = figures["hashing"] = hashing_figures(args.agent_rounds, args.agent_budget)
        sections.append(section_hashing(hashing, args.agent_rounds, alone))
    if "soak" in only:
        import soak

        print("# soak ...", file=sys.stderr, flush=True)
        rows = figures["soak"] = soak.soak(args.soak_sessions, args.seed, peer=not args.no_peer,
                                           rounds=args.soak_rounds,
                                           long_answer=args.soak_long_answer, no_store=True)
        lines = soak.table(rows)
        print("\n".join(lines))
        chart = chart_soak(img_dir, rows)
        sections.append(section_soak(rows, lines, f"{img}/{chart}", alone))
    if alone and out.exists():
        text = splice(out.read_text(), sections)
    else:
        text = splice("\n".join(header()), sections)
    out.write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    if not alone:
        print(out.read_text())
    else:  # the soak printed its table as it ran
        print("\n".join(line for lines in sections if lines[0] != "## Soak under faults"
                         for line in lines))


if __name__ == "__main__":
    main()
