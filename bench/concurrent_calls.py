"""The soak's sessions in memory: what each in-flight session keeps alive, and what the cyclic
garbage collector costs for it (issue 31, CPU per streamed token at 1,000 sessions).

    python bench/concurrent_calls.py [--sessions 1000] [--rounds 3] [--baseline CHECKOUT] [--top K]

``bench/soak.py``'s bindloop side without the network: ``--sessions`` concurrent ``run_tool_loop``
sessions over a ``RoutedModel`` of four ``ModelAdapter`` candidates (OpenAI Chat wire, the soak's
watchdog budgets), each asking for two ``lookup`` calls and then streaming a 30-chunk answer, from an
in-memory transport that waits 20 ms before every chunk (as the soak's provider does), so all
sessions are in flight at once, as they are in the soak. No faults. Three figures:

- **live objects per session**: GC-tracked objects created since start-up that are alive while
  every session waits in the middle of its streamed answer, divided by the sessions (the transport
  holds them there); ``--top`` lists them by type. Each one is walked by every full collection
  while the session runs, and each one allocated and kept counts towards the next young one;
- **cyclic GC**: collections per generation and their CPU (``gc.callbacks``) for the whole run;
- **CPU per streamed token**: process CPU for the whole run over the tokens the sessions report
  (median of ``--rounds`` runs, each in a fresh process), and the same without the collector's.

``--baseline CHECKOUT`` runs the same in a child process on another checkout's ``src`` (for example
``git worktree add /tmp/base <commit>``) and prints both side by side, the rounds alternating.
CPU figures move with the machine's load; the object counts do not.
"""

from __future__ import annotations

import argparse
import collections
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import types
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec

DELAY_S = 0.02
ANSWER_CHUNKS = 30
PREFIXES = ("p1", "p2", "p3", "p4")


def _sse(obj: object) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chunk(delta: dict[str, Any] | None, finish: str | None = None,
           usage: dict[str, Any] | None = None) -> bytes:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return _sse({"id": "chatcmpl-soak", "object": "chat.completion.chunk", "created": 0,
                 "model": "soak", "choices": choices, "usage": usage})


def script(session: str, answered: int) -> list[bytes]:
    """The soak provider's reply for a session's request (``bench/soak.py``'s ``serve``)."""
    chunks = [_chunk({"role": "assistant", "content": ""})]
    if answered == 0:
        for i, key in enumerate(("alpha", "beta")):
            args = json.dumps({"key": f"{session}-{key}"})
            chunks.append(_chunk({"tool_calls": [{"index": i, "id": f"call_{session}_{key}",
                                                  "type": "function", "function": {
                                                      "name": "lookup", "arguments": ""}}]}))
            chunks.append(_chunk({"tool_calls": [{"index": i, "function": {"arguments": args}}]}))
        chunks.append(_chunk({}, finish="tool_calls"))
        out = 12
    else:
        chunks += [_chunk({"content": f"word{i} "}) for i in range(ANSWER_CHUNKS)]
        chunks.append(_chunk({}, finish="stop"))
        out = ANSWER_CHUNKS
    chunks.append(_chunk(None, usage={"prompt_tokens": 10, "completion_tokens": out,
                                      "total_tokens": 10 + out}))
    chunks.append(b"data: [DONE]\n\n")
    return chunks


class _Gate:
    """Holds every answer at its 11th chunk while set (for counting what the sessions keep)."""

    def __init__(self) -> None:
        self.event: anyio.Event | None = None


class _Response:
    status = 200
    headers = (("content-type", "text/event-stream"),)

    def __init__(self, chunks: list[bytes], gate: _Gate) -> None:
        self._chunks = chunks
        self._gate = gate

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for i, chunk in enumerate(self._chunks):
            await anyio.sleep(DELAY_S)
            if i == 10 and self._gate.event is not None and len(self._chunks) > 20:
                await self._gate.event.wait()
            yield chunk


