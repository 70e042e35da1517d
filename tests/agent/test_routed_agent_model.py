"""A ``RoutedModel`` as the agent's model, over real HTTP to the scripted
provider server: the call's options reach every candidate's request (also after a fallback), a
structured answer goes out natively or as a forced output tool, and ``on_stream`` sees exactly the
attempt that serves the turn, streamed as it arrives."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import anyio
import msgspec
import pytest

from bindloop.agent import (
    create_agent,
    equip_instruction,
    on_stream,
    prompt_agent,
    prompt_chat,
    run_with,
)
from bindloop.agent.events import (
    AgentStreamEvent,
    TurnDoneEvent,
    TurnFailedEvent,
    TurnStartEvent,
)
from bindloop.completion import TextEvent, UsageEvent
from bindloop.wire import StreamBudgets
from bindloop.contracts import ModelTurnResult, ToolCall, TurnUsage
from bindloop.errors import UsageError
from bindloop.hosts.transports.httpx import HttpxTransport
from harness.fixtures.scripted_server import (
    ScriptedProviderServer,
    ScriptedReply,
    error_reply,
    turn_reply,
)
from bindloop.routing import (
    AttemptError,
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteStage,
    canonical_model_id,
    provider_id,
)
from bindloop.wire import ModelAdapter, RoutedModel, WireOptions, create_wire_adapter

pytestmark = pytest.mark.anyio

ANSWER = "The answer is five, as two plus three makes five."
FIRST_HALF = ANSWER[: len(ANSWER) // 2]  # the scripted SSE splits a text in two deltas
BUDGETS = StreamBudgets(first_token_ms=2000, inter_chunk_ms=400, total_ms=5000)


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server() -> Iterator[ScriptedProviderServer]:
    with ScriptedProviderServer() as srv:
        yield srv


class Point(msgspec.Struct):
    x: int
    y: int


def _plan(names: Sequence[str]) -> RoutePlan:
    model_id = canonical_model_id("demo/m")
    return RoutePlan(stages=(RouteStage(
        role="primary", model=model_id,
        policy=OrderedPolicy(providers=tuple(provider_id(n) for n in names)),
        candidates=tuple(RouteCandidate(provider_id=provider_id(n), canonical_model_id=model_id,
                                        provider_invocation_model=f"{n}-model",
                                        credential_source="platform") for n in names)),))


def _route(server: ScriptedProviderServer, wires: dict[str, str], **options: Any) -> RoutedModel:
    models = {}
    for name, wire in wires.items():
        adapter = create_wire_adapter(wire)
        models[name] = ModelAdapter(
            adapter, HttpxTransport(server.base_url(name), headers=adapter.auth_headers("k")),
            WireOptions(model="unused", stream=True, max_tokens=64), budgets=BUDGETS)
    return RoutedModel(plan=_plan(list(wires)), models=models, **options)


def _as(routed: RoutedModel, **options: Any) -> RoutedModel:
    """The same route with ``options`` (``id``, ``structured_output``, ``streaming``)."""
    return RoutedModel(plan=routed.plan, models=routed.models, **options)


def _text(wire: str, text: str = ANSWER, **options: object) -> ScriptedReply:
    return turn_reply(wire, ModelTurnResult(text=text, usage=TurnUsage(input_tokens=9,
                                                                       output_tokens=7),
                                            finish_reason="stop"), stream=True, **options)


def _busy() -> ScriptedReply:
    return error_reply(503, b'{"error":{"message":"overloaded","type":"server_error"}}')


def _bodies(server: ScriptedProviderServer, name: str) -> list[dict[str, Any]]:
    return [msgspec.json.decode(r.body) for r in server.requests
            if r.path.startswith(f"/{name}/")]


def _point_handler(**options: Any) -> Any:
    async def handler(_: None) -> Point:
        equip_instruction("a point")
        return await prompt_agent(Point, **options)
    return handler


# -- per-call options through a route ---------------------------------------------------------------

async def test_native_schema_and_options_reach_every_candidate_after_a_fallback(
        server: ScriptedProviderServer) -> None:
    server.enqueue("primary", error_reply(
        529, b'{"type":"error","error":{"type":"overloaded_error","message":"busy"}}'))
    server.enqueue("backup", _text("openai_chat", '{"x": 3, "y": 4}'))
    model = _as(_route(server, {"primary": "anthropic", "backup": "openai_chat"}))
    assert getattr(model, "structured_output") == "json_schema"
    agent = create_agent(id="n", handler=_point_handler(
        additional_options={"max_tokens": 32}), model=model)
    assert await agent(None) == Point(x=3, y=4)
    (primary,), (backup,) = _bodies(server, "primary"), _bodies(server, "backup")
    # Each candidate keeps its own options (its model, stream) under the call's overrides.
    assert primary["model"] == "primary-model" and primary["stream"] is True
    assert primary["max_tokens"] == 32
    assert primary["output_config"]["format"]["type"] == "json_schema"
    assert set(primary["output_config"]["format"]["schema"]["required"]) == {"x", "y"}
    assert "tools" not in primary
    assert backup["model"] == "backup-model" and backup["stream"] is True
    assert backup["max_completion_tokens"] == 32
    assert backup["response_format"]["json_schema"]["name"] == "Point"
    assert backup["response_format"]["json_schema"]["strict"] is True
    assert "tools" not in backup


async def test_tool_mode_forces_the_output_tool_on_every_candidate(
        server: ScriptedProviderServer) -> None:
    server.enqueue("primary", _busy())
    answer = ModelTurnResult(tool_calls=(ToolCall(id="out_1", name="Point",
                                                  arguments='{"x": 5, "y": 6}'),),
                             finish_reason="tool_calls")
    server.enqueue("backup", turn_reply("anthropic", answer, stream=True))
    model = _as(_route(server, {"primary": "openai_chat", "backup": "anthropic"}),
                           structured_output="tool")
    assert getattr(model, "structured_output") == "tool"
    assert await create_agent(id="t", handler=_point_handler(), model=model)(None) == Point(5, 6)
    (primary,), (backup,) = _bodies(server, "primary"), _bodies(server, "backup")
    assert primary["tool_choice"] == {"type": "function", "function": {"name": "Point"}}
    assert [t["function"]["name"] for t in primary["tools"]] == ["Point"]
    assert "response_format" not in primary
    assert backup["tool_choice"]["type"] == "tool" and backup["tool_choice"]["name"] == "Point"
    assert [t["name"] for t in backup["tools"]] == ["Point"]


async def test_an_unbound_candidate_makes_the_route_use_the_output_tool(
        server: ScriptedProviderServer) -> None:
    routed = _route(server, {"only": "openai_chat"})
    unbound = RoutedModel(plan=_plan(["only", "ghost"]), models=routed.models)
    assert _as(unbound).structured_output == "tool"
    assert _as(routed).structured_output == "json_schema"


@pytest.mark.parametrize(("options", "named"), [
    ({"model": "other"}, "'model'"),
    ({"temprature": 0.2}, "temprature"),
    ({"temperature": "hot"}, "temperature"),
])
async def test_bad_call_options_are_refused_before_any_request(
        server: ScriptedProviderServer, options: dict[str, Any], named: str) -> None:
    model = _as(_route(server, {"a": "openai_chat", "b": "openai_chat"}))

    async def handler(_: None) -> str:
        equip_instruction("hi")
        return (await prompt_chat(additional_options=options)).data

    with pytest.raises(UsageError, match=named):
        await create_agent(id="bad", handler=handler, model=model)(None)
    assert server.requests == []


async def test_routed_model_refuses_bad_keywords(server: ScriptedProviderServer) -> None:
    routed = _route(server, {"a": "openai_chat"})
    with pytest.raises(UsageError, match="structured_output"):
        _as(routed, structured_output="native")
    with pytest.raises(UsageError, match="streaming"):
        _as(routed, streaming="eager")


# -- streamed tokens ---------------------------------------------------------------------------------

def _watched(events: list[AgentStreamEvent]) -> Any:
    async def handler(_: None) -> str:
        equip_instruction("what is 2 + 3?")

        async def consume(stream: Any) -> None:
            async for event in stream:
                events.append(event)

        on_stream(consume)
        return (await prompt_chat()).data
    return handler


def _texts(events: Sequence[AgentStreamEvent]) -> list[str]:
    return [e.event.content for e in events if isinstance(e.event, TextEvent)]


def _kinds(events: Sequence[AgentStreamEvent]) -> list[str]:
    return [type(e.event).__name__ for e in events if not isinstance(e.event, TextEvent)]


async def _run(model: Any, events: list[AgentStreamEvent]) -> str:
    with anyio.fail_after(10):
        result: str = await create_agent(id="s", handler=_watched(events), model=model)(None)
    return result


@pytest.mark.parametrize("streaming", ["settled", "live"])
async def test_503_before_text_streams_only_the_backup(server: ScriptedProviderServer,
                                                       streaming: str) -> None:
    server.enqueue("primary", _busy())
    server.enqueue("backup", _text("openai_chat"))
    routed = _route(server, {"primary": "openai_chat", "backup": "openai_chat"},
                    streaming=streaming)
    events: list[AgentStreamEvent] = []
    model = routed
    assert await _run(model, events) == ANSWER
    # The backup's deltas as they came (two), not one whole-turn text event.
    assert _texts(events) == [FIRST_HALF, ANSWER[len(FIRST_HALF):]]
    assert _kinds(events) == ["TurnStartEvent", "FinishEvent", "UsageEvent", "TurnDoneEvent"]
    assert [a.outcome for a in routed.last_result.attempts] == ["failed", "succeeded"]  # type: ignore[union-attr]


@pytest.mark.parametrize("drop_after", [1, 2, 3, 4, 5])
async def test_settled_mid_stream_drop_never_shows_the_failed_attempt(
        server: ScriptedProviderServer, drop_after: int) -> None:
    # Every cut point of the primary's six SSE chunks (role, two text halves, finish, usage,
    # [DONE]) before the end: the consumer and the folded turn see the backup's answer alone.
    server.enqueue("primary", _text("openai_chat", "Primary words that must vanish.",
                                    drop_after=drop_after))
    server.enqueue("backup", _text("openai_chat"))
    routed = _route(server, {"primary": "openai_chat", "backup": "openai_chat"}, streaming="settled")
    events: list[AgentStreamEvent] = []
    assert await _run(routed, events) == ANSWER
    assert "".join(_texts(events)) == ANSWER
    assert _kinds(events) == ["TurnStartEvent", "FinishEvent", "UsageEvent", "TurnDoneEvent"]
    assert [(a.provider_id, a.outcome, a.produced_output)
            for a in routed.last_result.attempts] == [  # type: ignore[union-attr]
        ("primary", "failed", False), ("backup", "succeeded", False)]


async def test_live_mid_stream_drop_after_text_is_retracted_and_falls_back(
        server: ScriptedProviderServer) -> None:
    # "live" streams the primary at once; when it drops after some text the backup takes the turn
    # over and the consumer is told first: a second turn_start for the same turn (the seed's
    # "clear this turn's UI state"), then the backup's deltas. The turn is the backup's alone.
    server.enqueue("primary", _text("openai_chat", "Primary words that vanish.", drop_after=2))
    server.enqueue("backup", _text("openai_chat"))
    routed = _route(server, {"primary": "openai_chat", "backup": "openai_chat"}, streaming="live")
    events: list[AgentStreamEvent] = []
    assert await _run(routed, events) == ANSWER
    starts = [i for i, e in enumerate(events) if isinstance(e.event, TurnStartEvent)]
    assert len(starts) == 2 and {e.turn_index for e in events} == {0}
    assert "".join(_texts(events[:starts[1]])) == "Primary words that vanish."[:13]
    assert "".join(_texts(events[starts[1]:])) == ANSWER
    assert _kinds(events) == ["TurnStartEvent", "TurnStartEvent", "FinishEvent", "UsageEvent",
                              "TurnDoneEvent"]
    assert [(a.provider_id, a.outcome, a.produced_output)
            for a in routed.last_result.attempts] == [  # type: ignore[union-attr]
        ("primary", "failed", False), ("backup", "succeeded", False)]


async def test_live_drop_before_text_still_falls_back(server: ScriptedProviderServer) -> None:
    server.enqueue("primary", _text("openai_chat", drop_after=1))  # the role chunk only
    server.enqueue("backup", _text("openai_chat"))
    routed = _route(server, {"primary": "openai_chat", "backup": "openai_chat"}, streaming="live")
    events: list[AgentStreamEvent] = []
    assert await _run(routed, events) == ANSWER
    assert _texts(events) == [FIRST_HALF, ANSWER[len(FIRST_HALF):]]


async def test_the_last_attempt_streams_live(server: ScriptedProviderServer) -> None:
    # The backup stalls after its first text delta: that delta reached the consumer while the
    # attempt was still open (it was never held), and then the turn failed.
    server.enqueue("primary", _busy())
    server.enqueue("backup", _text("openai_chat", stall_after=2))
    routed = _route(server, {"primary": "openai_chat", "backup": "openai_chat"})
    events: list[AgentStreamEvent] = []
    with pytest.raises(AttemptError) as info:
        await _run(routed, events)
    assert info.value.category == "stream_stall"
    assert _texts(events) == [FIRST_HALF]
    assert isinstance(events[-1].event, TurnFailedEvent)


async def test_a_held_attempt_that_stalls_is_never_shown(server: ScriptedProviderServer) -> None:
    server.enqueue("primary", _text("openai_chat", "Primary words that must vanish.",
                                    stall_after=2))
    server.enqueue("backup", _text("openai_chat"))
    routed = _route(server, {"primary": "openai_chat", "backup": "openai_chat"}, streaming="settled")
    events: list[AgentStreamEvent] = []
    assert await _run(routed, events) == ANSWER
    assert "".join(_texts(events)) == ANSWER
    assert sum(isinstance(e.event, UsageEvent) for e in events) == 1
    assert sum(isinstance(e.event, TurnDoneEvent) for e in events) == 1


# -- the stream's own lifecycle ----------------------------------------------------------------------

async def test_closing_the_stream_early_cancels_the_route(server: ScriptedProviderServer) -> None:
    # The backup stalls mid-answer (long budgets): closing after the first delta must not wait
    # for the watchdog, and must leave nothing running.
    server.enqueue("only", _text("openai_chat", stall_after=2))
    model = _as(_route(server, {"only": "openai_chat"}))
    from bindloop.model import ModelRequest
    from bindloop.contracts import UserMessage
    from bindloop.completion import TextEvent

    with anyio.fail_after(1.5):  # well under the 2 s first-token budget and the stall
        events = model.stream([UserMessage(content="x")], ModelRequest())
        async for event in events:
            if isinstance(event, TextEvent):
                break
        await events.aclose()  # type: ignore[attr-defined]


@pytest.mark.parametrize("watched", [True, False])
async def test_a_run_signal_cancels_a_route(server: ScriptedProviderServer, watched: bool) -> None:
    # Watched: the streaming path; not watched: complete without a sink. Either way the agent reports a
    # cancellation as from any model, not as the route's AttemptError.
    from bindloop.agent import run_with
    from bindloop.errors import RunCancelledError
    from bindloop.signal import AbortController

    server.enqueue("a", _busy())
    server.enqueue("b", ScriptedReply(stall_before_headers=True))
    model = _as(_route(server, {"a": "openai_chat", "b": "openai_chat"}))
    controller = AbortController()
    events: list[AgentStreamEvent] = []

    async def plain(_: None) -> str:
        equip_instruction("hi")
        return (await prompt_chat()).data

    handler = _watched(events) if watched else plain

    async def stop() -> None:
        await anyio.sleep(0.3)
        controller.abort("user pressed stop")

    with anyio.fail_after(1.5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(stop)
            with pytest.raises(RunCancelledError):
                await run_with(lambda: create_agent(id="c", handler=handler)(None),
                               model=model, signal=controller.signal)
    if watched:
        assert isinstance(events[0].event, TurnStartEvent) and _texts(events) == []


@pytest.mark.parametrize("streaming", ["settled", "live"])
@pytest.mark.parametrize("mode", ["json_schema", "tool"])
async def test_structured_partials_stream_from_the_backup_only(server: ScriptedProviderServer,
                                                                mode: str, streaming: str) -> None:
    from bindloop.agent.events import StructuredDataEvent

    # The primary starts an answer and drops; the backup answers. Both modes: the structured view
    # is built from the backup's deltas alone and ends valid.
    if mode == "tool":
        def reply(arguments: str, **options: object) -> ScriptedReply:
            return turn_reply("openai_chat", ModelTurnResult(
                tool_calls=(ToolCall(id="o1", name="Point", arguments=arguments),),
                finish_reason="tool_calls"), stream=True, **options)
    else:
        def reply(arguments: str, **options: object) -> ScriptedReply:
            return _text("openai_chat", arguments, **options)
    server.enqueue("primary", reply('{"x": 100, "y": 200}', drop_after=2))
    server.enqueue("backup", reply('{"x": 1, "y": 2}'))
    routed = _route(server, {"primary": "openai_chat", "backup": "openai_chat"})
    model = routed = _as(routed, structured_output=mode,  # type: ignore[arg-type]
                           streaming=streaming)  # type: ignore[arg-type]
    events: list[AgentStreamEvent] = []

    async def handler(_: None) -> Point:
        equip_instruction("a point")

        async def consume(stream: Any) -> None:
            async for event in stream:
                events.append(event)

        on_stream(consume)
        return await prompt_agent(Point)

    with anyio.fail_after(10):
        assert await create_agent(id="sd", handler=handler, model=model)(None) == Point(1, 2)
    if streaming == "live":  # the primary's partials came first; the second turn_start retracts
        restart = [i for i, e in enumerate(events) if isinstance(e.event, TurnStartEvent)][1]
        events = events[restart:]
    views = [e.event for e in events if isinstance(e.event, StructuredDataEvent)]
    assert views[-1].status == "complete" and views[-1].data == {"x": 1, "y": 2}
    assert all(v.data.get("x") in (None, 1) for v in views if isinstance(v.data, dict))
    assert [a.outcome for a in routed.last_result.attempts] == ["failed", "succeeded"]  # type: ignore[union-attr]


class _Events:
    """A trace bus: records every trace event."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def emit(self, event: Any) -> None:
        self.events.append(event)


@pytest.mark.parametrize("traced, snapshot", [(True, False), (False, True)])
async def test_a_traced_or_journaled_run_nobody_watches_keeps_live_fallbacks(
        server: ScriptedProviderServer, traced: bool, snapshot: bool) -> None:
    # A trace or a journal needs the turn, not its deltas: with no stream consumer the agent takes
    # the whole turn, so "live" mode shows nothing mid-attempt and the drop still falls back.
    server.enqueue("primary", _text("openai_chat", "Primary words that must vanish.", drop_after=2))
    server.enqueue("backup", _text("openai_chat"))
    routed = _route(server, {"primary": "openai_chat", "backup": "openai_chat"})
    bus = _Events()

    async def handler(_: None) -> str:
        equip_instruction("what is 2 + 3?")
        return (await prompt_chat()).data

    with anyio.fail_after(10):
        out = await run_with(create_agent(id="t", handler=handler),
                             model=(routed := _as(routed, streaming="live")),
                             event_bus=bus if traced else None, enable_snapshot=snapshot)
    assert out == ANSWER
    assert [a.outcome for a in routed.last_result.attempts] == ["failed", "succeeded"]  # type: ignore[union-attr]
    assert (len(bus.events) > 0) == traced
