"""on_stream: the agent stream events (an envelope of the turn index around the model's own
completion events or the agent's kinds; multicast; structured_data partials)."""

from __future__ import annotations

from typing import Any

import anyio
import msgspec
import pytest

from bindloop.agent import (
    create_agent,
    equip_instruction,
    equip_memory,
    equip_tool,
    on_stream,
    prompt_agent,
    prompt_chat,
    reborn,
)
from bindloop.agent.events import (
    AgentStreamEvent,
    StructuredDataEvent,
    ToolCallDoneEvent,
    ToolFinishedEvent,
    ToolStartedEvent,
    TurnDoneEvent,
    TurnFailedEvent,
    TurnStartEvent,
)
from bindloop.completion import FinishEvent, TextEvent, ToolCallEvent, UsageEvent
from bindloop.contracts import ToolResult
from bindloop.errors import ProviderError
from bindloop.tools import define_tool
from bindloop.signal import AbortController
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

pytestmark = pytest.mark.anyio


class Answer(msgspec.Struct):
    answer: str
    score: int


class Q(msgspec.Struct):
    q: str


async def _search(args: Q, ctx: object) -> ToolResult:
    return ToolResult(content="sunny")


SEARCH = define_tool(name="search", description="s", args=Q, execute=_search)


def _collector(into: list[Any], ended: list[bool] | None = None) -> Any:
    async def consume(stream: Any) -> None:
        try:
            async for event in stream:
                into.append(event)
        finally:
            if ended is not None:
                ended.append(True)

    return consume


async def test_events_are_multicast_with_turn_indices_and_structured_partials() -> None:
    first: list[AgentStreamEvent] = []
    second: list[AgentStreamEvent] = []
    model = scripted_stream_model([
        tool_call_turn([tool_call("search", {"q": "weather"})]),
        final_answer('{"answer": "sunny", "score": 9}'),
    ], chunk_size=5)

    async def handler(_: None) -> Answer:
        equip_instruction("weather?")
        equip_tool(SEARCH)
        on_stream(_collector(first))
        on_stream(_collector(second))
        return await prompt_agent(Answer)

    assert await create_agent(id="s", handler=handler, model=model)(None) == Answer("sunny", 9)
    assert first == second  # multicast: every consumer sees every event
    assert [e for e in first if isinstance(e.event, (TurnStartEvent, TurnDoneEvent))] == [
        AgentStreamEvent(turn_index=0, event=TurnStartEvent()),
        AgentStreamEvent(turn_index=0, event=TurnDoneEvent(finish_reason="tool_calls")),
        AgentStreamEvent(turn_index=1, event=TurnStartEvent()),
        AgentStreamEvent(turn_index=1, event=TurnDoneEvent(finish_reason="stop"))]
    # The model's own events, as it streamed them, inside the envelope.
    assert [type(e.event) for e in first if e.turn_index == 0] == [
        TurnStartEvent, ToolCallEvent, UsageEvent, FinishEvent, ToolCallDoneEvent, TurnDoneEvent,
        ToolStartedEvent, ToolFinishedEvent]
    calls = [e for e in first if isinstance(e.event, ToolCallDoneEvent)]
    assert [(c.turn_index, c.event.tool_call.name) for c in calls] == [(0, "search")]
    text = "".join(e.event.content for e in first if isinstance(e.event, TextEvent))
    assert text == '{"answer": "sunny", "score": 9}'
    structured = [e for e in first if isinstance(e.event, StructuredDataEvent)]
    assert all(e.turn_index == 1 for e in structured)
    assert [e.event.status for e in structured[:-1]] == ["partial"] * (len(structured) - 1)
    assert structured[-1] == AgentStreamEvent(turn_index=1, event=StructuredDataEvent(
        status="complete", data={"answer": "sunny", "score": 9}, is_valid=True))
    partial_answers = [e.event.data.get("answer") for e in structured
                       if isinstance(e.event.data, dict)]
    assert "sun" in partial_answers or "s" in partial_answers  # a string seen while it grew
    # Events are frozen Structs; the inner event is tagged: the envelope encodes to JSON.
    assert msgspec.json.decode(msgspec.json.encode(first[0])) == {
        "turn_index": 0, "event": {"type": "turn_start"}}
    with pytest.raises(AttributeError):
        first[0].turn_index = 5  # type: ignore[misc]


