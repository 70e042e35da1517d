"""bindloop.hosts.telemetry.otel: trace events become OTel spans (tested with the OTel SDK)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import StatusCode  # noqa: E402

from bindloop.agent import (  # noqa: E402
    create_agent,
    equip_instruction,
    equip_tool,
    prompt_chat,
    run_with,
)
from bindloop.contracts import ToolResult  # noqa: E402
from bindloop.errors import ProviderError  # noqa: E402
from bindloop.hosts.telemetry.otel import OtelTraceBus  # noqa: E402
from bindloop.tools import define_tool  # noqa: E402
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn  # noqa: E402

import msgspec  # noqa: E402

pytestmark = pytest.mark.anyio


class Q(msgspec.Struct):
    q: str


async def _search(args: Q, ctx: object) -> ToolResult:
    return ToolResult(content="secret result")


SEARCH = define_tool(name="search", description="s", args=Q, execute=_search)


def _provider() -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("test"), exporter


async def _run(bus: OtelTraceBus, script: list[Any]) -> Any:
    async def handler(_: None) -> str:
        equip_instruction("q")
        equip_tool(SEARCH)
        return (await prompt_chat()).data

    return await run_with(lambda: create_agent(id="helper", handler=handler)(None),
                          model=scripted_stream_model(script), event_bus=bus)


async def test_spans_carry_gen_ai_attributes_and_nest() -> None:
    tracer, exporter = _provider()
    await _run(OtelTraceBus(tracer), [tool_call_turn([tool_call("search", {"q": "x"})]),
                                      final_answer("ok")])
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"invoke_agent helper", "bindloop.generation", "chat scripted",
                          "execute_tool search"}
    agent, tool = spans["invoke_agent helper"], spans["execute_tool search"]
    assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["gen_ai.agent.name"] == "helper"
    assert tool.attributes["gen_ai.tool.name"] == "search"
    assert tool.parent.span_id == spans["bindloop.generation"].context.span_id
    assert spans["bindloop.generation"].parent.span_id == agent.context.span_id
    assert len({s.context.trace_id for s in exporter.get_finished_spans()}) == 1
    # Content stays out unless asked for.
    assert all("bindloop.tool.outcome" not in s.attributes and "bindloop.turn" not in s.attributes
               for s in exporter.get_finished_spans())


async def test_content_on_request_and_errors_as_error_status() -> None:
    tracer, exporter = _provider()
    await _run(OtelTraceBus(tracer, include_content=True),
               [tool_call_turn([tool_call("search", {"q": "x"})]), final_answer("ok")])
    tool = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool search")
    assert "secret result" in tool.attributes["bindloop.tool.outcome"]

    tracer, exporter = _provider()
    with pytest.raises(ProviderError):
        await _run(OtelTraceBus(tracer), [ProviderError("down")])
    chat = next(s for s in exporter.get_finished_spans() if s.name == "chat scripted")
    assert chat.status.status_code == StatusCode.ERROR
    assert chat.attributes["error.type"] == "ProviderError"


async def test_a_tools_exception_reaches_its_span_with_content_only() -> None:
    """The exception the run's tool_finished event carries is recorded on the tool's span (an OTel
    exception event) when content is exported; without, only the error status and type."""
    async def broken(args: Q, ctx: object) -> ToolResult:
        raise ConnectionError("db password=hunter2 refused")

    tool = define_tool(name="broken", description="b", args=Q, execute=broken)

    async def handler(_: None) -> str:
        equip_instruction("q")
        equip_tool(tool)
        return (await prompt_chat()).data

    for include in (True, False):
        tracer, exporter = _provider()
        await run_with(lambda: create_agent(id="helper", handler=handler)(None),
                       model=scripted_stream_model([tool_call_turn([tool_call("broken", {"q": "x"})]),
                                                    final_answer("ok")]),
                       event_bus=OtelTraceBus(tracer, include_content=include))
        span = next(s for s in exporter.get_finished_spans() if s.name == "execute_tool broken")
        assert span.status.status_code == StatusCode.ERROR
        assert span.attributes["error.type"] == "ConnectionError"
        recorded = [e for e in span.events if e.name == "exception"]
        if include:
            assert [e.attributes["exception.type"] for e in recorded] == ["ConnectionError"]
        else:
            assert recorded == []
