"""The run's one event union beyond the model's stream: tools started and finished (what the model
reads, and the exception for the host), approvals requested and decided, checkpoints saved, usage
on each turn's end; ``on_event`` and ``run_with(on_event=)`` (synchronous) and ``stream_text``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import msgspec
import pytest

from bindloop.agent import (
    TextStream,
    create_agent,
    equip_instruction,
    equip_tool,
    on_event,
    on_stream,
    prompt_chat,
    resume_chat,
    run_with,
    stream_text,
)
from bindloop.agent.approvals import (
    approve,
    deny,
)
from bindloop.agent.events import (
    AgentStreamEvent,
    ApprovalDecidedEvent,
    ApprovalRequestedEvent,
    CheckpointSavedEvent,
    RunEvent,
    ToolFinishedEvent,
    ToolStartedEvent,
    TurnDoneEvent,
)
from bindloop.contracts import ToolCall, ToolError, ToolResult, TurnUsage
from bindloop.errors import RunCancelledError, UsageError
from bindloop.tools import define_tool
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

pytestmark = pytest.mark.anyio


class Q(msgspec.Struct):
    q: str


def _tool(name: str, fn: Any) -> Any:
    async def execute(args: Q, ctx: object) -> ToolResult:
        return fn(args.q)

    return define_tool(name=name, description=name, args=Q, execute=execute)


def _ok(q: str) -> ToolResult:
    return ToolResult(content=f"found {q}")


def _boom(q: str) -> ToolResult:
    raise RuntimeError(f"db password=hunter2 refused {q}")


def _kinds(events: list[AgentStreamEvent]) -> list[str]:
    return [type(e.event).__name__ for e in events
            if type(e.event).__module__.startswith("bindloop.agent")]


async def _watched(model: Any, *tools: Any, **chat: Any) -> tuple[Any, list[AgentStreamEvent]]:
    seen: list[AgentStreamEvent] = []

    async def handler(_: None) -> Any:
        equip_instruction("go")
        for t in tools:
            equip_tool(t)
        on_event(seen.append)
        return await prompt_chat(**chat)

    return await create_agent(id="w", handler=handler, model=model)(None), seen


async def test_a_tool_starts_and_finishes_with_what_the_model_reads() -> None:
    calls = [tool_call("search", {"q": "a"}, id="c1"), tool_call("broken", {"q": "b"}, id="c2")]
    model = scripted_stream_model([tool_call_turn(calls), final_answer("done")])
    chat, seen = await _watched(model, _tool("search", _ok), _tool("broken", _boom))
    assert chat.data == "done"
    started = [e for e in seen if isinstance(e.event, ToolStartedEvent)]
    finished = [e for e in seen if isinstance(e.event, ToolFinishedEvent)]
    assert {e.event.call.id for e in started} == {"c1", "c2"}
    assert all(e.turn_index == 0 for e in started + finished)  # the turn that asked for them
    by_id = {e.event.call.id: e.event for e in finished}
    assert by_id["c1"].outcome == ToolResult(content="found a") and by_id["c1"].error is None
    # A raise: the model reads the redacted tool error, the host gets the exception itself.
    assert by_id["c2"].outcome == ToolError(error="RuntimeError: the tool failed")
    assert isinstance(by_id["c2"].error, RuntimeError)
    assert "hunter2" in str(by_id["c2"].error)
    # The exception is for the host alone: no encoded form carries it, and equality ignores it.
    encoded = msgspec.json.encode([e for e in finished if e.event.call.id == "c2"][0])
    assert b"hunter2" not in encoded and b"raised" not in encoded
    assert by_id["c2"] == ToolFinishedEvent(call=calls[1], outcome=by_id["c2"].outcome)
    assert msgspec.json.decode(msgspec.json.encode(by_id["c2"]), type=RunEvent) == by_id["c2"]
    # What the model read is what the transcript holds.
    read = [m.content for m in chat.delta if getattr(m, "tool_call_id", None) == "c2"]
    assert read == ['{"error":"RuntimeError: the tool failed","kind":"error"}']


async def test_a_fatal_raise_finishes_with_no_outcome() -> None:
    def stop(q: str) -> ToolResult:
        raise RunCancelledError("the host stopped the run")

    model = scripted_stream_model([tool_call_turn([tool_call("stop", {"q": "x"}, id="c1")]),
                                   final_answer("never")])
    seen: list[AgentStreamEvent] = []

    async def handler(_: None) -> Any:
        equip_instruction("go")
        equip_tool(_tool("stop", stop))
        on_event(seen.append)
        return await prompt_chat()

    with pytest.raises(RunCancelledError):
        await create_agent(id="f", handler=handler, model=model)(None)
    finished = [e.event for e in seen if isinstance(e.event, ToolFinishedEvent)]
    assert len(finished) == 1 and finished[0].outcome is None
    assert isinstance(finished[0].error, RunCancelledError)


async def test_turn_done_carries_the_turns_usage_and_cost() -> None:
    usage = TurnUsage(input_tokens=7, output_tokens=3, cached_input_tokens=2)
    model = scripted_stream_model([final_answer("hi", usage=usage)],
                                  price=lambda u: u.input_tokens * 10 + u.output_tokens)
    chat, seen = await _watched(model)
    done = [e.event for e in seen if isinstance(e.event, TurnDoneEvent)]
    assert done == [TurnDoneEvent(finish_reason="stop", usage=usage, cost=73)]
    assert chat.stats.cost == 73


async def test_saves_are_reported_after_they_are_stored_with_what_came_before() -> None:
    model = scripted_stream_model([tool_call_turn([tool_call("search", {"q": "a"})]),
                                   final_answer("done")])
    seen: list[AgentStreamEvent] = []
    before_save: list[list[str]] = []

    def save(checkpoint: Any) -> None:
        before_save.append(_kinds(seen))  # on_event is synchronous: it is all there

    async def handler(_: None) -> Any:
        equip_instruction("go")
        equip_tool(_tool("search", _ok))
        on_event(seen.append)
        return await prompt_chat(on_checkpoint=save)

    chat = await create_agent(id="s", handler=handler, model=model)(None)
    saved = [e.event.checkpoint for e in seen if isinstance(e.event, CheckpointSavedEvent)]
    assert [c.status for c in saved] == ["ready", "finished"]
    assert saved[-1] == chat.checkpoint
    # The boundary after the tool round: the call finished before the save was asked for.
    assert before_save[0][-1] == "ToolFinishedEvent"
    assert _kinds(seen)[len(before_save[0])] == "CheckpointSavedEvent"


async def test_approvals_are_requested_and_decided_on_the_stream() -> None:
    calls = [tool_call("delete", {"q": "x"}, id="d1"), tool_call("delete", {"q": "y"}, id="d2")]
    model = scripted_stream_model([tool_call_turn(calls), final_answer("ok")])
    seen: list[AgentStreamEvent] = []
    saves: list[Any] = []

    async def ask(_: None) -> Any:
        equip_instruction("delete both")
        equip_tool(_tool("delete", _ok), needs_approval=True)
        on_event(seen.append)
        return await prompt_chat(approval_secret="s3cret")

    chat = await create_agent(id="a", handler=ask, model=model)(None)
    asked = [e.event for e in seen if isinstance(e.event, ApprovalRequestedEvent)]
    assert asked == [ApprovalRequestedEvent(call_id=p.call_id, tool=p.tool, arguments=p.arguments,
                                            token=p.token) for p in chat.approvals]
    assert [a.call_id for a in asked] == ["d1", "d2"] and all(a.token for a in asked)
    assert not any(isinstance(e.event, ToolStartedEvent) for e in seen)  # nothing ran
    seen.clear()

    async def decide(_: None) -> Any:
        equip_tool(_tool("delete", _ok), needs_approval=True)
        on_event(seen.append)
        first, second = chat.approvals
        return await resume_chat(chat.checkpoint, decisions=[approve(first), deny(second, "no")],
                                 on_checkpoint=saves.append, approval_secret="s3cret")

    done = await create_agent(id="a", handler=decide, model=model)(None)
    assert done.data == "ok"
    head = [e.event for e in seen[:4]]
    assert head[:2] == [ApprovalDecidedEvent(call_id="d1", approved=True, arguments=calls[0].arguments),
                        ApprovalDecidedEvent(call_id="d2", approved=False, reason="no")]
    assert isinstance(head[2], CheckpointSavedEvent) and head[2].checkpoint == saves[0]
    assert all(e.turn_index == -1 for e in seen[:4])  # before the resumed prompt's first turn
    # Only the approved call runs; the denied one is answered by the gate, never started.
    assert [e.event.call.id for e in seen if isinstance(e.event, ToolStartedEvent)] == ["d1"]


async def test_on_event_and_on_stream_see_the_same_events() -> None:
    model = scripted_stream_model([tool_call_turn([tool_call("search", {"q": "a"})]),
                                   final_answer("done")], chunk_size=2)
    sync: list[AgentStreamEvent] = []
    streamed: list[AgentStreamEvent] = []

    async def consume(events: AsyncIterator[AgentStreamEvent]) -> None:
        async for e in events:
            streamed.append(e)

    async def handler(_: None) -> Any:
        equip_instruction("go")
        equip_tool(_tool("search", _ok))
        on_event(sync.append)
        on_stream(consume)
        return await prompt_chat()

    await create_agent(id="b", handler=handler, model=model)(None)
    assert sync == streamed and sync


async def test_on_event_refuses_what_is_not_callable() -> None:
    async def handler(_: None) -> Any:
        on_event(42)  # type: ignore[arg-type]

    with pytest.raises(UsageError, match="on_event"):
        await create_agent(id="x", handler=handler, model=scripted_stream_model([]))(None)
    with pytest.raises(UsageError, match="on_event"):
        await run_with(lambda: anyio.sleep(0), on_event=42)  # type: ignore[arg-type]


def _outer_and_inner(text: str) -> Any:
    inner_model = scripted_stream_model([final_answer("inner words")], chunk_size=3)

    async def inner(_: None) -> Any:
        equip_instruction("help")
        return await prompt_chat()

    helper = create_agent(id="inner", handler=inner, model=inner_model)

    async def outer(_: None) -> Any:
        await helper(None)  # a sub-agent's text is not the run's answer
        equip_instruction("go")
        return await prompt_chat()

    return create_agent(id="outer", handler=outer)


async def test_stream_text_gives_the_top_level_answer_as_it_streams() -> None:
    model = scripted_stream_model([final_answer("Hello there, world.")], chunk_size=4)
    agent = _outer_and_inner("Hello there, world.")
    chunks: list[str] = []
    async with stream_text(agent, initial_props=None, model=model) as stream:
        assert isinstance(stream, TextStream)
        with pytest.raises(UsageError, match="not returned yet"):
            stream.result
        async for text in stream:
            chunks.append(text)
    assert len(chunks) > 1 and "".join(chunks) == "Hello there, world."
    assert stream.result.data == "Hello there, world."


async def test_stream_text_waits_for_the_run_and_raises_what_it_raised() -> None:
    model = scripted_stream_model([final_answer("a b c d e f")], chunk_size=1)
    agent = _outer_and_inner("")
    async with stream_text(agent, initial_props=None, model=model) as stream:
        async for _ in stream:
            break  # stop printing: the run goes on to its end
    assert stream.result.data == "a b c d e f"

    failing = scripted_stream_model([RuntimeError("provider down")])

    async def handler(_: None) -> Any:
        equip_instruction("go")
        return await prompt_chat()

    with pytest.raises(RuntimeError, match="provider down"):
        async with stream_text(create_agent(id="x", handler=handler), initial_props=None,
                               model=failing) as stream:
            assert [t async for t in stream] == []


async def test_run_with_on_event_sees_the_top_level_agent_only() -> None:
    model = scripted_stream_model([final_answer("outer")])
    seen: list[AgentStreamEvent] = []
    await run_with(_outer_and_inner(""), initial_props=None, model=model, on_event=seen.append)
    done = [e.event for e in seen if isinstance(e.event, TurnDoneEvent)]
    assert len(done) == 1  # the outer agent's one turn; the sub-agent's is its own business


async def test_tool_finished_without_an_exception_has_none() -> None:
    event = ToolFinishedEvent(call=ToolCall(id="c", name="t"), outcome=None)
    assert event.error is None


async def test_tool_spans_are_read_off_the_tool_events_live_and_replayed() -> None:
    """A trace's ``execute_tool`` spans are the run's tool events: one per call started, ending
    with the outcome the model read (or the raise), the same when a replay serves the calls."""
    from bindloop.agent.events import TraceEvent
    from bindloop.agent.snapshots import dump_snapshot

    calls = [tool_call("search", {"q": "a"}, id="c1"), tool_call("broken", {"q": "b"}, id="c2")]
    turns = [tool_call_turn(calls), final_answer("done")]

    class Bus:
        def __init__(self) -> None:
            self.events: list[TraceEvent] = []

        def emit(self, event: TraceEvent) -> None:
            self.events.append(event)

    seen: list[AgentStreamEvent] = []

    async def handler(_: None) -> Any:
        equip_instruction("go")
        equip_tool(_tool("search", _ok))
        equip_tool(_tool("broken", _boom))
        on_event(seen.append)
        return await prompt_chat()

    agent = create_agent(id="t", handler=handler)

    def tool_spans(bus: Bus) -> list[tuple[str, str | None, Any]]:
        return [(e.name, e.status, e.attributes.get("bindloop.tool.outcome")) for e in bus.events
                if e.type == "span_end" and e.name.startswith("execute_tool")]

    async def root() -> Any:
        return await agent(None), dump_snapshot()

    live = Bus()
    _, snap = await run_with(root, model=scripted_stream_model(turns), event_bus=live,
                             enable_snapshot=True)
    finished = {e.event.call.id: e.event for e in seen if isinstance(e.event, ToolFinishedEvent)}
    assert sorted(tool_spans(live)) == [
        ("execute_tool broken", "error", None),
        ("execute_tool search", "ok", msgspec.to_builtins(finished["c1"].outcome))]
    replayed = Bus()
    await run_with(agent, initial_props=None, snapshot=snap, model=scripted_stream_model([]),
                   event_bus=replayed)
    # The journal keeps what a call returned; a raise is not journaled, so the replay runs it.
    assert sorted(tool_spans(replayed)) == sorted(tool_spans(live))
