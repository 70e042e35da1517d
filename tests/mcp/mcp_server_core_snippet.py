# The MCP server core (bindloop.mcp.server.McpServer) driven without HTTP: the same code runs on CPython
# and under Pyodide (tests/mcp/test_mcp_server_runtimes.py), and the two transcripts must be
# identical. Top-level await; the value of the last expression is the transcript (JSON text).
import json

import msgspec

from bindloop.contracts import ToolResult
from bindloop.errors import ToolFailure
from bindloop.mcp.server import McpCall, McpServer
from bindloop.tools import define_tool


class Pair(msgspec.Struct):
    a: int
    b: int


async def add(args, ctx):
    for step in (1, 2, 2, 3):
        ctx.report_progress(step, 3)
    return ToolResult(content=str(args.a + args.b))


async def refuse(args, ctx):
    raise ToolFailure("no, on purpose")


server = McpServer([define_tool(name="add", description="Add.", args=Pair, execute=add),
                    define_tool(name="refuse", description="Refuses.", args=Pair,
                                execute=refuse)], name="core", version="1")
transcript = []


async def send(body, **headers):
    decided = server.post(json.dumps(body).encode(), **headers)
    if isinstance(decided, McpCall):
        emitted = []
        answer = await server.run_call(decided, emitted.append)
        transcript.append({"call": decided.tool, "emitted": [json.loads(m) for m in emitted],
                           "answer": json.loads(answer)})
        return None
    transcript.append({"status": decided.status, "session": decided.session_id,
                       "body": None if decided.body is None else json.loads(decided.body)})
    return decided.session_id


session = await send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c"}}})
await send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, session_id=session)
await send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
    "name": "add", "arguments": {"a": 2, "b": 40}, "_meta": {"progressToken": "p"}}},
    session_id=session)
await send({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
    "name": "refuse", "arguments": {"a": 1, "b": 1}}}, session_id=session)
await send({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
    "name": "add", "arguments": {"a": "x"}}}, session_id=session)
await send({"jsonrpc": "2.0", "id": 6, "method": "nope"}, session_id=session)
await send({"jsonrpc": "2.0", "id": 7, "method": "ping"}, session_id="unknown")
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
await send({"jsonrpc": "2.0", "id": 8, "method": "server/discover", "params": {"_meta": meta}},
           protocol_version="2026-07-28", method_header="server/discover")
await send({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
    "name": "add", "arguments": {"a": 1, "b": 1}, "_meta": meta}},
    protocol_version="2026-07-28", method_header="tools/call", name_header="add")
server.post(b"[" * 100_000)  # bounded before any recursion
json.dumps(transcript, sort_keys=True)
