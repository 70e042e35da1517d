"""The Python half of the browser demo: one agent run in Pyodide, reported to a JS ``bridge``.

Loaded by ``loader.js`` into Pyodide (browser or Node) after the wheels are installed; the page calls
``await run_page_agent(bridge, origin, prompt)``. Everything goes through ``bindloop``'s public
subpackages: ``run_tool_loop`` over a :class:`~bindloop.wire.RoutedModel` that routes each turn to a
flaky primary provider, then to a backup, both OpenAI-chat wire over the JS ``fetch`` transport (a
real streamed ``Response`` body). Each turn's text goes through a retractable turn text stream, so
the page's reducer wipes a failed attempt's text when the fallback's first token arrives.

The bridge receives JSON strings only (no proxies to keep alive):

``turn_event(json)``  a turn stream event (``kind`` ``text`` or ``reset``, ``turn_id``, ``epoch``, ``seq``)
``turn_end(turn_id)``  the turn's assistant message is final
``route(json)``        the turn's routing attempts (``RouteResult.attempts``)
``tool(json)``         a tool call and its outcome
``done(json)``         stop reason, run stats and the message count

This file is the only Python the page runs; swapping the loop for the agent API changes only it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from bindloop.completion import TurnStreamEvent, TurnTextStream, create_turn_text_stream
from bindloop.contracts import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolOutcome,
    ToolResult,
    UserMessage,
)
from bindloop.hosts.demo import DEFAULT_PROMPT, TOOLS, Notes, make_dispatch
from bindloop.hosts.js_fetch import FetchTransport
from bindloop.loop import ToolLoopParams, ToolLoopState, run_tool_loop
from bindloop.routing import (
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteResult,
    RouteStage,
    canonical_model_id,
    provider_id,
)
from bindloop.completion import StreamBudgets
from bindloop.wire import ModelAdapter, OpenAIChatAdapter, RoutedModel, WireOptions

PROVIDERS = ("primary", "backup")


def _json(value: object) -> str:
    return msgspec.json.encode(value).decode()


class BridgeSink:
    """A turn stream sink that hands each event to the page. The page re-renders from events, so
    it is retractable: a reset really is honoured there."""

    retractable = True

    def __init__(self, bridge: Any) -> None:
        self._bridge = bridge

    def emit(self, event: TurnStreamEvent) -> None:
        self._bridge.turn_event(_json(event))


def _plan() -> RoutePlan:
    model = canonical_model_id("demo/policy-model")
    return RoutePlan(stages=(RouteStage(
        role="primary", model=model,
        policy=OrderedPolicy(providers=tuple(provider_id(p) for p in PROVIDERS)),
        candidates=tuple(RouteCandidate(provider_id=provider_id(p), canonical_model_id=model,
                                        provider_invocation_model=f"{p}-model",
                                        credential_source="platform") for p in PROVIDERS)),))


async def run_page_agent(bridge: Any, origin: str, prompt: str = DEFAULT_PROMPT,
                         max_iterations: int = 8) -> str:
    """Run the demo agent against the scripted providers under ``origin``; returns the stop reason."""
    chat = OpenAIChatAdapter()
    # Generous for a local server, tight enough that a stalled provider cannot hang the page.
    budgets = StreamBudgets(first_token_ms=10_000, inter_chunk_ms=5_000, total_ms=30_000)
    models = {p: ModelAdapter(chat, FetchTransport(f"{origin}/{p}/v1",
                                                   headers=chat.auth_headers("demo-key")),
                              WireOptions(model=f"{p}-model", stream=True), budgets=budgets)
              for p in PROVIDERS}
    streams: list[TurnTextStream] = []

    def next_turn() -> TurnTextStream:
        # One stream per turn (RoutedModel calls this before the turn's first attempt).
        streams.append(create_turn_text_stream(turn_id=f"turn-{len(streams) + 1}",
                                               sink=BridgeSink(bridge)))
        return streams[-1]

    def on_route(result: RouteResult[object]) -> None:
        bridge.route(_json({"turn_id": streams[-1].turn_id, "resets": streams[-1].reset_count,
                            "attempts": result.attempts}))

    routed = RoutedModel(plan=_plan(), models=models, on_route=on_route,  # type: ignore[arg-type]
                         text_stream=next_turn)
    dispatch = make_dispatch(Notes())

    def run_tool(call: ToolCall) -> ToolOutcome:
        outcome = dispatch(call)
        shown = outcome.content if isinstance(outcome, ToolResult) else str(outcome)
        bridge.tool(_json({"turn_id": streams[-1].turn_id, "id": call.id, "name": call.name,
                           "arguments": call.arguments, "ok": isinstance(outcome, ToolResult),
                           "result": shown}))
        return outcome

    def on_assistant(_message: AssistantMessage) -> None:
        bridge.turn_end(streams[-1].turn_id)

    state = ToolLoopState(messages=[
        SystemMessage(content="You are a careful assistant with a calculator and a notes store."),
        UserMessage(content=prompt),
    ])
    result = await run_tool_loop(ToolLoopParams(
        state=state, call_model=routed.call_model, run_tool_call=run_tool,
        max_iterations=max_iterations, build_tools=lambda: TOOLS,
        on_assistant_message=on_assistant,
        # Writes run first, one at a time, so the list in the same batch sees them.
        runs_serially=lambda call: call.name == "notes_write",
    ))
    bridge.done(_json({"stop_reason": result.stop_reason, "stats": result.stats,
                       "messages": len(state.messages)}))
    return str(result.stop_reason)
