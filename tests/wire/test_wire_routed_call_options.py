"""A RoutedModel call's request over loopback HTTP: ``additional_options`` applied on top of each
candidate's own WireOptions, a call ``signal``, and an ``on_event`` sink (settled ``complete``) or a
live ``stream`` that sees the attempt that ends the turn and no other (a property over every mix of
failures)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bindloop.completion import StreamEvent, TextEvent, TurnCollector
from bindloop.wire import StreamBudgets
from bindloop.contracts import ModelTurnResult, ToolDefinition, TurnUsage, UserMessage
from bindloop.errors import RunCancelledError, UsageError
from bindloop.model import ModelRequest, fold_events
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
from bindloop.wire import ModelAdapter, RoutedModel, WireOptions, create_wire_adapter

httpx_transport = pytest.importorskip("bindloop.hosts.transports.httpx")
from harness.fixtures.scripted_server import (  # noqa: E402
    ScriptedProviderServer,
    ScriptedReply,
    error_reply,
    turn_reply,
)

BUDGETS = StreamBudgets(first_token_ms=2000, inter_chunk_ms=300, total_ms=5000)
_PREFIXES = itertools.count()


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedProviderServer]:
    with ScriptedProviderServer() as srv:
        yield srv


def _plan(names: Sequence[str], defect_retries: int = 1) -> RoutePlan:
    model_id = canonical_model_id("acme/m")
    return RoutePlan(defect_retries=defect_retries, stages=(RouteStage(
        role="primary", model=model_id,
        policy=OrderedPolicy(providers=tuple(provider_id(n) for n in names)),
        candidates=tuple(RouteCandidate(provider_id=provider_id(n), canonical_model_id=model_id,
                                        provider_invocation_model=f"{n}-m",
                                        credential_source="platform") for n in names)),))


def _routed(server: ScriptedProviderServer, names: Sequence[str],
            options: WireOptions = WireOptions(model="x", stream=True, temperature=0.5),
            signal: Any = None) -> RoutedModel:
    models = {}
    for name in names:
        adapter = create_wire_adapter("openai_chat")
        models[name] = ModelAdapter(adapter, httpx_transport.HttpxTransport(
            server.base_url(name), headers=adapter.auth_headers("k")), options, budgets=BUDGETS)
    return RoutedModel(plan=_plan(names), models=models, signal=signal)


def _answer(text: str, **options: object) -> ScriptedReply:
    return turn_reply("openai_chat", ModelTurnResult(
        text=text, usage=TurnUsage(input_tokens=4, output_tokens=len(text)),
        finish_reason="stop"), stream=True, **options)


def _busy() -> ScriptedReply:
    return error_reply(503, b'{"error":{"message":"busy","type":"server_error"}}')


def _bodies(server: ScriptedProviderServer, name: str) -> list[dict[str, Any]]:
    return [msgspec.json.decode(r.body) for r in server.requests
            if r.path.startswith(f"/{name}/")]


def _names(n: int) -> list[str]:
    run = next(_PREFIXES)
    return [f"p{run}x{i}" for i in range(n)]


@pytest.mark.anyio
async def test_options_apply_on_top_of_each_candidates_own(server: ScriptedProviderServer) -> None:
    a, b = _names(2)
    server.enqueue(a, _busy())
    server.enqueue(b, _answer("ok"))
    routed = _routed(server, [a, b])
    tools = [ToolDefinition(name="add", parameters={"type": "object", "properties": {}})]
    turn = await routed.complete([UserMessage(content="x")], ModelRequest(
        tools=tuple(tools), additional_options={"tool_choice": "required", "max_tokens": 9}))
    assert turn.text == "ok"
    for name in (a, b):
        (body,) = _bodies(server, name)
        assert body["model"] == f"{name}-m"  # the candidate's, never the call's
        assert body["temperature"] == 0.5  # the candidate's own option stands
        assert body["tool_choice"] == "required" and body["max_completion_tokens"] == 9
    # A call's options do not stick: the next call sends the candidate's options again.
    server.enqueue(a, _answer("again"))
    await routed.complete([UserMessage(content="x")], ModelRequest(tools=tuple(tools)))
    assert "tool_choice" not in _bodies(server, a)[-1]


@pytest.mark.anyio
@pytest.mark.parametrize(("options", "named"), [
    ({"model": "y"}, "cannot set 'model'"),
    ({"tool_choise": "none"}, "tool_choise"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"max_tokens": 0}, "max_tokens"),
    (["temperature"], "mapping"),
])
async def test_bad_options_raise_before_any_request(server: ScriptedProviderServer,
                                                    options: Any, named: str) -> None:
    (a,) = _names(1)
    before = len(server.requests)
    with pytest.raises(UsageError, match=named):
        await _routed(server, [a]).complete([UserMessage(content="x")],
                                            ModelRequest(additional_options=options))
    assert len(server.requests) == before


@pytest.mark.anyio
async def test_the_call_signal_cancels_without_leaving_a_listener(
        server: ScriptedProviderServer) -> None:
    a, b = _names(2)
    server.enqueue(a, ScriptedReply(stall_before_headers=True))
    server.enqueue(b, _answer("never asked"))
    model_signal = AbortController()
    routed = _routed(server, [a, b], signal=model_signal.signal)
    call = AbortController()

    async def stop() -> None:
        await anyio.sleep(0.2)
        call.abort("user pressed stop")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(stop)
            # A cancelled route raises the cancellation itself, as any model does.
            with pytest.raises(RunCancelledError, match="user pressed stop"):
                await routed.complete([UserMessage(content="x")], ModelRequest(signal=call.signal))
    assert routed.last_result is not None
    assert routed.last_result.attempts[-1].category == "cancelled"
    assert server.pending(b) == 1  # cancellation is not a reason to fall back
    # The model's long-lived signal keeps no listener per call, and still cancels on its own.
    assert model_signal.signal._listeners == []  # type: ignore[attr-defined]
    model_signal.abort("shutdown")
    with pytest.raises(Exception, match="shutdown|cancelled"):
        await routed.complete([UserMessage(content="x")],
                              ModelRequest(signal=AbortController().signal))


# -- on_event: a property over every mix of failures ----------------------------------------------

FAILURES = st.one_of(
    st.just(("busy",)),
    st.tuples(st.just("drop"), st.integers(1, 5)),  # six chunks: role, 2 text, finish, usage, DONE
    st.tuples(st.just("stall"), st.integers(1, 3)),
)


def _reply(kind: tuple[Any, ...], text: str) -> ScriptedReply:
    if kind[0] == "busy":
        return _busy()
    if kind[0] == "drop":
        return _answer(text, drop_after=kind[1])
    if kind[0] == "stall":
        return _answer(text, stall_after=kind[1])
    return _answer(text)


@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(failures=st.lists(FAILURES, min_size=0, max_size=3), live=st.booleans(),
       succeeds=st.booleans())
def test_on_event_sees_one_attempt_and_folds_to_the_turn(
        server: ScriptedProviderServer, failures: list[tuple[Any, ...]], live: bool,
        succeeds: bool) -> None:
    # Candidates 0..n-1 fail as drawn; the last one answers (or fails too, as a drop after text).
    replies = [*failures, ("ok",) if succeeds else ("drop", 2)]
    names = _names(len(replies))
    texts = [f"Answer number {i} from candidate {name}." for i, name in enumerate(names)]
    for name, kind, text in zip(names, replies, texts, strict=True):
        server.enqueue(name, _reply(kind, text))
    # live: the route's stream (every attempt streams; the first content clamps the route);
    # settled: complete() with a sink that cannot take events back (no on_reset).
    routed = RoutedModel(plan=_plan(names, defect_retries=0),
                         models=_routed(server, names).models,
                         streaming="live" if live else "settled")
    seen: list[StreamEvent] = []

    async def main() -> ModelTurnResult | AttemptError:
        with anyio.fail_after(15):
            try:
                if live:
                    return await fold_events(routed.stream([UserMessage(content="x")]), None,
                                             seen.append)
                return await routed.complete([UserMessage(content="x")], ModelRequest(),
                                             seen.append)
            except AttemptError as exc:
                return exc

    outcome = anyio.run(main)
    shown = "".join(e.content for e in seen if isinstance(e, TextEvent))
    assert routed.last_result is not None
    attempts = routed.last_result.attempts
    served = len(attempts) - 1  # the attempt whose events on_event may carry
    if isinstance(outcome, ModelTurnResult):
        collector = TurnCollector()
        for event in seen:
            collector.observe(event)
        folded = collector.result()
        assert folded.text == outcome.text == texts[served]
        assert folded.usage == outcome.usage
    else:
        # A failed route shows nothing, or a prefix of the one attempt whose failure ended it.
        assert texts[served].startswith(shown)
        if shown:
            assert attempts[-1].produced_output
    for record in attempts[:-1]:
        # Whatever the mode, no attempt that another one followed had shown content.
        assert not record.produced_output
