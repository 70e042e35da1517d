"""bindloop.model: one Model protocol. The fold of a stream gives the turn back, priced once; the
loop's port over a model passes the loop's tools; the wire's models are Models as they are, and a
consumed call streams whatever ``WireOptions.stream`` says (a stream listener never gets the whole
answer as one chunk, under the agent too)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindloop.agent import create_agent, equip_instruction, on_stream, prompt_chat
from bindloop.completion import StreamEvent, TextEvent
from bindloop.contracts import (
    Message,
    ModelTurnResult,
    ToolDefinition,
    ToolResult,
    TurnUsage,
    UserMessage,
)
from bindloop.errors import UsageError
from harness.fixtures.provider_replies import render_body, render_sse
from bindloop.model import (
    ForcedTool,
    JsonSchemaFormat,
    Model,
    ModelRequest,
    StreamModel,
    fold_events,
    turn_events,
    unpriced,
)
from bindloop.routing import (
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteStage,
    canonical_model_id,
    provider_id,
)
from bindloop.loop import ToolLoopParams, ToolRunner, run_tool_loop
from bindloop.testing import (
    final_answer,
    fresh_state,
    function_model,
    scripted_model,
    scripted_stream_model,
    tool_call,
    tool_call_turn,
)
from bindloop.testing.strategies import model_turns
from bindloop.wire import HttpRequest, ModelAdapter, RoutedModel, WireOptions, create_wire_adapter


def _price(usage: TurnUsage) -> int:
    return usage.input_tokens + 3 * usage.output_tokens


class _Script(StreamModel):
    id = "script"

    def __init__(self, turn: ModelTurnResult) -> None:
        self.turn = turn

    def price(self, usage: TurnUsage, /) -> int:
        return _price(usage)

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        for event in turn_events(self.turn):
            yield event


@given(model_turns())
def test_a_stream_models_own_fold_is_the_turn_priced_once(turn: ModelTurnResult) -> None:
    seen: list[StreamEvent] = []
    model: Model = _Script(turn)
    folded = anyio.run(model.complete, [UserMessage(content="x")], ModelRequest(), seen.append)
    assert seen == turn_events(turn)  # the observer saw every event the fold folded, in order
    # An empty text is no text; a turn without a finish reason ended with "stop".
    assert folded == msgspec.structs.replace(turn, cost=_price(turn.usage), text=turn.text or None,
                                             finish_reason=turn.finish_reason or "stop")
    again = anyio.run(fold_events, _Script(turn).stream([], ModelRequest()), _price)
    assert again == folded


def test_the_loop_asks_its_model_with_the_runners_tools_and_the_shared_request() -> None:
    seen: list[ModelRequest] = []

    async def respond(messages: Sequence[Message], request: ModelRequest) -> ModelTurnResult:
        seen.append(request)
        return tool_call_turn([tool_call("add", id="c1")]) if len(seen) == 1 else final_answer("ok")

    shared = ModelRequest(additional_options={"temperature": 0.5})
    tools = [ToolDefinition(name="add")]
    offered = [tools, []]
    result = anyio.run(run_tool_loop, ToolLoopParams(
        model=function_model(respond), request=shared, state=fresh_state(), max_iterations=3,
        runner=ToolRunner(run_tool_call=lambda call: ToolResult(content="2"),
                          build_tools=lambda: offered.pop(0))))
    assert result.stop_reason == "done" and result.final_turn is not None
    assert seen[0] == ModelRequest(tools=tuple(tools), additional_options={"temperature": 0.5})
    assert seen[1] is shared  # no tools offered: the shared request as it is
    with pytest.raises(UsageError, match="carries no tools"):
        anyio.run(run_tool_loop, ToolLoopParams(
            model=function_model(respond), request=ModelRequest(tools=tuple(tools)),
            state=fresh_state(), max_iterations=3,
            runner=ToolRunner(run_tool_call=lambda call: ToolResult(content="2"))))


def test_a_scripted_model_is_a_model() -> None:
    script = scripted_model([final_answer("a"), final_answer("b")])
    seen: list[StreamEvent] = []
    first = anyio.run(script.complete, [UserMessage(content="x")],
                      ModelRequest(tools=(ToolDefinition(name="t"),)), seen.append)
    second = anyio.run(script.complete, [UserMessage(content="x")], ModelRequest())
    assert (first.text, second.text) == ("a", "b")
    assert seen == turn_events(final_answer("a"))
    assert script.calls == [(1, ("t",)), (1, ())]


# -- the wire's models ---------------------------------------------------------------------------

class _Body:
    status = 200
    headers: tuple[tuple[str, str], ...] = ()

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self._chunks = chunks

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            await anyio.lowlevel.checkpoint()
            yield chunk


class _Provider:
    """Answers each request as the provider would: SSE when it asked to stream, else JSON."""

    def __init__(self, turn: ModelTurnResult) -> None:
        self.turn = turn
        self.requests: list[HttpRequest] = []

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Body]:
        self.requests.append(request)
        if request.stream:
            yield _Body(render_sse("openai_chat", self.turn, model="m"))
        else:
            yield _Body([render_body("openai_chat", self.turn, model="m")])


ANSWER = ModelTurnResult(text="It is sunny in Lisbon today.", finish_reason="stop",
                         usage=TurnUsage(input_tokens=5, output_tokens=7))


def _adapter(provider: _Provider, **options: Any) -> ModelAdapter:
    return ModelAdapter(create_wire_adapter("openai_chat"), provider,
                        WireOptions(model="m", stream=False), price=_price, **options)


@pytest.mark.anyio
async def test_a_consumed_call_streams_even_when_the_options_say_not_to() -> None:
    provider = _Provider(ANSWER)
    model = _adapter(provider)
    plain = await model.complete([UserMessage(content="x")])
    seen: list[StreamEvent] = []
    watched = await model.complete([UserMessage(content="x")], ModelRequest(), seen.append)
    own_sink = await _adapter(provider, on_event=seen.append).complete([UserMessage(content="x")])
    assert [r.stream for r in provider.requests] == [False, True, True]
    assert [msgspec.json.decode(r.body).get("stream", False) for r in provider.requests] == [
        False, True, True]
    assert plain == watched == own_sink and plain.cost == _price(ANSWER.usage)
    assert len([e for e in seen if isinstance(e, TextEvent)]) > 2  # deltas, not one chunk each


@pytest.mark.anyio
async def test_an_on_stream_consumer_gets_the_deltas_of_a_non_streaming_adapter() -> None:
    """The issue's case: ``WireOptions(stream=False)`` (the default) and an agent stream listener:
    the wire call streams, and the listener sees the answer as it is generated."""
    texts: list[str] = []

    async def show(events: Any) -> None:
        async for envelope in events:
            if isinstance(envelope.event, TextEvent):
                texts.append(envelope.event.content)

    async def handler(_: None) -> str:
        equip_instruction("weather?")
        on_stream(show)
        return (await prompt_chat()).data

    provider = _Provider(ANSWER)
    answer = await create_agent(id="w", handler=handler, model=_adapter(provider))(None)
    assert answer == ANSWER.text and provider.requests[0].stream
    assert len(texts) > 1 and "".join(texts) == ANSWER.text


def test_a_request_applies_on_top_of_the_adapters_options() -> None:
    model = _adapter(_Provider(ANSWER))
    assert model.wire_options(ModelRequest()) is model.options
    options = model.wire_options(ModelRequest(
        schema={"type": "object"}, schema_name="Point", tool_choice=ForcedTool(name="f"),
        additional_options={"temperature": 0.25, "tool_choice": "none"}))
    assert options.response_format == JsonSchemaFormat(name="Point", schema={"type": "object"})
    assert options.tool_choice == ForcedTool(name="f")  # the request's choice wins
    assert options.temperature == 0.25 and options.model == "m"
    with pytest.raises(UsageError, match="does not have"):
        model.wire_options(ModelRequest(additional_options={"temprature": 1}))
    with pytest.raises(UsageError, match="mapping"):
        model.wire_options(ModelRequest(additional_options=["temperature"]))  # type: ignore[arg-type]


def test_a_route_declares_its_capabilities_and_prices_by_its_primary() -> None:
    mid = canonical_model_id("test/m")
    names = ("a", "b")
    plan = RoutePlan(stages=(RouteStage(
        role="primary", model=mid, policy=OrderedPolicy(providers=tuple(map(provider_id, names))),
        candidates=tuple(RouteCandidate(provider_id=provider_id(n), canonical_model_id=mid,
                                        provider_invocation_model="m",
                                        credential_source="platform") for n in names)),))
    primary = _adapter(_Provider(ANSWER))
    backup = ModelAdapter(create_wire_adapter("openai_chat"), _Provider(ANSWER),
                          WireOptions(model="m"), price=lambda u: 1000)
    route: Model = RoutedModel(plan=plan, models={"a": primary, "b": backup})
    assert (route.id, route.provider, route.structured_output) == ("routed", None, "json_schema")
    assert route.price(ANSWER.usage) == _price(ANSWER.usage)
    only_backup = RoutedModel(plan=plan, models={"b": backup}, id="r", provider="acme")
    assert (only_backup.id, only_backup.provider, only_backup.structured_output) == (
        "r", "acme", "tool")  # a candidate without a ModelAdapter: the forced output tool
    assert only_backup.price(ANSWER.usage) == 1000


@given(st.sampled_from(["json_schema", "tool"]))
def test_function_models_declare_what_they_are_given(mode: Any) -> None:
    async def respond(messages: Sequence[Message], request: ModelRequest) -> Any:
        return "not a turn"

    model = function_model(respond, id="f", structured_output=mode)
    assert (model.id, model.structured_output, model.price(TurnUsage())) == ("f", mode, 0)
    with pytest.raises(UsageError, match="not a ModelTurnResult"):
        anyio.run(model.complete, [], ModelRequest())


class _Turns(StreamModel):
    """A StreamModel over a script of turns (one per call)."""

    id = "turns"

    def __init__(self, turns: Sequence[ModelTurnResult]) -> None:
        self.turns = list(turns)

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        for event in turn_events(self.turns.pop(0)):
            yield event


class _PricedTurns(_Turns):
    def price(self, usage: TurnUsage, /) -> int:
        return _price(usage)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", [_Turns, _PricedTurns])
async def test_a_stream_model_runs_the_same_watched_or_not(kind: type[_Turns]) -> None:
    """Unwatched, a StreamModel that charges nothing is folded by the agent with no extra frame;
    watched or priced it goes through its complete: the chat, its stats and its cost agree."""
    from bindloop.testing import tool_call, tool_call_turn

    def script() -> list[ModelTurnResult]:
        return [tool_call_turn([tool_call("echo", {"text": "hi"}, id="c1")],
                               usage=TurnUsage(input_tokens=3, output_tokens=2)),
                final_answer("done", usage=TurnUsage(input_tokens=5, output_tokens=1))]

    from bindloop.agent import equip_tool
    from bindloop.contracts import ToolResult
    from bindloop.tools import define_tool

    class Echo(msgspec.Struct):
        text: str

    async def echo(args: Echo, ctx: object) -> ToolResult:
        return ToolResult(content=args.text)

    tool = define_tool(name="echo", description="Echo.", args=Echo, execute=echo)

    async def run(watched: bool) -> Any:
        async def drain(events: Any) -> None:
            async for _ in events:
                pass

        async def handler(_: None) -> Any:
            equip_instruction("go")
            equip_tool(tool)
            if watched:
                on_stream(drain)
            return await prompt_chat()

        return await create_agent(id="a", handler=handler, model=kind(script()))(None)

    plain, watched = await run(False), await run(True)
    assert (plain.data, plain.stop_reason) == (watched.data, watched.stop_reason) == ("done",
                                                                                      "done")
    assert plain.stats.cost == watched.stats.cost == (
        sum(_price(t.usage) for t in script()) if kind is _PricedTurns else 0)
    assert (plain.stats.input_tokens, plain.stats.output_tokens) == (8, 3)


def test_a_stream_models_price_is_asked_only_when_it_has_one() -> None:
    class Plain(StreamModel):
        def __init__(self, turn: ModelTurnResult) -> None:
            self.turn = turn

        async def stream(self, messages: Sequence[Message],
                         request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
            for event in turn_events(self.turn):
                yield event

    class Priced(Plain):
        def price(self, usage: TurnUsage, /) -> int:
            return _price(usage)

    turn = ModelTurnResult(text="hi", usage=TurnUsage(input_tokens=2, output_tokens=1))
    plain, priced, instance = Plain(turn), Priced(turn), Plain(turn)
    instance.price = _price  # type: ignore[method-assign]
    assert unpriced(plain) and not unpriced(priced) and not unpriced(instance)
    for model, cost in ((plain, 0), (priced, 5), (instance, 5)):
        assert anyio.run(model.complete, [], ModelRequest()).cost == cost


def test_the_scripted_stream_model_is_a_stream_model_priced_only_when_asked() -> None:
    turns = [final_answer("a long enough answer", usage=TurnUsage(input_tokens=2,
                                                                   output_tokens=1))]
    free, paid = scripted_stream_model(turns), scripted_stream_model(turns, price=_price)
    assert isinstance(free, StreamModel) and unpriced(free) and not unpriced(paid)
    seen: list[StreamEvent] = []
    assert anyio.run(free.complete, [], ModelRequest(), seen.append).cost == 0
    assert anyio.run(paid.complete, [], ModelRequest()).cost == 5
    assert [e.content for e in seen if isinstance(e, TextEvent)] == ["a long e", "nough an",
                                                                     "swer"]


async def _read_async(stream: Any) -> list[StreamEvent]:
    return [event async for event in stream]


@given(turn=model_turns(), chunk=st.integers(1, 9), priced_=st.booleans())
def test_a_stream_at_hand_folds_as_the_same_stream_awaited(turn: ModelTurnResult, chunk: int,
                                                           priced_: bool) -> None:
    """The scripted stream model's stream is at hand: ``fold_events`` reads it without awaiting
    each event. The fold, and what ``on_event`` sees, are those of the same events read as an
    async iterator and folded from an async generator."""
    def model() -> Any:
        return scripted_stream_model([turn], chunk_size=chunk)

    price = _price if priced_ else None
    seen: list[StreamEvent] = []
    at_hand = anyio.run(fold_events, model().stream([], ModelRequest()), price, seen.append)
    events = anyio.run(_read_async, model().stream([], ModelRequest()))
    assert seen == events

    async def generated() -> AsyncIterator[StreamEvent]:
        for event in events:
            yield event

    assert at_hand == anyio.run(fold_events, generated(), price)


def test_a_stream_at_hand_that_fails_is_closed_and_raises_as_itself() -> None:
    class Boom(Exception):
        pass

    closed: list[str] = []

    def events() -> Iterator[StreamEvent]:
        try:
            yield TextEvent(content="a")
            raise Boom("the stream broke")
        finally:
            closed.append("closed")

    class AtHand:
        def __init__(self) -> None:
            self.events = events()

        def __iter__(self) -> Iterator[StreamEvent]:
            return self.events

        def __aiter__(self) -> Any:
            return self

        async def aclose(self) -> None:
            closed.append("aclose")
            self.events.close()

    seen: list[StreamEvent] = []
    with pytest.raises(Boom, match="the stream broke"):
        anyio.run(fold_events, AtHand(), None, seen.append)
    assert seen == [TextEvent(content="a")] and closed == ["closed", "aclose"]
    # A scripted failure is raised by the call itself, whichever way the stream is read.
    failing = scripted_stream_model([Boom("scripted")])
    with pytest.raises(Boom, match="scripted"):
        anyio.run(fold_events, failing.stream([], ModelRequest()), None)
    failing = scripted_stream_model([Boom("scripted")])
    with pytest.raises(Boom, match="scripted"):
        anyio.run(_read_async, failing.stream([], ModelRequest()))


_SHOWN = st.lists(st.sampled_from(["grow", "same", "replace", "shrink", "copy", "tuple",
                                   "mutate_after"]), min_size=1, max_size=12)


@given(steps=_SHOWN, data=st.data())
def test_the_scripted_stream_models_requests_are_what_each_call_was_shown(
        steps: list[str], data: st.DataObject) -> None:
    """Each recorded request holds the messages its call was shown, as a tuple, whatever the
    caller did with its list between calls and after: grew it (as the loop does), sent it
    again, replaced a message in place (a compaction), cut it short, passed a copy or a tuple,
    or changed it after the last call; ``requests`` read between calls is the same list, holding
    the calls made so far."""
    from bindloop.testing import StreamRequest

    pool = [UserMessage(content=f"m{i}") for i in range(8)]
    model = scripted_stream_model([final_answer("ok") for _ in steps])
    live: list[Message] = [pool[0]]
    shown: list[tuple[Message, ...]] = []

    async def call(messages: Sequence[Message]) -> None:
        async for _ in model.stream(messages, ModelRequest()):
            pass

    for step in steps:
        pick = data.draw(st.sampled_from(pool))
        if step == "grow":
            live.extend([pick] * data.draw(st.integers(1, 3)))
        elif step == "replace":
            live[data.draw(st.integers(0, len(live) - 1))] = pick
        elif step == "shrink" and len(live) > 1:
            del live[data.draw(st.integers(1, len(live) - 1)):]
        sent: Sequence[Message] = live
        if step == "copy":
            sent = list(live)
        elif step == "tuple":
            sent = tuple(live)
        shown.append(tuple(sent))
        anyio.run(call, sent)
        if step == "mutate_after":
            live[0] = UserMessage(content="changed afterwards")
        if data.draw(st.booleans()):  # read between calls: the same list, the calls so far
            read = model.requests
            assert read is model.requests and [r.messages for r in read] == shown
    assert [r.messages for r in model.requests] == shown
    assert all(type(r.messages) is tuple for r in model.requests)
    first = model.requests[0]
    assert first == StreamRequest(messages=shown[0], request=ModelRequest())
    assert repr(first).startswith("StreamRequest(messages=(")


def test_tool_call_turn_refuses_a_bare_call_with_a_usage_error() -> None:
    """One call where a list is expected (a common slip) is refused at the builder, by name."""
    from bindloop.errors import UsageError
    from bindloop.testing import tool_call, tool_call_turn

    with pytest.raises(UsageError, match=r"takes a list of tool calls.*got ToolCall"):
        tool_call_turn(tool_call("echo", {"text": "hi"}))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="holding something else"):
        tool_call_turn([{"name": "echo"}])  # type: ignore[list-item]
    assert tool_call_turn([tool_call("echo", id="c1")]).tool_calls[0].name == "echo"
