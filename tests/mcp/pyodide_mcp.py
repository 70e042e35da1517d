# Runs under Pyodide (tests/mcp/run_pyodide_mcp.mjs): the same MCP client, over JS fetch, against the
# official SDK's server on 127.0.0.1 — tools through run_tool_loop, an image, a raising tool, a
# cancelled slow call, the background GET stream of `async with`, PKCE — then timings. The last expression (one JSON line) is printed.
import json
import time

t0 = time.perf_counter()
import bindloop.tools  # (what bindloop.mcp builds on, timed apart from it)
import bindloop.schema
import bindloop.wire
t1 = time.perf_counter()
import bindloop.mcp
t2 = time.perf_counter()

import anyio
from mcp_host import fetch, url

from bindloop.contracts import ImagePart, ToolMessage
from bindloop.hosts.transports.js_fetch import FetchTransport
from bindloop.loop import ToolRunner, run_tool_loop
from bindloop.mcp import McpHttpClient, load_mcp_tools
from bindloop.tools import plugin_from_tools
from bindloop.signal import AbortController
from bindloop.testing import final_answer, loop_harness, tool_call, tool_call_turn
from bindloop.transcript import validate_and_heal_messages

client = McpHttpClient(FetchTransport(url, fetch=fetch), server="ref", modern_versions=())
toolset = await load_mcp_tools(client)
assert client.session_id and client.session.protocol_version == "2025-11-25"
plugin = plugin_from_tools(name="ref", description="reference", tools=toolset.tools)
controller = AbortController()
progress = []
slow = (await load_mcp_tools(client, on_progress=lambda n, p: progress.append(p))).tools[3]
assert slow.name == "ref__slow"


async def dispatch(call):
    if call.name == "ref__slow":
        return await slow.execute(call.arguments, controller.signal)
    return await plugin.execute(call.name, call.arguments, None)


h = loop_harness(
    [tool_call_turn([tool_call("ref__add", {"a": 20, "b": 22}, id="sum"),
                                  tool_call("ref__render_square", {"red": 0, "green": 9, "blue": 0},
                                            id="img"),
                                  tool_call("ref__explode", {"message": "boom"}, id="err")]),
                  final_answer("ok")],
    runner=ToolRunner(run_tool_call=dispatch),
)
assert (await run_tool_loop(h.params)).stop_reason == "done"
answers = {m.tool_call_id: m for m in h.state.messages if isinstance(m, ToolMessage)}
assert answers["sum"].content == "42", answers["sum"]
assert isinstance(answers["img"].content[0], ImagePart), answers["img"]
assert answers["err"].is_error
assert validate_and_heal_messages(h.state.messages, for_request=False).issues == ()


async def abort_after_progress():
    while not progress:
        await anyio.sleep(0.01)
    controller.abort("stop")

before = (await client.call_tool("cancellations", {})).structured_content
h2 = loop_harness(
    [tool_call_turn([tool_call("ref__slow", {"seconds": 30}, id="s")]),
                   final_answer("never")],
    signal=controller.signal,
    runner=ToolRunner(run_tool_call=dispatch),
)
t_cancel = time.perf_counter()
async with anyio.create_task_group() as tg:
    tg.start_soon(abort_after_progress)
    cancelled = await run_tool_loop(h2.params)
# stopped at the abort, far before the 30 s call would end (even on a loaded machine)
assert cancelled.stop_reason == "aborted" and time.perf_counter() - t_cancel < 15
answer = [m for m in h2.state.messages if isinstance(m, ToolMessage)][0]
assert answer.is_error and '"kind":"cancelled"' in str(answer.content), answer
for _ in range(60):
    if (await client.call_tool("cancellations", {})).structured_content != before:
        break
    await anyio.sleep(0.05)
else:
    raise AssertionError("the server never saw notifications/cancelled")

# async with: the background GET stream opens in Pyodide's loop too, and calls go on beside it.
async with McpHttpClient(FetchTransport(url, fetch=fetch), server="ref2",
                         modern_versions=()) as listening:
    for _ in range(100):
        if listening.listening:
            break
        await anyio.sleep(0.02)
    assert listening.listening == 1, "the GET stream did not open under Pyodide"
    assert (await listening.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}

# The authorization decisions are pure (hashlib for PKCE): RFC 7636's vector under Pyodide.
from bindloop.mcp._oauth_model import pkce_pair
from bindloop.loop import ToolRunner

assert pkce_pair(bytes([116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187,
                        186, 22, 212, 37, 77, 105, 214, 191, 240, 91, 88, 5, 88, 83, 132, 141,
                        121]))[1] == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"

add = toolset.tools[0]
calls = 30
t3 = time.perf_counter()
for i in range(calls):
    await add.execute({"a": i, "b": 1}, None)
per_call_ms = (time.perf_counter() - t3) * 1000 / calls
await client.aclose()
json.dumps({"ok": True, "import_deps_ms": round((t1 - t0) * 1000, 1),
            "import_mcp_ms": round((t2 - t1) * 1000, 1), "mcp_call_ms": round(per_call_ms, 2)})
