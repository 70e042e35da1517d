"""Prompt caching: the input tokens a multi-turn agent session is billed for, without and with
``WireOptions(cache=CachePolicy())``, on the Anthropic wire.

    .venv/bin/python bench/prompt_cache.py [--turns N] [--ttl 5m|1h]

The session is scripted, not recorded from the API: a coding-assistant system prompt (320 fixed
rules, about 13k tokens), six tools with JSON Schemas, and N turns in which the model calls a
tool and reads a result of about 400 tokens, then answers. It runs through the real
stack: ``run_tool_loop`` drives a ``ModelAdapter(AnthropicAdapter(), ...)``, which builds every
request, sends it through a transport and decodes the reply's usage into ``RunStats``.

The transport is an in-process stand-in for the Messages API that applies Anthropic's documented
caching rules to each request's bytes and reports usage the way the API does (``input_tokens``
uncached, ``cache_creation_input_tokens``, ``cache_read_input_tokens``):

- the prompt is the blocks in cache order: tools, then system blocks, then message blocks; a block
  with ``cache_control`` is a breakpoint;
- a request reads the longest cached prefix found at a breakpoint or up to 20 blocks before one,
  and writes a cache entry at every breakpoint past that point; a prefix shorter than 1,024 tokens
  (the minimum for Sonnet-class models) is never cached;
- cache entries do not expire during the run (the session is far shorter than the 5-minute TTL);
- tokens are estimated as the UTF-8 bytes of each block's JSON divided by 4 (no tokenizer ships
  here), so the counts are an estimate of the API's, and the ratios are what this measures.

Billing uses the published multipliers of the base input price: cache writes 1.25x (5-minute TTL)
or 2x (1-hour), cache reads 0.1x. The table prints tokens and "billed input" in base-price token
equivalents, side by side, with the ratio.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio

from bindloop.contracts import (
    ModelTurnResult,
    RunStats,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolOutcome,
    ToolResult,
    UserMessage,
)
from bindloop.loop import ToolLoopParams, ToolRunner, run_tool_loop
from bindloop.testing import fresh_state
from bindloop.wire import AnthropicAdapter, CachePolicy, HttpRequest, ModelAdapter, WireOptions

MIN_CACHEABLE = 1024
LOOKBACK = 20
WRITE_MULTIPLIER = {"5m": 1.25, "1h": 2.0}
READ_MULTIPLIER = 0.1

TOOLS = [
    ToolDefinition(name=name, description=f"{name.replace('_', ' ').capitalize()} in the repo.",
                   parameters={"type": "object", "properties": {
                       "path": {"type": "string", "description": "A path relative to the root."},
                       "pattern": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
                       "required": ["path"], "additionalProperties": False})
    for name in ("read_file", "list_dir", "grep", "run_tests", "apply_patch", "git_log")
]


def _tokens(value: object) -> int:
    return math.ceil(len(json.dumps(value, separators=(",", ":")).encode()) / 4)


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


class SimulatedAnthropic:
    """A Transport: answers each request with the next scripted turn, and the usage Anthropic's
    caching rules give for the request's bytes."""

    def __init__(self, script: Sequence[ModelTurnResult]) -> None:
        self.script = list(script)
        self.cache: set[str] = set()
        self.requests = 0

    def _usage(self, body: dict[str, Any]) -> dict[str, int]:
        blocks: list[tuple[object, bool]] = []
        for tool in body.get("tools", ()):
            blocks.append((tool, "cache_control" in tool))
        for block in body.get("system", ()):
            blocks.append((block, "cache_control" in block))
        for turn in body["messages"]:
            content = turn["content"]
            for block in content if isinstance(content, list) else [{"text": content}]:
                blocks.append(({"role": turn["role"], **block}, "cache_control" in block))
        prefix, hashes, total = hashlib.sha256(), [], [0]
        for block, _ in blocks:
            prefix.update(json.dumps(_strip(block), sort_keys=True).encode())
            hashes.append(prefix.copy().hexdigest())
            total.append(total[-1] + _tokens(_strip(block)))
        breakpoints = [i for i, (_, marked) in enumerate(blocks) if marked]
        read_at = -1
        for b in breakpoints:
            for i in range(b, max(-1, b - LOOKBACK - 1), -1):
                if hashes[i] in self.cache and i > read_at:
                    read_at = i
                    break
        read = total[read_at + 1] if read_at >= 0 else 0
        written_to = read_at
        for b in breakpoints:
            if b > read_at and total[b + 1] >= MIN_CACHEABLE:
                self.cache.add(hashes[b])
                written_to = max(written_to, b)
        write = total[written_to + 1] - read if written_to > read_at else 0
        return {"input_tokens": total[-1] - read - write, "cache_creation_input_tokens": write,
                "cache_read_input_tokens": read}

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Response]:
        body = json.loads(request.body)
        turn = self.script[self.requests]
        self.requests += 1
        content: list[dict[str, Any]] = []
        if turn.text:
            content.append({"type": "text", "text": turn.text})
        content += [{"type": "tool_use", "id": c.id, "name": c.name,
                     "input": json.loads(c.arguments)} for c in turn.tool_calls]
        usage = self._usage(body)
        usage["output_tokens"] = _tokens(content)
        reply = {"id": f"msg_{self.requests}", "type": "message", "role": "assistant",
                 "model": body["model"], "content": content,
                 "stop_reason": "tool_use" if turn.tool_calls else "end_turn", "usage": usage}
        yield _Response(json.dumps(reply).encode())


