"""One path per job: every way of watching a prompt (nobody, ``on_stream``, a trace, snapshots)
sees the same turn, priced once by the model's own fold."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel

from bindloop.agent import create_agent, equip_instruction, on_stream, prompt_chat, run_with
from bindloop.wire import HttpRequest, ModelAdapter, WireOptions, create_wire_adapter


def _sse(text: str) -> list[bytes]:
    def chunk(body: dict[str, Any]) -> bytes:
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    base = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    return [chunk({**base, "choices": [{"index": 0, "delta": {"content": part},
                                        "finish_reason": None}]}) for part in text.split(" ")] + [
        chunk({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}),
        b"data: [DONE]\n\n"]


class _Body:
    status = 200
    headers: tuple[tuple[str, str], ...] = ()

    def __init__(self, chunks: Sequence[bytes]) -> None:
        self._chunks = chunks

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        for c in self._chunks:
            await anyio.lowlevel.checkpoint()
            yield c


class ScriptedTransport:
    """Answers every request with the same streamed Chat Completions reply."""

    def __init__(self, text: str) -> None:
        self.chunks = _sse(text)
        self.requests = 0

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Body]:
        self.requests += 1
        yield _Body(self.chunks)


def _priced_adapter() -> ModelAdapter:
    return ModelAdapter(create_wire_adapter("openai_chat"), ScriptedTransport("hello there"),
                        WireOptions(model="m", stream=True), price=lambda usage: 7)


async def _chat(watch: bool) -> Any:
    seen: list[object] = []

    async def consume(events: AsyncIterator[object]) -> None:
        async for event in events:
            seen.append(event)

    async def handler(_: None) -> Any:
        equip_instruction("hi")
        if watch:
            on_stream(consume)
        return await prompt_chat()

    chat = await run_with(create_agent(id="a", handler=handler), initial_props=None,
                          model=_priced_adapter())
    return chat, seen


def test_cost_is_the_models_price_watched_or_not() -> None:
    plain, _ = anyio.run(_chat, False)
    watched, events = anyio.run(_chat, True)
    assert events  # the consumer did see the stream
    assert plain.data == watched.data == "hellothere"
    assert plain.stats.cost == 7
    assert watched.stats.cost == 7


# -- the same scripted run through every path --------------------------------------------------

import msgspec  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from bindloop.agent import (
    equip_tool,
    expect_validator,
)
from bindloop.agent.events import (
    CheckpointSavedEvent,
    ToolFinishedEvent,
    ToolStartedEvent,
    TurnDoneEvent,
    TurnStartEvent,
)
from bindloop.agent.snapshots import dump_snapshot
from bindloop.completion import StreamEvent  # noqa: E402
from bindloop.model import ModelRequest, StreamModel, turn_events  # noqa: E402
from bindloop.contracts import (  # noqa: E402
    AssistantMessage,
    Message,
    ModelTurnResult,
    ProviderItemPart,
    RunStats,
    ToolCall,
    ToolResult,
    TurnUsage,
)
from harness.fixtures.provider_replies import render_sse  # noqa: E402
from bindloop.tools import define_tool  # noqa: E402
from bindloop.routing import (  # noqa: E402
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteStage,
    canonical_model_id,
    provider_id,
)
from bindloop.testing import scripted_stream_model  # noqa: E402
from bindloop.wire import RoutedModel  # noqa: E402


def _price(usage: TurnUsage) -> int:
    return usage.input_tokens + 3 * usage.output_tokens


class AddArgs(msgspec.Struct):
    a: int
    b: int


async def _add(args: AddArgs, ctx: object) -> ToolResult:
    return ToolResult(content=str(args.a + args.b))


ADD = define_tool(name="add", description="Add two integers.", args=AddArgs, execute=_add)


def _wire_of(turns: list[ModelTurnResult]) -> str:
    # Provider items exist on the Responses wire only: a script that carries them goes through it.
    return "openai_responses" if any(t.provider_items for t in turns) else "openai_chat"


class _ReplayTransport:
    """Serves the next scripted turn as a streamed reply of ``wire`` per request."""

    def __init__(self, turns: list[ModelTurnResult]) -> None:
        self.turns = turns
        self.position = 0
        self.wire = _wire_of(turns)

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Body]:
        turn = self.turns[self.position]
        self.position += 1
        yield _Body(render_sse(self.wire, turn, model="m"))


class _WholeTurnModel(StreamModel):
    """A model with its own fold: complete hands each event to on_event and prices the turn."""

    structured_output = "json_schema"

    def __init__(self, turns: list[ModelTurnResult]) -> None:
        self.id, self.turns, self.position = "whole", turns, 0

    def stream(self, messages: Sequence[Message], request: ModelRequest, /,
               ) -> AsyncIterator[StreamEvent]:
        raise AssertionError("a model with its own complete is never streamed")

    async def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                       on_event: Any = None, on_reset: Any = None) -> ModelTurnResult:
        from bindloop.completion import collect_turn

        turn = self.turns[self.position]
        self.position += 1
        events = turn_events(turn)
        if on_event is not None:
            for event in events:
                on_event(event)
        return collect_turn(events, price=_price)


def _routed(turns: list[ModelTurnResult]) -> RoutedModel:
    mid = canonical_model_id("test/m")
    plan = RoutePlan(stages=(RouteStage(
        role="primary", model=mid, policy=OrderedPolicy(providers=(provider_id("p"),)),
        candidates=(RouteCandidate(provider_id=provider_id("p"), canonical_model_id=mid,
                                   provider_invocation_model="m",
                                   credential_source="platform"),)),))
    adapter = ModelAdapter(create_wire_adapter(_wire_of(turns)),
                           _ReplayTransport(turns), WireOptions(model="m", stream=True),
                           price=_price)
    return RoutedModel(plan=plan, models={"p": adapter})


def _item(r: int) -> ProviderItemPart:
    """A Responses item the canonical turn does not model, as the wire keeps it (compact JSON)."""
    data = {"type": "tool_search_call", "id": f"ts_{r}", "status": "completed",
            "arguments": {"query": f"round {r}"}}
    return ProviderItemPart(wire="openai_responses", kind="tool_search_call", id=f"ts_{r}",
                            data=json.dumps(data, separators=(",", ":")))


def _script(tool_rounds: list[list[tuple[int, int]]], answers: list[str],
            usage: list[tuple[int, int]], items: bool = False) -> list[ModelTurnResult]:
    turns: list[ModelTurnResult] = []
    k = 0
    for r, calls in enumerate(tool_rounds):
        turns.append(ModelTurnResult(
            tool_calls=tuple(ToolCall(id=f"call_{r}_{i}", name="add",
                                      arguments=msgspec.json.encode({"a": a, "b": b}).decode())
                             for i, (a, b) in enumerate(calls)),
            provider_items=(_item(r),) if items else (),
            finish_reason="tool_calls"))
    turns += [ModelTurnResult(text=t, finish_reason="stop") for t in answers]
    out = []
    for k, turn in enumerate(turns):
        i, o = usage[k % len(usage)]
        out.append(msgspec.structs.replace(turn, usage=TurnUsage(input_tokens=i, output_tokens=o)))
    return out


def _comparable(stats: RunStats) -> RunStats:
    # Everything but measured milliseconds.
    return msgspec.structs.replace(stats, model_ms=0.0, tool_ms=0.0, tools={
        name: msgspec.structs.replace(t, ms=0.0) for name, t in stats.tools.items()})


async def _through(path: str, turns: list[ModelTurnResult], refused: int,
                   seen: list[tuple[int, object]]) -> Any:
    """One run of the script through ``path`` (a model kind, `` watched`` for an ``on_stream``
    consumer); ``seen`` gets the agent's own events (the completion deltas differ in granularity
    from one model kind to another, what they add up to does not)."""
    refusals = [0]
    watched = path.endswith(" watched")
    path = path.removesuffix(" watched")

    def validator(text: str) -> object:
        if refusals[0] < refused:
            refusals[0] += 1
            return f"answer {text!r} refused"
        return True

    async def consume(events: AsyncIterator[Any]) -> None:
        async for e in events:
            if type(e.event).__module__.startswith("bindloop.agent"):
                seen.append((e.turn_index, e.event))

    gated = path == "approved"

    async def handler(_: None) -> Any:
        equip_instruction("add things")
        equip_tool(ADD, needs_approval=gated)
        expect_validator(validator)
        if watched:
            on_stream(consume)
        saves: list[object] = []
        return await prompt_chat(max_turn_steps=8, on_checkpoint=saves.append
                                 if path in ("saved", "approved") else None)

    agent = create_agent(id="p", handler=handler, max_retries=3)
    if gated:
        return await _approved_every_time(agent, validator, turns)

    class Bus:
        def emit(self, event: object) -> None:
            pass

    if path == "replayed":
        async def root() -> Any:
            return await agent(None), dump_snapshot()

        _, snap = await run_with(root, model=scripted_stream_model(turns, price=_price),
                                 enable_snapshot=True)
        refusals[0] = 0
        seen.clear()  # what the replay emits, not the recording run
        return await run_with(agent, initial_props=None, snapshot=snap,
                              model=scripted_stream_model([]))
    model: Any
    if path == "whole-turn":
        model = _WholeTurnModel(turns)
    elif path == "wire":
        model = ModelAdapter(create_wire_adapter(_wire_of(turns)),
                             _ReplayTransport(turns), WireOptions(model="m", stream=True),
                             price=_price)
    elif path == "routed":
        model = _routed(turns)
    else:
        model = scripted_stream_model(turns, price=_price)
    return await run_with(agent, initial_props=None, model=model,
                          event_bus=Bus() if path == "traced" else None,
                          enable_snapshot=path == "snapshots")


async def _approved_every_time(agent: Any, validator: Any, turns: list[ModelTurnResult]) -> Any:
    """Every tool round suspends for approval and is approved in a resumed chat: the legs, put
    together, are the ungated run (the suspend itself runs and counts nothing)."""
    from bindloop.agent import resume_chat
    from bindloop.agent.approvals import approve
    from bindloop.contracts import accumulate_run

    model = scripted_stream_model(turns, price=_price)
    chat = await run_with(agent, initial_props=None, model=model)
    delta, stats = list(chat.delta), chat.stats
    while chat.stop_reason == "waiting_for_reply":
        cp, pending = chat.checkpoint, chat.approvals

        async def decide(_: None) -> Any:
            equip_tool(ADD, needs_approval=True)
            expect_validator(validator)
            return await resume_chat(cp, decisions=[approve(p) for p in pending],
                                     on_checkpoint=lambda c: None)

        chat = await run_with(create_agent(id="p", handler=decide, max_retries=3),
                              initial_props=None, model=model)
        delta += chat.delta
        stats = accumulate_run(stats, chat.stats)
    return msgspec.structs.replace(chat, delta=delta, stats=stats)


PATHS = ("plain", "plain watched", "traced", "traced watched", "snapshots", "snapshots watched",
         "saved", "saved watched", "replayed", "replayed watched", "whole-turn",
         "whole-turn watched", "wire", "wire watched", "routed", "routed watched", "approved")


@settings(max_examples=60, deadline=None)
@given(tool_rounds=st.lists(st.lists(st.tuples(st.integers(0, 99), st.integers(0, 99)),
                                     min_size=1, max_size=3), max_size=3),
       refused=st.integers(0, 2),
       usage=st.lists(st.tuples(st.integers(0, 500), st.integers(0, 500)), min_size=1,
                      max_size=4),
       items=st.booleans())
def test_every_path_gives_the_same_run(tool_rounds: list[list[tuple[int, int]]], refused: int,
                                       usage: list[tuple[int, int]], items: bool) -> None:
    """``items``: the tool turns carry a provider item (a Responses ``tool_search_call``), which
    every path, the journal replay included, keeps in the assistant message."""
    answers = [f"answer {k}" for k in range(refused + 1)]
    turns = _script(tool_rounds, answers, usage, items)
    seen: dict[str, list[tuple[int, object]]] = {path: [] for path in PATHS}
    results = {path: anyio.run(_through, path, turns, refused, seen[path]) for path in PATHS}
    plain = results["plain"]
    assert plain.data == answers[-1] and plain.stop_reason == "done"
    assert plain.stats.cost == sum(_price(t.usage) for t in turns)
    kept = [p for m in plain.delta if isinstance(m, AssistantMessage)
            and isinstance(m.content, tuple) for p in m.content if isinstance(p, ProviderItemPart)]
    assert kept == [t.provider_items[0] for t in turns if t.provider_items]
    for path, chat in results.items():
        assert (chat.data, chat.delta, chat.stop_reason) == (
            plain.data, plain.delta, plain.stop_reason), path
        assert _comparable(chat.stats) == _comparable(plain.stats), path
        if path.endswith(" watched"):
            # The run events: watched, traced, journaled, saved, replayed, folded by the model or
            # by the agent, routed -- the same events in the same order (a saving run adds its
            # saves, where they happen).
            events = [(i, e) for i, e in seen[path] if not isinstance(e, CheckpointSavedEvent)]
            assert events == seen["plain watched"], path
    watched = [e for _, e in seen["plain watched"]]
    assert len([e for e in watched if isinstance(e, TurnStartEvent)]) == len(turns)
    # Every call the model requested ran: started, then finished with what the model read.
    calls = [c for t in turns for c in t.tool_calls]
    assert [e.call for e in watched if isinstance(e, ToolStartedEvent)] == calls
    assert [(e.call, e.outcome) for e in watched if isinstance(e, ToolFinishedEvent)] == [
        (c, ToolResult(content=str(sum(msgspec.json.decode(c.arguments).values()))))
        for c in calls]
    assert [e.usage for e in watched if isinstance(e, TurnDoneEvent)] == [t.usage for t in turns]
    assert sum(e.cost for e in watched if isinstance(e, TurnDoneEvent)) == plain.stats.cost
    saves = [e for _, e in seen["saved watched"] if isinstance(e, CheckpointSavedEvent)]
    assert [e.checkpoint.revision for e in saves] == list(range(len(saves)))
    assert saves[-1].checkpoint.status == "finished"


def test_the_output_tool_ends_the_run_as_a_real_call() -> None:
    """Tool mode: the output tool's call stays in the transcript as the model sent it, answered by
    a receipt; a refused one is re-asked after it, and nothing is rewritten into assistant text."""
    from bindloop.agent import prompt_agent
    from bindloop.contracts import AssistantMessage, ToolMessage, UserMessage
    from bindloop.testing import tool_call, tool_call_turn

    class Point(msgspec.Struct):
        x: int
        y: int

    model = scripted_stream_model([tool_call_turn([tool_call("Point", {"x": 1})]),
                                   tool_call_turn([tool_call("Point", {"x": 1, "y": 2})])],
                                  structured_output="tool")

    async def handler(_: None) -> Point:
        equip_instruction("a point")
        return await prompt_agent(Point)

    assert anyio.run(create_agent(id="t", handler=handler, model=model), None) == Point(1, 2)
    sent = model.requests[1].messages
    assert [type(m) for m in sent] == [UserMessage, AssistantMessage, ToolMessage, UserMessage]
    assistant, receipt, reask = sent[1], sent[2], sent[3]
    assert isinstance(assistant, AssistantMessage) and assistant.content is None
    assert [c.name for c in assistant.tool_calls] == ["Point"]
    assert isinstance(receipt, ToolMessage) and receipt.tool_call_id == assistant.tool_calls[0].id
    assert "corrected arguments for the Point tool" in str(reask.content)


def test_a_replayed_turn_is_served_whole_to_its_watchers() -> None:
    from bindloop.agent import prompt_agent
    from bindloop.agent.events import (
        AgentStreamEvent,
        StructuredDataEvent,
        ToolCallDoneEvent,
        ToolFinishedEvent,
        ToolStartedEvent,
        TurnDoneEvent,
        TurnStartEvent,
    )
    from bindloop.testing import final_answer, tool_call, tool_call_turn

    class Point(msgspec.Struct):
        x: int
        y: int

    seen: list[AgentStreamEvent] = []

    async def consume(events: AsyncIterator[AgentStreamEvent]) -> None:
        async for event in events:
            seen.append(event)

    async def handler(_: None) -> Point:
        equip_instruction("a point")
        equip_tool(ADD)
        on_stream(consume)
        return await prompt_agent(Point)

    agent = create_agent(id="r", handler=handler)

    async def root() -> Any:
        return await agent(None), dump_snapshot()

    model = scripted_stream_model([tool_call_turn([tool_call("add", {"a": 1, "b": 2})]),
                                   final_answer('{"x": 3, "y": 4}')])
    value, snap = anyio.run(lambda: run_with(root, model=model, enable_snapshot=True))
    live = list(seen)
    seen.clear()
    again = anyio.run(lambda: run_with(agent, initial_props=None, snapshot=snap,
                                       model=scripted_stream_model([])))
    assert again == value == Point(3, 4)
    kinds = [(e.turn_index, type(e.event)) for e in seen]
    assert kinds == [(0, TurnStartEvent), (0, ToolCallDoneEvent), (0, TurnDoneEvent),
                     (0, ToolStartedEvent), (0, ToolFinishedEvent),
                     (1, TurnStartEvent), (1, StructuredDataEvent), (1, TurnDoneEvent)]
    # The journaled call is served, not run: started and finished as live, with its outcome.
    assert [e for e in seen if isinstance(e.event, ToolFinishedEvent)] == \
        [e for e in live if isinstance(e.event, ToolFinishedEvent)]
    # The answer's final view is the live run's final view.
    final = [e for e in live if isinstance(e.event, StructuredDataEvent)][-1]
    assert seen[6] == final
