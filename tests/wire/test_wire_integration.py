"""The loop, through a real wire and a real HTTP transport, against the scripted provider server on
127.0.0.1: every wire streamed and not, fallback on 503, stalls, dropped connections, cancellation."""

from __future__ import annotations

from collections.abc import Iterator

import anyio
import msgspec
import pytest

from bindloop.completion import TextEvent
from bindloop.model import Model, ModelRequest
from bindloop.wire import StreamStalledError
from bindloop.contracts import (
    ModelTurnResult,
    ToolCall,
    ToolDefinition,
    ToolResult,
    TurnUsage,
    UserMessage,
)
from bindloop.errors import PromptTooLongError, RunCancelledError
from bindloop.loop import ToolLoopParams, ToolLoopState, run_tool_loop
from bindloop.routing import (
    AttemptError,
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteStage,
    canonical_model_id,
    provider_id,
)
from bindloop.signal import AbortController
from bindloop.wire import StreamBudgets
from bindloop.wire import (
    WIRE_NAMES,
    ModelAdapter,
    ProviderHttpError,
    RoutedModel,
    TransportError,
    WireOptions,
    create_wire_adapter,
)

httpx_transport = pytest.importorskip("bindloop.hosts.transports.httpx")
from harness.fixtures.scripted_server import (  # noqa: E402
    ScriptedProviderServer,
    error_reply,
    turn_reply,
)

from .wire_fixtures import fixture  # noqa: E402
from bindloop.loop import ToolRunner

pytestmark = pytest.mark.anyio

CALL = ModelTurnResult(text="Let me add.",
                       tool_calls=(ToolCall(id="call_1", name="add", arguments='{"a":2,"b":3}'),),
                       usage=TurnUsage(input_tokens=20, output_tokens=7, cached_input_tokens=4),
                       finish_reason="tool_calls")
ANSWER = ModelTurnResult(text="2 + 3 = 5", usage=TurnUsage(input_tokens=35, output_tokens=6),
                         finish_reason="stop")
