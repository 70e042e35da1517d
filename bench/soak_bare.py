"""The soak's bare reader: what any Python client pays to read the soak's stream (``bench/soak.py``
runs it beside bindloop, same server, same sessions, and reports bindloop's CPU per streamed token
as a ratio to this one's).

It makes the same two streamed requests per session as the bindloop side (same body shape, same
connection policy: a new connection per request), with httpx and the 2 s read timeout that matches
the watchdog's inter-chunk budget; it reads the body as bytes, splits lines, and decodes each
``data:`` payload with msgspec into Structs that hold only the fields it uses. It keeps no
transcript model, checkpoints, routing table or watchdog task: a failed request moves to the next
prefix, and four failures in a row count as one retry (as a failed route does).
"""

from __future__ import annotations

import time
from typing import Any

import msgspec

from soak import PREFIXES, TRIES, GcWatch, Ledger, _finish, _usage

# The reader's view of a chunk: only the fields it uses (msgspec skips the rest unparsed).


class Fn(msgspec.Struct):
    name: str | None = None
    arguments: str = ""


class CallDelta(msgspec.Struct):
    index: int
    id: str | None = None
    function: Fn | None = None


class Delta(msgspec.Struct):
    content: str | None = None
    tool_calls: list[CallDelta] | None = None


class Choice(msgspec.Struct):
    delta: Delta


class Usage(msgspec.Struct):
    completion_tokens: int = 0


class Chunk(msgspec.Struct):
    choices: list[Choice] = []
    usage: Usage | None = None


async def run_bare(port: int, sessions: int) -> None:
    """Run ``sessions`` concurrent sessions against the soak server on ``port``; print one JSON
    row (``soak._finish``), as the bindloop side does."""
    import anyio
    import httpx

    decode = msgspec.json.Decoder(Chunk).decode
    encode = msgspec.json.Encoder().encode
    ledger = Ledger()
    client = httpx.AsyncClient(limits=httpx.Limits(max_connections=None,
                                                   max_keepalive_connections=0),
                               timeout=httpx.Timeout(60.0, read=2.0, connect=10.0))
    headers = {"authorization": "Bearer soak-key", "content-type": "application/json",
               "accept": "text/event-stream"}
    tools = [{"type": "function", "function": {
        "name": "lookup", "description": "Look a key up.", "parameters": {
            "type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}}}]

    async def turn(prefix: str, messages: list[dict[str, Any]]
                   ) -> tuple[str, dict[int, list[str]], int] | None:
        body = encode({"model": "soak", "messages": messages, "tools": tools, "stream": True,
                       "stream_options": {"include_usage": True}})
        text: list[str] = []
        calls: dict[int, list[str]] = {}  # index -> [id, name, arguments...]
        tokens = 0
        try:
            async with client.stream("POST", f"http://127.0.0.1:{port}/{prefix}/chat/completions",
                                     content=body, headers=headers) as resp:
                if resp.status_code != 200:
                    await resp.aread()
                    return None
                rest = b""
                async for data in resp.aiter_bytes():
                    *lines, rest = (rest + data).split(b"\n")
                    for line in lines:
                        if not line.startswith(b"data: "):
                            continue
                        payload = line[6:]
                        if payload == b"[DONE]":
                            return "".join(text), calls, tokens
                        chunk = decode(payload)
                        for choice in chunk.choices:
                            delta = choice.delta
                            if delta.content:
                                text.append(delta.content)
                            for tc in delta.tool_calls or ():
                                parts = calls.setdefault(tc.index, ["", ""])
                                if tc.id:
                                    parts[0] = tc.id
                                if tc.function is not None:
                                    if tc.function.name:
                                        parts[1] = tc.function.name
                                    parts.append(tc.function.arguments)
                        if chunk.usage is not None:
                            tokens = chunk.usage.completion_tokens
        except httpx.HTTPError:
            return None
        return None  # the body ended before [DONE]

    durations: dict[str, float] = {}
    outcome = {"completed": 0, "retries": 0, "tokens": 0}

    async def routed(messages: list[dict[str, Any]]) -> tuple[str, dict[int, list[str]], int] | None:
        for _ in range(TRIES):
            for prefix in PREFIXES:
                got = await turn(prefix, messages)
                if got is not None:
                    return got
            outcome["retries"] += 1
        return None

    async def one(n: int) -> None:
        ident = f"s{n:04d}"
        started = time.perf_counter()
        messages: list[dict[str, Any]] = [{"role": "user", "content": f"session {ident} look up"}]
        first = await routed(messages)
        if first is None:
            return
        text, calls, tokens = first
        ordered = [calls[i] for i in sorted(calls)]
        messages.append({"role": "assistant", "content": text or None, "tool_calls": [
            {"id": c[0], "type": "function", "function": {"name": c[1], "arguments": "".join(c[2:])}}
            for c in ordered]})
        for c in ordered:
            key = msgspec.json.decode("".join(c[2:]))["key"]
            messages.append({"role": "tool", "tool_call_id": c[0], "content": ledger.lookup(key)})
        second = await routed(messages)
        if second is None:
            return
        durations[ident] = time.perf_counter() - started
        outcome["completed"] += 1
        outcome["tokens"] += tokens + second[2]

    with GcWatch() as collector:
        cpu0, _ = _usage()
        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for n in range(sessions):
                tg.start_soon(one, n)
        wall = time.perf_counter() - t0
        cpu1, rss = _usage()
    await client.aclose()
    _finish("bare reader", sessions=sessions, completed=outcome["completed"],
            retries=outcome["retries"], tokens=outcome["tokens"], wall=wall, cpu=cpu1 - cpu0,
            rss=rss, durations=durations, invalid=0, unanswered=0,
            duplicates=ledger.duplicates(), extra={"gc": collector.figures()})
