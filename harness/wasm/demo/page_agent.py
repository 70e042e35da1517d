"""The Python half of the browser demo: one agent run in Pyodide, reported to a JS ``bridge``.

Loaded by ``loader.js`` into Pyodide (browser or Node) after the wheels are installed; the page calls
``await run_page_agent(bridge, origin, prompt)``. The run goes through the agent API
(:mod:`bindloop.agent`): ``create_agent`` with a handler that equips a system prompt, the user's
instruction and the demo's three tools, watches the agent stream with ``on_stream`` and runs
``prompt_chat``. Its model is a :class:`~bindloop.wire.RoutedModel` (a :class:`~bindloop.model.Model`) that routes
each turn to a flaky primary provider, then to a backup, both OpenAI-chat wire over the JS ``fetch``
transport (a real streamed ``Response`` body).

A routed model hands the agent whole turns (a route's fallback is settled inside it), so the tokens
come from the route's own retractable turn text stream, one per turn, streamed as they arrive: when
the backup takes over a turn whose primary attempt already showed text, the stream emits a
``reset`` and the page's reducer wipes the failed attempt's text. The agent stream supplies
everything else: each assembled tool call, each turn's end and usage.

The bridge receives JSON strings only (no proxies to keep alive):

``turn_event(json)``   a turn text stream event (``kind`` ``text`` or ``reset``, ``turn_id``, ``epoch``, ``seq``)
``route(json)``        the turn's routing attempts (``RouteResult.attempts``)
``agent_event(json)``  an agent stream event, flattened (``turn_index``, the event's ``type`` —
                       ``turn_start``, ``text``, ``tool_call`` chunks, ``tool_call_done``,
                       ``usage``, ``turn_done``, ... — and its fields; ``turn_id`` added), in the
                       order the agent emitted them
``tool_result(json)``  a tool call's outcome, from the agent stream's ``tool_finished`` event
                       (``turn_id``, ``id``, ``ok``, ``result``)
``done(json)``         stop reason, run stats, the message count and the ``transcript`` (the
                       instruction and the messages the run added, as JSON)

``await run_report_agent(bridge, origin, transcript_json)`` then runs a second agent on that
transcript (``equip_history``) asking ``prompt_agent(NotesReport)``, a structured answer, from a
provider that honours a JSON schema natively (a ``ModelAdapter``: the schema goes out as
``response_format``) and streams the JSON a few characters a chunk. Its bridge calls:

``structured(json)``   an agent stream ``structured_data`` event: ``status`` ``partial`` (the
                       partial JSON value so far) while streaming, then ``complete``; ``is_valid``
``report(json)``       the decoded :class:`NotesReport`

This file is the only Python the page runs.
"""

# No `from __future__ import annotations`: the page runs this file as a namespace, not a module in
# sys.modules, so msgspec could not resolve the report Structs' string annotations (NameError: Note).
from collections.abc import AsyncIterator
from typing import Any

import msgspec

from bindloop.agent import (
    ChatResult,
    create_agent,
    equip_history,
    equip_instruction,
    equip_system,
    equip_tool,
    expect_validator,
    on_stream,
    prompt_agent,
    prompt_chat,
)
from bindloop.agent.events import (
    AgentStreamEvent,
    StructuredDataEvent,
    ToolFinishedEvent,
)
from bindloop.completion import ErrorEvent
from bindloop.textstream import TurnStreamEvent, TurnTextStream, create_turn_text_stream
from bindloop.wire import StreamBudgets
from bindloop.contracts import Message, ToolResult, UserMessage
from examples.demos.demo import DEFAULT_PROMPT, Notes, calculate
from bindloop.hosts.transports.js_fetch import FetchTransport
from bindloop.tools import Tool, define_tool
from bindloop.routing import (
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteResult,
    RouteStage,
    canonical_model_id,
    provider_id,
)
from bindloop.wire import ModelAdapter, OpenAIChatAdapter, RoutedModel, WireOptions

PROVIDERS = ("primary", "backup")
SYSTEM = "You are a careful assistant with a calculator and a notes store."


def _json(value: object) -> str:
    return msgspec.json.encode(value).decode()


def _turn_id(turn_index: int) -> str:
    # The route opens one text stream per model call, named the same way (see next_turn below).
    return f"turn-{turn_index + 1}"


class BridgeSink:
    """A turn stream sink that hands each event to the page. The page re-renders from events, so
    it is retractable: a reset really is honoured there."""

    retractable = True

    def __init__(self, bridge: Any) -> None:
        self._bridge = bridge

    def emit(self, event: TurnStreamEvent) -> None:
        self._bridge.turn_event(_json(event))


class CalculatorArgs(msgspec.Struct, frozen=True):
    expression: str


class NoteArgs(msgspec.Struct, frozen=True):
    title: str
    body: str


class NoArgs(msgspec.Struct, frozen=True):
    pass


def demo_tools(notes: Notes) -> list[Tool[Any, Any]]:
    """The ``make demo`` tools (a safe calculator, a notes store) as agent tools over ``notes``."""

    def calculator(args: CalculatorArgs, _ctx: object) -> ToolResult:
        return ToolResult(content=str(calculate(args.expression)))

    def notes_write(args: NoteArgs, _ctx: object) -> ToolResult:
        return ToolResult(content=notes.write(args.title, args.body))

    def notes_list(_args: NoArgs, _ctx: object) -> ToolResult:
        return ToolResult(content=_json(notes.list()))

    return [
        define_tool(name="calculator", description="Evaluate an arithmetic expression.",
                    args=CalculatorArgs, execute=calculator),
        define_tool(name="notes_write", description="Save a note.", args=NoteArgs,
                    execute=notes_write),
        define_tool(name="notes_list", description="List saved notes.", args=NoArgs,
                    execute=notes_list),
    ]


