"""``make demo`` (second part): the agent API over a real provider wire.

A local scripted provider server on 127.0.0.1 speaks OpenAI Chat Completions (SSE). Its replies come
from a small policy that reads each request the way a model would: it calls the ``weather`` tool
first, then answers in the requested JSON schema — the first answer with a wrong type, so the agent
re-asks with the decoding error, the second one right. The agent streams partial structured data
as it arrives and prints the trace's span names. Run ``python -m examples.demos.agent_demo``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import anyio
import msgspec

from bindloop.agent import (
    create_agent,
    equip_instruction,
    equip_system,
    equip_tool,
    expect_validator,
    on_stream,
    prompt_agent,
    run_with,
)
from bindloop.agent.events import (
    StructuredDataEvent,
    ToolCallDoneEvent,
    TraceEvent,
    TurnStartEvent,
)
from bindloop.contracts import ModelTurnResult, ToolCall, ToolResult, TurnUsage
from bindloop.tools import define_tool
from bindloop.wire import ModelAdapter, OpenAIChatAdapter, WireOptions

from bindloop.hosts.transports.httpx import HttpxTransport
from harness.fixtures.scripted_server import RecordedRequest, ScriptedProviderServer, ScriptedReply, turn_reply

__all__ = ("Forecast", "main", "run_agent_demo")


class Forecast(msgspec.Struct):
    """What the demo asks for."""

    city: str
    high_c: int
    conditions: str
    umbrella: bool


class CityArgs(msgspec.Struct):
    city: str


_WEATHER = {"Lisbon": ("sunny", 24), "Oslo": ("light snow", -3), "London": ("rain", 12)}


async def _weather(args: CityArgs, ctx: object) -> ToolResult:
    conditions, high = _WEATHER.get(args.city, ("unknown", 0))
    return ToolResult(content=msgspec.json.encode({"conditions": conditions,
                                                   "high_c": high}).decode())


WEATHER_TOOL = define_tool(name="weather", description="Today's weather for a city",
                           args=CityArgs, execute=_weather)


def _policy(request: RecordedRequest) -> ScriptedReply:
    """The provider's side: decide the next turn from the transcript it was sent."""
    body = msgspec.json.decode(request.body)
    messages = body["messages"]
    usage = TurnUsage(input_tokens=sum(len(str(m.get("content") or "")) for m in messages) // 4,
                      output_tokens=24)
    tool_results = [m for m in messages if m["role"] == "tool"]
    if not tool_results:
        city = messages[-1]["content"].rsplit(" ", 1)[-1].rstrip("?.")
        turn = ModelTurnResult(tool_calls=(ToolCall(
            id="call_weather", name="weather",
            arguments=msgspec.json.encode({"city": city}).decode()),),
            usage=usage, finish_reason="tool_calls")
    else:
        seen = msgspec.json.decode(tool_results[-1]["content"])
        reasked = messages[-1]["role"] == "user"
        high: Any = seen["high_c"] if reasked else f"{seen['high_c']} degrees"
        answer = {"city": "Lisbon", "high_c": high, "conditions": seen["conditions"],
                  "umbrella": "rain" in seen["conditions"]}
        turn = ModelTurnResult(text=msgspec.json.encode(answer).decode(), usage=usage,
                               finish_reason="stop")
    return turn_reply("openai_chat", turn, stream=bool(body.get("stream")), model=body["model"],
                      delay_s=0.001)


async def run_agent_demo(write: Callable[[str], None], city: str = "Lisbon",
                         requests: list[RecordedRequest] | None = None) -> Forecast:
    """The demo: one structured-output agent with a tool, a validator and a stream consumer.
    ``requests`` receives the HTTP requests the provider served."""
    spans: list[str] = []

    class Bus:
        def emit(self, event: TraceEvent) -> None:
            if event.type == "span_start":
                spans.append(event.name)
            elif event.name == "bindloop.structured_output.retry":
                write(f"   ⟲ re-ask: {event.attributes['bindloop.reason']}")

    with ScriptedProviderServer() as server:
        server.set_responder("openai", _policy)
        chat = OpenAIChatAdapter()
        # Cost in micro-USD, priced by the adapter's fold.
        model = ModelAdapter(chat, HttpxTransport(server.base_url("openai"),
                                                  headers=chat.auth_headers("demo-key")),
                             WireOptions(model="gpt-demo", stream=True),
                             price=lambda u: u.input_tokens * 1 + u.output_tokens * 6)

        async def show(stream: Any) -> None:
            last = ""
            async for envelope in stream:
                event = envelope.event
                if isinstance(event, TurnStartEvent):
                    write(f"── turn {envelope.turn_index}")
                elif isinstance(event, ToolCallDoneEvent):
                    write(f"   ↳ tool call {event.tool_call.name}({event.tool_call.arguments})")
                elif isinstance(event, StructuredDataEvent):
                    shown = msgspec.json.encode(event.data).decode()
                    if event.status != "partial":
                        write(f"   ▣ structured {event.status} (valid={event.is_valid}): {shown}")
                    elif shown != last and len(shown) - len(last) >= 16:
                        write(f"   … partial {shown}")
                        last = shown
                # text events: the structured view covers the same text

        async def handler(props: dict[str, str]) -> Forecast:
            equip_system("You are a weather service. Use the weather tool, then answer as JSON.")
            equip_instruction(f"What is the weather today in {props['city']}")
            equip_tool(WEATHER_TOOL)
            expect_validator(lambda f: True if -90 <= f.high_c <= 60 else "implausible high_c")
            on_stream(show)
            return await prompt_agent(Forecast)

        forecaster = create_agent(id="forecaster", handler=handler, model=model)
        write(f"scripted OpenAI-chat provider on {server.base_url('openai')} (SSE)")
        forecast = await run_with(lambda: forecaster({"city": city}), event_bus=Bus())
        write(f"\nresult: {forecast!r}")
        write(f"HTTP requests served: {len(server.requests)}")
        if requests is not None:
            requests.extend(server.requests)
        write("trace spans: " + ", ".join(dict.fromkeys(spans)))
        return forecast


def main(argv: list[str] | None = None) -> int:
    def write(line: str) -> None:
        print(line)

    print("\n=== the agent API: prompt_agent(Forecast) over a real wire ===")
    forecast = anyio.run(run_agent_demo, write)
    return 0 if forecast.high_c == 24 else 1


if __name__ == "__main__":
    sys.exit(main())
