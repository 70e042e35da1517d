"""A small MCP server built with the official ``mcp`` SDK (``pip install 'bindloop[mcp]'``), served
over streamable HTTP on 127.0.0.1 for the MCP tests, the demo and the benchmark.

    python -m bindloop.hosts.mcp_reference_server [--port 0] [--json-response]

prints ``READY http://127.0.0.1:<port>/mcp`` on stdout once it listens, then serves until killed.
Its tools: ``add`` (typed integers), ``describe`` (a string enum, an optional list, a structured
result), ``render_square`` (returns a PNG image), ``slow`` (sleeps, reporting progress, and counts
cancellations), ``cancellations`` (how many ``slow`` calls were cancelled), ``explode`` (raises).
"""

# No `from __future__ import annotations`: the SDK reads the tool signatures at definition time.

import argparse
import asyncio
import socket
import struct
import sys
import zlib
from typing import Any, Literal

__all__ = ("build_server", "main", "png_square")


def png_square(size: int, rgb: tuple[int, int, int]) -> bytes:
    """A solid ``size`` x ``size`` PNG, made without an imaging library."""
    def chunk(tag: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + tag + data
                + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF))
    row = b"\x00" + bytes(rgb) * size
    raw = zlib.compress(row * size)
    header = struct.pack(">IIBBBBB", size, size, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


def build_server() -> Any:
    try:
        from mcp.server.mcpserver import Context, Image, MCPServer
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SystemExit("the reference MCP server needs the SDK: pip install 'bindloop[mcp]'") from exc

    server = MCPServer("bindloop-reference", instructions="Arithmetic, shapes and a slow job.",
                            log_level="WARNING")
    counters = {"cancelled": 0}

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def describe(shape: Literal["circle", "square"], size: float,
                 tags: list[str] | None = None) -> dict[str, Any]:
        """Describe a shape; returns structured data."""
        return {"shape": shape, "area": round(size * size * (3.14159 if shape == "circle" else 1), 3),
                "tags": tags or []}

    @server.tool()
    def render_square(red: int, green: int, blue: int) -> Image:
        """Render a 4x4 square of one colour as a PNG."""
        return Image(data=png_square(4, (red, green, blue)), format="png")

    @server.tool()
    async def slow(seconds: float, ctx: Context) -> str:
        """Sleep for a while, reporting progress every 50 ms."""
        steps = max(1, int(seconds / 0.05))
        try:
            for step in range(steps):
                await ctx.report_progress(step, steps, f"step {step} of {steps}")
                await asyncio.sleep(seconds / steps)
        except asyncio.CancelledError:
            counters["cancelled"] += 1
            raise
        return f"slept {seconds}s"

    @server.tool()
    def cancellations() -> int:
        """How many slow calls were cancelled so far."""
        return counters["cancelled"]

    @server.tool()
    def explode(message: str) -> str:
        """Always fails with ``message``."""
        raise ValueError(message)

    return server


async def _serve(port: int, json_response: bool) -> None:
    import uvicorn

    app = build_server().streamable_http_app(json_response=json_response)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    uv = uvicorn.Server(config)
    bound = sock.getsockname()[1]

    async def announce() -> None:
        while not uv.started:
            await asyncio.sleep(0.01)
        print(f"READY http://127.0.0.1:{bound}/mcp", flush=True)

    await asyncio.gather(uv.serve(sockets=[sock]), announce())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--json-response", action="store_true",
                        help="answer with one JSON body instead of an event stream")
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve(args.port, args.json_response))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
