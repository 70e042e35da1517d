"""The Worker template's agent turn in real workerd, beside the same agent module on CPython.

Both run ``bindloop.hosts.workers.agent.run_session`` (the agent API: one user message -> one streamed
model turn -> done) against the scripted OpenAI-chat provider on 127.0.0.1; workerd over its JS
``fetch`` transport and SSE to the client with the Durable Object commits, CPython over httpx. The
workerd figures come twice, side by side: with the plain wheel set (harness/wasm/wheels) and with the
``.pyc`` one (harness/wasm/wheels-pyc, compiled inside Pyodide). Prints:

- cold start: workerd process start -> socket listening, and -> first streamed token of the first
  request (the figure a user pays after an isolate is evicted);
- warm turn: latency to the first token and to the end of the stream, and workerd's CPU per request
  (utime + stime of the process from /proc, so it includes the DO and the SSE plumbing);
- the vendored wheel set as the Worker ships it (files and bytes under python_modules/).

Needs ``make worker-node wasm-wheels wasm-wheels-pyc`` (and pycapnp, see worker/worker.mk).

    python bench/worker_turn.py [--turns 20] [--colds 3]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import msgspec

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "worker" / "tools"))
sys.path.insert(0, str(REPO / "worker" / "src"))
sys.path.insert(0, str(REPO))  # harness.fixtures

from tools import TOOLS  # noqa: E402  # the template's
from workerd_harness import Workerd, stage, tree_bytes  # noqa: E402

from bindloop.contracts import UserMessage  # noqa: E402
from bindloop.hosts.workers import agent  # noqa: E402
from bindloop.hosts.transports.httpx import HttpxTransport  # noqa: E402
from harness.fixtures.scripted_server import (  # noqa: E402
    RecordedRequest,
    ScriptedProviderServer,
    ScriptedReply,
    turn_reply,
)
from bindloop.checkpoints import create_loop_checkpoint  # noqa: E402
from bindloop.testing import final_answer  # noqa: E402

ANSWER = "The quick brown fox jumps over the lazy dog, twice over and once more for luck."


def respond(request: RecordedRequest) -> ScriptedReply:
    body = msgspec.json.decode(request.body)
    return turn_reply("openai_chat", final_answer(ANSWER), stream=True, model=body["model"])


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def chat(port: int, t_start: float) -> tuple[float, float]:
    """POST /v1/chat; seconds from ``t_start`` to the first ``turn`` event and to the stream's end."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", "/v1/chat", body=json.dumps({"message": "hi"}),
                 headers={"content-type": "application/json"})
    resp = conn.getresponse()
    first = None
    while True:
        line = resp.readline()
        if not line:
            break
        if first is None and line.startswith(b"event: turn"):
            first = time.perf_counter() - t_start
        if line.startswith(b"event: error"):
            raise RuntimeError(resp.read().decode())
    conn.close()
    if first is None:
        raise RuntimeError("no turn event in the stream")
    return first, time.perf_counter() - t_start


async def cpython_turn(base_url: str) -> tuple[float, float]:
    cfg = agent.AgentConfig(providers=(agent.Provider(id="primary", base_url=base_url,
                                                      wire="openai_chat", model="m", api_key="k"),))
    cp = create_loop_checkpoint(execution_id="bench", messages=[UserMessage(content="hi")],
                                max_iterations=2)
    first: list[float] = []
    t0 = time.perf_counter()

    def on_event(_e: object) -> None:
        if not first:
            first.append(time.perf_counter() - t0)

    model = agent.build_model(cfg, transport_for=lambda p, h: HttpxTransport(p.base_url, headers=h),
                              on_turn_event=on_event, turn_prefix="bench", first_turn=0)
    run = await agent.run_session(cp, model=model, tools=TOOLS)
    msgspec.json.encode(run.checkpoint)  # what the Worker stores
    return first[0], time.perf_counter() - t0


