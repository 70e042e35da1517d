"""Building a request from a long transcript: each wire's ``build_request`` against the floor,
msgspec encoding the same request body (already built as Python objects) each turn.

    PYTHONPATH=src .venv/bin/python bench/wire_request.py [--sizes 10,1000,5000] [--rounds 5]

An agent turn sends the whole transcript again with two messages more (the assistant's tool call
and its result). For each wire and transcript size N, three paths run interleaved in the same
process over the same sessions: up to 20 successive requests ending at N messages, each the
previous one plus two new message objects (as a loop's transcript grows):

- ``floor``: ``msgspec.json.encode`` of the request's body as Python objects (decoded once from
  the request's own bytes): the least any builder pays, an encoder that is handed the body;
- ``uncached``: the adapter with ``request_cache=0``: every message and tool schema converted on
  every request (the build before issue 31);
- ``cached``: the default adapter, which keeps each message's and tool's encoded wire form.

CPU µs per request (``time.process_time``, the cyclic collector off while timing), median of ``--rounds`` interleaved rounds, ratios
to the floor of the same round. A second table shows the same 10-message sessions with 1, 10, 50
and 200 tools (each request a new turn of its session, the tools those of the call before): the
floor, which encodes every schema each time, grows with them; the cached build, which sends the
tool list's kept array, stays flat but for copying its bytes into the body. Every cached body is
checked equal to the uncached one.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

import msgspec

from bindloop.contracts import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from bindloop.wire import (
    WIRE_NAMES,
    AnthropicAdapter,
    GeminiAdapter,
    OpenAIChatAdapter,
    OpenAIResponsesAdapter,
    WireOptions,
)

MAKERS: dict[str, Callable[..., Any]] = {
    "openai_chat": OpenAIChatAdapter, "openai_responses": OpenAIResponsesAdapter,
    "anthropic": AnthropicAdapter, "gemini": GeminiAdapter,
}
RESULT = ("The page says the stream API yields events as they arrive; each event carries a type "
          "and a payload, and the client folds them into one turn. ") * 2


def tools(n: int) -> list[ToolDefinition]:
    return [ToolDefinition(
        name=f"tool_{i}", description=f"Tool number {i}: looks things up in the docs.",
        parameters={"type": "object", "properties": {
            "query": {"type": "string", "description": "what to look for", "minLength": 1},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
            "filters": {"type": "array", "items": {"type": "string", "format": "uri"}}},
            "required": ["query"], "additionalProperties": False}) for i in range(n)]


def turn(i: int) -> tuple[Message, Message]:
    call = ToolCall(id=f"call_{i:06d}", name=f"tool_{i % 10}",
                    arguments=f'{{"query":"question {i}","limit":5}}')
    return (AssistantMessage(content=f"Let me look that up ({i}).", tool_calls=(call,)),
            ToolMessage(tool_call_id=call.id, name=call.name, content=RESULT))


def transcript(n: int) -> list[Message]:
    out: list[Message] = [SystemMessage(content="You answer from the docs. Cite the page."),
                          UserMessage(content="How do I stream a turn?")]
    i = 0
    while len(out) < n:
        out.extend(turn(i))
        i += 1
    return out[:n]


def session(base: list[Message], k: int) -> list[list[Message]]:
    """``k`` successive requests of one session ending at ``base``'s length: each one the
    previous one plus a tool call and its result (new objects each time this is called; the
    messages before them are ``base``'s own)."""
    n = len(base)
    tail = [msgspec.structs.replace(m) for m in base[n - 2 * k:]]
    full = base[:n - 2 * k] + tail
    return [full[:n - 2 * (k - 1 - j)] for j in range(k)]


def cpu(fn: Callable[[], object]) -> float:
    """CPU seconds of ``fn()``, the cyclic collector off (as ``timeit`` does): a collection
    triggered by one path's allocations would walk every path's transcripts."""
    gc.collect()
    gc.disable()
    try:
        t0 = time.process_time()
        fn()
        return time.process_time() - t0
    finally:
        gc.enable()


def measure(wire: str, n: int, n_tools: int, rounds: int) -> dict[str, float]:
    k = max(1, min(20, (n - 2) // 2))
    defs = tools(n_tools)
    options = WireOptions(model="m", stream=True, max_tokens=1024)
    cached, uncached = MAKERS[wire](), MAKERS[wire](request_cache=0)
    base = transcript(n)
    encode = msgspec.json.Encoder().encode
    figures: dict[str, list[float]] = {"floor": [], "uncached": [], "cached": []}
    repeat = max(1, 400 // n)  # sessions per round: enough CPU time to read at 10 messages
    for _ in range(rounds):
        batches = [session(base, k) for _ in range(repeat)]
        bodies = [msgspec.json.decode(uncached.build_request(m, defs, options).body)
                  for batch in batches for m in batch]
        calls = len(bodies)
        figures["floor"].append(cpu(lambda: [encode(b) for b in bodies]) / calls)
        figures["uncached"].append(cpu(lambda: [uncached.build_request(m, defs, options)
                                                for batch in batches for m in batch]) / calls)
        batches = [session(base, k) for _ in range(repeat)]
        # The session's earlier turns went through the adapter already.
        for batch in batches:
            cached.build_request(batch[0][:-2], defs, options)
        out: list[Any] = []
        figures["cached"].append(cpu(lambda: [out.append(cached.build_request(m, defs, options))
                                              for batch in batches for m in batch]) / calls)
        expected = uncached.build_request(batches[-1][-1], defs, options).body
        assert out[-1].body == expected, f"{wire}: cached bytes differ at {n} messages"
    return {name: statistics.median(v) * 1e6 for name, v in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10,1000,5000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tools", type=int, default=10)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"build_request, CPU µs per request, median of {args.rounds} interleaved rounds, "
          f"{args.tools} tools, stream=True")
    print(f"{'wire':<18}{'messages':>9}{'floor':>10}{'uncached':>11}{'cached':>10}"
          f"{'uncached/floor':>16}{'cached/floor':>14}{'speedup':>9}")
    for wire in WIRE_NAMES:
        for n in sizes:
            f = measure(wire, n, args.tools, args.rounds)
            print(f"{wire:<18}{n:>9,}{f['floor']:>10.1f}{f['uncached']:>11.1f}{f['cached']:>10.1f}"
                  f"{f['uncached'] / f['floor']:>15.2f}x{f['cached'] / f['floor']:>13.2f}x"
                  f"{f['uncached'] / f['cached']:>8.1f}x")
    counts = (1, 10, 50, 200)
    print("\n10 messages by number of tools: cached build (floor), CPU µs per request")
    print(f"{'wire':<18}" + "".join(f"{f'{t} tools':>18}" for t in counts)
          + f"{'cached 200/1':>14}")
    for wire in WIRE_NAMES:
        row = [measure(wire, 10, t, args.rounds) for t in counts]
        print(f"{wire:<18}" + "".join(f"{f['cached']:>9.1f} ({f['floor']:>6.1f})" for f in row)
              + f"{row[-1]['cached'] / row[0]['cached']:>13.2f}x")


if __name__ == "__main__":
    main()
