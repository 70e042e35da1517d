"""One reader of tool arguments and one of the OpenAI tool-call dict: ``define_tool`` tools, MCP
tools, streamed deltas and stored transcripts accept exactly the same shapes."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, strategies as st

from bindloop.completion import create_tool_call_accumulator
from bindloop.tools import (
    ParsedArguments,
    UnparseableArguments,
    parse_tool_call_arguments,
    read_tool_arguments,
)
from bindloop.contracts import ToolCall, ToolError, message_from_openai, openai_tool_call_fields
from bindloop.hosts.transports.httpx import HttpxTransport
from bindloop.mcp import McpArguments, McpHttpClient, McpToolInfo, build_mcp_tools
from bindloop.tools import define_tool


class Args(msgspec.Struct):
    q: str = ""


async def _run(args: Args, ctx: object) -> str:
    return args.q


TOOL = define_tool(name="t", description="", args=Args, execute=_run)
MCP = build_mcp_tools(McpHttpClient(HttpxTransport("http://127.0.0.1:9/mcp"), server="s"),
                      [McpToolInfo(name="t", input_schema={"type": "object"})]).tools[0]

RAW = st.one_of(
    st.none(), st.sampled_from(["", "  ", "{}", '{"q": "x"}', "[]", "null", "NaN", "1e999",
                                '{"q": NaN}', "{", '{"q": "\\ud800"}']),
    st.sampled_from([b'{"q": "y"}', b"\xff", b""]),
    st.dictionaries(st.just("q"), st.sampled_from(["a", "b"]), max_size=1),
)


@given(RAW)
def test_define_tool_and_mcp_tools_read_arguments_alike(raw: Any) -> None:
    verdict = read_tool_arguments(raw)
    ours, theirs = TOOL.parse_arguments(raw), MCP.parse_arguments(raw)
    if isinstance(verdict, UnparseableArguments):
        assert isinstance(ours, ToolError) and isinstance(theirs, ToolError)
        assert verdict.detail in ours.error and verdict.detail in theirs.error
    else:
        assert isinstance(theirs, McpArguments) and theirs.values == verdict.arguments


def test_the_reader_copies_decoded_objects_and_refuses_what_json_cannot_carry() -> None:
    given_args: dict[str, Any] = {"q": ["x"]}
    parsed = read_tool_arguments(given_args)
    assert isinstance(parsed, ParsedArguments) and parsed.arguments == given_args
    assert parsed.arguments["q"] is not given_args["q"]
    assert isinstance(read_tool_arguments({"q": object()}), UnparseableArguments)  # type: ignore[dict-item]
    assert isinstance(read_tool_arguments(b"\xff"), UnparseableArguments)


@pytest.mark.parametrize("call", [
    {"id": "c1", "type": "function", "function": {"name": "t", "arguments": '{"q": "x"}'}},
    {"id": "c1", "name": "t", "arguments": '{"q": "x"}'},                  # flat
])
def test_one_tool_call_dict_rule_everywhere(call: dict[str, Any]) -> None:
    assert openai_tool_call_fields(call)[1:] == ("c1", "t", '{"q": "x"}')
    assert parse_tool_call_arguments(call) == ParsedArguments(arguments={"q": "x"})
    message = message_from_openai({"role": "assistant", "content": None, "tool_calls": [call]})
    assert message.tool_calls == (ToolCall(id="c1", name="t", arguments='{"q": "x"}'),)  # type: ignore[union-attr]
    accumulator = create_tool_call_accumulator()
    accumulator.observe([{"index": 0, **call}])
    assert accumulator.assembled() == (ToolCall(id="c1", name="t", arguments='{"q": "x"}'),)


def test_absent_or_null_arguments_mean_none_everywhere() -> None:
    for call in ({"id": "c1", "function": {"name": "t"}},
                 {"id": "c1", "function": {"name": "t", "arguments": None}}):
        assert parse_tool_call_arguments(call) == ParsedArguments(arguments={})
        message = message_from_openai({"role": "assistant", "tool_calls": [call]})
        assert message.tool_calls[0].arguments == "{}"  # type: ignore[union-attr]
