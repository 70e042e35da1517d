"""MCP client overhead: one ``add`` call as a direct bindloop tool vs the same tool on an MCP server,
in one run, side by side (µs per call, median of rounds), plus where the MCP time goes, and the
import cost of ``bindloop.mcp`` on CPython and (when ``make wasm-node wasm-wheels`` has run) on
Pyodide 314 in Node.

Rows:
- direct tool: ``define_tool`` + ``Tool.execute`` (parse, validate, run) — the baseline;
- MCP client, in-memory transport: everything bindloop does for an MCP call (validate, encode
  the JSON-RPC request, build the HTTP request, read and decode the reply, map the content), with
  a transport that answers a canned reply at once — the client's own overhead;
- raw httpx POST of the same ``tools/call`` to the server, read to the end of the body (no
  bindloop);
- MCP client over loopback to the official SDK's server (event-stream and JSON reply modes).

On loopback the SDK's server (uvicorn) sends a JSON reply's body about 40 ms after its headers
(small writes meeting delayed ACKs), and ends an event stream about as late: any client that reads
to the end waits for that. On an event stream the MCP client leaves as soon as its response event
arrived, which is why it beats the raw POST there.

    python bench/mcp_client.py [--calls 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec

from bindloop.contracts import ToolResult
from bindloop.hosts.transports.httpx import HttpxTransport
from bindloop.mcp import McpHttpClient, load_mcp_tools
from bindloop.tools import define_tool
from bindloop.wire import HttpRequest

ROOT = Path(__file__).resolve().parents[1]


class Pair(msgspec.Struct):
    a: int
    b: int


class _CannedResponse:
    def __init__(self, body: bytes, headers: Sequence[tuple[str, str]]) -> None:
        self.status = 200
        self.headers = list(headers)
        self._body = body

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        yield self._body


class CannedTransport:
    """Answers every POST with the JSON-RPC reply for the request's id: no network at all."""

    def __init__(self, tools: list[dict[str, Any]]) -> None:
        self.tools = tools

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_CannedResponse]:
        if request.method != "POST":
            yield _CannedResponse(b"", [])
            return
        rpc = json.loads(request.body)
        method = rpc.get("method")
        if "id" not in rpc:
            response = _CannedResponse(b"", [])
            response.status = 202
            yield response
            return
        if method == "initialize":
            result: dict[str, Any] = {"protocolVersion": "2025-11-25", "capabilities": {},
                                      "serverInfo": {"name": "canned"}}
        elif method == "tools/list":
            result = {"tools": self.tools}
        else:
            args = rpc["params"]["arguments"]
            total = args["a"] + args["b"]
            result = {"content": [{"type": "text", "text": str(total)}],
                      "structuredContent": {"result": total}, "isError": False}
        body = json.dumps({"jsonrpc": "2.0", "id": rpc["id"], "result": result}).encode()
        yield _CannedResponse(body, [("content-type", "application/json"),
                                     ("mcp-session-id", "s")])


