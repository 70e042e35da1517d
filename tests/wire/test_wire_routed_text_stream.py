"""RoutedModel and the turn's output: only answer text is output, and a turn text stream is driven
across attempts (reset on retry when the surface is retractable, clamp when it is not)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import anyio
import pytest

from bindloop.completion import ReasoningEvent, StreamEvent, TextEvent, ToolCallEvent
from bindloop.textstream import (
    TurnResetEvent,
    TurnStreamEvent,
    TurnTextEvent,
    TurnTextStream,
    create_turn_text_stream,
)
from bindloop.contracts import (
    ModelTurnResult,
    ReasoningPart,
    ToolCall,
    TurnUsage,
    UserMessage,
)
from bindloop.errors import UsageError
from bindloop.routing import (
    AttemptError,
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteStage,
    canonical_model_id,
    provider_id,
)
from bindloop.wire import StreamBudgets
from bindloop.wire import ModelAdapter, RoutedModel, WireOptions, create_wire_adapter

httpx_transport = pytest.importorskip("bindloop.hosts.transports.httpx")
from harness.fixtures.scripted_server import ScriptedProviderServer, turn_reply  # noqa: E402

pytestmark = pytest.mark.anyio

ANSWER = ModelTurnResult(text="2 + 3 = 5", usage=TurnUsage(input_tokens=35, output_tokens=6),
                         finish_reason="stop")
CALL_ONLY = ModelTurnResult(
    tool_calls=(ToolCall(id="call_1", name="add", arguments='{"a":2,"b":3}'),),
    usage=TurnUsage(input_tokens=20, output_tokens=7), finish_reason="tool_calls")
THINK_THEN_ANSWER = ModelTurnResult(
    text="5", reasoning=(ReasoningPart(text="two plus three is five", signature="sig"),),
    usage=TurnUsage(input_tokens=5, output_tokens=9), finish_reason="stop")
# Tight enough that a scripted stall ends an attempt quickly, generous for a local healthy stream.
BUDGETS = StreamBudgets(first_token_ms=1000, inter_chunk_ms=400, total_ms=5000)


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def server(anyio_backend: str) -> Iterator[ScriptedProviderServer]:
    """One server per backend: prefixes and their hang-up counts are per test run."""
    with ScriptedProviderServer() as srv:
        yield srv


class Surface:
    """A sink recording what it was sent, and what a client applying the events would render."""

    def __init__(self, *, retractable: bool) -> None:
        self.retractable = retractable
        self.events: list[TurnStreamEvent] = []

    def emit(self, event: TurnStreamEvent) -> None:
        self.events.append(event)

    @property
    def rendered(self) -> str:
        text = ""
        for event in self.events:
            text = "" if isinstance(event, TurnResetEvent) else text + event.text
        return text


def _plan(names: Sequence[str]) -> RoutePlan:
    model_id = canonical_model_id("acme/m")
    return RoutePlan(stages=(RouteStage(
        role="primary", model=model_id,
        policy=OrderedPolicy(providers=tuple(provider_id(n) for n in names)),
        candidates=tuple(RouteCandidate(provider_id=provider_id(n), canonical_model_id=model_id,
                                        provider_invocation_model="m",
                                        credential_source="platform") for n in names)),))


def _routed(server: ScriptedProviderServer, names: Sequence[str], *, wire: str = "openai_chat",
            on_event: list[StreamEvent] | None = None,
            text_stream: object = None) -> RoutedModel:
    models = {}
    for name in names:
        adapter = create_wire_adapter(wire)
        transport = httpx_transport.HttpxTransport(server.base_url(name),
                                                   headers=adapter.auth_headers("k"))
        models[name] = ModelAdapter(adapter, transport, WireOptions(model="m", stream=True),
                                    budgets=BUDGETS,
                                    on_event=None if on_event is None else on_event.append)
    if text_stream is None:
        return RoutedModel(plan=_plan(names), models=models)
    return RoutedModel(plan=_plan(names), models=models,
                       text_stream=text_stream)  # type: ignore[arg-type]


def _attempts(routed: RoutedModel) -> list[tuple[str, str, str | None, bool]]:
    assert routed.last_result is not None
    return [(a.provider_id, a.outcome, a.category, a.produced_output)
            for a in routed.last_result.attempts]


# -- without a text stream: only answer text reaching on_event is output -------------------------

async def test_tool_call_only_partial_attempt_falls_back(server: ScriptedProviderServer) -> None:
    # role chunk, the call's header, both argument halves; then silence until the watchdog fires.
    server.enqueue("tc1", turn_reply("openai_chat", CALL_ONLY, stream=True, stall_after=4))
    server.enqueue("tc2", turn_reply("openai_chat", CALL_ONLY, stream=True))
    shown: list[StreamEvent] = []
    routed = _routed(server, ["tc1", "tc2"], on_event=shown)
    with anyio.fail_after(5):
        turn = await routed.complete([UserMessage(content="x")])
    assert turn.tool_calls == CALL_ONLY.tool_calls
    assert _attempts(routed) == [("tc1", "failed", "stream_stall", False),
                                 ("tc2", "succeeded", None, False)]
    # The failed attempt really did stream tool-call deltas to the sink: one call header each.
    assert sum(1 for e in shown if isinstance(e, ToolCallEvent) and e.tool_call.name) == 2
    assert not any(isinstance(e, TextEvent) and e.content for e in shown)


async def test_reasoning_only_partial_attempt_falls_back(server: ScriptedProviderServer) -> None:
    # message_start, ping, the thinking block's start and both thinking deltas; then silence.
    server.enqueue("rs1", turn_reply("anthropic", THINK_THEN_ANSWER, stream=True, stall_after=5))
    server.enqueue("rs2", turn_reply("anthropic", THINK_THEN_ANSWER, stream=True))
    shown: list[StreamEvent] = []
    routed = _routed(server, ["rs1", "rs2"], wire="anthropic", on_event=shown)
    with anyio.fail_after(5):
        turn = await routed.complete([UserMessage(content="x")])
    assert turn.text == "5"
    assert _attempts(routed) == [("rs1", "failed", "stream_stall", False),
                                 ("rs2", "succeeded", None, False)]
    thinking = "".join(e.content or "" for e in shown if isinstance(e, ReasoningEvent))
    assert thinking == "two plus three is five" * 2


async def test_text_without_a_sink_is_not_output(server: ScriptedProviderServer) -> None:
    # Text that reached no surface was shown to nobody: fall back.
    server.enqueue("ns1", turn_reply("openai_chat", ANSWER, stream=True, stall_after=2))
    server.enqueue("ns2", turn_reply("openai_chat", ANSWER, stream=True))
    routed = _routed(server, ["ns1", "ns2"])
    with anyio.fail_after(5):
        turn = await routed.complete([UserMessage(content="x")])
    assert turn.text == "2 + 3 = 5"
    assert _attempts(routed) == [("ns1", "failed", "stream_stall", False),
                                 ("ns2", "succeeded", None, False)]


# -- with a text stream ----------------------------------------------------------------------------

async def test_retractable_stream_resets_on_retry(server: ScriptedProviderServer) -> None:
    server.enqueue("rt1", turn_reply("openai_chat", ANSWER, stream=True, stall_after=2))
    server.enqueue("rt2", turn_reply("openai_chat", ANSWER, stream=True))
    surface = Surface(retractable=True)
    streams: list[TurnTextStream] = []

    def per_turn() -> TurnTextStream:
        streams.append(create_turn_text_stream(turn_id=f"turn-{len(streams)}", sink=surface))
        return streams[-1]

    routed = _routed(server, ["rt1", "rt2"], text_stream=per_turn)
    with anyio.fail_after(5):
        turn = await routed.complete([UserMessage(content="x")])
    assert turn.text == "2 + 3 = 5"
    assert _attempts(routed) == [("rt1", "failed", "stream_stall", False),
                                 ("rt2", "succeeded", None, False)]
    first, reset, *retry = surface.events
    assert isinstance(first, TurnTextEvent) and first.epoch == 0 and first.text
    assert "2 + 3 = 5".startswith(first.text)
    assert reset == TurnResetEvent(turn_id="turn-0", epoch=1, seq=1, reason="attempt_failed")
    assert all(isinstance(e, TurnTextEvent) and e.epoch == 1 for e in retry)
    assert [e.seq for e in surface.events] == list(range(len(surface.events)))
    # Never glued: what the reader ends up with is exactly the successful attempt's answer.
    assert surface.rendered == "2 + 3 = 5"
    (stream,) = streams
    assert stream.finished and not stream.produced_output


async def test_non_retractable_stream_clamps(server: ScriptedProviderServer) -> None:
    server.enqueue("nr1", turn_reply("openai_chat", ANSWER, stream=True, stall_after=2))
    server.enqueue("nr2", turn_reply("openai_chat", ANSWER, stream=True))
    surface = Surface(retractable=False)
    stream = create_turn_text_stream(turn_id="posted", sink=surface)
    routed = _routed(server, ["nr1", "nr2"], text_stream=stream)
    with anyio.fail_after(5):
        with pytest.raises(AttemptError) as info:
            await routed.complete([UserMessage(content="x")])
    assert info.value.category == "stream_stall"
    assert _attempts(routed) == [("nr1", "failed", "stream_stall", True)]
    assert server.pending("nr2") == 1
    assert [e.kind for e in surface.events] == ["text"]
    assert stream.finished and stream.produced_output


async def test_retry_answering_with_tool_calls_only_flushes_the_reset(
        server: ScriptedProviderServer) -> None:
    # The failed attempt's narration must not stay on screen under a turn that answered with a
    # tool call and no text: finish("succeeded") delivers the armed reset.
    server.enqueue("fl1", turn_reply("openai_chat", ANSWER, stream=True, stall_after=2))
    server.enqueue("fl2", turn_reply("openai_chat", CALL_ONLY, stream=True))
    surface = Surface(retractable=True)
    routed = _routed(server, ["fl1", "fl2"],
                     text_stream=lambda: create_turn_text_stream(turn_id="t", sink=surface))
    with anyio.fail_after(5):
        turn = await routed.complete([UserMessage(content="x")])
    assert turn.tool_calls == CALL_ONLY.tool_calls
    assert [e.kind for e in surface.events] == ["text", "reset"]
    assert surface.rendered == ""


async def test_every_attempt_failing_keeps_the_partial_text(
        server: ScriptedProviderServer) -> None:
    server.enqueue("ff1", turn_reply("openai_chat", ANSWER, stream=True, stall_after=2))
    server.enqueue("ff2", turn_reply("openai_chat", CALL_ONLY, stream=True, stall_after=2))
    surface = Surface(retractable=True)
    stream = create_turn_text_stream(turn_id="t", sink=surface)
    routed = _routed(server, ["ff1", "ff2"], text_stream=stream)
    with anyio.fail_after(5):
        with pytest.raises(AttemptError):
            await routed.complete([UserMessage(content="x")])
    assert [a[1] for a in _attempts(routed)] == ["failed", "failed"]
    # The reset armed for the second attempt was never delivered: it produced no text, and
    # finish("failed") drops it, so the reader keeps the partial answer.
    assert [e.kind for e in surface.events] == ["text"]
    assert stream.finished and stream.epoch == 1


async def test_factory_builds_one_stream_per_turn(server: ScriptedProviderServer) -> None:
    server.enqueue("pt", turn_reply("openai_chat", ANSWER, stream=True),
                   turn_reply("openai_chat", ANSWER, stream=True))
    surfaces: list[Surface] = []

    def per_turn() -> TurnTextStream:
        surfaces.append(Surface(retractable=True))
        return create_turn_text_stream(turn_id=f"turn-{len(surfaces)}", sink=surfaces[-1])

    routed = _routed(server, ["pt"], text_stream=per_turn)
    for _ in range(2):
        with anyio.fail_after(5):
            await routed.complete([UserMessage(content="x")])
    assert [s.rendered for s in surfaces] == ["2 + 3 = 5", "2 + 3 = 5"]
    assert [{(e.turn_id, e.epoch) for e in s.events} for s in surfaces] == [
        {("turn-1", 0)}, {("turn-2", 0)}]


async def test_a_single_stream_serves_one_turn(server: ScriptedProviderServer) -> None:
    server.enqueue("one", turn_reply("openai_chat", ANSWER, stream=True))
    stream = create_turn_text_stream(turn_id="t", sink=Surface(retractable=True))
    routed = _routed(server, ["one"], text_stream=stream)
    with anyio.fail_after(5):
        await routed.complete([UserMessage(content="x")])
    assert stream.finished
    with pytest.raises(UsageError, match="factory"):
        await routed.complete([UserMessage(content="x")])
    assert server.pending("one") == 0 and len(
        [r for r in server.requests if r.path.startswith("/one/")]) == 1


def test_text_stream_must_be_a_stream_or_a_factory() -> None:
    with pytest.raises(UsageError, match="text_stream"):
        RoutedModel(plan=_plan(["p"]), models={}, text_stream="turn-1")  # type: ignore[arg-type]
