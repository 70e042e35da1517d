"""Protocol benchmarks: what speaking the AI SDK UI message stream and AG-UI costs. Prints tables;
not a test.

    .venv/bin/python bench/protocols.py [--quick]

1. Encoder cost per streamed token: N one-token text events through ``UIStreamEncoder`` /
   ``AgUiEncoder``, each chunk encoded to JSON and framed as SSE with its offset, beside the base a
   host pays anyway -- the agent event itself encoded and framed (the Worker's own SSE dialect does
   exactly that). CPU time of this process, best of 7.
2. One request end to end on CPython: the demo host (``examples.demos.ui_demo``, no pacing) under
   uvicorn in a child process, requests sent one after another over loopback. Time to first byte
   (client side, median) and the server's CPU per request (its /proc utime + stime over the batch),
   for ``POST /api/chat`` and ``POST /ag-ui``, beside the same chat run in-process with no HTTP and
   no encoder (``prompt_chat`` over the same model and tools).
3. ``--workerd``: the Worker template's routes in real workerd, the same requests over a scripted
   provider: time to first byte and workerd's CPU per request (warm isolate).
4. ``--clients``: ``POST /api/chat`` on the demo host of 2., sent by each AI SDK major's own
   ``DefaultChatTransport`` and folded by its ``readUIMessageStream`` (harness/clients/ttfb.mjs: ai@6 on
   the system Node, ai@7 on Node 22 from harness/clients/v7; needs ``make clients-node``): time to the
   response, to the first UI chunk and to the end (client side, median), and the server's CPU
   per request.
"""

from __future__ import annotations

import argparse
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec

from bindloop.agent.events import AgentStreamEvent, TurnStartEvent
from bindloop.completion import TextEvent
from bindloop.protocols import (
    AgUiEncoder,
    UIStreamEncoder,
    encode_ag_ui_event,
    encode_ui_chunk,
    sse_frame,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # examples.demos, harness.fixtures


def best_of(repeats: int, fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def encoder_costs(n: int) -> None:
    tokens = [f"tok{i % 50} " for i in range(n)]
    enc = msgspec.json.Encoder()

    def base() -> None:
        out = []
        for i, t in enumerate(tokens):
            out.append(sse_frame(enc.encode(AgentStreamEvent(turn_index=0, event=TextEvent(content=t))),
                                 event_id=i))

    def ui() -> None:
        e = UIStreamEncoder("msg-1")
        out = [sse_frame(encode_ui_chunk(c), event_id=0) for c in e.start()]
        out += [sse_frame(encode_ui_chunk(c), event_id=1) for c in e.feed(TurnStartEvent(), turn_index=0)]
        for i, t in enumerate(tokens):
            for c in e.feed(TextEvent(content=t), turn_index=0):
                out.append(sse_frame(encode_ui_chunk(c), event_id=i + 2))
        out += [sse_frame(encode_ui_chunk(c)) for c in e.finish()]

    def ag() -> None:
        e = AgUiEncoder(thread_id="t", run_id="r")
        out = [sse_frame(encode_ag_ui_event(c), event_id=0) for c in e.start()]
        for i, t in enumerate(tokens):
            for c in e.feed(TextEvent(content=t), turn_index=0):
                out.append(sse_frame(encode_ag_ui_event(c), event_id=i + 1))
        out += [sse_frame(encode_ag_ui_event(c)) for c in e.finish()]

    rows = [("agent event, framed (base)", best_of(7, base)),
            ("AI SDK UI message stream", best_of(7, ui)),
            ("AG-UI", best_of(7, ag))]
    base_s = rows[0][1]
    print(f"\n1. encoder cost per token ({n} one-token text events, CPU, best of 7)")
    print(f"   {'path':<30} {'us/token':>9} {'x base':>7}")
    for name, secs in rows:
        print(f"   {name:<30} {secs / n * 1e6:>9.2f} {secs / base_s:>7.2f}")


def _cpu_of(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


UI_BODY = {"id": "c", "trigger": "submit-message", "messages": [
    {"id": "u", "role": "user", "parts": [{"type": "text", "text": "count the words of this"}]}]}
AG_BODY = {"threadId": "t", "runId": "r", "messages": [
    {"id": "u", "role": "user", "content": "count the words of this"}]}


def _requests(base: str, path: str, body: dict[str, Any], n: int,
              key: str) -> tuple[list[float], list[float]]:
    ttfb: list[float] = []
    total: list[float] = []
    with httpx.Client(timeout=30) as client:
        for i in range(n):
            payload = {**body, key: f"{key}-{path.strip('/')}-{i}"}
            if "runId" in payload:
                payload["runId"] = f"run-{i}"
            start = time.perf_counter()
            with client.stream("POST", base + path, json=payload) as r:
                if r.status_code != 200:
                    raise RuntimeError(f"{path}: {r.status_code} {r.read()!r}")
                first = None
                for chunk in r.iter_bytes():
                    if first is None and chunk:
                        first = time.perf_counter()
                end = time.perf_counter()
            ttfb.append((first or end) - start)
            total.append(end - start)
    return ttfb, total


def in_process_cost(n: int) -> float:
    from bindloop.agent import create_agent, equip_history, equip_tool, prompt_chat
    from bindloop.contracts import UserMessage
    from examples.demos.ui_demo import DemoModel, demo_tools

    tools = demo_tools()

    async def handler(_: None) -> Any:
        for t in tools:
            equip_tool(t)
        equip_history([UserMessage(content="count the words of this")])
        return await prompt_chat()

    async def many() -> None:
        for _ in range(n):
            await create_agent(id="bench", handler=handler, model=DemoModel())(None)

    start = time.process_time()
    anyio.run(many)
    return (time.process_time() - start) / n


def request_costs(n: int) -> None:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "examples.demos.ui_demo", "--port", str(port),
                             "--delay", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(base + "/", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        _requests(base, "/api/chat", {**UI_BODY, "id": "warm"}, 1, "id")  # warm up
        rows = []
        for name, path, body, key in (("AI SDK  POST /api/chat", "/api/chat", UI_BODY, "id"),
                                      ("AG-UI   POST /ag-ui", "/ag-ui", AG_BODY, "threadId")):
            cpu0 = _cpu_of(proc.pid)
            ttfb, total = _requests(base, path, body, n, key)
            cpu = (_cpu_of(proc.pid) - cpu0) / n
            rows.append((name, statistics.median(ttfb), statistics.median(total), cpu))
    finally:
        proc.terminate()
        proc.wait(10)
    bare = in_process_cost(n)
    print(f"\n2. one request on CPython (demo host under uvicorn, {n} sequential requests: a tool "
          "round, then the answer)")
    print(f"   {'route':<26} {'TTFB ms':>8} {'total ms':>9} {'server CPU ms':>14} {'x bare':>7}")
    for name, t1, tt, cpu in rows:
        print(f"   {name:<26} {t1 * 1e3:>8.2f} {tt * 1e3:>9.2f} {cpu * 1e3:>14.2f} "
              f"{cpu / bare:>7.2f}")
    print(f"   {'bare prompt_chat (no HTTP)':<26} {'':>8} {'':>9} {bare * 1e3:>14.2f} {1.0:>7.2f}")


def workerd_costs(n: int, base_rev: str | None = None) -> None:
    """The Worker template's POST /api/chat and POST /ag-ui in real workerd (make test-worker's
    install), over a scripted OpenAI-chat provider: the same request shape as section 2. With
    ``base_rev``, the template's ``worker/src`` at that git revision is measured too (the same
    vendored bindloop), and the ratios after/base printed."""
    import tempfile
    from pathlib import Path

    rows = _workerd_rows(n, None)
    base_rows = None
    if base_rev is not None:
        with tempfile.TemporaryDirectory() as tmp:
            repo = Path(__file__).resolve().parents[1]
            names = subprocess.run(["git", "ls-tree", "--name-only", f"{base_rev}:worker/src"],
                                   cwd=repo, check=True, capture_output=True, text=True).stdout
            for name in names.split():
                if name.endswith(".py"):
                    (Path(tmp) / name).write_bytes(subprocess.run(
                        ["git", "show", f"{base_rev}:worker/src/{name}"], cwd=repo, check=True,
                        capture_output=True).stdout)
            base_rows = _workerd_rows(n, Path(tmp))
    print(f"\n3. one request in workerd (the Worker template, scripted provider on loopback, {n} "
          "sequential requests, warm isolate)")
    print(f"   {'route':<26} {'TTFB ms':>8} {'total ms':>9} {'workerd CPU ms':>15} {'x own':>6}")
    for name, t1, tt, cpu in rows:
        print(f"   {name:<26} {t1 * 1e3:>8.2f} {tt * 1e3:>9.2f} {cpu * 1e3:>15.2f} "
              f"{cpu / rows[0][3]:>6.2f}")
    print("   (own SSE: the Worker's /v1/chat, which also stores the session in its Durable Object)")
    if base_rows is not None:
        print(f"\n   worker/src at {base_rev} (base), then this tree's / base:")
        print(f"   {'route':<26} {'TTFB ms':>8} {'total ms':>9} {'workerd CPU ms':>15} "
              f"{'TTFB x':>7} {'total x':>8} {'CPU x':>6}")
        for (name, t1, tt, cpu), (_, b1, bt, bcpu) in zip(rows, base_rows, strict=True):
            print(f"   {name:<26} {b1 * 1e3:>8.2f} {bt * 1e3:>9.2f} {bcpu * 1e3:>15.2f} "
                  f"{t1 / b1:>7.2f} {tt / bt:>8.2f} {cpu / bcpu:>6.2f}")


def _workerd_rows(n: int, src_dir: Any) -> list[tuple[str, float, float, float]]:
    import tempfile
    from pathlib import Path

    from bindloop.contracts import TurnUsage
    from harness.fixtures.scripted_server import ScriptedProviderServer, turn_reply
    from bindloop.testing import final_answer, tool_call, tool_call_turn

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "worker" / "tools"))
    from workerd_harness import Workerd, stage

    def policy(request: Any) -> Any:
        body = msgspec.json.decode(request.body)
        last = body["messages"][-1]
        if last["role"] == "tool":
            turn = final_answer(f"Counted {last['content']} words.",
                                usage=TurnUsage(input_tokens=12, output_tokens=3))
        else:
            turn = tool_call_turn([tool_call("word_count", {"text": "the words of this"},
                                             id="wc1")])
        return turn_reply("openai_chat", turn, stream=True, model=body["model"])

    server = ScriptedProviderServer().start()
    server.set_responder("p", policy)
    with tempfile.TemporaryDirectory() as tmp:
        extra = {} if src_dir is None else {"src_dir": src_dir}
        config = stage(Path(tmp) / "stage", storage_dir=Path(tmp) / "do", with_conformance=False,
                       bindings={"OPENAI_BASE_URL": server.base_url("p"),
                                 "OPENAI_API_KEY": "sk-bench"}, **extra)
        workerd = Workerd(config).start()
        try:
            assert workerd.proc is not None
            _requests(workerd.base_url, "/api/chat", {**UI_BODY, "id": "warm"}, 3, "id")
            rows = []
            own = {"message": "count the words of this"}
            for name, path, body, key in (("own SSE POST /v1/chat", "/v1/chat", own, "tag"),
                                          ("AI SDK  POST /api/chat", "/api/chat", UI_BODY, "id"),
                                          ("AG-UI   POST /ag-ui", "/ag-ui", AG_BODY, "threadId")):
                cpu0 = _cpu_of(workerd.proc.pid)
                ttfb, total = _requests(workerd.base_url, path, body, n, key)
                cpu = (_cpu_of(workerd.proc.pid) - cpu0) / n
                rows.append((name, statistics.median(ttfb), statistics.median(total), cpu))
        finally:
            workerd.stop()
            server.stop()
    return rows


CLIENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "harness", "clients")


def client_costs(n: int) -> None:
    majors = {6: (CLIENTS, "node"),
              7: (os.path.join(CLIENTS, "v7"),
                  os.path.join(CLIENTS, "v7", "node_modules", "node", "bin", "node"))}
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "examples.demos.ui_demo", "--port", str(port),
                             "--delay", "0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            cwd=ROOT)
    base = f"http://127.0.0.1:{port}"
    rows: list[tuple[Any, ...]] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(base + "/", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        _requests(base, "/api/chat", {**UI_BODY, "id": "warm"}, 1, "id")  # warm up
        ttfb, total = _requests(base, "/api/chat", UI_BODY, n, "id")
        rows.append(("httpx (bytes only)", "-", None, statistics.median(ttfb),
                     statistics.median(total)))
        for major, (root, node) in majors.items():
            cpu0 = _cpu_of(proc.pid)
            out = subprocess.run([node, os.path.join(CLIENTS, "ttfb.mjs"), base, root, str(n)],
                                 capture_output=True, text=True, check=True, timeout=600)
            cpu = (_cpu_of(proc.pid) - cpu0) / (2 * n + 2)  # its requests and fetch's
            got = msgspec.json.decode(out.stdout.strip().splitlines()[-1])
            bare = got["fetch"]
            rows.append(("plain fetch", got["node"], bare["headersMs"] / 1e3,
                         bare["firstByteMs"] / 1e3, bare["totalMs"] / 1e3))
            rows.append((f"ai@{got['ai']}", got["node"], got["headersMs"] / 1e3,
                         got["firstChunkMs"] / 1e3, got["totalMs"] / 1e3, cpu))
    finally:
        proc.terminate()
        proc.wait(10)
    print(f"\n4. POST /api/chat from each AI SDK major's client (demo host under uvicorn, {n} "
          "sequential requests: a tool round, then the answer)")
    print(f"   {'client':<18} {'node':<9} {'response ms':>11} {'1st chunk ms':>12} {'total ms':>9} "
          f"{'server CPU ms':>14}")
    for row in rows:
        name, node, t0, t1, tt = row[:5]
        cpu = f"{row[5] * 1e3:>14.2f}" if len(row) > 5 else f"{'':>14}"
        response = f"{t0 * 1e3:>11.2f}" if t0 is not None else f"{'':>11}"
        print(f"   {name:<18} {node:<9} {response} {t1 * 1e3:>12.2f} {tt * 1e3:>9.2f} {cpu}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--workerd", action="store_true",
                        help="also the Worker's routes in workerd (needs make test-worker's install)")
    parser.add_argument("--workerd-base", metavar="REV",
                        help="with --workerd: also worker/src at git revision REV, for ratios")
    parser.add_argument("--clients", action="store_true",
                        help="only the AI SDK 6 and 7 clients' requests (needs make clients-node)")
    args = parser.parse_args()
    if args.clients:
        client_costs(20 if args.quick else 100)
        return
    print(f"python {platform.python_version()} on {platform.machine()}, msgspec "
          f"{msgspec.__version__}")
    encoder_costs(2_000 if args.quick else 20_000)
    request_costs(20 if args.quick else 100)
    if args.workerd:
        workerd_costs(10 if args.quick else 50, args.workerd_base)


if __name__ == "__main__":
    main()