TOOLS = [ToolDefinition(name="add", parameters={
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"]})]


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def server(anyio_backend: str) -> Iterator[ScriptedProviderServer]:
    """One server per backend: prefixes and their hang-up counts are per test run."""
    with ScriptedProviderServer() as srv:
        yield srv


def _model(server: ScriptedProviderServer, wire: str, prefix: str | None = None, *,
           stream: bool = True, **kw: object) -> ModelAdapter:
    adapter = create_wire_adapter(wire)
    transport = httpx_transport.HttpxTransport(server.base_url(prefix or wire),
                                               headers=adapter.auth_headers("test-key"))
    kw.setdefault("retry", None)  # one call: these tests study a single attempt's failure
    return ModelAdapter(adapter, transport, WireOptions(model="scripted", stream=stream),
                        **kw)  # type: ignore[arg-type]


def _add(call: ToolCall) -> ToolResult:
    args = msgspec.json.decode(call.arguments)
    return ToolResult(content=str(args["a"] + args["b"]))


async def _run(model: Model) -> tuple[str, ToolLoopState, object]:
    state = ToolLoopState(messages=[UserMessage(content="what is 2 + 3?")])
    result = await run_tool_loop(ToolLoopParams(
        state=state,
        model=model,
        max_iterations=4,
        runner=ToolRunner(run_tool_call=_add, build_tools=lambda: TOOLS),
    ))
    return result.stop_reason, state, result.stats


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_loop_runs_through_each_wire(server: ScriptedProviderServer, wire: str,
                                           stream: bool) -> None:
    prefix = f"{wire}-{stream}"
    server.enqueue(prefix, turn_reply(wire, CALL, stream=stream),
                   turn_reply(wire, ANSWER, stream=stream))
    seen = len(server.requests)
    model = _model(server, wire, prefix, stream=stream)
    stop, state, stats = await _run(model)
    assert stop == "done"
    assert state.messages[-1].content == "2 + 3 = 5"  # type: ignore[union-attr]
    assert state.messages[2].content == "5"  # type: ignore[union-attr]
    assert stats.input_tokens == 55 and stats.output_tokens == 13  # type: ignore[attr-defined]
    assert stats.cached_input_tokens == 4  # type: ignore[attr-defined]
    sent = server.requests[seen:]
    assert len(sent) == 2
    # The second request carries the call and its result in the wire's own shape.
    second = sent[1].body.decode()
    assert "call_1" in second and '"5"' in second.replace(":5", ':"5"')
    assert dict(sent[0].headers).get("content-type") == "application/json"


async def test_fallback_from_503_to_second_provider_is_in_the_route_log(
        server: ScriptedProviderServer) -> None:
    server.enqueue("primary", error_reply(503, fixture("gemini", "error_unavailable.json"),
                                          retry_after="2"))
    server.enqueue("backup", turn_reply("anthropic", ANSWER, stream=True))
    model_id = canonical_model_id("acme/model-1")
    plan = RoutePlan(stages=(RouteStage(
        role="primary", model=model_id,
        policy=OrderedPolicy(providers=(provider_id("primary"), provider_id("backup"))),
        candidates=tuple(RouteCandidate(provider_id=provider_id(p), canonical_model_id=model_id,
                                        provider_invocation_model=f"{p}-model",
                                        credential_source="platform")
                         for p in ("primary", "backup"))),))
    routes = []
    routed = RoutedModel(plan=plan, models={"primary": _model(server, "gemini", "primary"),
                                            "backup": _model(server, "anthropic", "backup")},
                         on_route=routes.append)
    turn = await routed.complete([UserMessage(content="hi")])
    assert turn.text == "2 + 3 = 5"
    (result,) = routes
    assert result.ok and result.fallback_kind == "provider"
    assert [(a.provider_id, a.outcome, a.category, a.status_code) for a in result.attempts] == [
        ("primary", "failed", "server_error", 503), ("backup", "succeeded", None, None)]
    assert server.requests[-1].path == "/backup/v1/messages"
    assert b'"model":"backup-model"' in server.requests[-1].body


async def test_prompt_too_long_propagates_recognisably(server: ScriptedProviderServer) -> None:
    server.enqueue("ptl", error_reply(400, fixture("anthropic", "error_prompt_too_long.json")))
    model = _model(server, "anthropic", "ptl")
    with pytest.raises(PromptTooLongError) as info:
        await model.complete([UserMessage(content="x" * 100)])
    assert isinstance(info.value, ProviderHttpError) and info.value.status_code == 400


async def test_stall_mid_stream_is_torn_down_by_the_watchdog(
        server: ScriptedProviderServer) -> None:
    server.enqueue("stall", turn_reply("openai_chat", ANSWER, stream=True, stall_after=2))
    model = _model(server, "openai_chat", "stall",
                   budgets=StreamBudgets(first_token_ms=2000, inter_chunk_ms=150, total_ms=5000))
    with anyio.fail_after(5):
        with pytest.raises(StreamStalledError) as info:
            await model.complete([UserMessage(content="x")])
    assert info.value.stall.kind == "inter_chunk"


async def test_dropped_connection_is_a_transport_error(server: ScriptedProviderServer) -> None:
    server.enqueue("drop", turn_reply("anthropic", ANSWER, stream=True, drop_after=3))
    with pytest.raises(TransportError):
        await _model(server, "anthropic", "drop").complete([UserMessage(content="x")])


async def test_clean_close_before_the_terminal_event_is_incomplete(
        server: ScriptedProviderServer) -> None:
    from harness.fixtures.scripted_server import ScriptedReply
    from harness.fixtures.provider_replies import render_sse
    from bindloop.wire import IncompleteStreamError

    chunks = tuple(render_sse("openai_responses", ANSWER)[:-1])
    server.enqueue("short", ScriptedReply(chunks=chunks))
    with pytest.raises(IncompleteStreamError):
        await _model(server, "openai_responses", "short").complete([UserMessage(content="x")])


async def test_cancellation_closes_the_stream(server: ScriptedProviderServer) -> None:
    server.enqueue("cancel", turn_reply("openai_chat", ANSWER, stream=True, stall_after=2))
    controller = AbortController()
    model = _model(server, "openai_chat", "cancel")
    seen: list[object] = []

    async def cancel_soon() -> None:
        await anyio.sleep(0.2)
        controller.abort("user pressed stop")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_soon)
            with pytest.raises(RunCancelledError):
                async for event in model.stream([UserMessage(content="x")],
                                                ModelRequest(signal=controller.signal)):
                    seen.append(event)
    assert seen and all(not isinstance(e, TextEvent) or e.content for e in seen)
    # The server, stalled mid-body, saw the client hang up: the connection was really closed.
    with anyio.fail_after(3):
        while server.hung_up("cancel") < 1:
            await anyio.sleep(0.01)
    assert server.hung_up("cancel") == 1


async def test_leaving_the_stream_early_closes_the_connection(
        server: ScriptedProviderServer) -> None:
    # No read is in flight when the consumer stops, so no cancellation closes the connection:
    # closing the generator must (the server holds it open until the client hangs up).
    server.enqueue("leave", turn_reply("openai_chat", ANSWER, stream=True, stall_after=2))
    model = _model(server, "openai_chat", "leave")
    with anyio.fail_after(5):
        events = model.stream([UserMessage(content="x")])
        async for event in events:
            if isinstance(event, TextEvent):
                break
        await events.aclose()
        while server.hung_up("leave") < 1:
            await anyio.sleep(0.01)
    assert server.hung_up("leave") == 1


async def test_stream_yields_events_live_with_a_sink(server: ScriptedProviderServer) -> None:
    server.enqueue("sink", turn_reply("openai_chat", ANSWER, stream=True, delay_s=0.01))
    seen: list[object] = []
    model = _model(server, "openai_chat", "sink", on_event=seen.append)
    turn = await model.complete([UserMessage(content="x")])
    assert turn.text == "2 + 3 = 5"
    assert "".join(e.content for e in seen if isinstance(e, TextEvent)) == "2 + 3 = 5"


async def test_routed_stall_counts_as_stream_stall_and_falls_back(
        server: ScriptedProviderServer) -> None:
    server.enqueue("s1", turn_reply("openai_chat", ANSWER, stream=True, stall_after=1))
    server.enqueue("s2", turn_reply("openai_chat", ANSWER, stream=True))
    model_id = canonical_model_id("acme/m")
    plan = RoutePlan(stages=(RouteStage(
        role="primary", model=model_id,
        policy=OrderedPolicy(providers=(provider_id("s1"), provider_id("s2"))),
        candidates=tuple(RouteCandidate(provider_id=provider_id(p), canonical_model_id=model_id,
                                        provider_invocation_model="m",
                                        credential_source="platform") for p in ("s1", "s2"))),))
    budgets = StreamBudgets(first_token_ms=200, inter_chunk_ms=200, total_ms=3000)
    # the fallback's budgets are far from its pace, even on a loaded machine: only s1 stalls
    roomy = StreamBudgets(first_token_ms=10_000, inter_chunk_ms=10_000, total_ms=30_000)
    routed = RoutedModel(plan=plan, models={
        "s1": _model(server, "openai_chat", "s1", budgets=budgets),
        "s2": _model(server, "openai_chat", "s2", budgets=roomy)})
    with anyio.fail_after(15):
        turn = await routed.complete([UserMessage(content="x")])
    assert turn.text == "2 + 3 = 5"
    assert routed.last_result is not None
    assert [a.category for a in routed.last_result.attempts] == ["stream_stall", None]


async def test_unreachable_provider_is_a_connection_failure() -> None:
    adapter = create_wire_adapter("openai_chat")
    transport = httpx_transport.HttpxTransport("http://127.0.0.1:9")
    model = ModelAdapter(adapter, transport, WireOptions(model="m"))
    with pytest.raises(TransportError) as info:
        await model.complete([UserMessage(content="x")])
    assert info.value.kind == "connection"


def test_attempt_error_mapping() -> None:
    from bindloop.routing import AttemptTarget, RouteCursor
    from bindloop.wire import IncompleteStreamError, WireDecodeError, attempt_error_from

    target = AttemptTarget(cursor=RouteCursor(stage=0, candidate=0),
                           provider_id=provider_id("p"),
                           canonical_model_id=canonical_model_id("a/b"),
                           provider_invocation_model="b")
    http = ProviderHttpError("x", wire="anthropic", category="rate_limited", status_code=429,
                             retry_after_ms=1500.0)
    mapped = attempt_error_from(http, target)
    assert (mapped.category, mapped.status_code, mapped.retry_after_ms) == ("rate_limited", 429,
                                                                            1500.0)
    assert attempt_error_from(IncompleteStreamError("x"), target).category == "connection"
    assert attempt_error_from(WireDecodeError("x"), target).category == "response_defect"
    assert attempt_error_from(TransportError("t", kind="timeout"), target).category == "timeout"
    assert attempt_error_from(RunCancelledError(), target).category == "cancelled"
    assert attempt_error_from(KeyError("bug"), target).category == "client_error"
    already = AttemptError("auth", target)
    assert attempt_error_from(already, target) is already


async def test_output_already_shown_stops_fallback(server: ScriptedProviderServer) -> None:
    # The first provider streams answer text into the adapter's on_event sink, then the
    # connection drops. Without a (retractable) turn text stream that text cannot be taken back,
    # so routing must not silently retry elsewhere. Tool-call and reasoning deltas do not count:
    # see test_wire_routed_text_stream.py.
    server.enqueue("shown1", turn_reply("openai_chat", ANSWER, stream=True, drop_after=3))
    server.enqueue("shown2", turn_reply("openai_chat", ANSWER, stream=True))
    model_id = canonical_model_id("acme/m")
    plan = RoutePlan(stages=(RouteStage(
        role="primary", model=model_id,
        policy=OrderedPolicy(providers=(provider_id("shown1"), provider_id("shown2"))),
        candidates=tuple(RouteCandidate(provider_id=provider_id(p), canonical_model_id=model_id,
                                        provider_invocation_model="m",
                                        credential_source="platform")
                         for p in ("shown1", "shown2"))),))
    shown: list[object] = []
    routed = RoutedModel(plan=plan, models={
        "shown1": _model(server, "openai_chat", "shown1", on_event=shown.append),
        "shown2": _model(server, "openai_chat", "shown2", on_event=shown.append)})
    with pytest.raises(AttemptError) as info:
        await routed.complete([UserMessage(content="x")])
    assert info.value.category == "connection"
    assert routed.last_result is not None
    assert [(a.provider_id, a.produced_output) for a in routed.last_result.attempts] == [
        ("shown1", True)]
    assert server.pending("shown2") == 1
    assert any(isinstance(e, TextEvent) and e.content for e in shown)
