"""``make demo-mcp``: an agent that finds an MCP server in its plugin catalog, loads it, and uses
its tools, traced.

The MCP server is real: the official ``mcp`` SDK's server (``harness.fixtures.mcp_reference_server``)
started on 127.0.0.1 with an ephemeral port, reached over streamable HTTP through the httpx
transport. The model is a small deterministic policy (no network, no credentials) that reads the
catalog and the tool results the way a model would. Progress notifications from the slow tool
are printed as they arrive; the last call is cancelled through the loop's signal.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import anyio
import msgspec

from bindloop.contracts import (
    AssistantMessage,
    ImagePart,
    Message,
    ModelTurnResult,
    SystemMessage,
    ToolCall,

    ToolDefinition,
    ToolMessage,
    ToolOutcome,
    ToolResult,
    TurnUsage,
    UserMessage,
    accumulate_run,
    content_text,
)
from bindloop.completion import StreamEvent
from bindloop.loop import (
    LoopHooks,
    ToolLoopParams,
    ToolLoopResult,
    ToolLoopState,
    ToolRunner,
    run_tool_loop,
)
from bindloop.model import ModelRequest, StreamModel, turn_events
from bindloop.mcp import McpHttpClient, McpServerPlugin
from bindloop.mcp.session import McpProgress
from bindloop.tools import (
    ToolRegistry,
    create_tool_registry,
    define_tool,
    partition_plugin_catalog,
    plugin_from_tools,
)
from bindloop.signal import AbortController

from bindloop.hosts.transports.httpx import HttpxTransport

__all__ = ("main", "run_mcp_demo", "start_reference_server")

PROMPT = "What is 1234 + 4321, how big is a circle of size 2, and can you draw me a red square?"


def start_reference_server() -> tuple[subprocess.Popen[str], str]:
    """Start the SDK's server on an ephemeral port; returns the process and its MCP URL."""
    proc = subprocess.Popen([sys.executable, "-m", "harness.fixtures.mcp_reference_server"],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise SystemExit("the reference MCP server did not start (is the `mcp` extra installed? "
                         "pip install mcp (bindloop's mcp extra))")
    return proc, line.split()[1]


class LoadPlugin(msgspec.Struct):
    name: str


def _results(messages: Sequence[Message]) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}


class PolicyModel(StreamModel):
    """Plans from what it sees: load the MCP plugin named in the catalog, call its tools, start a
    slow job, then answer from the results."""

    id = "policy"

    def __init__(self) -> None:
        self.turn = 0

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        for event in turn_events(await self.complete(messages, request)):
            yield event

    async def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                       on_event: Callable[[StreamEvent], None] | None = None,
                       on_reset: Callable[[], None] | None = None) -> ModelTurnResult:
        self.turn += 1
        names = {t.name for t in request.tools}
        usage = TurnUsage(input_tokens=sum(len(content_text(getattr(m, "content", ""))) // 4
                                           for m in messages), output_tokens=12)
        if "shapes__add" not in names:
            return ModelTurnResult(tool_calls=(ToolCall(id="load", name="load_plugin",
                                                        arguments='{"name":"shapes"}'),),
                                   usage=usage, finish_reason="tool_calls")
        done = _results(messages)
        if "sum" not in done:
            return ModelTurnResult(text="Asking the shapes server.", tool_calls=(
                ToolCall(id="sum", name="shapes__add", arguments='{"a":1234,"b":4321}'),
                ToolCall(id="circle", name="shapes__describe",
                         arguments='{"shape":"circle","size":2}'),
                ToolCall(id="square", name="shapes__render_square",
                         arguments='{"red":255,"green":0,"blue":0}'),
                ToolCall(id="typo", name="shapes__add", arguments='{"a":"one","b":2}'),
            ), usage=usage, finish_reason="tool_calls")
        if "slow" not in done:
            return ModelTurnResult(text="Starting a long job too.", tool_calls=(
                ToolCall(id="slow", name="shapes__slow", arguments='{"seconds":10}'),),
                usage=usage, finish_reason="tool_calls")
        image = done["square"].content
        drew = isinstance(image, tuple) and any(isinstance(p, ImagePart) for p in image)
        circle = msgspec.json.decode(content_text(done["circle"].content))
        text = (f"1234 + 4321 = {content_text(done['sum'].content)}. A circle of size 2 has "
                f"area {circle['area']}. "
                + ("I drew the red square (a PNG)." if drew else "I could not draw the square."))
        return ModelTurnResult(text=text, usage=usage, finish_reason="stop")