async def test_an_invalid_answer_ends_its_turn_with_structured_error() -> None:
    events: list[Any] = []
    model = scripted_stream_model([final_answer('{"answer": 1}'),
                                   final_answer('{"answer": "x", "score": 1}')])

    async def handler(_: None) -> Answer:
        equip_instruction("q")
        on_stream(_collector(events))
        return await prompt_agent(Answer)

    await create_agent(id="s", handler=handler, model=model)(None)
    finals = [e for e in events
              if isinstance(e.event, StructuredDataEvent) and e.event.status != "partial"]
    assert [(e.turn_index, e.event.status, e.event.is_valid) for e in finals] == [
        (0, "error", False), (1, "complete", True)]


async def test_the_consumer_sees_the_end_when_the_model_fails_at_once() -> None:
    events: list[Any] = []
    ended: list[bool] = []
    model = scripted_stream_model([ProviderError("upstream down")])

    async def handler(_: None) -> str:
        equip_instruction("q")
        on_stream(_collector(events, ended))
        return (await prompt_chat()).data

    with pytest.raises(ProviderError, match="upstream down"):
        await create_agent(id="s", handler=handler, model=model)(None)
    assert ended == [True]
    assert events == [AgentStreamEvent(turn_index=0, event=TurnStartEvent()),
                      AgentStreamEvent(turn_index=0, event=TurnFailedEvent(
                          error="ProviderError: upstream down"))]


async def test_streams_do_not_survive_reborn() -> None:
    per_generation: list[list[Any]] = []
    model = scripted_stream_model([final_answer("one"), final_answer("two")])

    async def handler(_: None) -> str:
        n, set_n = equip_memory("n", 0)
        bucket: list[Any] = []
        per_generation.append(bucket)
        if n == 0:
            on_stream(_collector(bucket))
        equip_instruction("q")
        chat = await prompt_chat()
        if n == 0:
            set_n(1)
            return reborn()  # type: ignore[return-value]
        return chat.data

    assert await create_agent(id="s", handler=handler, model=model)(None) == "two"
    assert [type(e.event) for e in per_generation[0]] == [
        TurnStartEvent, TextEvent, UsageEvent, FinishEvent, TurnDoneEvent]
    assert per_generation[1] == []


async def test_a_signal_ends_one_consumer_early_and_the_prompt_waits_for_consumers() -> None:
    controller = AbortController()
    cut: list[Any] = []
    slow_done: list[bool] = []
    model = scripted_stream_model([final_answer("a long answer here")], chunk_size=2)

    async def stopping(stream: Any) -> None:
        async for event in stream:
            cut.append(event)
            if isinstance(event.event, TextEvent):
                controller.abort("enough")

    async def slow(stream: Any) -> None:
        async for _ in stream:
            pass
        await anyio.sleep(0.01)
        slow_done.append(True)

    async def handler(_: None) -> str:
        equip_instruction("q")
        on_stream(stopping, signal=controller.signal)
        on_stream(slow)
        return (await prompt_chat()).data

    assert await create_agent(id="s", handler=handler, model=model)(None) == "a long answer here"
    assert sum(isinstance(e.event, TextEvent) for e in cut) == 1
    assert slow_done == [True]  # await_on_end=True: the prompt returned after the consumer


async def test_a_consumer_that_stops_reading_does_not_stall_the_model() -> None:
    model = scripted_stream_model([final_answer("x" * 200)], chunk_size=1)

    async def lazy(stream: Any) -> None:
        return None  # never reads

    async def handler(_: None) -> str:
        equip_instruction("q")
        on_stream(lazy)
        on_stream(lambda stream: None)  # a plain function is fine too
        return (await prompt_chat()).data

    with anyio.fail_after(5):
        assert await create_agent(id="s", handler=handler, model=model)(None) == "x" * 200


async def test_await_on_end_false_is_fire_and_forget() -> None:
    """The prompt returns while the consumer is still busy; the consumer is not cancelled, sees
    the end of its stream, and the run's root (run_with) waits for it before returning."""
    from bindloop.agent import run_with

    model = scripted_stream_model([final_answer("done")], chunk_size=2)
    release = anyio.Event()
    log: list[str] = []

    async def ui(stream: Any) -> None:
        async for _ in stream:
            pass
        log.append("stream ended")
        await release.wait()  # cleanup that outlives the prompt
        log.append("cleanup done")

    async def handler(_: None) -> str:
        equip_instruction("q")
        on_stream(ui, await_on_end=False)
        out = (await prompt_chat()).data
        log.append("prompt returned")
        return out

    async def root() -> str:
        out = await create_agent(id="ff", handler=handler, model=model)(None)
        log.append("agent returned")
        await anyio.sleep(0)
        release.set()
        return out

    with anyio.fail_after(5):
        assert await run_with(root) == "done"
    assert log.index("prompt returned") < log.index("cleanup done")
    assert log.index("agent returned") < log.index("cleanup done")
    assert log[-1] == "cleanup done"  # run_with returned only after the consumer finished


