"""bindloop as an MCP server vs the official SDK's server, one ``add`` tool each, side by side: time
to first byte, time to the end of the reply, and the server process's CPU per request, for N
``tools/call`` requests over loopback (one keep-alive connection, JSON replies so both answer the
same way), in the 2025-11-25 session form and the stateless 2026-07-28 form, plus the pure core
alone (no HTTP).

Each server runs under uvicorn in a process of its own on 127.0.0.1, so its CPU time
(``/proc/<pid>/stat``, user + system) is its own; the client is a raw socket in this process
(see :class:`RawClient` for why not httpx).

    python bench/mcp_server.py [--calls 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

_INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench",
                                                                        "version": "0"}}}


def bindloop_app() -> Any:
    import msgspec

    from bindloop.contracts import ToolResult
    from bindloop.hosts.mcp.server import McpServerApp
    from bindloop.tools import define_tool

    class Pair(msgspec.Struct):
        a: int
        b: int

    async def add(args: Pair, ctx: Any) -> ToolResult:
        return ToolResult(content=str(args.a + args.b))

    return McpServerApp([define_tool(name="add", description="Add two integers.", args=Pair,
                                     execute=add)])


def sdk_app() -> Any:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("sdk", log_level="WARNING")

    @server.tool()
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    return server.streamable_http_app(json_response=True)


def serve(which: str, nodelay: bool) -> None:
    import socket

    import uvicorn

    app = bindloop_app() if which == "bindloop" else sdk_app()
    sock = socket.socket()
    if nodelay:
        # Accepted sockets inherit TCP_NODELAY from the listening one (Linux): the reply's body,
        # written after its headers, then leaves at once instead of waiting for a delayed ACK.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", 0))
    print(f"READY http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on")).run(sockets=[sock])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class RawClient:
    """One keep-alive HTTP/1.1 connection with TCP_NODELAY, each request sent in one write: what
    is timed is the server, not the client's own Nagle delay (httpx writes headers and body
    apart, and on loopback the body then waits ~40 ms for a delayed ACK)."""

    def __init__(self, url: str) -> None:
        import socket
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        self.host, self.path = f"{parts.hostname}:{parts.port}", parts.path
        self.sock = socket.create_connection((parts.hostname, parts.port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.headers: dict[str, str] = {}

    def post(self, message: dict[str, Any]) -> tuple[float, float, dict[str, str], bytes]:
        body = json.dumps(message).encode()
        head = "".join(f"{k}: {v}\r\n" for k, v in self.headers.items())
        request = (f"POST {self.path} HTTP/1.1\r\nhost: {self.host}\r\n"
                   "content-type: application/json\r\n"
                   "accept: application/json, text/event-stream\r\n"
                   f"{head}content-length: {len(body)}\r\n\r\n").encode() + body
        started = time.perf_counter()
        self.sock.sendall(request)
        data = self.sock.recv(65536)
        first = time.perf_counter() - started
        while b"\r\n\r\n" not in data:
            data += self.sock.recv(65536)
        raw_head, rest = data.split(b"\r\n\r\n", 1)
        lines = raw_head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, v in (x.split(":", 1) for x in lines[1:])}
        if "content-length" in headers:
            while len(rest) < int(headers["content-length"]):
                rest += self.sock.recv(65536)
        else:  # chunked
            while not rest.endswith(b"0\r\n\r\n"):
                rest += self.sock.recv(65536)
        return first, time.perf_counter() - started, headers, rest

    def close(self) -> None:
        self.sock.close()


def measure(which: str, calls: int, nodelay: bool, form: str) -> dict[str, float]:
    proc = subprocess.Popen([sys.executable, __file__, "--serve", which,
                             *(["--nodelay"] if nodelay else [])], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[1]
        for _ in range(50):
            try:
                client = RawClient(url)
                break
            except OSError:
                time.sleep(0.1)
        params: dict[str, Any] = {"name": "add", "arguments": {"a": 2, "b": 40}}
        if form == "2025-11-25":
            _, _, headers, _ = client.post(_INIT)
            client.headers = {"mcp-session-id": headers["mcp-session-id"],
                              "mcp-protocol-version": "2025-11-25"}
            client.post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        else:  # stateless: no handshake, the envelope in every request
            client.headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call",
                              "mcp-name": "add"}
            params["_meta"] = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                               "io.modelcontextprotocol/clientCapabilities": {}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}
        for n in range(20):  # warm-up
            client.post(body | {"id": n + 1})
        first: list[float] = []
        whole: list[float] = []
        cpu0 = cpu_seconds(proc.pid)
        wall0 = time.perf_counter()
        for n in range(calls):
            ttfb, total, _, data = client.post(body | {"id": 100 + n})
            first.append(ttfb)
            whole.append(total)
            assert b"42" in data, data
        wall = time.perf_counter() - wall0
        cpu = cpu_seconds(proc.pid) - cpu0
        client.close()
        return {"ttfb_ms": statistics.median(first) * 1e3,
                "ttfb_p90_ms": statistics.quantiles(first, n=10)[-1] * 1e3,
                "reply_ms": statistics.median(whole) * 1e3,
                "cpu_us": cpu / calls * 1e6, "wall_s": wall}
    finally:
        proc.terminate()
        proc.wait(10)


def core_only(calls: int) -> float:
    """The pure core's work per call (decide + run the tool + encode), no HTTP: µs."""
    import anyio

    from bindloop.mcp.server import McpCall, McpServer

    server = McpServer(bindloop_app().server.tools.values())
    init = server.post(json.dumps(_INIT).encode())
    session = init.session_id  # type: ignore[union-attr]
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": "add", "arguments": {"a": 2, "b": 40}}}).encode()

    def drop(_: bytes) -> None:
        pass

    async def run() -> float:
        started = time.perf_counter()
        for _ in range(calls):
            call = server.post(body, session_id=session)
            assert isinstance(call, McpCall)
            await server.run_call(call, drop)
        return (time.perf_counter() - started) / calls * 1e6

    return anyio.run(run)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--serve", choices=["bindloop", "sdk"])
    parser.add_argument("--nodelay", action="store_true")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.nodelay)
        return 0
    print(f"{args.calls} tools/call over loopback (uvicorn, JSON replies, one connection), "
          "CPython " + sys.version.split()[0])
    print(f"{'server':<24}{'form':<12}{'socket':<10}{'TTFB med':>10}{'TTFB p90':>10}"
          f"{'reply med':>11}{'CPU/req':>10}{'wall':>8}")
    for nodelay, form in ((True, "2025-11-25"), (True, "2026-07-28"), (False, "2025-11-25")):
        for name, which in (("bindloop McpServerApp", "bindloop"),
                            ("official SDK MCPServer", "sdk")):
            r = measure(which, args.calls, nodelay, form)
            print(f"{name:<24}{form:<12}{'NODELAY' if nodelay else 'default':<10}"
                  f"{r['ttfb_ms']:>8.2f}ms{r['ttfb_p90_ms']:>8.2f}ms{r['reply_ms']:>9.2f}ms"
                  f"{r['cpu_us']:>8.0f}µs{r['wall_s']:>7.1f}s", flush=True)
    print(f"bindloop core alone (McpServer.post + run_call, no HTTP): {core_only(args.calls):.1f} µs"
          " per call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
