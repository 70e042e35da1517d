"""fallback_route over loopback HTTP: one call gives a two-provider route; a 503 falls back; a 429's
Retry-After keeps the primary out of later turns until it has passed (the breaker's clock is the
test's); bad arguments are refused by name."""

from __future__ import annotations

import anyio
import pytest

from bindloop.contracts import ModelTurnResult, TurnUsage, UserMessage
from bindloop.errors import UsageError
from bindloop.routing import BreakerKey, create_circuit_breaker
from bindloop.wire import ModelAdapter, RoutedModel, WireOptions, create_wire_adapter, fallback_route

httpx = pytest.importorskip("httpx")
from bindloop.hosts.transports.httpx import HttpxTransport  # noqa: E402
from harness.fixtures.scripted_server import ScriptedProviderServer, error_reply, turn_reply  # noqa: E402

ANSWER = ModelTurnResult(text="ok", usage=TurnUsage(input_tokens=3, output_tokens=1),
                         finish_reason="stop")


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _adapter(srv: ScriptedProviderServer, prefix: str, wire: str) -> ModelAdapter:
    return ModelAdapter(create_wire_adapter(wire), HttpxTransport(srv.base_url(prefix)),
                        WireOptions(model=f"{prefix}-model", stream=True))


def _calls(srv: ScriptedProviderServer, prefix: str) -> int:
    return sum(1 for r in srv.requests if r.path.startswith(f"/{prefix}/"))


def test_a_retry_after_keeps_the_primary_out_until_it_passes() -> None:
    clock = Clock()
    with ScriptedProviderServer(keep_alive=True) as srv:
        route = fallback_route(_adapter(srv, "main", "anthropic"),
                               _adapter(srv, "backup", "openai_chat"), now=clock)
        assert isinstance(route, RoutedModel)
        srv.enqueue("main", error_reply(429, b'{"type":"error","error":{"type":"rate_limit_error",'
                                             b'"message":"slow down"}}', retry_after="7"))
        srv.set_responder("backup", lambda _: turn_reply("openai_chat", ANSWER, stream=True))
        srv.set_responder("main", lambda _: turn_reply("anthropic", ANSWER, stream=True))

        async def turn() -> str:
            with anyio.fail_after(10):
                return (await route.complete([UserMessage(content="x")])).text

        assert anyio.run(turn) == "ok"  # turn 1: 429, then the backup
        assert (_calls(srv, "main"), _calls(srv, "backup")) == (1, 1)
        clock.t = 500.0  # the next turn, half a second later: the primary asked for 7 s
        assert anyio.run(turn) == "ok"
        assert (_calls(srv, "main"), _calls(srv, "backup")) == (1, 2)
        assert route.last_result is not None and route.last_result.served is not None
        assert route.last_result.served.provider_id == "fallback-1"
        clock.t = 7_000.0  # passed: the primary is asked again and serves
        assert anyio.run(turn) == "ok"
        assert (_calls(srv, "main"), _calls(srv, "backup")) == (2, 2)
        assert route.last_result.served.provider_id == "primary"


def test_a_503_falls_back_and_the_plan_is_ordinary() -> None:
    with ScriptedProviderServer() as srv:
        primary, backup = _adapter(srv, "a", "openai_chat"), _adapter(srv, "b", "gemini")
        route = fallback_route(primary, backup, names=("alpha", "beta"), breaker=None)
        srv.enqueue("a", error_reply(503, b'{"error":{"message":"busy"}}'))
        srv.enqueue("b", turn_reply("gemini", ANSWER, stream=True))
        turn = anyio.run(route.complete, [UserMessage(content="x")])
        assert turn.text == "ok"
        [stage] = route.plan.stages
        assert [(c.provider_id, c.provider_invocation_model) for c in stage.candidates] == [
            ("alpha", "a-model"), ("beta", "b-model")]
        assert route.models == {"alpha": primary, "beta": backup}


def test_a_shared_breaker_is_used_as_given() -> None:
    clock = Clock()
    breaker = create_circuit_breaker(now=clock)
    with ScriptedProviderServer() as srv:
        route = fallback_route(_adapter(srv, "a", "openai_chat"), _adapter(srv, "b", "openai_chat"),
                               breaker=breaker)
        srv.enqueue("a", error_reply(429, b'{"error":{"message":"later"}}', retry_after="3"))
        srv.enqueue("b", turn_reply("openai_chat", ANSWER, stream=True))
        anyio.run(route.complete, [UserMessage(content="x")])
    key = BreakerKey(provider_id="primary", invocation_model="a-model", credential_source="platform")
    assert breaker.state(key).not_before_ms == 3000.0


def test_bad_arguments_are_refused_by_name() -> None:
    with ScriptedProviderServer() as srv:
        a = _adapter(srv, "a", "openai_chat")
        with pytest.raises(UsageError, match="fallback 1 must be a ModelAdapter"):
            fallback_route(a, "gpt-4o")  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="appears twice"):
            fallback_route(a, a)
        with pytest.raises(UsageError, match="names must be a tuple of 2"):
            fallback_route(a, _adapter(srv, "b", "openai_chat"), names=("only",))
        with pytest.raises(UsageError, match="breaker must be a CircuitBreaker"):
            fallback_route(a, breaker="yes")