async def test_await_on_end_false_in_an_implicit_run_is_joined_by_the_outer_agent() -> None:
    model = scripted_stream_model([final_answer("x")])
    log: list[str] = []

    async def ui(stream: Any) -> None:
        async for _ in stream:
            pass
        await anyio.sleep(0.01)
        log.append("cleanup done")

    async def handler(_: None) -> str:
        equip_instruction("q")
        on_stream(ui, await_on_end=False)
        out = (await prompt_chat()).data
        log.append("prompt returned")
        return out

    assert await create_agent(id="ff", handler=handler, model=model)(None) == "x"
    assert log == ["prompt returned", "cleanup done"]


async def test_a_failing_fire_and_forget_consumer_is_reraised_after_the_run() -> None:
    from bindloop.agent import run_with

    model = scripted_stream_model([final_answer("x")])
    log: list[str] = []

    async def ui(stream: Any) -> None:
        async for _ in stream:
            pass
        raise RuntimeError("ui broke")

    async def handler(_: None) -> str:
        equip_instruction("q")
        on_stream(ui, await_on_end=False)
        return (await prompt_chat()).data

    async def root() -> str:
        out = await create_agent(id="ff", handler=handler, model=model)(None)
        await anyio.sleep(0.01)
        log.append("root finished")  # the consumer's failure did not cancel the root
        return out

    with pytest.raises(RuntimeError, match="ui broke"):
        await run_with(root)
    assert log == ["root finished"]


async def test_awaited_and_fire_and_forget_consumers_together() -> None:
    model = scripted_stream_model([final_answer("x")], chunk_size=1)
    seen: dict[str, int] = {"awaited": 0, "detached": 0}

    def counting(name: str) -> Any:
        async def consumer(stream: Any) -> None:
            async for event in stream:
                if isinstance(event.event, TextEvent):
                    seen[name] += 1
        return consumer

    async def handler(_: None) -> str:
        equip_instruction("q")
        on_stream(counting("awaited"))
        on_stream(counting("detached"), await_on_end=False)
        return (await prompt_chat()).data

    assert await create_agent(id="ff", handler=handler, model=model)(None) == "x"
    assert seen == {"awaited": 1, "detached": 1}


async def test_cancelling_the_run_cancels_the_consumers_it_hosts() -> None:
    """A fire-and-forget consumer still running when the run is cancelled is cancelled with it
    (its cleanup runs) and run_with does not return before it finished."""
    from bindloop.agent import run_with

    model = scripted_stream_model([final_answer("x")])
    log: list[str] = []

    async def ui(stream: Any) -> None:
        async for _ in stream:
            pass
        try:
            await anyio.sleep_forever()
        finally:
            log.append("consumer cancelled")

    async def handler(_: None) -> str:
        equip_instruction("q")
        on_stream(ui, await_on_end=False)
        return (await prompt_chat()).data

    async def root() -> str:
        out = await create_agent(id="ff", handler=handler, model=model)(None)
        log.append("agent returned")
        await anyio.sleep_forever()
        return out

    with anyio.fail_after(5):
        with anyio.move_on_after(0.1) as scope:
            await run_with(root)
        log.append("run_with left")
    assert scope.cancelled_caught
    assert log == ["agent returned", "consumer cancelled", "run_with left"]


async def test_a_run_nobody_watches_never_yields_to_the_event_loop(anyio_backend: str) -> None:
    """On asyncio the root hosts consumers as tasks started on demand: a run without any opens no
    task group, so a run whose model and tools never wait does not give the loop a turn (an
    empty anyio task group's exit would)."""
    from bindloop.agent import run_with
    from bindloop.model import ModelRequest, StreamModel
    from bindloop.completion import StreamEvent

    if anyio_backend != "asyncio":
        pytest.skip("the root opens an anyio task group on other backends")
    import asyncio

    class Instant(StreamModel):
        id, provider, structured_output = "instant", "test", "json_schema"

        async def stream(self, messages: Any, request: ModelRequest, /) -> Any:
            event: StreamEvent
            for event in (TextEvent(content='{"answer": "a", "score": 1}'),
                          FinishEvent(finish_reason="stop")):
                yield event

    async def handler(_: None) -> Answer:
        equip_instruction("q")
        return await prompt_agent(Answer)

    ran: list[int] = []
    asyncio.get_running_loop().call_soon(ran.append, 1)
    out = await run_with(create_agent(id="still", handler=handler), model=Instant())
    assert out == Answer(answer="a", score=1)
    assert ran == []  # nothing else ran while the run did
    await anyio.sleep(0)
    assert ran == [1]
