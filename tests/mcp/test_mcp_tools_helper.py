"""``bindloop.hosts.mcp_tools(url)``: the SDK's reference server's tools, over real HTTP, handed to
an agent's ``tools=``; bad URLs refused before anything is sent."""

from __future__ import annotations

import pytest

from bindloop.agent import create_agent
from bindloop.contracts import ToolMessage
from bindloop.errors import UsageError
from bindloop.hosts import mcp_tools
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

pytestmark = pytest.mark.anyio


async def test_a_servers_tools_for_an_agent_in_one_block(reference_url: str) -> None:
    async with mcp_tools(reference_url, server="calc", allow=["add"]) as calc:
        assert [t.name for t in calc.tools] == ["calc__add"]
        model = scripted_stream_model([tool_call_turn([tool_call("calc__add", {"a": 2, "b": 3})]),
                                       final_answer("5")])
        result = await create_agent(model=model, tools=calc.tools)("What is 2 + 3?")
    answer = model.requests[1].messages[-1]
    assert isinstance(answer, ToolMessage) and "5" in str(answer.content)
    assert result.data == "5"


@pytest.mark.parametrize("url", ["ftp://x/mcp", "127.0.0.1:8000/mcp", 3])
async def test_a_url_that_is_not_http_is_refused(url: object) -> None:
    with pytest.raises(UsageError, match="http"):
        async with mcp_tools(url):  # type: ignore[arg-type]
            pass
