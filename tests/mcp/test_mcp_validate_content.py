"""Argument validation agrees with a reference JSON Schema validator on sanitized schemas, and MCP
content blocks map onto content parts without losing anything."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given, strategies as st

from bindloop.contracts import FilePart, ImagePart, TextPart, ToolError, ToolResult
from bindloop.mcp import CallToolResult, map_call_result, map_content_block
from bindloop.schema import first_schema_violation
from bindloop.schema import sanitize_tool_schema

scalars = st.sampled_from([
    {"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"},
    {"type": "null"}, {"type": "string", "enum": ["a", "b"]}, {"type": "string", "minLength": 2},
    {"type": "integer", "minimum": 0, "maximum": 10}, {"type": "number", "exclusiveMinimum": 1.5},
    {"type": "string", "pattern": "^x+$"}, {"type": "integer", "multipleOf": 3},
    {"type": "string", "maxLength": 1}, {"type": "number", "maximum": 3, "exclusiveMaximum": 2.5},
    {"type": "array", "uniqueItems": True, "maxItems": 2}, {"type": "string", "const": "xy"},
])


def schemas() -> st.SearchStrategy[dict[str, Any]]:
    return st.recursive(scalars, lambda inner: st.one_of(
        st.builds(lambda items, lo: {"type": "array", "items": items, "minItems": lo},
                  inner, st.integers(0, 2)),
        st.builds(lambda props, req: {"type": "object", "properties": props,
                                      "required": sorted(set(req) & set(props))},
                  st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3),
                  st.lists(st.sampled_from(["a", "b", "c"]), max_size=3)),
        st.builds(lambda a, b: {"anyOf": [a, b]}, inner, inner),
        st.builds(lambda a, b: {"oneOf": [a, b]}, inner, inner),
        st.builds(lambda a, b: {"allOf": [a, b]}, inner, inner),
    ), max_leaves=6)


values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 15) | st.floats(-5, 15, allow_nan=False)
    | st.sampled_from(["", "a", "b", "xx", "xy", "abc"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["a", "b", "c", "d"]), inner, max_size=3), max_leaves=8)


@given(schemas(), st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), values, max_size=3),
       st.booleans())
def test_the_checker_agrees_with_jsonschema_on_sanitized_schemas(
        inner: dict[str, Any], value: dict[str, Any], closed: bool) -> None:
    root: dict[str, Any] = {"type": "object", "properties": {"a": inner, "b": inner},
                            "required": ["a"]}
    if closed:
        root["additionalProperties"] = False
    schema = sanitize_tool_schema(root)
    ours = first_schema_violation(value, schema)
    theirs = jsonschema.Draft202012Validator(schema).is_valid(value)
    assert (ours is None) == theirs, (schema, value, ours)


def test_violations_name_the_path() -> None:
    schema = {"type": "object", "properties": {"items": {"type": "array", "items": {
        "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}},
        "additionalProperties": False}
    assert first_schema_violation({"items": [{"n": 1}, {"n": "x"}]}, schema) == \
        "/items/1/n: expected integer, got string"
    assert first_schema_violation({"other": 1}, schema) == "/: unexpected property 'other'"
    assert first_schema_violation({"items": [{}]}, schema) == \
        "/items/0: missing required property 'n'"


def test_depth_is_bounded() -> None:
    schema: dict[str, Any] = {"type": "array"}
    value: Any = []
    for _ in range(200):
        schema = {"type": "array", "items": schema}
        value = [value]
    assert "deeper" in (first_schema_violation(value, schema) or "")


@pytest.mark.parametrize(("block", "part"), [
    ({"type": "text", "text": "hi"}, TextPart(text="hi")),
    ({"type": "image", "data": "AAA=", "mimeType": "image/png"},
     ImagePart(data="AAA=", media_type="image/png")),
    ({"type": "audio", "data": "BBB=", "mimeType": "audio/wav"},
     FilePart(data="BBB=", media_type="audio/wav", filename="audio")),
    ({"type": "resource", "resource": {"uri": "file:///a.txt", "text": "body"}},
     TextPart(text="[resource file:///a.txt]\nbody")),
    ({"type": "resource", "resource": {"uri": "file:///dir/b.pdf", "blob": "CCC=",
                                       "mimeType": "application/pdf"}},
     FilePart(data="CCC=", media_type="application/pdf", filename="b.pdf")),
    ({"type": "resource_link", "uri": "https://x.test/doc", "name": "doc",
      "mimeType": "text/html", "description": "the doc"},
     TextPart(text="[resource link doc: https://x.test/doc (text/html) - the doc]")),
    ({"type": "hologram", "data": 1}, TextPart(text='[unsupported MCP content block: '
                                                    '{"data":1,"type":"hologram"}]')),
    ("text", TextPart(text='[unreadable MCP content block: "text"]')),
])
def test_content_blocks_map_to_parts(block: Any, part: Any) -> None:
    assert map_content_block(block) == part


def test_results_errors_and_structured_content() -> None:
    one = map_call_result(CallToolResult(content=[{"type": "text", "text": "5"}],
                                         structured_content={"result": 5}), server="s", tool="t")
    assert one == ToolResult(content="5")
    only_structured = map_call_result(CallToolResult(structured_content={"b": 1, "a": 2}),
                                      server="s", tool="t")
    assert only_structured == ToolResult(content='{"a":2,"b":1}')
    mixed = map_call_result(CallToolResult(content=[{"type": "text", "text": "see"},
                                                    {"type": "image", "data": "AA=="}]),
                            server="s", tool="t")
    assert isinstance(mixed, ToolResult) and isinstance(mixed.content, tuple)
    failed = map_call_result(CallToolResult(content=[{"type": "text", "text": "no such city"}],
                                            is_error=True), server="s", tool="t")
    assert failed == ToolError(error="no such city", kind="error")
    silent_failure = map_call_result(CallToolResult(is_error=True), server="s", tool="t")
    assert isinstance(silent_failure, ToolError) and "'t' on server 's' failed" in silent_failure.error
    empty = map_call_result(CallToolResult(), server="s", tool="t")
    assert empty == ToolResult(content="(MCP tool 't' returned no content)")
