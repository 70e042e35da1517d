"""A small MCP server built with the official ``mcp`` SDK (``pip install mcp (bindloop's mcp extra)``), served
over streamable HTTP on 127.0.0.1 for the MCP tests, the demo and the benchmark.

    python -m bindloop.hosts.mcp_reference_server [--port 0] [--json-response] [--client-features]

prints ``READY http://127.0.0.1:<port>/mcp`` on stdout once it listens, then serves until killed.
Its tools: ``add`` (typed integers), ``describe`` (a string enum, an optional list, a structured
result), ``render_square`` (returns a PNG image), ``slow`` (sleeps, reporting progress, and counts
cancellations), ``cancellations`` (how many ``slow`` calls were cancelled), ``explode`` (raises),
and with ``--client-features`` the 2025-11-25 client features: ``weather_report`` (sampling with a ``forecast`` tool the
server runs), ``open_dashboard`` (a URL-mode elicitation), ``link_account`` (refused with
URLElicitationRequired until ``GET /verify/<id>`` is visited, which sends
``notifications/elicitation/complete``), ``book_table`` (a form elicitation), ``task_round``
(sends a task-augmented sampling or elicitation request, then drives the client's ``tasks/*`` and
returns, as JSON, every answer it got), and the 2026-07-28 Multi Round-Trip ones:
``reserve_seat`` (answers ``input_required`` with a form elicitation, a sampling request and a
``requestState``; the re-issued call books the seat) and ``reserve_rounds`` (how many first and
re-issued ``reserve_seat`` calls it saw, as JSON).
"""

# No `from __future__ import annotations`: the SDK reads the tool signatures at definition time.

import argparse
import asyncio
import socket
import struct
import sys
import zlib
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

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


def build_server(client_features: bool = False) -> Any:
    try:
        from mcp.server.mcpserver import Context, Image, MCPServer
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise SystemExit("the reference MCP server needs the SDK: pip install mcp (bindloop's mcp extra)") from exc

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

    if client_features:
        _client_feature_tools(server)
    return server


