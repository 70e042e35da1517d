"""run_with, trace events (gen_ai.*), snapshots, deterministic replay, restore_snapshot."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.agent import (
    create_agent,
    equip_instruction,
    equip_memory,
    equip_tool,
    prompt_agent,
    prompt_chat,
    reborn,
    run_with,
)
from bindloop.agent.events import (
    TraceEvent,
    TurnDoneEvent,
    TurnFailedEvent,
    TraceOptions,
)
from bindloop.agent.snapshots import (
    dump_snapshot,
    encode_snapshot,
    parse_snapshot,
    restore_snapshot,
)
from bindloop.contracts import ToolResult
from bindloop.checkpoints import CheckpointFormatError
from bindloop.agent.errors import NoAgentContextError
from bindloop.agent.snapshots import SnapshotDisabledError, SnapshotDivergenceError
from bindloop.tools import define_tool
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

pytestmark = pytest.mark.anyio


class Q(msgspec.Struct):
    q: str


class Verdict(msgspec.Struct):
    answer: str
    rounds: int


def _world() -> tuple[Any, list[str]]:
    executed: list[str] = []

    async def search(args: Q, ctx: object) -> ToolResult:
        executed.append(args.q)
        return ToolResult(content=f"{args.q}: found")

    return define_tool(name="search", description="s", args=Q, execute=search), executed


def _script() -> list[Any]:
    return [
        tool_call_turn([tool_call("search", {"q": "owls"})]),
        final_answer("owls are birds"),
        final_answer('{"answer": "owls", "rounds": 2}'),
    ]


def _app(search: Any, question: str = "owls?") -> Any:
    async def researcher(topic: str) -> str:
        equip_instruction(f"research {topic}")
        equip_tool(search)
        return (await prompt_chat()).data

    research = create_agent(id="researcher", handler=researcher)

    async def lead(_: None) -> Verdict:
        rounds, set_rounds = equip_memory("rounds", 0)
        notes = await research(question) if rounds == 0 else "noted"
        set_rounds(rounds + 1)
        if rounds == 0:
            return reborn()  # type: ignore[return-value]
        equip_instruction(f"Summarise: {notes}")
        return await prompt_agent(Verdict)

    lead_agent = create_agent(id="lead", handler=lead)

    async def main() -> tuple[Verdict, Any]:
        verdict = await lead_agent(None)
        return verdict, dump_snapshot()

    return main


async def test_snapshot_holds_memory_and_journal_of_every_frame_with_stable_bytes() -> None:
    search, executed = _world()
    model = scripted_stream_model(_script())
    verdict, snap = await run_with(_app(search), model=model, enable_snapshot=True)
    assert verdict == Verdict(answer="owls", rounds=2)
    (lead,) = snap.root.children
    assert lead.agent_id == "lead" and lead.memory == {"rounds": 2}
    (child,) = lead.children
    assert child.agent_id == "researcher" and len(child.journal) == 2
    assert child.journal[0].tools["call_1_0"] == ToolResult(content="owls: found")
    assert len(lead.journal) == 1
    data = encode_snapshot(snap)
    assert parse_snapshot(data) == snap and encode_snapshot(parse_snapshot(data)) == data
    assert executed == ["owls"]


async def test_replay_makes_zero_model_calls_and_zero_tool_runs() -> None:
    search, executed = _world()
    _, snap = await run_with(_app(search), model=scripted_stream_model(_script()),
                             enable_snapshot=True)
    executed.clear()
    empty = scripted_stream_model([])  # any call would raise ScriptExhaustedError
    verdict, again = await run_with(_app(search), model=empty, snapshot=encode_snapshot(snap),
                                    enable_snapshot=True)
    assert verdict == Verdict(answer="owls", rounds=2)
    assert empty.requests == [] and executed == []
    assert encode_snapshot(again) == encode_snapshot(snap)


async def test_replay_goes_live_when_the_journal_runs_out() -> None:
    search, _ = _world()
    _, snap = await run_with(_app(search), model=scripted_stream_model(_script()),
                             enable_snapshot=True)
    # Keep only the sub-agent's first turn: the rest of the run is live.
    (lead,) = snap.root.children
    (child,) = lead.children
    cut = msgspec.structs.replace(snap, root=msgspec.structs.replace(snap.root, children=(
        msgspec.structs.replace(lead, journal=(), children=(
            msgspec.structs.replace(child, journal=child.journal[:1]),)),)))
    live = scripted_stream_model(_script()[1:])
    verdict, _ = await run_with(_app(search), model=live, snapshot=cut, enable_snapshot=True)
    assert verdict.answer == "owls" and live.position == 2


async def test_a_changed_prompt_raises_divergence_naming_the_call() -> None:
    search, _ = _world()
    _, snap = await run_with(_app(search), model=scripted_stream_model(_script()),
                             enable_snapshot=True)
    with pytest.raises(SnapshotDivergenceError, match="model call #1 of agent 'researcher'"):
        await run_with(_app(search, question="bats?"), model=scripted_stream_model([]),
                       snapshot=snap)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["tool", "text"]), min_size=0, max_size=4), st.text(
    "abc xyz", min_size=1, max_size=8))
def test_replaying_any_recorded_run_is_model_free_and_equal(steps: list[str], final: str) -> None:
    script: list[Any] = []
    for i, step in enumerate(steps):
        if step == "tool":
            script.append(tool_call_turn([tool_call("search", {"q": f"q{i}"})]))
    script.append(final_answer(final))
    search, executed = _world()

    async def handler(_: None) -> Any:
        equip_instruction("go")
        equip_tool(search)
        return await prompt_chat()

    async def main() -> Any:
        return await create_agent(id="a", handler=handler)(None), dump_snapshot()

    first, snap = anyio.run(lambda: run_with(main, model=scripted_stream_model(script),
                                              enable_snapshot=True))
    ran = len(executed)
    second, snap2 = anyio.run(lambda: run_with(main, model=scripted_stream_model([]),
                                                snapshot=snap, enable_snapshot=True))
    assert len(executed) == ran
    assert (second.data, second.delta, second.stop_reason) == (first.data, first.delta,
                                                               first.stop_reason)
    assert encode_snapshot(snap2) == encode_snapshot(snap)


async def test_dump_snapshot_refuses_when_disabled_or_outside_a_run() -> None:
    with pytest.raises(NoAgentContextError):
        dump_snapshot()

    async def main() -> None:
        dump_snapshot()

    with pytest.raises(SnapshotDisabledError, match="enable_snapshot=True"):
        await run_with(main)


def test_snapshot_from_another_version_names_the_field() -> None:
    with pytest.raises(CheckpointFormatError, match="^version: "):
        parse_snapshot(b'{"version": 99, "root": {"agent_id": null}}')
    with pytest.raises(CheckpointFormatError, match="root"):
        parse_snapshot(b'{"version": 1, "root": {"agent_id": 5}}')
    with pytest.raises(CheckpointFormatError, match="not JSON"):
        parse_snapshot(b"{")


class Bus:
    def __init__(self) -> None:
        self.events: list[TraceEvent] = []

    def emit(self, event: TraceEvent) -> None:
        self.events.append(event)


async def test_trace_events_use_gen_ai_names_and_nest() -> None:
    search, _ = _world()
    bus = Bus()
    await run_with(_app(search), model=scripted_stream_model(_script()), event_bus=bus,
                   enable_snapshot=True,
                   trace=TraceOptions(trace_id="ab" * 16, parent_span_id="req",
                                      attributes={"tenant": "t1"}))
    events = bus.events
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert {e.trace_id for e in events} == {"ab" * 16}
    starts = {e.span_id: e for e in events if e.type == "span_start"}
    ends = {e.span_id: e for e in events if e.type == "span_end"}
    assert set(starts) == set(ends)  # every span ends
    names = [e.name for e in starts.values()]
    assert names.count("invoke_agent lead") == 1 and names.count("invoke_agent researcher") == 1
    assert names.count("chat scripted") == 3 and names.count("execute_tool search") == 1
    lead = next(e for e in starts.values() if e.name == "invoke_agent lead")
    assert lead.parent_span_id == "req" and lead.attributes["tenant"] == "t1"
    assert lead.attributes["gen_ai.operation.name"] == "invoke_agent"
    chat = next(e for e in starts.values() if e.name == "chat scripted")
    assert chat.attributes["gen_ai.request.model"] == "scripted"
    tool = next(e for e in starts.values() if e.name == "execute_tool search")
    assert tool.attributes["gen_ai.tool.name"] == "search"
    # Nesting: tool span -> generation span -> researcher span -> generation -> lead span.
    chain = []
    span: str | None = tool.span_id
    while span in starts:
        chain.append(starts[span].name)
        span = starts[span].parent_span_id
    assert chain == ["execute_tool search", "bindloop.generation", "invoke_agent researcher",
                     "bindloop.generation", "invoke_agent lead"]
    assert all(e.status == "ok" for e in ends.values())
    usage = [e.attributes.get("gen_ai.usage.input_tokens") for e in ends.values()
             if e.name == "chat scripted"]
    assert usage == [0, 0, 0]
    # Trace events are JSON.
    msgspec.json.decode(msgspec.json.encode(events), type=list[TraceEvent])


async def test_restore_snapshot_from_a_trace_replays_up_to_the_anchor() -> None:
    search, executed = _world()
    bus = Bus()
    _, snap = await run_with(_app(search), model=scripted_stream_model(_script()),
                             event_bus=bus, enable_snapshot=True)
    as_json = msgspec.json.decode(msgspec.json.encode(bus.events))
    rebuilt = restore_snapshot(as_json)
    assert [c.agent_id for c in rebuilt.root.children] == ["lead"]
    replay_model = scripted_stream_model([])
    executed.clear()
    verdict, _ = await run_with(_app(search), model=replay_model, snapshot=rebuilt,
                                enable_snapshot=True)
    assert verdict.answer == "owls" and replay_model.requests == [] and executed == []
    assert rebuilt.root.children[0].memory == {"rounds": 2}

    # Anchor at the researcher's first chat span end: only that turn is re-served.
    anchor = next(e.seq for e in bus.events if e.type == "span_end" and e.name == "chat scripted")
    partial = restore_snapshot(bus.events, anchor=anchor)
    live = scripted_stream_model(_script()[1:])
    executed.clear()
    verdict, _ = await run_with(_app(search), model=live, snapshot=partial,
                                enable_snapshot=True)
    assert verdict.answer == "owls" and live.position == 2 and executed == ["owls"]
    with pytest.raises(Exception, match="no trace event"):
        restore_snapshot(bus.events, anchor=10_000)


async def test_a_memory_value_without_a_json_form_keeps_the_trace_json() -> None:
    """A non-JSON memory value is traced by its type name (never its repr) and left out of a
    snapshot restored from the trace; JSON-able ones (a Struct included) are traced as data."""

    class Secretive:
        def __repr__(self) -> str:
            return "Secretive(token=sk-123)"

    bus = Bus()

    async def handler(_: None) -> str:
        _, set_obj = equip_memory("obj", 1)
        _, set_struct = equip_memory("struct", Q(q="x"))
        set_obj(Secretive())
        equip_instruction("q")
        return (await prompt_chat()).data

    assert await run_with(create_agent(id="m", handler=handler), event_bus=bus,
                          model=scripted_stream_model([final_answer("ok")])) == "ok"
    text = msgspec.json.encode(bus.events)  # must not raise
    assert b"sk-123" not in text
    sets = [e.attributes for e in bus.events if e.name == "bindloop.memory.set"]
    assert sets[0] == {"bindloop.memory.key": "obj", "bindloop.memory.value": 1}
    assert sets[1] == {"bindloop.memory.key": "struct", "bindloop.memory.value": {"q": "x"}}
    assert sets[2] == {"bindloop.memory.key": "obj",
                       "bindloop.memory.unencodable": "test_a_memory_value_without_a_json_form_"
                                                      "keeps_the_trace_json.<locals>.Secretive"}
    rebuilt = restore_snapshot(msgspec.json.decode(text))
    assert rebuilt.root.children[0].memory == {"struct": {"q": "x"}}


async def test_replay_re_derives_memory_and_says_nothing_when_an_unjournaled_input_changed() -> None:
    """Replay runs the handler again instead of injecting the snapshot's memory: equal memory when
    it derives from journaled turns and tool outputs; a memory value written from an input outside
    the journal (here a provider) follows the new input, silently, until it reaches a prompt."""
    from bindloop.agent import expect_resource

    async def handler(_: None) -> str:
        _, set_seen = equip_memory("seen", "")
        set_seen(expect_resource("stamp"))  # not journaled
        equip_instruction("q")
        return (await prompt_chat()).data

    agent = create_agent(id="m", handler=handler)

    async def main() -> Any:
        return await agent(None), dump_snapshot()

    (out, snap) = await run_with(main, model=scripted_stream_model([final_answer("a")]),
                                 enable_snapshot=True, providers={"stamp": "t1"})
    assert snap.root.children[0].memory == {"seen": "t1"}
    same = await run_with(main, model=scripted_stream_model([]), snapshot=snap,
                          enable_snapshot=True, providers={"stamp": "t1"})
    assert same == (out, snap)  # equivalent: everything memory derives from is the same
    again, snap2 = await run_with(main, model=scripted_stream_model([]), snapshot=snap,
                                  enable_snapshot=True, providers={"stamp": "t2"})
    assert again == "a" and snap2.root.children[0].memory == {"seen": "t2"}  # not equivalent

    async def prompting(_: None) -> str:
        seen, set_seen = equip_memory("seen", "")
        set_seen(expect_resource("stamp"))
        equip_instruction(f"q {expect_resource('stamp')}")  # now the input reaches the prompt
        return (await prompt_chat()).data

    async def main2() -> Any:
        return await create_agent(id="m", handler=prompting)(None), dump_snapshot()

    _, snap3 = await run_with(main2, model=scripted_stream_model([final_answer("a")]),
                              enable_snapshot=True, providers={"stamp": "t1"})
    with pytest.raises(SnapshotDivergenceError):
        await run_with(main2, model=scripted_stream_model([]), snapshot=snap3,
                       providers={"stamp": "t2"})


def _one_agent(search: Any) -> Any:
    async def handler(_: None) -> str:
        equip_instruction("research owls")
        equip_tool(search)
        return (await prompt_chat()).data

    return lambda: create_agent(id="one", handler=handler)(None)


async def test_chat_spans_are_read_off_the_turn_events_the_stream_carries() -> None:
    search, _ = _world()
    bus = Bus()
    seen: list[Any] = []
    await run_with(_one_agent(search), model=scripted_stream_model(_script()), event_bus=bus,
                   enable_snapshot=True, on_event=seen.append)
    done = [e.event for e in seen if isinstance(e.event, TurnDoneEvent)]
    ends = [e for e in bus.events if e.type == "span_end" and e.name.startswith("chat ")]
    assert len(done) == len(ends) == 2
    for event, end in zip(done, ends):
        assert end.attributes["gen_ai.usage.input_tokens"] == event.usage.input_tokens
        assert end.attributes["gen_ai.response.finish_reasons"] == [event.finish_reason]
        assert end.attributes["bindloop.prompt_hash"] == event.prompt_hash != ""
        assert end.attributes["bindloop.turn"] == msgspec.to_builtins(event.turn)
        # The host's extras are not part of the event's wire form, nor of its equality.
        assert set(msgspec.to_builtins(event)) == {"type", "finish_reason", "usage", "cost"}
        assert event == TurnDoneEvent(finish_reason=event.finish_reason, usage=event.usage)


async def test_a_failed_turn_ends_its_chat_span_with_the_exception_the_event_carries() -> None:
    search, _ = _world()
    bus = Bus()
    seen: list[Any] = []
    boom = RuntimeError("provider down")
    with pytest.raises(RuntimeError, match="provider down"):
        await run_with(_one_agent(search), model=scripted_stream_model([boom]), event_bus=bus,
                       on_event=seen.append)
    [failed] = [e.event for e in seen if isinstance(e.event, TurnFailedEvent)]
    assert failed.raised is boom and failed.error == "RuntimeError: provider down"
    [end] = [e for e in bus.events if e.type == "span_end" and e.name.startswith("chat ")]
    assert end.status == "error" and end.exception is boom


# -- the live journal ---------------------------------------------------------------------------

_IDS = st.sampled_from(["c1", "c2", "c3"])
_JOURNAL_STEP = st.one_of(
    st.tuples(st.just("turn"), st.lists(_IDS, max_size=3)),  # a call id may repeat, in a turn too
    st.tuples(st.just("tool"), st.sampled_from(["c1", "c2", "c3", "never"]), st.integers(0, 99)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_JOURNAL_STEP, max_size=25))
def test_a_tool_outcome_lands_on_the_latest_turn_holding_its_call_id(steps: list[Any]) -> None:
    """Whatever the order of turns and outcomes, ids asked again by a later turn included, each
    frozen turn holds exactly the outcomes recorded while it was the latest turn asking for that
    call id (the last one recorded for an id wins), and nothing for an id no turn asked."""
    from bindloop.agent._snapshot import Journal
    from bindloop.contracts import ModelTurnResult, ToolCall

    journal = Journal()
    turns: list[ModelTurnResult] = []
    expected: list[dict[str, ToolResult]] = []
    for step in steps:
        if step[0] == "turn":
            turns.append(ModelTurnResult(tool_calls=tuple(
                ToolCall(id=i, name="t", arguments="{}") for i in step[1])))
            journal.record_turn(f"h{len(expected)}", turns[-1])
            expected.append({})
        else:
            _, call_id, n = step
            outcome = ToolResult(content=str(n))
            journal.record_tool(call_id, outcome)
            latest = next((k for k in range(len(expected) - 1, -1, -1)
                           if call_id in {c.id for c in turns[k].tool_calls}), None)
            if latest is not None:
                expected[latest][call_id] = outcome
    frozen = journal.freeze()
    assert [t.prompt_hash for t in frozen] == [f"h{k}" for k in range(len(expected))]
    assert [t.tools for t in frozen] == expected
    assert [t.turn for t in frozen] == turns
