"""The Worker template's agent turn in real workerd, beside the same agent module on CPython.

Both run ``worker/src/agent.py``'s ``run_session`` (one user message -> one streamed model turn ->
done) against the scripted OpenAI-chat provider on 127.0.0.1; workerd over its JS ``fetch``
transport and SSE to the client with a Durable Object commit per boundary, CPython over httpx with
an in-memory store. Prints:

- cold start: workerd process start -> socket listening, and -> first streamed token of the first
  request (the figure a user pays after an isolate is evicted);
- warm turn: latency to the first token and to the end of the stream, and workerd's CPU per request
  (utime + stime of the process from /proc, so it includes the DO and the SSE plumbing);
- the vendored wheel set as the Worker ships it (files and bytes under python_modules/).

Needs ``make worker-node wasm-wheels`` (and pycapnp, see worker/worker.mk).

    python bench/worker_turn.py [--turns 20]
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

import agent  # noqa: E402
from workerd_harness import Workerd, stage, tree_bytes  # noqa: E402

from bindloop.contracts import UserMessage  # noqa: E402
from bindloop.hosts.httpx_transport import HttpxTransport  # noqa: E402
from bindloop.hosts.scripted_server import (  # noqa: E402
    RecordedRequest,
    ScriptedProviderServer,
    ScriptedReply,
    turn_reply,
)
from bindloop.session import create_loop_checkpoint  # noqa: E402
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
    store: list[bytes] = []
    first: list[float] = []
    t0 = time.perf_counter()

    async def commit(c: object) -> None:
        store.append(msgspec.json.encode(c))

    def on_event(_e: object) -> None:
        if not first:
            first.append(time.perf_counter() - t0)

    await agent.run_session(cp, config=cfg, commit=commit, on_turn_event=on_event,
                            transport_for=lambda p, h: HttpxTransport(p.base_url, headers=h))
    return first[0], time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=20)
    args = ap.parse_args()
    with ScriptedProviderServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.set_responder("p", respond)
        config = stage(Path(tmp) / "stage", storage_dir=Path(tmp) / "do", with_conformance=False,
                       bindings={"PROVIDER_BASE_URL": server.base_url("p"),
                                 "PROVIDER_WIRE": "openai_chat", "PROVIDER_MODEL": "m",
                                 "PROVIDER_API_KEY": "k"})
        files, size = tree_bytes(Path(tmp) / "stage" / "python_modules")
        t_start = time.perf_counter()
        with Workerd(config) as wd:
            assert wd.proc is not None
            cold_first, cold_done = chat(wd.port, t_start)
            firsts, dones, cpus = [], [], []
            for _ in range(args.turns):
                c0 = cpu_s(wd.proc.pid)
                t0 = time.perf_counter()
                f, d = chat(wd.port, t0)
                cpus.append(cpu_s(wd.proc.pid) - c0)
                firsts.append(f)
                dones.append(d)
        cpy_first, cpy_done = [], []
        for _ in range(args.turns):
            f, d = anyio.run(cpython_turn, server.base_url("p"))
            cpy_first.append(f)
            cpy_done.append(d)

    def ms(xs: list[float]) -> str:
        return f"{statistics.median(xs) * 1000:7.1f}"

    print(f"workerd cold start: listening {wd.listen_s * 1000:.0f} ms, first streamed token "
          f"{cold_first * 1000:.0f} ms, first turn done {cold_done * 1000:.0f} ms")
    wheels = sorted((REPO / "wasm" / "wheels").glob("*.whl"))
    print(f"vendored python_modules (bindloop + msgspec + anyio + deps): {files} files, "
          f"{size / 1024:.0f} KiB unpacked; the {len(wheels)} wheels: "
          f"{sum(w.stat().st_size for w in wheels) / 1024:.0f} KiB")
    print(f"\nwarm turn, median of {args.turns}      first token   done (ms)")
    print(f"  workerd (SSE + DO commits)     {ms(firsts)}   {ms(dones)}")
    print(f"  CPython (httpx, in-memory)     {ms(cpy_first)}   {ms(cpy_done)}")
    print(f"  ratio workerd / CPython        {statistics.median(firsts) / statistics.median(cpy_first):7.1f}"
          f"   {statistics.median(dones) / statistics.median(cpy_done):7.1f}")
    print(f"workerd CPU per warm request (process utime+stime, 10 ms ticks): "
          f"median {ms(cpus)} ms, mean {statistics.mean(cpus) * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
