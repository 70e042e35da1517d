"""Building a request from a long transcript: each wire's ``build_request`` against the floor,
msgspec encoding the same request body (already built as Python objects) each turn.

    PYTHONPATH=src .venv/bin/python bench/wire_request.py [--sizes 10,1000,5000] [--rounds 5]
        [--wires anthropic,gemini] [--no-tools-table]

An agent turn sends the whole transcript again with two messages more (the assistant's tool call
and its result). For each wire and transcript size N, three paths run interleaved in the same
process over the same sessions: up to 20 successive requests ending at N messages, each the
previous one plus two new message objects (as a loop's transcript grows):

- ``floor``: ``msgspec.json.encode`` of the request's body as Python objects (decoded from the
  request's own bytes before it is timed): the least any builder pays, an encoder that is
  handed the body;
- ``uncached``: the adapter with ``request_cache=0``: every message and tool schema converted on
  every request (the build before issue 31);
- ``cached``: the default adapter, which keeps each message's and tool's encoded wire form.

The three are timed side by side in small chunks: one session's requests at 10 messages, one
request at 1,000 and more (each chunk ~50 µs of work or more). Each chunk's inputs are made one
chunk ahead (the floor's bodies, the cached adapter's earlier turns), so neither path's data was
just touched when it is timed; floor and cached alternate which goes first, and uncached, whose
work pushes the others' data out of the CPU caches, runs last. CPU µs per request
(``time.process_time_ns``; the cyclic collector off for the whole round), the **least** over
every chunk of ``--rounds`` rounds for each path: on a shared machine a chunk another process
slowed (a stolen core, its caches refilled) reads high, never low, so the least is each path's
own cost, and the ratio of two leasts compares the two the same way. A second table shows the
same 10-message sessions with 1, 10, 50 and 200 tools (each request a new turn of its session,
the tools those of the call before): the floor, which encodes every schema each time, grows
with them; the cached build, which sends the tool list's kept array, stays flat but for copying
its bytes into the body. A third table repeats the 10-message row with the cached adapter's memo
full, as in a long-running process (each message it keeps makes it drop an old one). Every
cached body is checked equal to the uncached one.
"""

from __future__ import annotations

import argparse
import gc
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