SERIAL_TOOLS = frozenset({"notes_write"})


class Note(msgspec.Struct, frozen=True):
    title: str
    body: str


class NotesReport(msgspec.Struct, frozen=True):
    """The report agent's answer: the notes the user has, their count and a one-line summary."""

    count: int
    notes: list[Note]
    summary: str


def _counted(report: NotesReport) -> bool | str:
    return True if report.count == len(report.notes) else (
        f"count is {report.count} but {len(report.notes)} notes are listed")


def _plan() -> RoutePlan:
    model = canonical_model_id("demo/policy-model")
    return RoutePlan(stages=(RouteStage(
        role="primary", model=model,
        policy=OrderedPolicy(providers=tuple(provider_id(p) for p in PROVIDERS)),
        candidates=tuple(RouteCandidate(provider_id=provider_id(p), canonical_model_id=model,
                                        provider_invocation_model=f"{p}-model",
                                        credential_source="platform") for p in PROVIDERS)),))


async def run_page_agent(bridge: Any, origin: str, prompt: str = DEFAULT_PROMPT,
                         max_iterations: int = 8, transport: Any = FetchTransport) -> str:
    """Run the demo agent against the scripted providers under ``origin``; returns the stop reason.

    ``transport(base_url, headers=...)`` makes each provider's HTTP transport: the JS ``fetch`` one
    in the page, :class:`~bindloop.hosts.transports.httpx.HttpxTransport` for a CPython run."""
    chat = OpenAIChatAdapter()
    # Generous for a local server, tight enough that a stalled provider cannot hang the page.
    budgets = StreamBudgets(first_token_ms=10_000, inter_chunk_ms=5_000, total_ms=30_000)
    models = {p: ModelAdapter(chat, transport(f"{origin}/{p}/v1",
                                              headers=chat.auth_headers("demo-key")),
                              WireOptions(model=f"{p}-model", stream=True), budgets=budgets)
              for p in PROVIDERS}
    streams: list[TurnTextStream] = []

    def next_turn() -> TurnTextStream:
        # One stream per model call (RoutedModel calls this before the turn's first attempt).
        streams.append(create_turn_text_stream(turn_id=_turn_id(len(streams)),
                                               sink=BridgeSink(bridge)))
        return streams[-1]

    def on_route(result: RouteResult[object]) -> None:
        bridge.route(_json({"turn_id": streams[-1].turn_id, "resets": streams[-1].reset_count,
                            "attempts": result.attempts}))

    routed = RoutedModel(plan=_plan(), models=models, on_route=on_route,  # type: ignore[arg-type]
                         text_stream=next_turn)

    async def watch(events: AsyncIterator[AgentStreamEvent]) -> None:
        async for envelope in events:
            event = envelope.event
            if isinstance(event, ErrorEvent):
                continue  # its exception is not JSON; the turn_failed event that follows says it
            turn_id = _turn_id(envelope.turn_index)
            if isinstance(event, ToolFinishedEvent):  # a call's outcome: the tool's own turn
                outcome = event.outcome
                bridge.tool_result(_json({
                    "turn_id": turn_id, "id": event.call.id,
                    "ok": isinstance(outcome, ToolResult),
                    "result": outcome.content if isinstance(outcome, ToolResult) else str(outcome)}))
                continue
            shown = {"turn_index": envelope.turn_index, **msgspec.to_builtins(event),
                     "turn_id": turn_id}
            bridge.agent_event(_json(shown))

    async def handler(request: str) -> ChatResult:
        equip_system(SYSTEM)
        equip_instruction(request)
        for tool in demo_tools(Notes()):
            # Writes run first, one at a time, so a list in the same turn sees them.
            equip_tool(tool, serial=tool.name in SERIAL_TOOLS)
        on_stream(watch)
        return await prompt_chat(max_turn_steps=max_iterations)

    agent = create_agent(id="page-agent", handler=handler, model=routed)
    result: ChatResult = await agent(prompt)
    bridge.done(_json({"stop_reason": result.stop_reason, "stats": result.stats,
                       # the transcript: the system prompt and the instruction, then the run's own
                       "messages": 2 + len(result.delta),
                       "transcript": [UserMessage(content=prompt), *result.delta]}))
    return str(result.stop_reason)


async def run_report_agent(bridge: Any, origin: str, transcript: str,
                           transport: Any = FetchTransport) -> str:
    """Ask ``/structured`` under ``origin`` for a :class:`NotesReport` of ``transcript`` (the JSON
    list of messages ``run_page_agent`` handed to ``done``), streaming the structured partials to
    the bridge; returns the report as JSON."""
    history = msgspec.json.decode(transcript, type=list[Message])
    chat = OpenAIChatAdapter()
    budgets = StreamBudgets(first_token_ms=10_000, inter_chunk_ms=5_000, total_ms=30_000)
    model = ModelAdapter(
        chat, transport(f"{origin}/structured/v1", headers=chat.auth_headers("demo-key")),
        WireOptions(model="structured-model", stream=True), budgets=budgets)

    async def watch(events: AsyncIterator[AgentStreamEvent]) -> None:
        async for envelope in events:
            event = envelope.event
            if isinstance(event, StructuredDataEvent):
                bridge.structured(_json({"status": event.status, "data": event.data,
                                         "is_valid": event.is_valid}))

    async def handler(_: None) -> NotesReport:
        equip_system(SYSTEM)
        equip_history(history)
        equip_instruction("Report the notes I have now as JSON: how many, each one, a summary.")
        expect_validator(_counted)
        on_stream(watch)
        return await prompt_agent(NotesReport)

    report = await create_agent(id="notes-report", handler=handler, model=model)(None)
    shown = _json(report)
    bridge.report(shown)
    return shown