class MemoryTransport:
    def __init__(self, gate: _Gate) -> None:
        self._gate = gate

    @asynccontextmanager
    async def open(self, request: Any) -> AsyncIterator[_Response]:
        # The provider's side (another process in the soak): read the session and the answers.
        body = msgspec.json.decode(request.body)
        session = body["messages"][0]["content"].split()[1]
        answered = sum(m["role"] == "tool" for m in body["messages"])
        await anyio.sleep(DELAY_S)
        yield _Response(script(session, answered), self._gate)


def _name(o: object) -> str:
    t = type(o)
    if t is types.FunctionType or t is types.MethodType:
        f = getattr(o, "__func__", o)
        return f"{t.__name__} {getattr(f, '__module__', '?')}.{getattr(f, '__qualname__', '?')}"
    if t in (types.CoroutineType, types.AsyncGeneratorType, types.GeneratorType):
        return f"{t.__name__} {getattr(o, '__qualname__', '?')}"
    if t is types.CellType:
        try:
            return f"cell -> {type(o.cell_contents).__qualname__}"  # type: ignore[attr-defined]
        except ValueError:
            return "cell -> (empty)"
    if t is tuple or t is list:
        return f"{t.__name__}[{', '.join(type(x).__name__ for x in o[:3])}]"  # type: ignore[index]
    return f"{t.__module__}.{t.__qualname__}"