def _client_feature_tools(server: "MCPServer") -> None:
    from mcp.server.mcpserver import Context

    waiting: dict[str, Any] = {}  # elicitation id -> the MCP session whose user was sent there
    linked: set[str] = set()  # the MCP session ids whose user visited the link

    @server.tool()
    async def weather_report(city: str, ctx: Context) -> str:
        """Ask the client's model about the weather; it may call ``forecast``, run here."""
        from mcp import types

        forecast = types.Tool.model_validate({
            "name": "forecast", "description": "Today's forecast for a city",
            "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}},
                            "required": ["city"]}})
        messages: list[Any] = [types.SamplingMessage.model_validate(
            {"role": "user", "content": {"type": "text", "text": f"Weather in {city}?"}})]
        for _ in range(4):
            answer = await ctx.session.create_message(messages, max_tokens=200, tools=[forecast],
                                                      related_request_id=ctx.request_id)
            blocks = answer.content if isinstance(answer.content, list) else [answer.content]
            uses = [b for b in blocks if b.type == "tool_use"]
            if answer.stop_reason != "toolUse" or not uses:
                return " ".join(b.text for b in blocks if b.type == "text")
            messages.append(types.SamplingMessage(role="assistant", content=blocks))
            messages.append(types.SamplingMessage(role="user", content=[
                types.ToolResultContent.model_validate({
                    "toolUseId": use.id,
                    "content": [{"type": "text", "text": f"sunny in {use.input.get('city')}"}]})
                for use in uses]))
        return "the model kept calling tools"

    @server.tool()
    async def open_dashboard(ctx: Context) -> str:
        """Send the user to a dashboard (URL-mode elicitation); returns their answer."""
        answer = await ctx.session.elicit_url(
            message="Open the dashboard to confirm the export.",
            url="https://dashboard.example/export/42", elicitation_id="export-42",
            related_request_id=ctx.request_id)
        return str(answer.action)

    @server.tool()
    async def link_account(ctx: Context) -> str:
        """Refused with URLElicitationRequired (-32042) until the user visited the link."""
        from mcp import UrlElicitationRequiredError, types

        request: Any = ctx.request_context.request
        session_id = request.headers.get("mcp-session-id", "")
        if session_id in linked:
            return "account linked"
        ident = f"link-{len(waiting) + len(linked)}"
        waiting[ident] = (ctx.session, session_id)
        raise UrlElicitationRequiredError([types.ElicitRequestURLParams(
            message="Link your account first.", url=f"{request.base_url}verify/{ident}",
            elicitation_id=ident)])

    async def verify(request: Any) -> Any:
        from starlette.responses import PlainTextResponse

        ident = request.path_params["ident"]
        entry = waiting.pop(ident, None)
        if entry is None:
            return PlainTextResponse("unknown link", status_code=404)
        session, session_id = entry
        linked.add(session_id)
        await session.send_elicit_complete(ident)
        return PlainTextResponse("linked")

    route: Any = server.custom_route("/verify/{ident}", methods=["GET"])
    route(verify)

    @server.tool()
    async def book_table(restaurant: str, ctx: Context) -> str:
        """Ask the user for the party size and a time (form elicitation)."""
        from pydantic import BaseModel, Field

        class Booking(BaseModel):
            party: int = Field(ge=1, le=12, description="How many people")
            time: str = Field(pattern=r"^[0-2][0-9]:[0-5][0-9]$", description="HH:MM")

        answer = await ctx.elicit(f"Book a table at {restaurant}?", Booking)
        if answer.action != "accept":
            return f"booking {answer.action}"
        return f"booked {restaurant} for {answer.data.party} at {answer.data.time}"

    rounds = {"asked": 0, "reissued": 0, "bad_state": 0}

    @server.tool()
    async def reserve_seat(flight: str, ctx: Context) -> Any:
        """Reserve a seat: asks for the seat (a form) and a one-line greeting (sampling) through
        Multi Round-Trip Requests, then books it when the call comes back with both."""
        import json

        from mcp_types import (CallToolResult, CreateMessageRequest,
                               CreateMessageRequestParams, ElicitRequest, ElicitRequestFormParams,
                               InputRequiredResult, SamplingMessage, TextContent)

        answers = ctx.input_responses
        if not answers:
            rounds["asked"] += 1
            return InputRequiredResult(input_requests={
                "seat": ElicitRequest(params=ElicitRequestFormParams(
                    message=f"Which seat on {flight}?", requested_schema={
                        "type": "object", "properties": {
                            "seat": {"type": "string", "pattern": "^[0-9]{1,2}[A-F]$"},
                            "meal": {"type": "boolean", "default": False}},
                        "required": ["seat"]})),
                "greeting": CreateMessageRequest(params=CreateMessageRequestParams(
                    messages=[SamplingMessage(role="user", content=TextContent(
                        type="text", text=f"Greet a passenger of {flight} in one line."))],
                    max_tokens=40))},
                request_state=json.dumps({"flight": flight, "round": 1}))
        state = json.loads(ctx.request_state or "{}")
        if state.get("flight") != flight:
            rounds["bad_state"] += 1
            return CallToolResult(content=[TextContent(type="text", text="state mismatch")],
                                  is_error=True)
        rounds["reissued"] += 1
        seat: Any = answers["seat"]
        greeting: Any = answers["greeting"]
        if getattr(seat, "action", None) != "accept":
            return f"no seat on {flight} ({getattr(seat, 'action', '?')})"
        content: Any = getattr(seat, "content", None) or {}
        said = getattr(getattr(greeting, "content", None), "text", "?")
        return (f"seat {content.get('seat')} on {flight}, meal {content.get('meal')}; "
                f"greeting: {said}")

    @server.tool()
    def reserve_rounds() -> str:
        """How many first and re-issued reserve_seat calls arrived, as JSON."""
        import json

        return json.dumps(rounds)

    @server.tool()
    async def task_round(method: str, cancel: bool, ctx: Context) -> str:
        """Ask the client to run ``method`` as a task and drive its tasks/* (the steps, as JSON)."""
        import json

        from mcp import MCPError

        # The SDK's typed requests have no task field and no tasks/* requests from the server:
        # the raw back-channel of the request is the way to send them.
        channel = ctx.session._request_outbound
        steps: list[Any] = []

        async def ask(what: str, params: dict[str, Any]) -> Any:
            try:
                answer = await channel.send_raw_request(what, params, None)
            except MCPError as exc:
                answer = {"error": exc.code, "message": exc.message}
            steps.append([what, answer])
            return answer

        params: dict[str, Any] = ({"messages": [{"role": "user", "content": {
            "type": "text", "text": "Summarise MCP tasks."}}], "maxTokens": 50}
            if method == "sampling/createMessage" else {
            "message": "Your name?", "requestedSchema": {"type": "object", "properties": {
                "name": {"type": "string"}}, "required": ["name"]}})
        created = await ask(method, {**params, "task": {"ttl": 60_000}})
        task_id = created.get("task", {}).get("taskId", "?")
        await ask("tasks/list", {})
        if cancel:
            await ask("tasks/cancel", {"taskId": task_id})
            await ask("tasks/cancel", {"taskId": task_id})
        else:
            for _ in range(200):
                status = await ask("tasks/get", {"taskId": task_id})
                if "error" in status or status.get("status") in ("completed", "failed", "cancelled"):
                    break
                await asyncio.sleep(0.02)
        await ask("tasks/result", {"taskId": task_id})
        await ask("tasks/get", {"taskId": "no-such-task"})
        return json.dumps(steps)


async def _serve(port: int, json_response: bool, client_features: bool) -> None:
    import uvicorn

    app = build_server(client_features).streamable_http_app(json_response=json_response)
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
    parser.add_argument("--client-features", action="store_true",
                        help="add the sampling-with-tools and elicitation tools")
    args = parser.parse_args(argv)
    try:
        asyncio.run(_serve(args.port, args.json_response, args.client_features))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
