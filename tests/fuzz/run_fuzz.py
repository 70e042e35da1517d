"""``make fuzz SECONDS=...``: drive every outside-bytes parser with generated and mutated inputs.

Prints, per target, the inputs tried, the findings (a raise outside the target's documented errors,
or an input over the time bound), the worst time, and the worst traced memory of the sampled
inputs; then the giants (a 1 GB line, an endless stream of tiny events, 100,000-deep nesting),
each of which must end in a typed error within its time and memory budget. Exit status 1 on any
finding.

    python tests/fuzz/run_fuzz.py --seconds 60 --seed 1
"""

from __future__ import annotations

import argparse
import resource
import signal
import sys
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

import random  # noqa: E402

from fuzz_targets import WIRES, Target, deep_inputs, mutate, targets  # noqa: E402

TIME_BOUND_S = 5.0          # any single input
GIANT_TIME_S = 20.0         # each giant case
GIANT_MEMORY = 256 << 20    # traced bytes, each giant case
SAMPLE_EVERY = 25           # inputs between traced-memory samples


class Hang(Exception):
    pass


def _alarm(_signum: int, _frame: object) -> None:
    raise Hang()


@dataclass
class Stats:
    inputs: int = 0
    worst_s: float = 0.0
    worst_mem: int = 0
    findings: list[str] = field(default_factory=list)