def run(sessions: int, count: bool, top: int) -> dict[str, Any]:
    from bindloop.contracts import ToolCall, ToolDefinition, ToolResult, UserMessage
    from bindloop.loop import ToolLoopParams, ToolLoopState, ToolRunner, run_tool_loop
    from bindloop.routing import (
        OrderedPolicy,
        RouteCandidate,
        RoutePlan,
        RouteStage,
        canonical_model_id,
        provider_id,
    )
    from bindloop.wire import (
        ModelAdapter,
        OpenAIChatAdapter,
        RoutedModel,
        StreamBudgets,
        WireOptions,
    )

    gate = _Gate()
    chat = OpenAIChatAdapter()
    # The soak's budgets; while counting, the answers wait at the gate as long as the count takes,
    # so the budgets are generous then (the same supervisor and objects, no stall on a slow count).
    budgets = (StreamBudgets(first_token_ms=600_000, inter_chunk_ms=600_000, total_ms=600_000)
               if count else
               StreamBudgets(first_token_ms=10_000, inter_chunk_ms=2_000, total_ms=60_000))
    models = {p: ModelAdapter(chat, MemoryTransport(gate), WireOptions(model="soak", stream=True),
                              budgets=budgets) for p in PREFIXES}
    model_id = canonical_model_id("soak/model")
    plan = RoutePlan(stages=(RouteStage(
        role="primary", model=model_id,
        policy=OrderedPolicy(providers=tuple(provider_id(p) for p in PREFIXES)),
        candidates=tuple(RouteCandidate(provider_id=provider_id(p), canonical_model_id=model_id,
                                        provider_invocation_model="soak",
                                        credential_source="platform") for p in PREFIXES)),))
    routed = RoutedModel(plan=plan, models=models)  # type: ignore[arg-type]
    tools = [ToolDefinition(name="lookup", description="Look a key up.", parameters={
        "type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]})]

    async def lookup(call: ToolCall) -> ToolResult:
        return ToolResult(content="value of " + json.loads(call.arguments)["key"])

    runner = ToolRunner(run_tool_call=lookup, build_tools=lambda: tools)
    tokens = [0]

    async def one(n: int) -> None:
        state = ToolLoopState(messages=[UserMessage(content=f"session s{n:04d} look up")])
        result = await run_tool_loop(ToolLoopParams(model=routed, runner=runner, state=state,
                                                    max_iterations=4))
        if result.stop_reason != "done":
            raise RuntimeError(f"session {n} stopped with {result.stop_reason}")
        tokens[0] += state.output_tokens

    async def counted() -> dict[str, Any]:
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, 999_999)  # warm: lazy imports and caches are not a session's
        gc.collect()
        before = {id(o) for o in gc.get_objects()}
        gate.event = anyio.Event()
        async with anyio.create_task_group() as tg:
            for n in range(sessions):
                tg.start_soon(one, n)
            await anyio.sleep(DELAY_S * 40)  # every session waits at its answer's 11th chunk
            alive = [o for o in gc.get_objects() if id(o) not in before]
            by_type = collections.Counter(map(_name, alive))
            gate.event.set()
        return {"live_per_session": len(alive) / sessions,
                "top": [(k, v / sessions) for k, v in by_type.most_common(top)]}

    async def timed() -> dict[str, Any]:
        counts, spent, started = [0, 0, 0], [0.0], [0.0]

        def watch(phase: str, info: dict[str, Any]) -> None:
            if phase == "start":
                started[0] = time.process_time()
            else:
                counts[info["generation"]] += 1
                spent[0] += time.process_time() - started[0]

        gc.callbacks.append(watch)
        cpu0 = time.process_time()
        try:
            async with anyio.create_task_group() as tg:
                for n in range(sessions):
                    tg.start_soon(one, n)
        finally:
            cpu = time.process_time() - cpu0
            gc.callbacks.remove(watch)
        return {"cpu_us_per_token": 1e6 * cpu / tokens[0],
                "cpu_us_per_token_without_gc": 1e6 * (cpu - spent[0]) / tokens[0],
                "gc_collections": counts, "gc_cpu_s": spent[0]}

    return anyio.run(counted if count else timed)


def _child(src: str, sessions: int, count: bool, top: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": src}
    cmd = [sys.executable, __file__, "--json", "--sessions", str(sessions), "--top", str(top)]
    out = subprocess.run(cmd + (["--count"] if count else []), env=env, capture_output=True,
                         text=True, check=True)
    return dict(json.loads(out.stdout))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--count", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:
        print(json.dumps(run(args.sessions, args.count, args.top)))
        return
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    sides = [("now", here)]
    if args.baseline:
        sides.insert(0, ("base", os.path.join(args.baseline, "src")))
    counted = {name: _child(src, min(args.sessions, 300), True, args.top) for name, src in sides}
    timed: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in sides}
    for _ in range(args.rounds):
        for name, src in sides:
            timed[name].append(_child(src, args.sessions, False, args.top))
    print(f"{args.sessions} concurrent sessions in memory (two model turns, two tool calls, a "
          f"{ANSWER_CHUNKS}-chunk answer, {DELAY_S * 1000:.0f} ms per chunk); load "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; CPU: median of {args.rounds}")
    print(f"{'':42}" + "".join(f"{name:>12}" for name, _ in sides))

    def row(label: str, values: list[str]) -> None:
        print(f"{label:42}" + "".join(f"{v:>12}" for v in values))

    row("live objects per session (mid-stream)",
        [f"{counted[n]['live_per_session']:.0f}" for n, _ in sides])
    med = {n: {k: statistics.median(r[k] for r in timed[n])
               for k in ("cpu_us_per_token", "cpu_us_per_token_without_gc", "gc_cpu_s")}
           for n, _ in sides}
    row("CPU µs / streamed token", [f"{med[n]['cpu_us_per_token']:.1f}" for n, _ in sides])
    row("  without the collector's", [f"{med[n]['cpu_us_per_token_without_gc']:.1f}"
                                      for n, _ in sides])
    row("cyclic GC CPU s", [f"{med[n]['gc_cpu_s']:.2f}" for n, _ in sides])
    row("collections young/middle/full (last run)",
        ["/".join(map(str, timed[n][-1]["gc_collections"])) for n, _ in sides])
    print("CPU µs / token by run: " + "; ".join(
        f"{n} " + ", ".join(f"{r['cpu_us_per_token']:.1f}" for r in timed[n]) for n, _ in sides))
    name = sides[-1][0]
    print(f"what a session keeps alive ({name}, per session, top {args.top}):")
    for kind, per in counted[name]["top"]:
        print(f"  {per:6.2f}  {kind}")


if __name__ == "__main__":
    main()
