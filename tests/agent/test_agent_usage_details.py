"""Token usage details (issue 20, item 15) reach what an agent's host reads: the prompt's
``RunStats`` and the trace (the ``chat`` span's ``bindloop.turn`` carries the turn's usage)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bindloop.agent import (
    create_agent,
    equip_instruction,
    equip_tool,
    prompt_chat,
    run_with,
)
from bindloop.agent.events import (
    TraceEvent,
    TraceOptions,
)
from bindloop.contracts import ToolResult
from bindloop.tools import define_tool
from bindloop.contracts import TurnUsage
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

pytestmark = pytest.mark.anyio

DETAILED = TurnUsage(input_tokens=120, output_tokens=40, cached_input_tokens=100,
                     reasoning_tokens=25, cache_write_tokens=20)


class Bus:
    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    def emit(self, event: TraceEvent) -> None:
        self.events.append(event)


async def test_usage_details_reach_the_prompts_stats_and_the_trace() -> None:
    first = msgspec.structs.replace(tool_call_turn([tool_call("lookup", {})]), usage=DETAILED)
    script = [first, final_answer("done", usage=DETAILED)]
    seen: list[Any] = []

    class Args(msgspec.Struct):
        pass

    async def lookup(args: Args, ctx: object) -> ToolResult:
        return ToolResult(content="found")

    async def handler(_: None) -> str:
        equip_instruction("look it up")
        equip_tool(define_tool(name="lookup", description="l", args=Args, execute=lookup))
        result = await prompt_chat()
        seen.append(result.stats)
        return str(result.data)

    bus = Bus()
    agent = create_agent(id="a", handler=handler)

    async def main() -> str:
        return await agent(None)

    await run_with(main, model=scripted_stream_model(script), event_bus=bus,
                   trace=TraceOptions(trace_id="cd" * 16))
    (stats,) = seen
    assert (stats.reasoning_tokens, stats.cache_write_tokens, stats.cached_input_tokens) == (
        50, 40, 200)
    ends = [e for e in bus.events if e.type == "span_end" and e.name.startswith("chat ")]
    assert ends
    for end in ends:
        usage = end.attributes["bindloop.turn"]["usage"]  # type: ignore[index]
        assert (usage["reasoning_tokens"], usage["cache_write_tokens"]) == (25, 20)
