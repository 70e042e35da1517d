"""The built-in model wrappers (``create_limit_middleware``, ``create_retry_middleware``) keep every
capability of the model they wrap, and a retry layer never sits on a model that retries itself."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from bindloop.agent import (
    augment_model,
    create_agent,
    equip_instruction,
    prompt_chat,
)
from bindloop.agent.limits import (
    create_limit_middleware,
    create_simple_limit_middleware,
)
from bindloop.agent.middleware import (
    ModelMiddleware,
    create_retry_middleware,
)
from bindloop.agent.limits import RateRule
from bindloop.completion import StreamEvent, TextEvent, collect_turn
from bindloop.contracts import Message, ModelTurnResult, TurnUsage
from bindloop.errors import UsageError
from bindloop.model import ModelRequest, StreamModel, turn_events
from harness.fixtures.provider_replies import render_sse
from bindloop.routing import (
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteStage,
    canonical_model_id,
    provider_id,
)
from bindloop.testing import final_answer
from bindloop.wire import (
    HttpRequest,
    ModelAdapter,
    ProviderHttpError,
    RetryPolicy,
    RoutedModel,
    WireOptions,
    create_wire_adapter,
)

from test_limits import FakeTime  # tests/agent is on sys.path (pytest prepend mode)

pytestmark = pytest.mark.anyio


def _busy() -> ProviderHttpError:
    return ProviderHttpError("busy", wire="openai_chat", category="server_error", status_code=503)


class WholeTurnModel:
    """A model with its own fold and a host's own extra; its ``stream`` must never be used."""

    provider = "acme"
    structured_output = "json_schema"
    region = "eu-west"  # a host's own metadata

    def __init__(self, script: Sequence[ModelTurnResult | BaseException | str]) -> None:
        self.id = "whole"
        self.script = list(script)
        self.calls = 0

    def price(self, usage: TurnUsage) -> int:
        return 5

    def stream(self, messages: Sequence[Message], request: ModelRequest,
               ) -> AsyncIterator[StreamEvent]:
        raise AssertionError("a model with its own fold is never streamed")

    async def complete(self, messages: Sequence[Message], request: ModelRequest,
                       on_event: Callable[[StreamEvent], None] | None = None,
                       on_reset: Callable[[], None] | None = None) -> ModelTurnResult:
        self.calls += 1
        item = self.script.pop(0)
        if isinstance(item, str):  # some text reaches the watcher, then the call fails
            if on_event is not None:
                on_event(TextEvent(content=item))
            raise _busy()
        if isinstance(item, BaseException):
            raise item
        events = turn_events(item)
        if on_event is not None:
            for event in events:
                on_event(event)
        return collect_turn(events, price=self.price)


class StreamOnly(StreamModel):
    id = "streamed"

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        for event in turn_events(final_answer("s")):
            yield event


WRAPPERS: dict[str, Callable[[FakeTime], ModelMiddleware]] = {
    "limit": lambda t: create_limit_middleware([RateRule(name="rpm", limit=10)], clock=t.clock,
                                               sleep=t.sleep),
    "retry": lambda t: create_retry_middleware(sleep=t.sleep),
}


@pytest.mark.parametrize("kind", sorted(WRAPPERS))
async def test_a_wrapper_keeps_id_provider_structured_output_price_and_extras(kind: str) -> None:
    inner = WholeTurnModel([])
    model: Any = augment_model(inner, [WRAPPERS[kind](FakeTime())])
    assert (model.id, model.provider, model.structured_output) == ("whole", "acme", "json_schema")
    assert model.price(TurnUsage()) == 5
    assert model.region == "eu-west"
    stacked: Any = augment_model(inner, [WRAPPERS["limit"](FakeTime()),
                                         WRAPPERS[kind](FakeTime())])
    assert stacked.region == "eu-west" and stacked.price(TurnUsage()) == 5


@pytest.mark.parametrize("kind", sorted(WRAPPERS))
async def test_a_wrapper_keeps_the_whole_turn_fold_and_adds_none(kind: str) -> None:
    """The agent calls the wrapped model's own ``complete`` (never its ``stream``), priced by
    it; over a stream-only model the wrapper's ``complete`` folds its own stream."""
    inner = WholeTurnModel([final_answer("hello", usage=TurnUsage(input_tokens=3)),
                            final_answer("again")])
    seen: list[StreamEvent] = []

    async def handler(_: None) -> Any:
        equip_instruction("hi")
        return await prompt_chat()

    model = augment_model(inner, [WRAPPERS[kind](FakeTime())])
    chat = await create_agent(id="w", handler=handler, model=model)(None)
    assert (chat.data, chat.stats.cost, inner.calls) == ("hello", 5, 1)
    turn = await model.complete([], ModelRequest(), seen.append)
    assert turn.text == "again" and seen and inner.calls == 2
    streamed = await augment_model(StreamOnly(), [WRAPPERS[kind](FakeTime())]).complete(
        [], ModelRequest())
    assert streamed.text == "s"