def run_one(target: Target, data: bytes, stats: Stats, *, trace: bool, bound_s: float) -> str | None:
    """Run one input; returns a finding or ``None``."""
    if trace:
        tracemalloc.start()
    signal.setitimer(signal.ITIMER_REAL, bound_s)
    started = time.perf_counter()
    finding = None
    try:
        target.run(data)
    except target.allowed:
        pass
    except Hang:
        finding = f"hang: over {bound_s:.0f} s"
    except BaseException as exc:  # noqa: BLE001 - anything else is what we hunt for
        finding = f"{type(exc).__name__}: {str(exc)[:160]!r}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        elapsed = time.perf_counter() - started
        if trace:
            stats.worst_mem = max(stats.worst_mem, tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
    stats.inputs += 1
    stats.worst_s = max(stats.worst_s, elapsed)
    if finding is not None:
        line = f"{finding} (input {len(data)} bytes: {data[:80]!r})"
        stats.findings.append(line)
    return finding


def campaign(seconds: float, seed: int, only: Sequence[str] = ()) -> dict[str, Stats]:
    rng = random.Random(seed)
    chosen = [t for t in targets() if not only or t.name in only]
    stats = {t.name: Stats() for t in chosen}
    pool = tuple(s for t in chosen for s in t.seeds)
    deadline = time.perf_counter() + seconds
    while True:
        for t in chosen:
            s = stats[t.name]
            data = rng.choice(t.seeds)
            for _ in range(rng.choice((1, 1, 2, 3))):
                data = mutate(data, pool, rng)
            run_one(t, data, s, trace=s.inputs % SAMPLE_EVERY == 0, bound_s=TIME_BOUND_S)
        if time.perf_counter() >= deadline:
            return stats


def fixed_run(target: Target, count: int, seed: int) -> Stats:
    """``count`` inputs for one target: its seeds, then seeded mutations (for the pytest run)."""
    rng = random.Random(seed)
    stats = Stats()
    pool = target.seeds
    for data in target.seeds:
        run_one(target, data, stats, trace=False, bound_s=TIME_BOUND_S)
    while stats.inputs < count:
        data = rng.choice(target.seeds)
        for _ in range(rng.choice((1, 2, 3))):
            data = mutate(data, pool, rng)
        run_one(target, data, stats, trace=False, bound_s=TIME_BOUND_S)
    return stats


# ---- giants -----------------------------------------------------------------------------------

@dataclass
class Giant:
    name: str
    outcome: str
    seconds: float
    traced: int
    ok: bool


def _rss_kib(field_name: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak_rss() -> bool:
    """Linux: writing 5 to clear_refs resets the peak RSS (VmHWM) to the current RSS."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def _budgeted(name: str, body: Callable[[], str]) -> Giant:
    # Peak RSS growth over the case, not tracemalloc: tracing every allocation would multiply the
    # time of the very cases whose time is being bounded.
    have_rss = _reset_peak_rss()
    base = _rss_kib("VmRSS") if have_rss else 0
    if not have_rss:
        tracemalloc.start()
    signal.setitimer(signal.ITIMER_REAL, GIANT_TIME_S)
    started = time.perf_counter()
    try:
        outcome = body()
        ok = not outcome.startswith("untyped") and not outcome.startswith("no error")
    except Hang:
        outcome, ok = f"hang: over {GIANT_TIME_S:.0f} s", False
    except BaseException as exc:  # noqa: BLE001
        outcome, ok = f"untyped {type(exc).__name__}: {str(exc)[:100]}", False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        elapsed = time.perf_counter() - started
        if have_rss:
            traced = max(0, _rss_kib("VmHWM") - base) * 1024
        else:
            traced = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    ok = ok and traced <= GIANT_MEMORY and elapsed <= GIANT_TIME_S
    return Giant(name, outcome, elapsed, traced, ok)


def _typed(run: Callable[[], object], allowed: tuple[type[BaseException], ...]) -> str:
    try:
        run()
    except allowed as exc:
        return f"{type(exc).__name__}"
    return "no error"


def giant_line(wire: str | None) -> Giant:
    """1 GB without a line end, fed 1 MiB at a time: the decoder must refuse it early."""
    from bindloop.wire import SseDecoder, SseLimitError, WireStream

    chunk = b"data: " + b"x" * ((1 << 20) - 6)

    def body() -> str:
        decoder: Any = SseDecoder() if wire is None else WireStream(WIRES[wire]().stream_decoder())
        fed = 0
        try:
            while fed < 1 << 30:
                decoder.feed(chunk)
                fed += len(chunk)
        except SseLimitError:
            return f"SseLimitError after {fed >> 20} MiB"
        except Exception as exc:  # noqa: BLE001
            return f"untyped {type(exc).__name__}"
        return "no error after 1 GiB"

    return _budgeted(f"1 GB line -> {wire or 'sse_decoder'}", body)


_TINY = {
    "openai_chat": b'data: {"id":"x","object":"chat.completion.chunk","created":0,"model":"m",'
                   b'"choices":[{"index":0,"delta":{"content":""},"finish_reason":null}]}\n\n',
    "openai_responses": b'event: response.in_progress\ndata: {"type":"response.in_progress",'
                        b'"response":{"id":"r","status":"in_progress","output":[]}}\n\n',
    "anthropic": b'event: ping\ndata: {"type":"ping"}\n\n',
    "gemini": b'data: {"candidates":[{"content":{"role":"model","parts":[{"text":""}]}}]}\n\n',
}


def giant_tiny_events(wire: str) -> Giant:
    """An endless stream of tiny events through ModelAdapter: memory stays flat, and the stream
    watchdog's ``total_ms`` ends it with its typed error."""
    import anyio

    from bindloop.wire import StreamStalledError
    from bindloop.contracts import UserMessage
    from bindloop.wire import StreamBudgets
    from bindloop.wire import ModelAdapter, WireOptions

    preamble = b""
    if wire == "anthropic":
        preamble = (b'event: message_start\ndata: {"type":"message_start","message":{"id":"m",'
                    b'"type":"message","role":"assistant","model":"m","content":[],'
                    b'"stop_reason":null,"usage":{"input_tokens":1,"output_tokens":0}}}\n\n')
    tiny = _TINY[wire] * 64

    class Endless:
        status = 200
        headers = (("content-type", "text/event-stream"),)

        async def aiter_bytes(self) -> AsyncIterator[bytes]:
            yield preamble
            while True:
                yield tiny
                await anyio.sleep(0)

    class Transport:  # the edge of the system under test: a provider that never stops
        @asynccontextmanager
        async def open(self, request: object) -> AsyncIterator[Endless]:
            yield Endless()

    model = ModelAdapter(WIRES[wire](), Transport(), WireOptions(model="m", stream=True),
                         budgets=StreamBudgets(total_ms=2000.0))

    def body() -> str:
        async def main() -> str:
            try:
                await model.complete([UserMessage(content="hi")])
            except StreamStalledError as exc:
                return f"StreamStalledError ({exc.__class__.__name__})"
            return "no error"
        return anyio.run(main)

    return _budgeted(f"endless tiny events -> {wire}", body)


def giant_deep(target: Target) -> Giant:
    deep = deep_inputs()
    kind = "sse" if target.name.endswith("stream_decoder") or target.name == "sse_decoder" else None

    if target.name == "sanitize_tool_schema":
        # The sanitizer takes a decoded value: build a 100,000-deep schema directly.
        schema: dict[str, Any] = {"type": "string"}
        for _ in range(100_000):
            schema = {"type": "object", "properties": {"a": schema}}

        def sanitize() -> str:
            from bindloop.schema import SchemaSanitizeError, sanitize_tool_schema
            return _typed(lambda: sanitize_tool_schema(schema), (SchemaSanitizeError,))

        return _budgeted(f"100,000-deep nesting -> {target.name}", sanitize)

    def body() -> str:
        outcomes = []
        for label in ([kind] if kind else ["arrays", "objects"]):
            data = deep[label]
            if target.name == "parse_skill_markdown":
                data = b"---\ndescription: " + data + b"\n---\n"
            try:
                target.run(data)
                outcomes.append(f"{label}: accepted")
            except target.allowed as exc:
                outcomes.append(f"{label}: {type(exc).__name__}")
            except RecursionError as exc:
                return f"untyped RecursionError ({label}): {str(exc)[:60]}"
        return ", ".join(outcomes)

    return _budgeted(f"100,000-deep nesting -> {target.name}", body)


def giants(only: Sequence[str] = ()) -> list[Giant]:
    out = [giant_line(None)] + [giant_line(w) for w in WIRES]
    out += [giant_tiny_events(w) for w in WIRES]
    out += [giant_deep(t) for t in targets() if not only or t.name in only]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", nargs="*", default=())
    args = parser.parse_args()
    signal.signal(signal.SIGALRM, _alarm)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    started = time.perf_counter()
    stats = campaign(args.seconds, args.seed, args.only)
    print(f"fuzz campaign: {args.seconds:.0f} s, seed {args.seed}")
    print(f"{'target':40} {'inputs':>8} {'findings':>9} {'worst ms':>9} "
          f"{'worst KiB':>10}")
    failed = False
    for name, s in stats.items():
        print(f"{name:40} {s.inputs:8} {len(s.findings):9} "
              f"{s.worst_s * 1000:9.1f} {s.worst_mem / 1024:10.0f}")
        for f in s.findings[:3]:
            print(f"    finding: {f}")
        failed |= bool(s.findings)
    print(f"total inputs: {sum(s.inputs for s in stats.values())}")
    print()
    print(f"{'giant':52} {'outcome':44} {'s':>6} {'+MiB':>7}")
    for g in giants(args.only):
        status = "ok" if g.ok else "FAIL"
        print(f"{g.name:52} {g.outcome[:44]:44} {g.seconds:6.2f} {g.traced / 2**20:7.1f}  {status}")
        failed |= not g.ok
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS {rss:.0f} MiB; wall {time.perf_counter() - started:.0f} s")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
