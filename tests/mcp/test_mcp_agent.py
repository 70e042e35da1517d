"""``equip_mcp``: an MCP server's tools inside the agent API, against the official SDK's server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import subprocess
import sys

from bindloop.agent import (
    ChatResult,
    create_agent,
    equip_instruction,
    equip_mcp,
    prompt_chat,
)
from bindloop.agent.errors import (
    AfterPromptAgentError,
    NoAgentContextError,
)
from bindloop.contracts import ToolMessage
from bindloop.errors import UsageError
from bindloop.hosts.transports.httpx import HttpxTransport
from bindloop.mcp import McpHttpClient, McpToolset, load_mcp_tools, open_mcp_client
from bindloop.testing import final_answer, scripted_stream_model, tool_call, tool_call_turn

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(("imported", "absent"), [("bindloop.agent", "bindloop.mcp"),
                                                  ("bindloop.mcp", "bindloop.agent")])
def test_the_agent_and_mcp_import_apart(imported: str, absent: str) -> None:
    # equip_mcp lives with the agent's hooks and loads MCP on its first call; MCP needs no agent.
    code = f"import sys, {imported}; print({absent!r} in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.fixture
async def client(reference_url: str) -> AsyncIterator[McpHttpClient]:
    transport = HttpxTransport(reference_url)
    try:
        async with open_mcp_client(transport, server="ref") as mcp:
            yield mcp
    finally:
        await transport.aclose()


def _tool_answers(result: ChatResult) -> dict[str, ToolMessage]:
    return {m.tool_call_id: m for m in result.delta if isinstance(m, ToolMessage)}


async def test_an_agent_calls_the_servers_tools(client: McpHttpClient) -> None:
    model = scripted_stream_model([
        tool_call_turn([tool_call("calc__add", {"a": 2, "b": 40}, id="c1"),
                        tool_call("calc__add", {"a": "x", "b": 1}, id="c2")]),
        final_answer("42"),
    ])
    seen: dict[str, Any] = {}

    async def handler(_: None) -> ChatResult:
        equip_instruction("Add 2 and 40.")
        seen["toolset"] = await equip_mcp(client, allow=["add"], prefix="calc")
        return await prompt_chat(max_turn_steps=4)

    result = await create_agent(id="calc", handler=handler, model=model)(None)
    assert result.data == "42" and result.stop_reason == "done"
    assert [t.name for t in seen["toolset"].tools] == ["calc__add"]
    # Only the allowed tool was offered to the model, under its namespaced name.
    offered = [t.name for t in model.requests[0].request.tools]
    assert offered == ["calc__add"]
    answers = _tool_answers(result)
    assert "42" in str(answers["c1"].content) and not answers["c1"].is_error
    # Bad arguments are refused before anything is sent; the model reads why.
    assert answers["c2"].is_error and "/a: expected integer" in str(answers["c2"].content)


async def test_a_loaded_toolset_is_equipped_without_listing_again(client: McpHttpClient) -> None:
    toolset = await load_mcp_tools(client, allow=["explode"], prefix="x")
    model = scripted_stream_model([tool_call_turn([tool_call("x__explode", {}, id="e")]),
                                   final_answer("it failed")])

    async def handler(_: None) -> ChatResult:
        equip_instruction("Explode.")
        assert await equip_mcp(toolset) is toolset
        with pytest.raises(UsageError, match="allow= and prefix="):
            await equip_mcp(toolset, prefix="again")
        return await prompt_chat()

    result = await create_agent(id="x", handler=handler, model=model)(None)
    assert result.stop_reason == "done"
    assert _tool_answers(result)["e"].is_error  # the server's isError reaches the model as a tool error


async def test_equip_mcp_follows_the_draft_rules(client: McpHttpClient) -> None:
    with pytest.raises(NoAgentContextError):
        await equip_mcp(client)

    async def late(_: None) -> None:
        equip_instruction("Say hi.")
        await prompt_chat()
        await equip_mcp(client)

    with pytest.raises(AfterPromptAgentError, match="equip_mcp"):
        await create_agent(id="late", handler=late,
                           model=scripted_stream_model([final_answer("hi")]))(None)

    async def wrong(_: None) -> None:
        await equip_mcp("http://example.invalid/mcp")  # type: ignore[arg-type]

    with pytest.raises(UsageError, match="McpHttpClient or an McpToolset"):
        await create_agent(id="wrong", handler=wrong,
                           model=scripted_stream_model([final_answer("hi")]))(None)
    assert isinstance(await load_mcp_tools(client), McpToolset)
