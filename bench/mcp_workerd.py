"""bindloop's MCP server and client on CPython and in workerd, side by side: time to first byte
(server) or per call (client), and the process's CPU per request.

Server rows: N ``tools/call`` requests on one keep-alive connection (bench/mcp_server.py's raw
client: each request in one write, TCP_NODELAY) to ``McpServerApp`` under uvicorn (CPython, its
own process, TCP_NODELAY listening socket) and to the Worker template's ``POST /mcp`` route in
workerd (``answer_mcp_http``, stateless ``McpServer``), in the 2026-07-28 form and the
2025-11-25 form; CPU is the server process's (``/proc/<pid>/stat``) over the timed calls.

Client rows: N ``call_tool`` calls of ``McpHttpClient`` against that CPython server, from this
process (``HttpxTransport``) and from a Worker in workerd (``FetchTransport``,
bench/workerd_mcp_client); per call is request sent to result decoded, CPU is the client
process's (this process's ``process_time``; the workerd process's).

    python bench/mcp_workerd.py [--calls 300] [--wheels harness/wasm/wheels-pyc]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "worker" / "tools"))
from mcp_server import RawClient, cpu_seconds  # noqa: E402
from workerd_harness import WHEELS_DIR, Workerd, stage  # noqa: E402

_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
         "io.modelcontextprotocol/clientCapabilities": {}}


def _summary(seconds: list[float], cpu_s: float) -> dict[str, float]:
    return {"med_ms": statistics.median(seconds) * 1e3,
            "p90_ms": statistics.quantiles(seconds, n=10)[-1] * 1e3,
            "cpu_us": cpu_s / len(seconds) * 1e6}


def server_rows(url: str, pid: int, calls: int, form: str, tool: str,
                arguments: dict[str, Any], expect: bytes) -> dict[str, float]:
    client = RawClient(url)
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if form == "2026-07-28":
        client.headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                          "mcp-name": tool}
        params["_meta"] = _META
    else:
        _, _, headers, _ = client.post({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                                        "params": {"protocolVersion": "2025-11-25",
                                                   "capabilities": {},
                                                   "clientInfo": {"name": "b", "version": "0"}}})
        client.headers = {"mcp-protocol-version": "2025-11-25"}
        if "mcp-session-id" in headers:
            client.headers["mcp-session-id"] = headers["mcp-session-id"]
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
    for n in range(20):
        client.post(body | {"id": n + 1})
    first: list[float] = []
    cpu0 = cpu_seconds(pid)
    for n in range(calls):
        ttfb, _, _, data = client.post(body | {"id": 100 + n})
        assert expect in data, data[:300]
        first.append(ttfb)
    cpu = cpu_seconds(pid) - cpu0
    client.close()
    return _summary(first, cpu)


def cpython_client(url: str, calls: int, modern: bool) -> dict[str, float]:
    import anyio

    from bindloop.hosts.transports.httpx import HttpxTransport
    from bindloop.mcp import MODERN_VERSIONS, McpHttpClient

    async def run() -> dict[str, float]:
        transport = HttpxTransport(url)
        try:
            async with McpHttpClient(transport, server="bench", listen=False,
                                     modern_versions=MODERN_VERSIONS if modern else ()) as c:
                for _ in range(10):
                    await c.call_tool("add", {"a": 2, "b": 40})
                times: list[float] = []
                cpu0 = time.process_time()
                for _ in range(calls):
                    started = time.perf_counter()
                    await c.call_tool("add", {"a": 2, "b": 40})
                    times.append(time.perf_counter() - started)
                return _summary(times, time.process_time() - cpu0)
        finally:
            await transport.aclose()

    return anyio.run(run)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--wheels", type=Path, default=WHEELS_DIR)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    server = subprocess.Popen([sys.executable, str(ROOT / "bench" / "mcp_server.py"), "--serve",
                               "bindloop", "--nodelay"], stdout=subprocess.PIPE, text=True,
                              env=env)
    rows: list[tuple[str, str, str, dict[str, float]]] = []
    try:
        assert server.stdout is not None
        url = server.stdout.readline().split()[1]
        time.sleep(0.5)
        with tempfile.TemporaryDirectory(prefix="bench-mcp-workerd-") as tmp:
            template = stage(Path(tmp) / "template", bindings={}, storage_dir=Path(tmp) / "do",
                             with_conformance=False, wheels_dir=args.wheels)
            bench_worker = stage(Path(tmp) / "client", bindings={"MCP_URL": url},
                                 storage_dir=Path(tmp) / "do2", with_conformance=False,
                                 wheels_dir=args.wheels,
                                 src_dir=ROOT / "bench" / "workerd_mcp_client",
                                 durable_objects=False)
            for form in ("2026-07-28", "2025-11-25"):
                rows.append(("server", "CPython (uvicorn)", form, server_rows(
                    url, server.pid, args.calls, form, "add", {"a": 2, "b": 40}, b"42")))
            with Workerd(template) as wd:
                for form in ("2026-07-28", "2025-11-25"):
                    rows.append(("server", "workerd (/mcp route)", form, server_rows(
                        wd.base_url + "/mcp", wd.pid, args.calls, form, "word_count",
                        {"text": "a b"}, b'"2"')))
            for modern, form in ((True, "2026-07-28"), (False, "2025-11-25")):
                rows.append(("client", "CPython (httpx)", form,
                             cpython_client(url, args.calls, modern)))
            with Workerd(bench_worker) as wd:
                for modern, form in ((True, "2026-07-28"), (False, "2025-11-25")):
                    era = "modern" if modern else "legacy"
                    urllib.request.urlopen(f"{wd.base_url}/?n=10&era={era}", timeout=300).read()
                    cpu0 = cpu_seconds(wd.pid)
                    with urllib.request.urlopen(f"{wd.base_url}/?n={args.calls}&era={era}",
                                                timeout=600) as resp:
                        seen = json.loads(resp.read())
                    cpu = cpu_seconds(wd.pid) - cpu0
                    assert seen["era"] == era
                    # The Worker's own timings (ms); its CPU includes the 10 warm-up calls.
                    row = _summary([ms / 1e3 for ms in seen["ms"]], cpu)
                    row["cpu_us"] = cpu / (args.calls + 10) * 1e6
                    rows.append(("client", "workerd (FetchTransport)", form, row))
    finally:
        server.terminate()
        server.wait(10)
    print(f"{args.calls} tools/call per row, loopback, CPython {sys.version.split()[0]}; "
          "server rows: TTFB; client rows: request sent to result decoded")
    print(f"{'side':<8}{'runtime':<27}{'form':<12}{'median':>10}{'p90':>10}{'CPU/req':>11}")
    for side, runtime, form, r in rows:
        print(f"{side:<8}{runtime:<27}{form:<12}{r['med_ms']:>8.2f}ms{r['p90_ms']:>8.2f}ms"
              f"{r['cpu_us']:>9.0f}µs", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