def tools(n: int) -> tuple[ToolDefinition, ...]:
    """``n`` tool definitions, as the agent passes them: one tuple for every call of a prompt."""
    return tuple(ToolDefinition(
        name=f"tool_{i}", description=f"Tool number {i}: looks things up in the docs.",
        parameters={"type": "object", "properties": {
            "query": {"type": "string", "description": "what to look for", "minLength": 1},
            "limit": {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
            "filters": {"type": "array", "items": {"type": "string", "format": "uri"}}},
            "required": ["query"], "additionalProperties": False}) for i in range(n))


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


PATHS = ("floor", "cached", "uncached")
SWAPPED = ("cached", "floor", "uncached")


def measure(wire: str, n: int, n_tools: int, rounds: int, full: bool = False) -> dict[str, float]:
    """CPU µs per request of each path: the least over its chunks (see the module docstring).
    ``full``: the cached adapter's memo is filled first (2,100 sessions of new messages, more
    than its default 16,384 entries), as in a process that has served many sessions, so every
    message it keeps makes it drop an old one."""
    k = max(1, min(20, (n - 2) // 2))
    defs = tools(n_tools)
    options = WireOptions(model="m", stream=True, max_tokens=1024)
    cached, uncached = MAKERS[wire](), MAKERS[wire](request_cache=0)
    shadow = MAKERS[wire]()  # builds each chunk's bodies for the floor, one chunk ahead
    if full:
        for _ in range(2_100):
            for m in session(transcript(n), k):
                cached.build_request(m, defs, options)
    base = transcript(n)
    encode, decode = msgspec.json.Encoder().encode, msgspec.json.decode
    clock = time.process_time_ns
    per = max(1, min(k, 40 // n))  # requests per timed chunk: ~50 µs or more of work
    sessions = max(1, 400 // n)  # per round: enough chunks to read at 10 messages
    figures: dict[str, list[float]] = {"floor": [], "uncached": [], "cached": []}
    for _ in range(rounds):
        gc.collect()
        gc.disable()  # the whole round (as timeit does): no collection lands in one path's time
        try:
            # Every chunk of the round, in session order; each session's first request
            # continues one the adapter already built (the turns before it).
            chunks: list[tuple[list[Message] | None, list[list[Message]]]] = []
            for _ in range(sessions):
                requests = session(base, k)
                chunks += [(requests[0][:-2] if at == 0 else None, requests[at:at + per])
                           for at in range(0, k, per)]

            def ready(index: int) -> list[Any]:
                """The chunk's bodies as Python objects (the floor encodes them), the cached
                adapter's session primed when the chunk starts one."""
                before, chunk = chunks[index]
                if before is not None:
                    cached.build_request(before, defs, options)
                    shadow.build_request(before, defs, options)
                return [decode(shadow.build_request(m, defs, options).body) for m in chunk]

            ahead = ready(0)
            for index, (_, chunk) in enumerate(chunks):
                # Inputs are made one chunk ahead, so the floor's bodies and the cached
                # adapter's session come to their timing through the same work (the next
                # chunk's preparation): neither was just touched. Floor and cached alternate
                # which goes first; uncached (the build before issue 31, whose work would push
                # the others' data out of the CPU caches) always runs last.
                bodies = ahead
                if index + 1 < len(chunks):
                    ahead = ready(index + 1)
                out: dict[str, list[Any]] = {"floor": [], "cached": [], "uncached": []}
                spent: dict[str, int] = {}
                for path in PATHS if index % 2 == 0 else SWAPPED:
                    kept = out[path].append
                    t0 = clock()
                    if path == "floor":
                        for b in bodies:
                            kept(encode(b))
                    elif path == "cached":
                        for m in chunk:
                            kept(cached.build_request(m, defs, options))
                    else:
                        for m in chunk:
                            kept(uncached.build_request(m, defs, options))
                    spent[path] = clock() - t0
                for path, ns in spent.items():
                    figures[path].append(ns / len(chunk) / 1e3)
                expected = [r.body for r in out["uncached"]]
                assert [r.body for r in out["cached"]] == expected, \
                    f"{wire}: cached bytes differ at {n} messages"
        finally:
            gc.enable()
    return {name: min(v) for name, v in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10,1000,5000")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tools", type=int, default=10)
    parser.add_argument("--wires", default=",".join(WIRE_NAMES))
    parser.add_argument("--no-tools-table", action="store_true",
                        help="leave out the table by number of tools")
    args = parser.parse_args()
    wires = [w for w in args.wires.split(",") if w]
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"build_request, CPU µs per request, least of {args.rounds} rounds of interleaved "
          f"chunks, {args.tools} tools, stream=True")
    print(f"{'wire':<18}{'messages':>9}{'floor':>10}{'uncached':>11}{'cached':>10}"
          f"{'uncached/floor':>16}{'cached/floor':>14}{'speedup':>9}")
    for wire in wires:
        for n in sizes:
            f = measure(wire, n, args.tools, args.rounds)
            print(f"{wire:<18}{n:>9,}{f['floor']:>10.1f}{f['uncached']:>11.1f}{f['cached']:>10.1f}"
                  f"{f['uncached'] / f['floor']:>15.2f}x{f['cached'] / f['floor']:>13.2f}x"
                  f"{f['uncached'] / f['cached']:>8.1f}x", flush=True)
    print("\n10 messages, the cached adapter's memo full (a process that served many sessions)")
    print(f"{'wire':<18}{'floor':>10}{'cached':>10}{'cached/floor':>14}")
    for wire in wires:
        f = measure(wire, 10, args.tools, args.rounds, full=True)
        print(f"{wire:<18}{f['floor']:>10.1f}{f['cached']:>10.1f}"
              f"{f['cached'] / f['floor']:>13.2f}x", flush=True)
    if args.no_tools_table:
        return
    counts = (1, 10, 50, 200)
    print("\n10 messages by number of tools: cached build (floor), CPU µs per request")
    print(f"{'wire':<18}" + "".join(f"{f'{t} tools':>18}" for t in counts)
          + f"{'cached 200/1':>14}")
    for wire in wires:
        row = [measure(wire, 10, t, args.rounds) for t in counts]
        print(f"{wire:<18}" + "".join(f"{f['cached']:>9.1f} ({f['floor']:>6.1f})" for f in row)
              + f"{row[-1]['cached'] / row[0]['cached']:>13.2f}x")


if __name__ == "__main__":
    main()