def staged(server: ScriptedProviderServer, tmp: Path, wheels: Path) -> tuple[Path, dict[str, list[float]]]:
    config = stage(tmp / "stage", storage_dir=tmp / "do", with_conformance=False, wheels_dir=wheels,
                   bindings={"OPENAI_BASE_URL": server.base_url("p"),
                             "OPENAI_API_KEY": "k"})
    files, size = tree_bytes(tmp / "stage" / "python_modules")
    return config, {"listen": [], "cold_first": [], "cold_done": [], "first": [], "done": [],
                    "cpu": [], "size": [files, size]}


def cold_then_warm(config: Path, out: dict[str, list[float]], turns: int) -> None:
    """One fresh workerd process: its cold start, then ``turns`` warm turns."""
    t_start = time.perf_counter()
    with Workerd(config) as wd:
        assert wd.proc is not None
        f, d = chat(wd.port, t_start)
        out["listen"].append(wd.listen_s)
        out["cold_first"].append(f)
        out["cold_done"].append(d)
        for _ in range(turns):
            c0 = cpu_s(wd.proc.pid)
            t0 = time.perf_counter()
            f, d = chat(wd.port, t0)
            out["cpu"].append(cpu_s(wd.proc.pid) - c0)
            out["first"].append(f)
            out["done"].append(d)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=20)
    ap.add_argument("--colds", type=int, default=3, help="fresh workerd processes per wheel set")
    args = ap.parse_args()
    sets = {"plain": REPO / "harness" / "wasm" / "wheels", "pyc": REPO / "harness" / "wasm" / "wheels-pyc"}
    missing = [n for n, d in sets.items() if not any(d.glob("bindloop-*.whl"))]
    if missing:
        print(f"no wheels for {missing}: run `make wasm-wheels wasm-wheels-pyc`", file=sys.stderr)
        return 2
    results: dict[str, dict[str, list[float]]] = {n: {} for n in sets}
    with ScriptedProviderServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.set_responder("p", respond)
        configs = {}
        for name, wheels in sets.items():
            configs[name], results[name] = staged(server, Path(tmp) / name, wheels)
        # Interleaved, the order flipped every round: neither set always starts on a warmer disk
        # cache or a quieter machine. Warm turns are split over the rounds.
        for i in range(args.colds):
            for name in (list(sets) if i % 2 == 0 else list(sets)[::-1]):
                cold_then_warm(configs[name], results[name], -(-args.turns // args.colds))
        cpy_first, cpy_done = [], []
        for _ in range(args.turns):
            f, d = anyio.run(cpython_turn, server.base_url("p"))
            cpy_first.append(f)
            cpy_done.append(d)

    def med(xs: list[float]) -> float:
        return statistics.median(xs) * 1000

    plain, pyc = results["plain"], results["pyc"]
    print(f"workerd, median of {args.colds} cold starts / {len(results['plain']['first'])} warm turns (ms)"
          f"{'plain':>10} {'.pyc':>9} {'pyc/plain':>10}")
    rows = (("cold: process start -> listening", "listen"),
            ("cold: process start -> first token", "cold_first"),
            ("cold: process start -> first turn done", "cold_done"),
            ("warm turn: first token", "first"),
            ("warm turn: done", "done"),
            ("warm turn: workerd CPU (10 ms ticks)", "cpu"))
    for label, key in rows:
        a, b = med(plain[key]), med(pyc[key])
        print(f"  {label:<44} {a:9.1f} {b:9.1f} {b / a:10.2f}")
    for name in sets:
        files, size = results[name]["size"]
        wheels = sorted(sets[name].glob("*.whl"))
        print(f"vendored python_modules ({name}): {files:.0f} files, {size / 1024:.0f} KiB unpacked; "
              f"{len(wheels)} wheels, {sum(w.stat().st_size for w in wheels) / 1024:.0f} KiB")
    print(f"\nCPython 3 (httpx, same agent.run_session), median of {args.turns}: first token "
          f"{med(cpy_first):.1f} ms, done {med(cpy_done):.1f} ms; workerd plain / CPython: "
          f"{med(plain['first']) / med(cpy_first):.1f} / {med(plain['done']) / med(cpy_done):.1f}")
    print("cold starts (ms) plain:", [round(x * 1000) for x in plain["cold_first"]],
          " pyc:", [round(x * 1000) for x in pyc["cold_first"]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
