"""ModelAdapter's own retries over loopback HTTP: a transient failure before any output is called
again (the provider's Retry-After, else backoff, through the injected sleep), output already shown
is never spliced, retry=None is one call, a routed attempt is one call; RetryPolicy's bounds as a
Hypothesis property."""

from __future__ import annotations

import anyio
import pytest
from hypothesis import given, strategies as st

from bindloop.completion import TextEvent
from bindloop.contracts import ModelTurnResult, TurnUsage, UserMessage
from bindloop.errors import UsageError
from bindloop.wire import (
    ProviderHttpError,
    ModelAdapter,
    RetryPolicy,
    TransportError,
    WireOptions,
    create_wire_adapter,
    fallback_route,
    is_retryable,
)

httpx = pytest.importorskip("httpx")
from bindloop.hosts.transports.httpx import HttpxTransport  # noqa: E402
from harness.fixtures.scripted_server import ScriptedProviderServer, error_reply, turn_reply  # noqa: E402

ANSWER = ModelTurnResult(text="fine", usage=TurnUsage(input_tokens=2, output_tokens=1),
                         finish_reason="stop")
BUSY = b'{"error":{"message":"busy","type":"server_error"}}'


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def _model(srv: ScriptedProviderServer, prefix: str, *, stream: bool = True,
           **kw: object) -> ModelAdapter:
    return ModelAdapter(create_wire_adapter("openai_chat"), HttpxTransport(srv.base_url(prefix)),
                        WireOptions(model="m", stream=stream), **kw)  # type: ignore[arg-type]


def _complete(model: ModelAdapter, **kw: object) -> ModelTurnResult:
    async def run() -> ModelTurnResult:
        with anyio.fail_after(10):
            return await model.complete([UserMessage(content="x")], **kw)  # type: ignore[arg-type]
    return anyio.run(run)


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
def test_a_502_then_an_answer_is_one_successful_call(stream: bool) -> None:
    sleeps = Sleeps()
    with ScriptedProviderServer() as srv:
        srv.enqueue("p", error_reply(502, BUSY), error_reply(503, BUSY),
                    turn_reply("openai_chat", ANSWER, stream=stream))
        turn = _complete(_model(srv, "p", stream=stream, sleep=sleeps))
        assert turn.text == "fine" and len(srv.requests) == 3
    assert sleeps.calls == [0.5, 1.0]  # 500 ms backoff, doubled; no jitter by default


def test_the_providers_retry_after_is_the_wait() -> None:
    sleeps = Sleeps()
    with ScriptedProviderServer() as srv:
        srv.enqueue("p", error_reply(429, BUSY, retry_after="2"),
                    turn_reply("openai_chat", ANSWER, stream=True))
        assert _complete(_model(srv, "p", sleep=sleeps)).text == "fine"
    assert sleeps.calls == [2.0]


def test_a_retry_after_past_the_policy_is_not_waited_on() -> None:
    sleeps = Sleeps()
    with ScriptedProviderServer() as srv:
        srv.enqueue("p", error_reply(429, BUSY, retry_after="120"),
                    turn_reply("openai_chat", ANSWER, stream=True))
        with pytest.raises(ProviderHttpError, match="429"):
            _complete(_model(srv, "p", sleep=sleeps, retry=RetryPolicy(max_delay_ms=10_000)))
        assert len(srv.requests) == 1
    assert sleeps.calls == []


def test_retry_none_is_one_call_and_permanent_errors_are_never_retried() -> None:
    with ScriptedProviderServer() as srv:
        srv.enqueue("p", error_reply(502, BUSY))
        with pytest.raises(ProviderHttpError, match="502"):
            _complete(_model(srv, "p", retry=None))
        srv.enqueue("q", error_reply(401, b'{"error":{"message":"no","type":"invalid_api_key"}}'),
                    turn_reply("openai_chat", ANSWER, stream=True))
        with pytest.raises(ProviderHttpError, match="401"):
            _complete(_model(srv, "q", sleep=Sleeps()))
        assert [r.path.split("/")[1] for r in srv.requests] == ["p", "q"]


def test_attempts_are_bounded() -> None:
    sleeps = Sleeps()
    with ScriptedProviderServer() as srv:
        srv.enqueue("p", *[error_reply(503, BUSY)] * 5)
        with pytest.raises(ProviderHttpError, match="503"):
            _complete(_model(srv, "p", sleep=sleeps, retry=RetryPolicy(max_attempts=4,
                                                                        backoff_ms=10)))
        assert len(srv.requests) == 4
    assert sleeps.calls == [0.01, 0.02, 0.04]


