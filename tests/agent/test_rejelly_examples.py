"""Rejelly's examples, in Python: the search agent, the safe search tool with static and
dynamic middleware, the rate-limited search loop middleware, the validator re-ask, the UI stream
consumer and the call-order example."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bindloop.agent import (
    augment_tool,
    create_agent,
    equip_instruction,
    equip_memory,
    equip_system,
    equip_tool,
    equip_tool_call_loop_middleware,
    expect_validator,
    on_stream,
    prompt_agent,
    reborn,
)
from bindloop.agent.events import (
    StructuredDataEvent,
    ToolCallDoneEvent,
    TurnDoneEvent,
    TurnStartEvent,
)
from bindloop.agent.middleware import (
    ToolCallLoopMiddleware,
    ToolMiddleware,
    ToolOutput,
)
from bindloop.completion import TextEvent
from bindloop.contracts import ToolError, ToolMessage, ToolResult
from bindloop.agent.errors import AfterPromptAgentError
from bindloop.tools import define_tool
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

pytestmark = pytest.mark.anyio


class SearchArgs(msgspec.Struct):
    query: str


class Result(msgspec.Struct):
    answer: str


def _search_tool(failures: list[int]) -> Any:
    async def search(args: SearchArgs, ctx: object) -> ToolResult:
        if failures and failures[0] > 0:  # a flaky backend: fails the first N calls
            failures[0] -= 1
            raise ConnectionError("search backend timed out")
        return ToolResult(content=f"top hit for {args.query!r}")

    return define_tool(name="search", description="Search the web", args=SearchArgs,
                       execute=search)


def wrap_log(log: list[str]) -> ToolMiddleware:
    async def handler(ctx: Any, next: Any) -> Any:
        log.append(f"call {ctx.tool_name}")
        out = await next()
        log.append(f"done {ctx.tool_name}")
        return out

    return ToolMiddleware(name="log", handler=handler)


def wrap_retry(n: int) -> ToolMiddleware:
    async def handler(ctx: Any, next: Any) -> Any:
        for attempt in range(n):
            try:
                return await next()
            except ConnectionError:
                if attempt == n - 1:
                    raise
        raise AssertionError("unreachable")

    return ToolMiddleware(name="retry", handler=handler, config={"n": n})


async def test_search_agent_is_called_like_a_function() -> None:
    model = scripted_stream_model([final_answer('{"answer": "hello, world"}')])

    async def handler(props: dict[str, str]) -> Result:
        equip_instruction(f"Search for {props['topic']}")
        return await prompt_agent(Result)

    search_agent = create_agent(id="search_agent", model=model, max_retries=3, handler=handler)
    assert await search_agent({"topic": "hello"}) == Result(answer="hello, world")


async def test_safe_search_tool_retries_inside_and_records_history_outside() -> None:
    log: list[str] = []
    failures = [2]
    safe_search = augment_tool(_search_tool(failures), [wrap_log(log), wrap_retry(3)])
    histories: list[list[str]] = []

    async def remember(ctx: Any, next: Any) -> Any:
        history, set_history = equip_memory("history", [])
        result = await next()
        set_history([*history, f"Used {ctx.tool_name}"])
        histories.append(equip_memory("history", [])[0])
        return result

    model = scripted_stream_model([tool_call_turn([tool_call("search", {"query": "owls"})]),
                                   final_answer('{"answer": "owls are birds"}')])

    async def handler(_: None) -> Result:
        equip_instruction("research owls")
        equip_tool(safe_search, middleware=[ToolMiddleware(name="history", handler=remember)])
        return await prompt_agent(Result)

    assert await create_agent(id="researcher", model=model, handler=handler)(None) == Result(
        "owls are birds")
    # Two backend failures were retried by the static layer: logged once, remembered once.
    assert log == ["call search", "done search"]
    assert histories == [["Used search"]]
    assert "top hit for 'owls'" in str(model.requests[1].messages[-1].content)


async def test_rate_limited_search_blocks_with_synthetic_outputs() -> None:
    async def block_search(ctx: Any, calls: list[Any], next: Any) -> list[ToolOutput]:
        valid = [c for c in calls if c.name != "search"]
        blocked = [ToolOutput(call_id=c.id, outcome=ToolError(
            error="Search tool is currently rate-limited and blocked.", kind="rejected"))
            for c in calls if c.name == "search"]
        real = await next(valid) if valid else []
        return [*real, *blocked]

    class Note(msgspec.Struct):
        text: str

    async def write_note(args: Note, ctx: object) -> ToolResult:
        return ToolResult(content="saved")

    notes = define_tool(name="note", description="Save a note", args=Note, execute=write_note)
    model = scripted_stream_model([
        tool_call_turn([tool_call("search", {"query": "x"}), tool_call("note", {"text": "y"})]),
        final_answer('{"answer": "searched nothing"}')])

    async def handler(_: None) -> Result:
        equip_instruction("go")
        equip_tool(_search_tool([]))
        equip_tool(notes)
        equip_tool_call_loop_middleware(ToolCallLoopMiddleware(name="rate-limit-search",
                                                               handler=block_search))
        return await prompt_agent(Result)

    await create_agent(id="a", model=model, handler=handler)(None)
    answers = [m for m in model.requests[1].messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in answers] == ["call_1_0", "call_1_1"]  # model order kept
    assert "rate-limited" in str(answers[0].content) and answers[1].content == "saved"


async def test_validator_re_asks_until_the_answer_is_long_enough() -> None:
    model = scripted_stream_model([final_answer('{"answer": "short"}'),
                                   final_answer('{"answer": "a properly elaborate answer"}')])

    async def handler(_: None) -> Result:
        equip_system("You are an assistant")
        equip_instruction("Answer the question")
        expect_validator(lambda data: "Answer too short, please elaborate"
                         if len(data.answer) < 10 else True)
        return await prompt_agent(Result)

    result = await create_agent(id="v", model=model, handler=handler)(None)
    assert result.answer == "a properly elaborate answer"
    assert "Answer too short, please elaborate" in str(model.requests[1].messages[-1].content)


async def test_ui_consumer_prefers_structured_data_over_plain_text() -> None:
    ui: list[str] = []
    model = scripted_stream_model([
        tool_call_turn([tool_call("search", {"query": "q"})], text="Let me look that up."),
        final_answer('{"answer": "found it"}')], chunk_size=6)

    async def consumer(stream: Any) -> None:
        saw_structured = False
        async for envelope in stream:
            event = envelope.event
            if isinstance(event, TurnStartEvent):
                saw_structured = False
                ui.append(f"reset {envelope.turn_index}")
            elif isinstance(event, TextEvent):
                if not saw_structured:
                    ui.append(f"text {event.content}")
            elif isinstance(event, StructuredDataEvent):
                saw_structured = True
                ui.append(f"form {event.status} {event.data}")
            elif isinstance(event, ToolCallDoneEvent):
                ui.append(f"tool {event.tool_call.name}")
            elif isinstance(event, TurnDoneEvent):
                ui.append(f"finish {envelope.turn_index} {event.finish_reason}")

    async def handler(_: None) -> Result:
        equip_instruction("q")
        equip_tool(_search_tool([]))
        on_stream(consumer, await_on_end=True)
        return await prompt_agent(Result)

    await create_agent(id="ui", model=model, handler=handler)(None)
    first_turn = ui[:ui.index("finish 0 tool_calls") + 1]
    assert "".join(x[5:] for x in first_turn if x.startswith("text ")) == "Let me look that up."
    assert "tool search" in first_turn
    second = ui[ui.index("reset 1"):]
    assert second[1] == "text {\"answ"  # plain text until the first structured view arrives
    assert not any(x.startswith("text ") for x in second[2:])
    assert second[-2] == "form complete {'answer': 'found it'}" and second[-1] == "finish 1 stop"


async def test_call_order_example_memory_after_the_prompt_and_business_reborn() -> None:
    model = scripted_stream_model([final_answer('{"answer": "not yet ok"}'),
                                   final_answer('{"answer": "now it is fine"}')])

    async def handler(_: None) -> Result:
        equip_system("You are an assistant")
        equip_instruction("Answer the question")
        count, set_count = equip_memory("post_prompt_count", 0)
        output = await prompt_agent(Result)
        set_count(count + 1)  # memory is fine after the prompt
        with pytest.raises(AfterPromptAgentError):
            equip_instruction("Additional instruction")
        if "not yet" in output.answer:  # business validation: plain code, then reborn
            return reborn()  # type: ignore[return-value]
        return output

    assert (await create_agent(id="o", model=model, handler=handler)(None)).answer == \
        "now it is fine"