async def per_call_us(call: Callable[[int], Awaitable[Any]], calls: int, rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        for i in range(calls):
            await call(i)
        samples.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(samples)


def start_server(*extra: str) -> tuple[subprocess.Popen[str], str]:
    # stderr dropped: the SDK logs the raising tool's traceback, which is expected here.
    proc = subprocess.Popen([sys.executable, "-m", "harness.fixtures.mcp_reference_server", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise SystemExit("the reference MCP server did not start (pip install 'bindloop[mcp]')")
    return proc, line.split()[1]


async def measure(calls: int, rounds: int, sse_url: str, json_url: str) -> list[tuple[str, float]]:
    rows: list[tuple[str, float]] = []

    direct = define_tool(name="add", description="Add two integers.", args=Pair,
                         execute=lambda a, _c: ToolResult(content=str(a.a + a.b)))
    rows.append(("direct tool (define_tool + execute)",
                 await per_call_us(lambda i: direct.execute(f'{{"a":{i},"b":1}}', None), calls,
                                   rounds)))

    http = HttpxTransport(sse_url)
    listing_client = McpHttpClient(http, server="ref")
    await listing_client.connect()
    infos, _ = await listing_client.list_tools()
    schema_tools = [{"name": t.name, "description": t.description or "",
                     "inputSchema": t.input_schema} for t in infos]
    await listing_client.aclose()

    canned = McpHttpClient(CannedTransport(schema_tools), server="canned")
    add_canned = {t.mcp_name: t for t in (await load_mcp_tools(canned)).tools}["add"]
    rows.append(("MCP client, in-memory transport",
                 await per_call_us(lambda i: add_canned.execute(f'{{"a":{i},"b":1}}', None),
                                   calls, rounds)))

    import httpx

    for label, url in (("event stream", sse_url), ("JSON reply", json_url)):
        transport = HttpxTransport(url)
        client = McpHttpClient(transport, server="ref")
        add = {t.mcp_name: t for t in (await load_mcp_tools(client)).tools}["add"]
        headers = {"content-type": "application/json",
                   "accept": "application/json, text/event-stream",
                   "mcp-protocol-version": client.session.protocol_version or ""}
        if client.session_id:
            headers["mcp-session-id"] = client.session_id
        async with httpx.AsyncClient(timeout=30) as raw:
            async def raw_post(i: int) -> None:
                body = {"jsonrpc": "2.0", "id": 10_000_000 + i, "method": "tools/call",
                        "params": {"name": "add", "arguments": {"a": i, "b": 1}}}
                resp = await raw.post(url, json=body, headers=headers)
                assert resp.status_code == 200
            rows.append((f"raw httpx POST, no bindloop ({label})",
                         await per_call_us(raw_post, calls, rounds)))
        rows.append((f"MCP client over loopback ({label})",
                     await per_call_us(lambda i: add.execute(f'{{"a":{i},"b":1}}', None),
                                       calls, rounds)))
        await client.aclose()
        await transport.aclose()
    await http.aclose()
    return rows


def cpython_import_ms(runs: int = 7) -> tuple[float, float]:
    code = ("import time; t0 = time.perf_counter(); import bindloop.tools, bindloop.schema, "
            "bindloop.wire; t1 = time.perf_counter(); import bindloop.mcp; t2 = time.perf_counter(); "
            "print((t1 - t0) * 1000, (t2 - t1) * 1000)")
    deps, own = [], []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True).stdout.split()
        deps.append(float(out[0]))
        own.append(float(out[1]))
    return statistics.median(deps), statistics.median(own)


def pyodide_figures(url: str) -> dict[str, Any] | None:
    if not (ROOT / "harness" / "wasm" / "node_modules" / "pyodide").exists() or not any(
            (ROOT / "harness" / "wasm" / "wheels").glob("bindloop-*.whl")):
        return None
    done = subprocess.run(["node", "tests/mcp/run_pyodide_mcp.mjs", "tests/mcp/pyodide_mcp.py",
                           url], cwd=ROOT, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return None
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    sse_proc, sse_url = start_server()
    json_proc, json_url = start_server("--json-response")
    try:
        rows = anyio.run(measure, args.calls, args.rounds, sse_url, json_url)
        pyodide = pyodide_figures(sse_url)
    finally:
        for proc in (sse_proc, json_proc):
            proc.terminate()
            proc.wait(timeout=10)
    base = rows[0][1]
    width = max(len(r[0]) for r in rows)
    print(f"MCP tool call vs direct tool call — {args.calls} calls x {args.rounds} rounds, "
          f"median µs per call, CPython {sys.version.split()[0]}\n")
    print(f"| {'path':<{width}} | {'µs/call':>9} | {'x direct':>9} |")
    print(f"|{'-' * (width + 2)}|{'-' * 11}|{'-' * 11}|")
    for name, us in rows:
        print(f"| {name:<{width}} | {us:>9.1f} | {us / base:>9.1f} |")
    by = dict(rows)
    for label in ("event stream", "JSON reply"):
        client = by[f"MCP client over loopback ({label})"]
        raw = by[f"raw httpx POST, no bindloop ({label})"]
        print(f"\nMCP client over loopback ({label}): {client - raw:+.1f} µs per call against a raw "
              f"httpx POST read to the end ({client / raw:.2f}x)")
    print(f"bindloop client work alone (in-memory transport): "
          f"{by['MCP client, in-memory transport'] - base:.1f} µs per call over a direct tool")
    deps, own = cpython_import_ms()
    print(f"\nimport cost, CPython (fresh interpreter, median of 7): bindloop.tools+tools+wire "
          f"{deps:.1f} ms, then bindloop.mcp {own:.1f} ms")
    if pyodide is None:
        print("import cost, Pyodide: skipped (run `make wasm-node wasm-wheels` first)")
    else:
        print(f"import cost, Pyodide 314 in Node: bindloop.tools+tools+wire "
              f"{pyodide['import_deps_ms']} ms, then bindloop.mcp {pyodide['import_mcp_ms']} ms; "
              f"one MCP call over JS fetch {pyodide['mcp_call_ms']} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