def test_output_a_sink_saw_is_never_spliced_with_a_retry() -> None:
    seen: list[str] = []
    with ScriptedProviderServer() as srv:
        srv.enqueue("p", turn_reply("openai_chat", ANSWER, stream=True, drop_after=2),
                    turn_reply("openai_chat", ANSWER, stream=True))
        model = _model(srv, "p", sleep=Sleeps(),
                       on_event=lambda e: seen.append(e.content) if isinstance(e, TextEvent)
                       else None)
        with pytest.raises(TransportError):
            _complete(model)
        shown = "".join(seen)
        assert len(srv.requests) == 1 and shown and "fine".startswith(shown)


def test_with_no_sink_a_drop_mid_answer_is_retried() -> None:
    # Nobody saw the partial answer: calling again cannot splice two answers for anyone.
    with ScriptedProviderServer() as srv:
        srv.enqueue("p", turn_reply("openai_chat", ANSWER, stream=True, drop_after=2),
                    turn_reply("openai_chat", ANSWER, stream=True))
        assert _complete(_model(srv, "p", sleep=Sleeps())).text == "fine"
        assert len(srv.requests) == 2


def test_stream_retries_before_the_first_token_only() -> None:
    async def drain(model: ModelAdapter) -> str:
        text = ""
        with anyio.fail_after(10):
            async for event in model.stream([UserMessage(content="x")]):
                if isinstance(event, TextEvent):
                    text += event.content
        return text

    with ScriptedProviderServer() as srv:
        srv.enqueue("p", error_reply(503, BUSY), turn_reply("openai_chat", ANSWER, stream=True))
        assert anyio.run(drain, _model(srv, "p", sleep=Sleeps())) == "fine"
        srv.enqueue("q", turn_reply("openai_chat", ANSWER, stream=True, drop_after=2),
                    turn_reply("openai_chat", ANSWER, stream=True))
        with pytest.raises(TransportError):
            anyio.run(drain, _model(srv, "q", sleep=Sleeps()))
        assert [r.path.split("/")[1] for r in srv.requests] == ["p", "p", "q"]


def test_a_routed_attempt_is_one_call_the_route_falls_back() -> None:
    sleeps = Sleeps()
    with ScriptedProviderServer() as srv:
        srv.enqueue("a", error_reply(503, BUSY), turn_reply("openai_chat", ANSWER, stream=True))
        srv.enqueue("b", turn_reply("openai_chat", ANSWER, stream=True))
        route = fallback_route(_model(srv, "a", sleep=sleeps), _model(srv, "b", sleep=sleeps),
                               breaker=None)
        assert anyio.run(route.complete, [UserMessage(content="x")]).text == "fine"
        assert [r.path.split("/")[1] for r in srv.requests] == ["a", "b"]
    assert sleeps.calls == []


def test_bad_policies_are_refused_by_name() -> None:
    for bad in ({"max_attempts": 0}, {"max_attempts": True}, {"backoff_ms": -1},
                {"max_delay_ms": float("nan")}):
        with pytest.raises(UsageError, match="RetryPolicy"):
            RetryPolicy(**bad)  # type: ignore[arg-type]
    with ScriptedProviderServer() as srv, pytest.raises(UsageError, match="retry must be"):
        _model(srv, "p", retry=3)


_errors = st.one_of(
    st.builds(lambda s, ra: ProviderHttpError("x", wire="w", category=c, status_code=s,
                                              retry_after_ms=ra)
              if (c := {429: "rate_limited", 401: "auth", 400: "invalid_request"}.get(
                  s, "server_error")) else None,
              st.sampled_from([400, 401, 429, 500, 502, 503]),
              st.one_of(st.none(), st.floats(0, 200_000))),
    st.sampled_from([TransportError("reset"), TransportError("slow", kind="timeout"),
                     ValueError("bug")]))


@given(attempt=st.integers(1, 10), error=_errors, jitter=st.floats(0, 1, exclude_max=True),
       max_attempts=st.integers(1, 6), backoff=st.floats(0, 5_000), cap=st.floats(0, 60_000))
def test_property_a_delay_is_bounded_and_only_for_retryable_errors(
        attempt: int, error: Exception, jitter: float, max_attempts: int, backoff: float,
        cap: float) -> None:
    policy = RetryPolicy(max_attempts=max_attempts, backoff_ms=backoff, max_delay_ms=cap)
    delay = policy.delay_ms(attempt, error, lambda: jitter)
    if attempt >= max_attempts or not is_retryable(error):
        assert delay is None
        return
    hinted = getattr(error, "retry_after_ms", None)
    if hinted is not None:
        assert delay == (hinted if hinted <= cap else None)  # never earlier than asked
    else:
        assert delay is not None and 0 <= delay <= cap