class _Response:
    status = 200
    headers = (("content-type", "application/json"),)

    def __init__(self, body: bytes) -> None:
        self._body = body

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        yield self._body


def _script(turns: int) -> list[ModelTurnResult]:
    out = []
    for i in range(turns):
        tool = TOOLS[i % len(TOOLS)].name
        out.append(ModelTurnResult(
            text=f"Step {i + 1}: checking with {tool}.",
            tool_calls=(ToolCall(id=f"toolu_{i:04d}", name=tool,
                                 arguments=json.dumps({"path": f"src/bindloop/wire/_{i}.py"})),)))
    out.append(ModelTurnResult(text="Done: the wire decodes every shape in the recordings."))
    return out


async def _tool(call: ToolCall) -> ToolOutcome:
    lines = [f"{call.name} line {n}: def handler_{n}(event): return decode(event, strict=True)"
             for n in range(20)]
    return ToolResult(content="\n".join(lines))


async def run_session(turns: int, policy: CachePolicy | None) -> tuple[RunStats, int]:
    server = SimulatedAnthropic(_script(turns))
    model = ModelAdapter(AnthropicAdapter(), server,
                         WireOptions(model="claude-sonnet-4-5", max_tokens=1024, cache=policy))
    system = "\n".join(
        f"Rule {n}: when a change touches {area}, read its tests first, keep the public names, "
        f"run the focused tests, and say in one sentence why the change is needed."
        for n, area in enumerate(["the wire", "the loop", "the transcript", "the tools"] * 80))
    state = fresh_state([SystemMessage(content=system),
                         UserMessage(content="Make the wire decode every recorded shape.")])
    result = await run_tool_loop(ToolLoopParams(
        state=state, model=model, runner=ToolRunner(run_tool_call=_tool, build_tools=lambda: TOOLS),
        max_iterations=turns + 2))
    return result.stats, server.requests


def billed(stats: RunStats, ttl: str) -> float:
    uncached = stats.input_tokens - stats.cached_input_tokens - stats.cache_write_tokens
    return (uncached + WRITE_MULTIPLIER[ttl] * stats.cache_write_tokens
            + READ_MULTIPLIER * stats.cached_input_tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--ttl", choices=("5m", "1h"), default="5m")
    args = parser.parse_args()
    rows = []
    for label, policy in (("no cache policy", None),
                          ("CachePolicy()", CachePolicy(ttl=None if args.ttl == "5m" else "1h"))):
        stats, requests = anyio.run(run_session, args.turns, policy)
        rows.append((label, stats, requests, billed(stats, args.ttl)))
    print(f"prompt caching, Anthropic wire: {rows[0][2]} requests, {args.turns} tool turns, "
          f"TTL {args.ttl} (simulated server; tokens estimated as bytes / 4)")
    print(f"{'':18}{'input':>10}{'uncached':>10}{'written':>10}{'read':>10}{'billed in':>12}")
    for label, stats, _, cost in rows:
        uncached = stats.input_tokens - stats.cached_input_tokens - stats.cache_write_tokens
        print(f"{label:18}{stats.input_tokens:>10,}{uncached:>10,}{stats.cache_write_tokens:>10,}"
              f"{stats.cached_input_tokens:>10,}{cost:>12,.0f}")
    base, cached = rows[0][3], rows[1][3]
    print(f"billed input with the policy: {cached / base:.2f}x of without ({base / cached:.1f}x "
          "fewer base-price tokens)")


if __name__ == "__main__":
    main()
