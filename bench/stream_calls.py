"""Calls per chunk and CPU per token of a streamed turn (issue 19, item 6).

    .venv/bin/python bench/stream_calls.py [--chunks N] [--wire W] [--baseline CHECKOUT] [--top K]

``ModelAdapter.complete()`` over an in-memory transport that yields N pre-rendered one-token SSE
chunks of the wire (one event per read, as a provider streaming token by token delivers them), with
the default watchdog budgets, on asyncio; each read gives the event loop a turn first, as a socket
read does (so the watchdog's supervision runs as it would), unless ``--no-yield``. Two figures:

- **calls per chunk**: Python function calls (``sys.setprofile`` "call" events; C functions are
  not counted) during the stream, divided by N, split by where the called function lives: the wire
  (``bindloop.wire``), its watchdog apart (``bindloop.wire._watchdog``), the signal
  (``bindloop.signal``), the clock (``bindloop.clock``), the rest of bindloop (the fold), anyio and
  the event loop (the last three are the host's, not counted in the bindloop total); ``--top``
  lists bindloop's most called functions;
- **CPU per token**: ``time.process_time()`` for the whole call divided by N, best of 5 runs
  without the profiler.

``--baseline CHECKOUT`` runs the same workload in a child process on another checkout's ``src``
(``git worktree add /tmp/base <commit>``) and prints both side by side with ratios.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import FrameType
from typing import Any

import anyio
import anyio.lowlevel

from bindloop.contracts import UserMessage
from bindloop.wire import HttpRequest, ModelAdapter, WireOptions, create_wire_adapter

WORDS = ["The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", "."]


def _sse(obj: object, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + json.dumps(obj, separators=(",", ":")) + "\n\n").encode()


def chunks_for(wire: str, n: int) -> list[bytes]:
    words = [WORDS[i % len(WORDS)] for i in range(n)]
    if wire == "openai_chat":
        base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                "model": "gpt-x"}
        return ([_sse({**base, "choices": [{"index": 0, "delta": {"content": w}}]}) for w in words]
                + [_sse({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
                   _sse({**base, "choices": [], "usage": {"prompt_tokens": 5,
                                                          "completion_tokens": n}}),
                   b"data: [DONE]\n\n"])
    if wire == "anthropic":
        return ([_sse({"type": "message_start", "message": {"model": "claude-x", "usage": {
                    "input_tokens": 5, "output_tokens": 1}}}, "message_start"),
                 _sse({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}}, "content_block_start")]
                + [_sse({"type": "content_block_delta", "index": 0,
                         "delta": {"type": "text_delta", "text": w}}, "content_block_delta")
                   for w in words]
                + [_sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
                   _sse({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                         "usage": {"output_tokens": n}}, "message_delta"),
                   _sse({"type": "message_stop"}, "message_stop")])
    raise SystemExit(f"unknown wire {wire!r} (openai_chat, anthropic)")


class _Response:
    status = 200
    headers = (("content-type", "text/event-stream"),)

    def __init__(self, chunks: list[bytes], yields: bool) -> None:
        self._chunks = chunks
        self._yields = yields

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            if self._yields:
                await anyio.lowlevel.checkpoint()  # a socket read gives the loop a turn
            yield chunk


class MemoryTransport:
    def __init__(self, chunks: list[bytes], yields: bool) -> None:
        self.chunks = chunks
        self.yields = yields

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Response]:
        yield _Response(self.chunks, self.yields)


# The watchdog lived in bindloop.completion before it moved to the wire: a --baseline of an older
# checkout still counts it apart.
_BUCKETS = (("bindloop.wire._watchdog", "watchdog"), ("bindloop.completion._watchdog", "watchdog"),
            ("bindloop.wire", "wire"),
            ("bindloop.signal", "signal"), ("bindloop.clock", "clock"), ("bindloop", "fold/other"),
            ("anyio", "anyio"), ("asyncio", "event loop"))


_OURS = frozenset(("wire", "watchdog", "signal", "clock", "fold/other"))


def _bucket(module: str) -> str:
    for prefix, name in _BUCKETS:
        if module == prefix or module.startswith(prefix + "."):
            return name
    return "other"


def measure(wire: str, n: int, top: int, yields: bool) -> dict[str, Any]:
    chunks = chunks_for(wire, n)
    model = ModelAdapter(create_wire_adapter(wire), MemoryTransport(chunks, yields),
                         WireOptions(model="m", stream=True, max_tokens=16))
    messages = [UserMessage(content="go")]

    async def once() -> None:
        turn = await model.complete(messages)
        assert turn.text is not None and len(turn.text) > n

    cpu = []
    for _ in range(5):
        start = time.process_time()
        anyio.run(once)
        cpu.append(time.process_time() - start)
    counts: collections.Counter[str] = collections.Counter()
    functions: collections.Counter[str] = collections.Counter()

    def profile(frame: FrameType, event: str, _arg: object) -> None:
        if event == "call":
            code = frame.f_code
            module = frame.f_globals.get("__name__", "?")
            counts[_bucket(module)] += 1
            if module.startswith("bindloop"):
                functions[f"{module}.{code.co_qualname}"] += 1

    async def profiled() -> None:
        sys.setprofile(profile)
        try:
            await once()
        finally:
            sys.setprofile(None)

    anyio.run(profiled)
    ours = sum(v for k, v in counts.items() if k in _OURS)
    return {"per_chunk": {k: v / n for k, v in counts.items()},
            "total_per_chunk": ours / n,
            "top": [(name, c / n) for name, c in functions.most_common(top)],
            "cpu_us_per_token": min(cpu) / n * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=2000)
    parser.add_argument("--wire", default="openai_chat")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--baseline", default=None)
    parser.add_argument("--no-yield", action="store_true",
                        help="the transport never gives the event loop a turn")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    after = measure(args.wire, args.chunks, args.top, not args.no_yield)
    if args.json:
        print(json.dumps(after))
        return
    base = None
    if args.baseline:
        env = {**os.environ, "PYTHONPATH": os.path.join(args.baseline, "src")}
        out = subprocess.run([sys.executable, __file__, "--json", "--wire", args.wire,
                              "--chunks", str(args.chunks), "--top", str(args.top)]
                             + (["--no-yield"] if args.no_yield else []),
                             env=env, capture_output=True, text=True, check=True)
        base = json.loads(out.stdout)
    print(f"streamed turn, {args.wire}, {args.chunks} one-token chunks, ModelAdapter.complete()"
          f"{'' if args.no_yield else ', each read yields to the event loop'}")
    names = [*dict.fromkeys(name for _, name in _BUCKETS), "other"]
    head = f"{'calls per chunk':22}" + (f"{'base':>9}" if base else "") + f"{'now':>9}"
    print(head + ("   ratio" if base else ""))
    for name in names:
        now = after["per_chunk"].get(name, 0.0)
        was = base["per_chunk"].get(name, 0.0) if base else None
        if not now and not was:
            continue
        row = f"  {name:20}" + (f"{was:9.2f}" if base else "") + f"{now:9.2f}"
        if base and was:
            row += f"{now / was:8.2f}"
        print(row)
    total = after["total_per_chunk"]
    row = f"  {'bindloop total':20}" + (f"{base['total_per_chunk']:9.2f}" if base else "") + f"{total:9.2f}"
    if base:
        row += f"{total / base['total_per_chunk']:8.2f}"
    print(row)
    cpu = after["cpu_us_per_token"]
    row = f"{'CPU us per token':22}" + (f"{base['cpu_us_per_token']:9.2f}" if base else "")
    row += f"{cpu:9.2f}" + (f"{cpu / base['cpu_us_per_token']:8.2f}" if base else "")
    print(row)
    print("most called in bindloop (per chunk, now):")
    for name, per in after["top"]:
        print(f"  {per:6.2f}  {name}")


if __name__ == "__main__":
    main()
