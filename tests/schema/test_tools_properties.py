"""Properties of the sanitizer over generated hostile schemas."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tools_schema_strategies import tool_schemas, values_for
from tools_strict_subset import violations

from bindloop.schema import SchemaSanitizeError, sanitize_tool_schema, sanitize_tool_schema_report

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@SETTINGS
@given(tool_schemas())
def test_output_passes_the_strict_subset_checker(schema: dict[str, Any]) -> None:
    assert violations(sanitize_tool_schema(schema)) == []


@SETTINGS
@given(tool_schemas())
def test_keep_mode_output_passes_the_checker_with_refs_allowed(schema: dict[str, Any]) -> None:
    assert violations(sanitize_tool_schema(schema, refs="keep"), allow_refs=True) == []


@SETTINGS
@given(tool_schemas(), st.sampled_from(["inline", "keep"]))
def test_idempotent(schema: dict[str, Any], refs: Any) -> None:
    once = sanitize_tool_schema(schema, refs=refs)
    assert sanitize_tool_schema(once, refs=refs) == once
    assert sanitize_tool_schema_report(once, refs=refs).changes == ()


@SETTINGS
@given(tool_schemas())
def test_never_mutates_its_input(schema: dict[str, Any]) -> None:
    before = copy.deepcopy(schema)
    out = sanitize_tool_schema(schema)
    assert schema == before
    # And the output shares no mutable container with the input.
    out_ids = _container_ids(out)
    assert not out_ids & _container_ids(schema)


def _container_ids(value: object) -> set[int]:
    ids: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            ids.add(id(item))
            stack.extend(item.values())
        elif isinstance(item, list):
            ids.add(id(item))
            stack.extend(item)
    return ids


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(tool_schemas(), st.data())
def test_sound_transforms_never_widen(schema: dict[str, Any], data: st.DataObject) -> None:
    """A value valid under the sanitized schema is valid under the original, unless a rewrite that
    is documented as relaxing ran."""
    report = sanitize_tool_schema_report(schema)
    if report.relaxed:
        return
    sanitized = jsonschema.Draft202012Validator(report.schema)
    original = jsonschema.Draft202012Validator(schema)
    for _ in range(4):
        value = data.draw(values_for(report.schema))
        if sanitized.is_valid(value):
            assert original.is_valid(value), (value, report.changes)


def _nest(depth: int, key: str) -> dict[str, Any]:
    node: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        node = {"type": "object", "properties": {key: node}} if key == "properties" else {
            "type": "array", "items": node}
    return node


@pytest.mark.parametrize("key", ["properties", "items"])
@pytest.mark.parametrize("depth", [100, 5_000, 50_000])
def test_deep_nesting_is_a_clear_error_not_a_recursion_error(depth: int, key: str) -> None:
    schema = {"type": "object", "properties": {"x": _nest(depth, key)}}
    with pytest.raises(SchemaSanitizeError, match="deeper"):
        sanitize_tool_schema(schema)


def test_deep_enum_value_is_bounded() -> None:
    value: Any = "leaf"
    for _ in range(20_000):
        value = [value]
    with pytest.raises(SchemaSanitizeError):
        sanitize_tool_schema({"type": "object", "properties": {"x": {"enum": [value]}}})


def test_python_object_cycle_is_a_clear_error() -> None:
    node: dict[str, Any] = {"type": "object", "properties": {}}
    node["properties"]["self"] = node
    with pytest.raises(SchemaSanitizeError, match="cycle"):
        sanitize_tool_schema(node)


def test_ref_fan_out_is_bounded() -> None:
    defs: dict[str, Any] = {"L0": {"type": "string"}}
    for level in range(1, 40):  # 2**39 nodes if inlined naively
        ref = {"$ref": f"#/$defs/L{level - 1}"}
        defs[f"L{level}"] = {"type": "object", "properties": {"a": ref, "b": ref}}
    schema = {"type": "object", "properties": {"x": {"$ref": "#/$defs/L39"}}, "$defs": defs}
    with pytest.raises(SchemaSanitizeError, match="nodes"):
        sanitize_tool_schema(schema, max_depth=1_000)
    kept = sanitize_tool_schema(schema, refs="keep")
    assert kept["properties"] == {"x": {"$ref": "#/$defs/L39"}}


@settings(max_examples=100, deadline=None)
@given(st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=3)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(
                                ["type", "properties", "items", "anyOf", "required", "enum",
                                 "$ref", "additionalProperties", "x"]), inner, max_size=4)),
    max_leaves=20,
))
def test_arbitrary_json_gives_a_schema_or_a_typed_error(value: Any) -> None:
    try:
        out = sanitize_tool_schema(value)
    except SchemaSanitizeError:
        return
    assert violations(out) == []
    assert sanitize_tool_schema(out) == out
