"""Per-protocol figures, CPython beside workerd: time to first byte and the server's CPU per
request for the AI SDK UI message stream (majors 6 and 7) and A2A 1.0 (JSON-RPC,
``SendStreamingMessage``). Prints a table; not a test.

    .venv/bin/python bench/protocol_figures.py [-n 20] [--rps SECONDS] [--clients 8]
        [--only-rps] [--provider-delay SECONDS]

The same work on both runtimes: one chat turn that calls ``word_count`` and then answers, the
model an OpenAI-chat provider scripted on 127.0.0.1 (this process), reached over HTTP by the
server. CPython: bindloop's ASGI apps under uvicorn, one child process per protocol
(``ChatApp(ai_sdk=6)``, ``ChatApp(ai_sdk=7)``, ``A2aServer``), the model ``create_model`` over
httpx. workerd: the Worker template (make test-worker's install), ``POST /api/chat`` and
``POST /a2a``; the Worker serves one UI message stream route for both AI SDK majors (the bytes
differ only on a retracted attempt, which this workload has none of), so its AI SDK row is measured
once and printed for both. Requests go one after another after warm-up; TTFB is the client's
median from sending to the first body byte, CPU the server process's utime + stime over the batch
(/proc, 10 ms ticks) divided by the requests. workerd also stores each run in its Session
object (the lease, the event log, the saves); CPython keeps them in memory.

``--rps SECONDS`` adds requests per second on both chat protocols (``POST /api/chat``, the AI SDK
UI stream, and ``POST /ag-ui``): ``--clients`` clients each sending the same turn one request after
another over keep-alive for SECONDS per route, to ``ChatApp`` under uvicorn and to the Worker
template in workerd, over the same scripted provider. Figures: requests/s, the median latency and
the server process's CPU per request (the row ``bench/web_host.py`` prints for CPython, there with
an in-process scripted model instead of the loopback provider), and the server's busiest thread's
share of the wall time on a CPU and runnable but waiting for one (``/proc/PID/task/*/schedstat``):
their sum near 100 % means that one thread bounds the rate. ``--provider-delay SECONDS`` spreads
each provider reply over SECONDS (replies overlap): with it, more clients get proportionally more
requests per second until that thread is busy, which shows that requests are not serialised.
``BINDLOOP_WORKER_WHEELS`` names the Worker's wheel set (default ``harness/wasm/wheels-pyc``).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import msgspec

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # examples.demos, harness.fixtures
HEADERS = {"A2A-Version": "1.0"}
UI_BODY = {"trigger": "submit-message", "messages": [
    {"id": "u", "role": "user", "parts": [{"type": "text", "text": "count the words of this"}]}]}


def _cpu_of(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _threads_of(pid: int) -> dict[str, tuple[int, int]]:
    """Each thread's (ns on a CPU, ns runnable but waiting for one) from
    ``/proc/PID/task/*/schedstat``."""
    out = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            on_cpu, waiting, _ = (task / "schedstat").read_text().split()
        except (OSError, ValueError):
            continue
        out[task.name] = (int(on_cpu), int(waiting))
    return out


def _busiest(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]],
             wall: float) -> tuple[float, float]:
    """The busiest thread's fractions of ``wall``: on a CPU, and runnable but waiting for one.
    Their sum near 1 means that thread bounds the rate: it computed or queued for a core the
    whole time, and requests could only wait for it."""
    deltas = [(after[t][0] - before[t][0], after[t][1] - before[t][1]) for t in after if t in before]
    on_cpu, waiting = max(deltas, default=(0, 0))
    return on_cpu / 1e9 / wall, waiting / 1e9 / wall


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def policy(request: Any, delay_s: float = 0.0) -> Any:
    """The scripted model: a ``word_count`` call, then the answer; each reply's chunks spread
    over ``delay_s`` (an asyncio sleep on the provider's loop, so replies overlap)."""
    from bindloop.contracts import TurnUsage
    from harness.fixtures.scripted_server import turn_reply
    from bindloop.testing import final_answer, tool_call, tool_call_turn

    body = msgspec.json.decode(request.body)
    last = body["messages"][-1]
    if last["role"] == "tool":
        turn = final_answer(f"Counted {last['content']} words.",
                            usage=TurnUsage(input_tokens=12, output_tokens=3))
    else:
        turn = tool_call_turn([tool_call("word_count", {"text": "the words of this"},
                                         id="wc1")])
    reply = turn_reply("openai_chat", turn, stream=True, model=body["model"])
    return dataclasses.replace(reply, delay_s=delay_s / len(reply.chunks)) if delay_s else reply


def serve(kind: str, port: int, provider: str) -> None:
    """The child process: one protocol's ASGI app over the scripted provider."""
    import uvicorn

    from bindloop.hosts import create_model
    from bindloop.hosts.a2a.server import A2aServer
    from bindloop.hosts.chat.agent import agent_runner
    from bindloop.hosts.asgi.chat import ChatApp
    from examples.demos.ui_demo import demo_tools

    model = create_model("openai:gpt-test", base_url=provider, api_key="sk-bench")
    runner = agent_runner(model, tools=demo_tools())
    app: Any
    if kind == "a2a":
        app = A2aServer(runner, name="bench", description="Counts words.",
                        url=f"http://127.0.0.1:{port}/a2a", rpc_path="/a2a")
    else:
        app = ChatApp(runner, ai_sdk=7 if kind == "ui7" else 6)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


def _one(client: httpx.Client, url: str, body: dict[str, Any],
         headers: dict[str, str]) -> tuple[float, float]:
    start = time.perf_counter()
    first = None
    seen = b""
    with client.stream("POST", url, json=body, headers=headers) as r:
        if r.status_code != 200:
            raise RuntimeError(f"{url}: {r.status_code} {r.read()!r}")
        for chunk in r.iter_bytes():
            if first is None and chunk:
                first = time.perf_counter()
            seen += chunk
    end = time.perf_counter()
    if b"Counted" not in seen:
        raise RuntimeError(f"{url}: no answer in {seen[-500:]!r}")
    return (first or end) - start, end - start


def _body(protocol: str) -> tuple[str, dict[str, Any], dict[str, str]]:
    if protocol == "ag-ui":
        thread = uuid.uuid4().hex
        return "ag-ui", {"threadId": thread, "runId": f"run-{thread}", "messages": [
            {"id": "u", "role": "user", "content": "count the words of this"}], "tools": [],
            "context": [], "state": {}, "forwardedProps": {}}, {}
    if protocol == "a2a":
        return "a2a", {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {
            "message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                        "parts": [{"text": "count the words of this"}]}}}, HEADERS
    return "api/chat", {**UI_BODY, "id": uuid.uuid4().hex}, {}


def measure(base: str, pid: int, protocol: str, n: int) -> tuple[float, float, float]:
    """(median TTFB s, median total s, server CPU s per request)."""
    with httpx.Client(timeout=60) as client:
        for _ in range(3):  # warm-up
            path, body, headers = _body(protocol)
            _one(client, f"{base}/{path}", body, headers)
        cpu0 = _cpu_of(pid)
        runs = []
        for _ in range(n):
            path, body, headers = _body(protocol)
            runs.append(_one(client, f"{base}/{path}", body, headers))
        cpu = (_cpu_of(pid) - cpu0) / n
    return statistics.median(r[0] for r in runs), statistics.median(r[1] for r in runs), cpu


Rate = tuple[float, float, float, int, float, float]


def rate(base: str, pid: int, protocol: str, seconds: float, clients: int) -> Rate:
    """(requests/s, median latency s, server CPU s per request, requests, the busiest server
    thread's on-CPU and waiting-for-a-CPU fractions) of ``clients`` clients sending one request
    after another for ``seconds``."""
    import threading

    latencies: list[float] = []
    lock = threading.Lock()

    def client() -> None:
        with httpx.Client(timeout=60) as http:
            path, body, headers = _body(protocol)
            _one(http, f"{base}/{path}", body, headers)  # warm: a connection and an isolate
            stop_at = time.monotonic() + seconds
            while time.monotonic() < stop_at:
                path, body, headers = _body(protocol)
                took = _one(http, f"{base}/{path}", body, headers)[1]
                with lock:
                    latencies.append(took)

    cpu0, sched0, wall0 = _cpu_of(pid), _threads_of(pid), time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall, cpu, sched = time.monotonic() - wall0, _cpu_of(pid) - cpu0, _threads_of(pid)
    count = len(latencies)
    return (count / wall, statistics.median(latencies), cpu / count, count,
            *_busiest(sched0, sched, wall))


def _child(kind: str, provider: str) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, __file__, "--serve", kind, str(port), provider],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError(f"the {kind} server did not start") from None
            time.sleep(0.1)


def rps_rows(provider: str, seconds: float, clients: int) -> dict[tuple[str, str], Rate]:
    """Requests per second on both chat routes, CPython's ChatApp beside the Worker template."""
    rows = {}
    proc, base = _child("ui6", provider)
    try:
        for protocol in ("ui", "ag-ui"):
            rows[("CPython", protocol)] = rate(base, proc.pid, protocol, seconds, clients)
    finally:
        proc.terminate()
        proc.wait(10)
    sys.path.insert(0, str(REPO / "worker" / "tools"))
    from workerd_harness import Workerd, stage

    with tempfile.TemporaryDirectory() as tmp:
        config = stage(Path(tmp) / "stage", storage_dir=Path(tmp) / "do", with_conformance=False,
                       wheels_dir=_wheels(),
                       bindings={"OPENAI_BASE_URL": provider, "OPENAI_API_KEY": "sk-bench"})
        workerd = Workerd(config).start()
        try:
            for protocol in ("ui", "ag-ui"):
                rows[("workerd", protocol)] = rate(workerd.base_url, workerd.pid, protocol,
                                                   seconds, clients)
        finally:
            workerd.stop()
    return rows


def _wheels() -> Path:
    """The Worker's wheel set: ``BINDLOOP_WORKER_WHEELS`` if set (as the workerd tests read it),
    else the harness's default (``make wasm-wheels-pyc``)."""
    from workerd_harness import WHEELS_DIR

    return Path(os.environ.get("BINDLOOP_WORKER_WHEELS", str(WHEELS_DIR)))


def cpython_rows(provider: str, n: int) -> dict[str, tuple[float, float, float]]:
    rows = {}
    for kind, protocol in (("ui6", "ui"), ("ui7", "ui"), ("a2a", "a2a")):
        port = _free_port()
        proc = subprocess.Popen([sys.executable, __file__, "--serve", kind, str(port), provider],
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise RuntimeError(f"the {kind} server did not start") from None
                    time.sleep(0.1)
            rows[kind] = measure(f"http://127.0.0.1:{port}", proc.pid, protocol, n)
        finally:
            proc.terminate()
            proc.wait(10)
    return rows


def workerd_rows(provider: str, n: int) -> dict[str, tuple[float, float, float]]:
    sys.path.insert(0, str(REPO / "worker" / "tools"))
    from workerd_harness import Workerd, stage

    with tempfile.TemporaryDirectory() as tmp:
        config = stage(Path(tmp) / "stage", storage_dir=Path(tmp) / "do", with_conformance=False,
                       wheels_dir=_wheels(),
                       bindings={"OPENAI_BASE_URL": provider, "OPENAI_API_KEY": "sk-bench"})
        workerd = Workerd(config).start()
        try:
            ui = measure(workerd.base_url, workerd.pid, "ui", n)
            a2a = measure(workerd.base_url, workerd.pid, "a2a", n)
        finally:
            workerd.stop()
    return {"ui6": ui, "ui7": ui, "a2a": a2a}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=20, help="requests per row")
    parser.add_argument("--rps", type=float, default=0.0, metavar="SECONDS",
                        help="also requests per second on both chat routes, SECONDS per route")
    parser.add_argument("--only-rps", action="store_true",
                        help="only the requests-per-second rows")
    parser.add_argument("--clients", type=int, default=8, help="clients of the --rps rows")
    parser.add_argument("--provider-delay", type=float, default=0.0, metavar="SECONDS",
                        help="the scripted provider spreads each reply over SECONDS")
    parser.add_argument("--serve", nargs=3, metavar=("KIND", "PORT", "PROVIDER"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve[0], int(args.serve[1]), args.serve[2])
        return
    from harness.fixtures.scripted_server import ScriptedProviderServer

    with ScriptedProviderServer() as server:
        server.set_responder("p", functools.partial(policy, delay_s=args.provider_delay))
        provider = server.base_url("p")
        rates = rps_rows(provider, args.rps, args.clients) if args.rps > 0 else {}
        if args.only_rps:
            _print_rates(rates, args)
            return
        cp = cpython_rows(provider, args.n)
        wd = workerd_rows(provider, args.n)
    _print_rates(rates, args)
    print(f"\nper-protocol figures ({args.n} sequential requests each, warm; a tool round then "
          "the answer, scripted OpenAI-chat provider over loopback HTTP)")
    print(f"   {'protocol':<34} {'TTFB ms':>17} {'total ms':>17} {'server CPU ms/req':>19}")
    print(f"   {'':<34} {'CPython':>8} {'workerd':>8} {'CPython':>8} {'workerd':>8} "
          f"{'CPython':>9} {'workerd':>9}")
    names = {"ui6": "AI SDK 6 UI stream (POST /api/chat)",
             "ui7": "AI SDK 7 UI stream (POST /api/chat)",
             "a2a": "A2A 1.0 SendStreamingMessage"}
    for kind, name in names.items():
        (c1, ct, cc), (w1, wt, wc) = cp[kind], wd[kind]
        print(f"   {name:<34} {c1 * 1e3:>8.2f} {w1 * 1e3:>8.2f} {ct * 1e3:>8.2f} {wt * 1e3:>8.2f} "
              f"{cc * 1e3:>9.2f} {wc * 1e3:>9.2f}")
    print("   (workerd serves AI SDK 6 and 7 from one route: one measurement, printed twice)")


def _print_rates(rates: dict[tuple[str, str], Rate],
                 args: argparse.Namespace) -> None:
    if not rates:
        return
    print(f"\nrequests per second ({args.clients} clients, {args.rps:g} s per route, one request "
          "after another each over keep-alive; a tool round then the answer, scripted "
          "OpenAI-chat provider over loopback HTTP)")
    print(f"   {'runtime':<9} {'route':<16} {'requests/s':>10} {'median ms':>10} "
          f"{'server CPU ms/req':>18} {'requests':>9} {'busiest thread: on CPU':>23} "
          f"{'waiting for a CPU':>18}")
    for (runtime, protocol), (per_s, median, cpu, count, on_cpu, waiting) in rates.items():
        route = "POST /api/chat" if protocol == "ui" else "POST /ag-ui"
        print(f"   {runtime:<9} {route:<16} {per_s:>10.1f} {median * 1e3:>10.1f} "
              f"{cpu * 1e3:>18.2f} {count:>9} {on_cpu:>23.0%} {waiting:>18.0%}")


if __name__ == "__main__":
    main()
