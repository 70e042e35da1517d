"""create_agent without a handler: a chat over ``tools`` and ``instructions``, called with the
user's message; its id defaults to the handler's name."""

from __future__ import annotations

import pytest

from bindloop.agent import ChatResult, create_agent, equip_tool, prompt_chat
from bindloop.contracts import SystemMessage, ToolMessage, UserMessage
from bindloop.errors import UsageError
from bindloop.tools import define_tool
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

pytestmark = pytest.mark.anyio


@define_tool
def word_count(text: str) -> int:
    """Count the words in a text."""
    return len(text.split())


async def test_an_agent_without_a_handler_chats_over_its_tools() -> None:
    model = scripted_stream_model([tool_call_turn([tool_call("word_count", {"text": "a b c"})]),
                                   final_answer("Three words.")])
    agent = create_agent(model=model, tools=[word_count], instructions="Be brief.")
    result = await agent("How many words in 'a b c'?")
    assert isinstance(result, ChatResult) and result.data == "Three words."
    first = model.requests[0]
    assert first.messages[0] == SystemMessage(content="Be brief.")
    assert first.messages[-1] == UserMessage(content="How many words in 'a b c'?")
    assert [t.name for t in first.request.tools] == ["word_count"]
    answered = model.requests[1].messages[-1]
    assert isinstance(answered, ToolMessage) and answered.content == "3"
    assert agent.id == "chat"


async def test_the_id_defaults_to_the_handler_name_and_the_chat_options_need_no_handler() -> None:
    async def assistant(prompt: str) -> ChatResult:
        equip_tool(word_count)
        return await prompt_chat()

    assert create_agent(handler=assistant).id == "assistant"
    with pytest.raises(UsageError, match="equip them in the handler"):
        create_agent(handler=assistant, tools=[word_count])
    with pytest.raises(UsageError, match="instructions"):
        create_agent(instructions=3)  # type: ignore[arg-type]
    model = scripted_stream_model([final_answer("hi")])
    with pytest.raises(UsageError, match="user's message"):
        await create_agent(model=model)({"not": "a str"})  # type: ignore[arg-type]
