"""prompt_chat / ChatResult / the turn budgets / suspend -> checkpoint -> resume_chat."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from bindloop.agent import (
    ChatResult,
    create_agent,
    equip_history,
    equip_instruction,
    equip_tool,
    expect_validator,
    prompt_agent,
    prompt_chat,
    resume_chat,
)
from bindloop.contracts import (
    AssistantMessage,
    TextPart,
    ToolMessage,
    ToolResult,
    ToolSuspend,
    TurnUsage,
    UserMessage,
)
from bindloop.errors import UsageError
from bindloop.agent.errors import PromptSuspendedError, ToolLoopExceededError
from bindloop.tools import define_tool
from bindloop.checkpoints import parse_loop_checkpoint, serialize_loop_checkpoint
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

pytestmark = pytest.mark.anyio


class Expr(msgspec.Struct):
    expression: str


async def _calc(args: Expr, ctx: object) -> ToolResult:
    a, b = args.expression.split("+")
    return ToolResult(content=str(int(a) + int(b)))


CALC = define_tool(name="calc", description="Add two numbers", args=Expr, execute=_calc)


class Question(msgspec.Struct):
    question: str


async def _ask(args: Question, ctx: object) -> ToolSuspend:
    return ToolSuspend(mode="waiting_for_reply", detail=args.question)


ASK = define_tool(name="ask_human", description="Ask the user", args=Question, execute=_ask)


def _chat_agent(model: Any, *, tools: Any = (CALC,), **prompt: Any) -> Any:
    async def handler(props: str) -> ChatResult:
        equip_instruction(props)
        for t in tools:
            equip_tool(t)
        return await prompt_chat(**prompt)

    return create_agent(id="chat", handler=handler, model=model)


async def test_chat_runs_tools_and_returns_text_delta_and_stats() -> None:
    model = scripted_stream_model([
        tool_call_turn([tool_call("calc", {"expression": "2+3"})],
                       usage=TurnUsage(input_tokens=10, output_tokens=3)),
        final_answer("2 + 3 = 5", usage=TurnUsage(input_tokens=20, output_tokens=5)),
    ])
    result = await _chat_agent(model)("What is 2+3?")
    assert result.data == "2 + 3 = 5"
    assert result.stop_reason == "done" and result.checkpoint is None
    assert [type(m) for m in result.delta] == [AssistantMessage, ToolMessage, AssistantMessage]
    assert result.delta[1].content == "5"
    assert (result.stats.turns, result.stats.tool_calls) == (2, 1)
    assert (result.stats.input_tokens, result.stats.output_tokens) == (30, 8)
    # The equipped tool is what the model was offered.
    assert [t.name for t in model.requests[0].request.tools] == ["calc"]


async def test_delta_continues_a_chat_through_equip_history() -> None:
    first = await _chat_agent(scripted_stream_model([final_answer("Hi Ada")]))("I am Ada")
    model = scripted_stream_model([final_answer("You are Ada")])

    async def handler(_: None) -> str:
        equip_history([UserMessage(content="I am Ada"), *first.delta])
        equip_instruction("Who am I?")
        return (await prompt_chat()).data

    assert await create_agent(id="c", handler=handler, model=model)(None) == "You are Ada"
    assert [type(m) for m in model.requests[0].messages] == [UserMessage, AssistantMessage,
                                                             UserMessage]


async def test_more_turns_than_max_turn_steps_raise_tool_loop_exceeded() -> None:
    model = scripted_stream_model([tool_call_turn([tool_call("calc", {"expression": "1+1"})])
                                   for _ in range(3)])
    with pytest.raises(ToolLoopExceededError, match="2 model turns"):
        await _chat_agent(model, max_turn_steps=2)("loop")
    assert model.position == 2


async def test_a_chat_out_of_turns_goes_on_from_its_checkpoint_in_a_new_process() -> None:
    ran: list[str] = []

    async def calc(args: Expr, ctx: object) -> ToolResult:
        ran.append(args.expression)
        return await _calc(args, ctx)

    counting = define_tool(name="calc", description="Add two numbers", args=Expr, execute=calc)
    model = scripted_stream_model([tool_call_turn([tool_call("calc", {"expression": f"{i}+1"})])
                                   for i in range(2)])
    with pytest.raises(ToolLoopExceededError, match="2 model turns") as info:
        await _chat_agent(model, tools=(counting,), max_turn_steps=2)("loop")
    cp = info.value.checkpoint
    assert cp is not None and cp.status == "iteration_limit"
    assert cp.iterations == cp.max_iterations == cp.stats.turns == 2
    assert [type(m) for m in cp.messages] == [UserMessage, AssistantMessage, ToolMessage,
                                              AssistantMessage, ToolMessage]
    stored = serialize_loop_checkpoint(cp)  # both finished tool rounds are in it

    # "A new process": only the stored bytes carried over; the rounds are not run again.
    model2 = scripted_stream_model([tool_call_turn([tool_call("calc", {"expression": "2+1"})]),
                                    final_answer("1, 2 and 3")])

    async def go_on(_: None) -> ChatResult:
        equip_tool(counting)
        return await resume_chat(stored, max_turn_steps=3)

    done = await create_agent(id="chat", handler=go_on, model=model2)(None)
    assert done.stop_reason == "done" and done.data == "1, 2 and 3"
    assert ran == ["0+1", "1+1", "2+1"]  # each round ran once, across both processes
    assert list(model2.requests[0].messages) == list(cp.messages)
    assert done.stats.turns == 2 and model2.position == 2

    # Out of turns again: the error carries the new position, which goes on once more.
    model3 = scripted_stream_model([tool_call_turn([tool_call("calc", {"expression": "2+1"})])])

    async def short(_: None) -> ChatResult:
        equip_tool(counting)
        return await resume_chat(stored, max_turn_steps=1)

    with pytest.raises(ToolLoopExceededError) as again:
        await create_agent(id="chat", handler=short, model=model3)(None)
    assert again.value.checkpoint is not None and again.value.checkpoint.iterations == 3


@pytest.mark.parametrize("steps", [0, -1, True, 1.5])
async def test_resume_chat_refuses_a_bad_max_turn_steps(steps: Any) -> None:
    stored = await _paused_chat()

    async def handler(_: None) -> ChatResult:
        return await resume_chat(stored, reply="x", max_turn_steps=steps)

    with pytest.raises(UsageError, match="max_turn_steps"):
        await create_agent(id="c", handler=handler, model=scripted_stream_model([]))(None)


async def test_validator_re_asks_in_chat() -> None:
    model = scripted_stream_model([final_answer("short"), final_answer("a much longer answer")])

    async def handler(_: None) -> str:
        equip_instruction("Explain")
        expect_validator(lambda text: True if len(text) > 10 else "too short, elaborate")
        return (await prompt_chat()).data

    assert await create_agent(id="v", handler=handler, model=model)(None) == "a much longer answer"
    assert "too short, elaborate" in str(model.requests[1].messages[-1].content)


async def test_suspend_ends_with_a_checkpoint_that_resumes_in_a_new_process() -> None:
    model = scripted_stream_model([
        tool_call_turn([tool_call("ask_human", {"question": "Which city?"}, id="ask_1")]),
    ])
    paused = await _chat_agent(model, tools=(ASK, CALC))("Plan my trip")
    assert paused.stop_reason == "waiting_for_reply" and paused.data == ""
    assert paused.checkpoint is not None
    assert [s.tool_call_id for s in paused.checkpoint.open_suspends] == ["ask_1"]
    stored = serialize_loop_checkpoint(paused.checkpoint)  # bytes a host persists

    # "A new process": fresh model, fresh agent, only the stored bytes carried over.
    model2 = scripted_stream_model([
        tool_call_turn([tool_call("calc", {"expression": "40+2"})]),
        final_answer("Lisbon it is; 42 days"),
    ])

    async def resume(_: None) -> ChatResult:
        equip_tool(ASK)
        equip_tool(CALC)
        return await resume_chat(stored, reply="Lisbon")

    done = await create_agent(id="chat", handler=resume, model=model2)(None)
    assert done.stop_reason == "done" and done.data == "Lisbon it is; 42 days"
    sent = model2.requests[0].messages
    assert sent[-1] == ToolMessage(tool_call_id="ask_1", content="Lisbon", name="ask_human")
    assert [type(m) for m in done.delta] == [ToolMessage, AssistantMessage, ToolMessage,
                                             AssistantMessage]
    assert parse_loop_checkpoint(stored).status == "waiting_for_reply"


async def test_a_suspend_inside_prompt_agent_raises_with_the_checkpoint() -> None:
    model = scripted_stream_model([tool_call_turn([tool_call("ask_human", {"question": "?"})])])

    async def handler(_: None) -> Any:
        equip_instruction("x")
        equip_tool(ASK)
        return await prompt_agent(Expr)

    with pytest.raises(PromptSuspendedError, match="resume_chat") as info:
        await create_agent(id="s", handler=handler, model=model)(None)
    assert info.value.checkpoint.status == "waiting_for_reply"


async def _paused_chat() -> bytes:
    model = scripted_stream_model([
        tool_call_turn([tool_call("ask_human", {"question": "Which city?"}, id="ask_1")]),
    ])
    paused = await _chat_agent(model, tools=(ASK,))("Plan my trip")
    assert paused.checkpoint is not None
    return serialize_loop_checkpoint(paused.checkpoint)


async def test_resume_chat_re_asks_validators() -> None:
    stored = await _paused_chat()
    model = scripted_stream_model([final_answer("Lisbon"), final_answer("Lisbon, in May")])
    seen: list[str] = []

    def needs_month(text: str) -> bool | str:
        seen.append(text)
        return True if "May" in text else "name the month"

    async def resume(_: None) -> ChatResult:
        equip_tool(ASK)
        expect_validator(needs_month)
        return await resume_chat(stored, reply="Lisbon")

    done = await create_agent(id="chat", handler=resume, model=model)(None)
    assert seen == ["Lisbon", "Lisbon, in May"]
    assert done.stop_reason == "done" and done.data == "Lisbon, in May"
    reask = model.requests[1].messages[-1]
    assert isinstance(reask, UserMessage) and "name the month" in str(reask.content)
    # The delta holds everything this prompt added: the reply, both answers and the re-ask.
    assert [type(m) for m in done.delta] == [ToolMessage, AssistantMessage, UserMessage,
                                             AssistantMessage]
    assert done.stats.turns == 2


async def test_resume_chat_gives_up_after_max_retries_with_every_attempt() -> None:
    from bindloop.agent.errors import StructuredOutputError

    stored = await _paused_chat()
    model = scripted_stream_model([final_answer("no"), final_answer("still no")])

    async def resume(_: None) -> ChatResult:
        equip_tool(ASK)
        expect_validator(lambda text: "refused")
        return await resume_chat(stored, reply="Lisbon")

    with pytest.raises(StructuredOutputError) as info:
        await create_agent(id="chat", handler=resume, model=model, max_retries=1)(None)
    assert [a[0] for a in info.value.attempts] == ["no", "still no"]

    model0 = scripted_stream_model([final_answer("no")])
    with pytest.raises(StructuredOutputError):
        await create_agent(id="chat", handler=resume, model=model0, max_retries=0)(None)
    assert len(model0.requests) == 1


async def _ask_keeping(args: Question, ctx: object) -> ToolSuspend:
    return ToolSuspend(mode="waiting_for_reply", detail=args.question,
                       state=f'{{"asked": {msgspec.json.encode(args.question).decode()}}}')


ASK_KEEPING = define_tool(name="ask_human", description="Ask the user", args=Question,
                          execute=_ask_keeping)


async def test_a_suspends_state_is_kept_in_the_stored_checkpoint_and_a_parts_reply_resumes(
        ) -> None:
    model = scripted_stream_model([
        tool_call_turn([tool_call("ask_human", {"question": "Which city?"}, id="ask_1")]),
    ])
    paused = await _chat_agent(model, tools=(ASK_KEEPING,))("Plan my trip")
    assert paused.checkpoint is not None
    stored = serialize_loop_checkpoint(paused.checkpoint)
    (suspend,) = parse_loop_checkpoint(stored).open_suspends
    assert suspend.state == '{"asked": "Which city?"}' and suspend.detail == "Which city?"
    # A suspend without state keeps the bytes it always had.
    plain = await _chat_agent(scripted_stream_model([
        tool_call_turn([tool_call("ask_human", {"question": "Which city?"}, id="ask_1")]),
    ]), tools=(ASK,))("Plan my trip")
    assert plain.checkpoint is not None
    assert b'"state"' not in serialize_loop_checkpoint(plain.checkpoint)

    model2 = scripted_stream_model([final_answer("Lisbon it is")])

    async def resume(_: None) -> ChatResult:
        equip_tool(ASK_KEEPING)
        return await resume_chat(stored, reply=(TextPart(text="Lisbon"),))

    done = await create_agent(id="chat", handler=resume, model=model2)(None)
    assert done.stop_reason == "done"
    assert model2.requests[0].messages[-1] == ToolMessage(
        tool_call_id="ask_1", content=(TextPart(text="Lisbon"),), name="ask_human")
