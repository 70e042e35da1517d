"""A2A benchmark: what serving a bindloop agent over A2A 1.0 (JSON-RPC binding) costs on CPython.
Prints a table; not a test.

    .venv/bin/python bench/a2a_requests.py [--quick] [-n N]

The demo agent of ``examples.demos.ui_demo`` (its scripted model, no pacing, its tools: a tool
round, then the answer) served by ``A2aServer`` under uvicorn in a child process, requests sent one
after another over loopback: ``SendStreamingMessage`` (time to first byte: the task's first SSE
event; and to the first artifact chunk), ``SendMessage`` (blocking: the whole task in one JSON),
and ``GetTask`` of a finished task. The server's CPU per request is its /proc utime + stime over
the batch. Beside it, the same agent behind the AI SDK route (``POST /api/chat`` of the demo host)
in a child process of its own, measured the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # examples.demos

HEADERS = {"A2A-Version": "1.0"}


def _cpu_of(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(port: int) -> None:
    """The child process: the demo agent as an A2A server."""
    import uvicorn

    from bindloop.hosts.a2a.server import A2aServer
    from bindloop.hosts.chat.agent import agent_runner
    from examples.demos.ui_demo import DemoModel, demo_tools

    runner = agent_runner(DemoModel(), tools=demo_tools())
    app = A2aServer(runner, name="demo", description="Counts words and keeps notes.",
                    url=f"http://127.0.0.1:{port}/")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


def _start(argv: list[str], probe: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(probe, timeout=1)
            return proc
        except httpx.TransportError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError("the server did not start") from None
            time.sleep(0.1)


def _message(text: str) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}]}


def _call(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


def _timed_stream(client: httpx.Client, url: str, body: dict[str, Any]
                  ) -> tuple[float, float, float, str]:
    """(first byte, first artifact chunk, total) seconds, and the task id."""
    start = time.perf_counter()
    first = artifact = None
    seen = b""
    with client.stream("POST", url, json=body, headers=HEADERS) as r:
        if r.status_code != 200:
            raise RuntimeError(f"{r.status_code} {r.read()!r}")
        for chunk in r.iter_bytes():
            now = time.perf_counter()
            if first is None and chunk:
                first = now
            seen += chunk
            if artifact is None and b'"artifactUpdate"' in seen:
                artifact = now
        end = time.perf_counter()
    first_event = seen.split(b"\n\n", 1)[0].removeprefix(b"data: ")
    task_id = str(json.loads(first_event)["result"]["task"]["id"])
    return (first or end) - start, (artifact or end) - start, end - start, task_id


def a2a_rows(n: int) -> list[tuple[str, float, float, float, float]]:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _start([sys.executable, __file__, "--serve", str(port)],
                  base + "/.well-known/agent-card.json")
    rows = []
    try:
        with httpx.Client(timeout=30) as client:
            stream = _call("SendStreamingMessage", {"message": _message("count the words of this")})
            _timed_stream(client, base + "/", stream)  # warm up
            cpu0 = _cpu_of(proc.pid)
            runs = []
            for _ in range(n):
                stream["params"]["message"] = _message("count the words of this")
                runs.append(_timed_stream(client, base + "/", stream))
            cpu = (_cpu_of(proc.pid) - cpu0) / n
            rows.append(("SendStreamingMessage (SSE)", statistics.median(r[0] for r in runs),
                         statistics.median(r[1] for r in runs),
                         statistics.median(r[2] for r in runs), cpu))
            task_id = runs[-1][3]

            cpu0 = _cpu_of(proc.pid)
            totals = []
            for _ in range(n):
                body = _call("SendMessage", {"message": _message("count the words of this")})
                start = time.perf_counter()
                r = client.post(base + "/", json=body, headers=HEADERS)
                totals.append(time.perf_counter() - start)
                assert r.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            cpu = (_cpu_of(proc.pid) - cpu0) / n
            t = statistics.median(totals)
            rows.append(("SendMessage (blocking)", t, t, t, cpu))

            cpu0 = _cpu_of(proc.pid)
            totals = []
            for _ in range(n):
                start = time.perf_counter()
                r = client.post(base + "/", json=_call("GetTask", {"id": task_id}),
                                headers=HEADERS)
                totals.append(time.perf_counter() - start)
                assert "result" in r.json()
            cpu = (_cpu_of(proc.pid) - cpu0) / n
            t = statistics.median(totals)
            rows.append(("GetTask (ended task)", t, t, t, cpu))
    finally:
        proc.terminate()
        proc.wait(10)
    return rows


def ui_row(n: int) -> tuple[str, float, float, float, float]:
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    proc = _start([sys.executable, "-m", "examples.demos.ui_demo", "--port", str(port),
                   "--delay", "0"], base + "/")
    body = {"trigger": "submit-message", "messages": [
        {"id": "u", "role": "user", "parts": [{"type": "text", "text": "count the words of this"}]}]}
    try:
        with httpx.Client(timeout=30) as client:
            runs = []
            for i in range(n + 1):
                start = time.perf_counter()
                first = text = None
                with client.stream("POST", base + "/api/chat", json={**body, "id": f"c{i}"}) as r:
                    seen = b""
                    for chunk in r.iter_bytes():
                        now = time.perf_counter()
                        first = first or now
                        seen += chunk
                        if text is None and b'"text-delta"' in seen:
                            text = now
                    end = time.perf_counter()
                runs.append(((first or end) - start, (text or end) - start, end - start))
                if i == 0:
                    cpu0 = _cpu_of(proc.pid)  # the first request warmed up
            cpu = (_cpu_of(proc.pid) - cpu0) / n
    finally:
        proc.terminate()
        proc.wait(10)
    runs = runs[1:]
    return ("AI SDK POST /api/chat (same agent)", statistics.median(r[0] for r in runs),
            statistics.median(r[1] for r in runs), statistics.median(r[2] for r in runs), cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="20 requests per row")
    parser.add_argument("-n", type=int, default=200, help="requests per row")
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        serve(args.serve)
        return
    n = 20 if args.quick else args.n
    rows = a2a_rows(n) + [ui_row(n)]
    print(f"A2A 1.0 on CPython {platform.python_version()} ({os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}); the demo agent (a tool round, then the answer) under "
          f"uvicorn, {n} sequential requests per row, medians")
    print(f"   {'request':<36} {'TTFB ms':>8} {'1st text ms':>12} {'total ms':>9} "
          f"{'server CPU ms':>14}")
    for name, first, text, total, cpu in rows:
        print(f"   {name:<36} {first * 1e3:>8.2f} {text * 1e3:>12.2f} {total * 1e3:>9.2f} "
              f"{cpu * 1e3:>14.2f}")


if __name__ == "__main__":
    main()