async def run_mcp_demo(url: str, write: Callable[[str], None]) -> ToolLoopResult:
    """The traced run against the MCP server at ``url``."""
    transport = HttpxTransport(url)
    controller = AbortController()
    progress_seen: list[McpProgress] = []

    def on_progress(tool: str, event: McpProgress) -> None:
        progress_seen.append(event)
        write(f"   ⋯ {tool} progress {event.progress:g}/{event.total or 0:g} {event.message or ''}")
        if len(progress_seen) == 3:
            write("   ⏹ the user presses stop")
            controller.abort("the user pressed stop")

    async def connect() -> McpHttpClient:
        return McpHttpClient(transport, server="shapes")

    shapes = McpServerPlugin(name="shapes", description="Arithmetic, shape facts and drawings.",
                             connect=connect, on_progress=on_progress)
    registry: ToolRegistry[Any] = create_tool_registry(core_plugins=["core"])
    active = {"core"}

    def load(args: LoadPlugin, ctx: object) -> ToolOutcome:
        return ToolResult(content=f"loading {args.name}", activate_plugins=(args.name,))

    registry.register(plugin_from_tools(name="core", description="Always loaded.", tools=[
        define_tool(name="load_plugin", description="Load a plugin from the catalog.",
                    args=LoadPlugin, execute=load)]))
    registry.register(shapes)
    catalog = partition_plugin_catalog(active, registry.summaries())
    listing = "; ".join(f"{s.name}: {s.description}" for s in catalog.loadable)

    async def activate(kind: str, names: tuple[str, ...]) -> None:
        if kind != "plugins":  # the demo's tools load plugins only
            return
        for name in names:
            plugin = registry.get(name)
            if isinstance(plugin, McpServerPlugin):
                toolset = await plugin.load()
                client = toolset.tools[0] if toolset.tools else None
                write(f"   ⇪ connected to MCP server {toolset.server!r}: "
                      f"{len(toolset.tools)} tools, {len(toolset.skipped)} skipped"
                      + (f" ({client.name} ...)" if client else ""))
            active.add(registry.canonicalize_name(name))

    async def run_call(call: ToolCall) -> ToolOutcome:
        outcome: ToolOutcome = await registry.run_tool_call(call, controller.signal, active)
        shown: object = outcome.content if isinstance(outcome, ToolResult) else outcome
        if isinstance(shown, tuple):
            shown = [type(p).__name__ + (f"({p.media_type})" if isinstance(p, ImagePart) else "")
                     for p in shown]
        write(f"   ⚙ {call.name}({call.arguments}) → {shown}")
        return outcome

    def on_assistant(message: AssistantMessage) -> None:
        if content_text(message.content):
            write("   🗨 " + content_text(message.content))
        for call in message.tool_calls:
            write(f"   ↳ asks for {call.name} [{call.id}]")

    async def build_tools() -> list[ToolDefinition]:
        await shapes.refresh_if_stale()
        return registry.tool_definitions(active)

    state = ToolLoopState(messages=[
        SystemMessage(content=f"You can load these plugins: {listing}."),
        UserMessage(content=PROMPT)])
    write(f"MCP server: {url}\ncatalog: {listing}\nuser: {PROMPT}")
    try:
        result = await run_tool_loop(ToolLoopParams(
            state=state, model=PolicyModel(), max_iterations=8, signal=controller.signal,
            runner=ToolRunner(run_tool_call=run_call, build_tools=build_tools,
                              runs_serially=lambda call: call.name == "load_plugin"),
            hooks=LoopHooks(
                activate=activate, on_assistant_message=on_assistant,
                on_tool_call_rejected=lambda i, e: write(f"   ✗ {i}: {type(e).__name__}: {e}"))))
        stats = result.stats
        if result.stop_reason == "aborted":
            write("\nstop reason: aborted (the slow call came back as a cancelled tool error, so "
                  "the transcript is paired and the run can go on)")
            result = await run_tool_loop(ToolLoopParams(
                state=state, model=PolicyModel(), max_iterations=8,
                runner=ToolRunner(run_tool_call=run_call, build_tools=build_tools),
                hooks=LoopHooks(activate=activate, on_assistant_message=on_assistant)))
            stats = accumulate_run(stats, result.stats)
        write(f"\nstop reason: {result.stop_reason}")
        write(f"turns: {stats.turns}, tool calls: {stats.tool_calls}, "
              f"messages: {len(state.messages)}, MCP tool time: {stats.tool_ms:.1f} ms")
        client_session = shapes.toolset
        if client_session is not None:
            write(f"skipped MCP tools: {[s.name for s in client_session.skipped] or 'none'}")
    finally:
        await shapes.aclose()
        await transport.aclose()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="An agent using a local MCP server's tools.")
    parser.add_argument("--url", help="an MCP endpoint to use instead of starting the local "
                                      "reference server")
    args = parser.parse_args(argv)
    proc = None
    url = args.url
    if url is None:
        proc, url = start_reference_server()
    try:
        result = anyio.run(run_mcp_demo, url, print)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)
    return 0 if result.stop_reason == "done" else 1


if __name__ == "__main__":
    sys.exit(main())