async def test_the_limit_charges_a_whole_turn_and_holds_its_slot() -> None:
    t = FakeTime()
    usage = TurnUsage(input_tokens=60, output_tokens=40)
    inner = WholeTurnModel([final_answer("x", usage=usage)] * 2)
    model: Any = augment_model(inner, [create_simple_limit_middleware(tpm=100, clock=t.clock,
                                                                      sleep=t.sleep)])
    await model.complete([], ModelRequest())
    await model.complete([], ModelRequest())  # the window is full: a minute's wait
    assert t.sleeps == [60.0]

    inside: list[int] = []

    class Counting(WholeTurnModel):
        async def complete(self, messages: Any, request: Any, on_event: Any = None,
                           on_reset: Any = None) -> Any:
            inside.append(1)
            assert len(inside) == 1, "two calls in flight under concurrency=1"
            await anyio.sleep(0.01)
            inside.pop()
            return final_answer("y")

    gated: Any = augment_model(Counting([]), [create_simple_limit_middleware(concurrency=1)])
    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(gated.complete, [], ModelRequest())


async def test_retry_retries_a_whole_turn_only_before_its_content_was_handed_on() -> None:
    t = FakeTime()
    inner = WholeTurnModel([_busy(), _busy(), final_answer("ok")])
    model: Any = augment_model(inner, [create_retry_middleware(sleep=t.sleep, backoff_ms=100)])
    seen: list[StreamEvent] = []
    turn = await model.complete([], ModelRequest(), seen.append)
    assert turn.text == "ok" and inner.calls == 3 and t.sleeps == [0.1, 0.2]

    half = WholeTurnModel(["partial ", final_answer("never")])
    model = augment_model(half, [create_retry_middleware(sleep=t.sleep)])
    with pytest.raises(ProviderHttpError):
        await model.complete([], ModelRequest())  # unwatched: the same rule
    assert half.calls == 1


# -- one retry layer per call -------------------------------------------------------------------

class _Body:
    status = 503
    headers: tuple[tuple[str, str], ...] = ()

    def __init__(self, status: int, chunks: list[bytes]) -> None:
        self.status, self._chunks = status, chunks

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for c in self._chunks:
            yield c


class CountingTransport:
    """Fails every request with a 503 until ``failures`` ran out, then answers."""

    def __init__(self, failures: int) -> None:
        self.failures, self.requests = failures, 0

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Body]:
        self.requests += 1
        if self.requests <= self.failures:
            yield _Body(503, [b'{"error": {"message": "busy"}}'])
        else:
            yield _Body(200, render_sse("openai_chat", final_answer("ok"), model="m"))


def _adapter(transport: CountingTransport, **kw: Any) -> ModelAdapter:
    return ModelAdapter(create_wire_adapter("openai_chat"), transport,
                        WireOptions(model="m", stream=True), sleep=FakeTime().sleep, **kw)


def _route(adapter: ModelAdapter) -> RoutedModel:
    mid = canonical_model_id("test/m")
    return RoutedModel(plan=RoutePlan(stages=(RouteStage(
        role="primary", model=mid, policy=OrderedPolicy(providers=(provider_id("p"),)),
        candidates=(RouteCandidate(provider_id=provider_id("p"), canonical_model_id=mid,
                                   provider_invocation_model="m",
                                   credential_source="platform"),)),)),
        models={"p": adapter})


@pytest.mark.parametrize("shape", ["adapter", "wrapped", "behind a limit"])
def test_retry_refuses_a_model_that_retries_itself(shape: str) -> None:
    adapter = _adapter(CountingTransport(0))  # retries by default: three calls in all
    model: Any = {"adapter": adapter, "wrapped": augment_model(adapter, []),
                  "behind a limit": augment_model(adapter, [create_simple_limit_middleware(
                      rpm=5)])}[shape]
    with pytest.raises(UsageError, match=r"already retries.*ModelAdapter\(retry=None\)"):
        augment_model(model, [create_retry_middleware()])


async def test_retry_over_a_route_adds_no_calls_to_the_routes_own_decisions() -> None:
    """A route calls each candidate once per attempt (its adapter's ``retry=`` unused there) and
    its failure is its final word, which the middleware does not call again."""
    from bindloop.routing import AttemptError

    transport = CountingTransport(failures=4)
    model: Any = augment_model(_route(_adapter(transport)),
                               [create_retry_middleware(max_attempts=3, sleep=FakeTime().sleep)])
    with pytest.raises(AttemptError):
        await model.complete([], ModelRequest())
    assert transport.requests == 1


async def test_retry_over_an_adapter_that_does_not_retry_calls_as_often_as_asked() -> None:
    """The adapter's own retry alone, or the middleware alone: never both (no 3 x 3)."""
    own = CountingTransport(failures=2)
    turn = await _adapter(own).complete([])
    assert turn.text == "ok" and own.requests == 3

    layered = CountingTransport(failures=2)
    t = FakeTime()
    model: Any = augment_model(_adapter(layered, retry=None),
                               [create_retry_middleware(max_attempts=3, sleep=t.sleep)])
    turn = await model.complete([], ModelRequest())
    assert turn.text == "ok" and layered.requests == 3

    failing = CountingTransport(failures=10)
    model = augment_model(_adapter(failing, retry=RetryPolicy(max_attempts=1)),
                          [create_retry_middleware(max_attempts=3, sleep=t.sleep)])
    with pytest.raises(ProviderHttpError):
        await model.complete([], ModelRequest())
    assert failing.requests == 3
