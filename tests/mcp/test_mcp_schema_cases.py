"""MCP tool calls are checked against the server's own ``inputSchema`` (not the rewrite the model
sees): valid calls are never refused, and what the rewrite had to drop is still enforced —
``patternProperties`` beside ``additionalProperties: false``, ``not``, ``if`` / ``then`` /
``else``, ``dependentRequired``, nested ``allOf`` / ``anyOf``."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings, strategies as st

from bindloop.contracts import ToolError
from bindloop.hosts.transports.httpx import HttpxTransport
from bindloop.mcp import McpArguments, McpHttpClient, McpTool, McpToolInfo, build_mcp_tools


_CLIENT: list[McpHttpClient] = []


def tool(schema: dict[str, Any]) -> McpTool:
    # The client is never called: parse_arguments runs before anything is sent.
    if not _CLIENT:
        _CLIENT.append(McpHttpClient(HttpxTransport("http://127.0.0.1:9/mcp"), server="s"))
    toolset = build_mcp_tools(_CLIENT[0], [McpToolInfo(name="t", input_schema=schema)])
    assert not toolset.skipped, toolset.skipped
    return toolset.tools[0]


def accepts(schema: dict[str, Any], args: dict[str, Any]) -> bool:
    parsed = tool(schema).parse_arguments(args)
    if isinstance(parsed, ToolError):
        assert parsed.kind == "validation"
        return False
    assert isinstance(parsed, McpArguments) and parsed.values == args
    return True


PATTERN = {"type": "object", "properties": {"name": {"type": "string"}},
           "patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": False}
NOT_REQUIRED = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "not": {"required": ["a"]}}
IF_THEN = {"type": "object", "properties": {"kind": {"type": "string"}, "size": {"type": "integer"}},
           "if": {"properties": {"kind": {"const": "box"}}, "required": ["kind"]},
           "then": {"required": ["size"]}, "else": {"not": {"required": ["size"]}}}
DEPENDENT = {"type": "object", "properties": {"card": {"type": "string"}, "cvc": {"type": "string"}},
             "dependentRequired": {"card": ["cvc"]}}
NESTED = {"type": "object", "properties": {"p": {"type": "object", "properties": {
    "a": {"type": "integer"}, "b": {"type": "integer"}},
    "allOf": [{"anyOf": [{"required": ["a"]}, {"required": ["b"]}]}]}}, "required": ["p"]}


@pytest.mark.parametrize(("schema", "args", "valid"), [
    (PATTERN, {"name": "n", "x-count": 3}, True),       # refused before: pattern props ignored
    (PATTERN, {"x-count": "three"}, False),
    (PATTERN, {"other": 1}, False),
    (NOT_REQUIRED, {"b": "x"}, True),
    (NOT_REQUIRED, {"a": "x"}, False),                  # `not: {}` would refuse both
    (IF_THEN, {"kind": "box", "size": 2}, True),
    (IF_THEN, {"kind": "box"}, False),
    (IF_THEN, {"kind": "bag"}, True),
    (IF_THEN, {"kind": "bag", "size": 2}, False),
    (DEPENDENT, {"card": "4111", "cvc": "123"}, True),
    (DEPENDENT, {"card": "4111"}, False),                # shown before, never enforced
    (DEPENDENT, {"cvc": "123"}, True),
    (NESTED, {"p": {"b": 1}}, True),
    (NESTED, {"p": {}}, False),
])
def test_calls_are_judged_by_the_servers_schema(schema: dict[str, Any], args: dict[str, Any],
                                                 valid: bool) -> None:
    assert jsonschema.Draft202012Validator(schema).is_valid(args) is valid  # the oracle agrees
    assert accepts(schema, args) is valid


def test_the_model_sees_no_schema_nothing_satisfies() -> None:
    # `not: {required: [a]}` cannot be kept for a strict provider (its `required` names no
    # property of its own node); it is dropped and reported, never emptied into `not: {}`.
    shown = tool(NOT_REQUIRED).parameters
    assert "not" not in shown
    assert shown["properties"] == NOT_REQUIRED["properties"]
    assert jsonschema.Draft202012Validator(shown).is_valid({"b": "x"})
    # the if/then/else group goes the same way; dependentRequired and patternProperties are kept
    assert not {"if", "then", "else"} & set(tool(IF_THEN).parameters)
    assert tool(DEPENDENT).parameters["dependentRequired"] == {"card": ["cvc"]}
    assert tool(PATTERN).parameters["patternProperties"] == {"^x-": {"type": "integer"}}


def test_a_multi_type_property_the_rewrite_collapses_still_takes_every_type() -> None:
    schema = {"type": "object", "properties": {"v": {"type": ["string", "integer"]}}}
    assert tool(schema).parameters["properties"]["v"]["type"] == "string"  # what the model sees
    assert accepts(schema, {"v": 3}) and accepts(schema, {"v": "3"})
    assert not accepts(schema, {"v": 1.5})


_NAMES = st.sampled_from(["a", "b", "x-1", "x-2", "c"])
_VALUES = st.one_of(st.integers(-3, 3), st.sampled_from(["", "s", "box"]), st.booleans())


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([PATTERN, NOT_REQUIRED, IF_THEN, DEPENDENT]),
       st.dictionaries(_NAMES, _VALUES, max_size=4))
def test_the_tool_agrees_with_jsonschema_on_the_servers_schema(schema: dict[str, Any],
                                                               args: dict[str, Any]) -> None:
    assert accepts(schema, args) is jsonschema.Draft202012Validator(schema).is_valid(args)
