"""The rewriter's policy for what a target cannot carry exactly (drop / describe / refuse), and the
guarantee behind it: a rewrite never empties a schema into one that refuses what the original
accepted, unless it reports a narrowing rewrite."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings, strategies as st

from bindloop.schema import (
    UnsupportedSchemaError,
    first_schema_violation,
    sanitize_tool_schema,
    sanitize_tool_schema_report,
    strict_json_schema,
)

PROPS = {"a": {"type": "string"}, "b": {"type": "integer"}}


def root(**extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": PROPS, **extra}


def test_not_with_a_required_name_is_dropped_reported_never_emptied() -> None:
    report = sanitize_tool_schema_report(root(**{"not": {"required": ["a"]}}))
    assert "not" not in report.schema
    assert [(c.path, c.kind) for c in report.changes] == [("/not", "keyword_dropped")]
    assert report.relaxed


def test_describe_writes_the_construct_for_the_model_and_refuse_names_it() -> None:
    described = sanitize_tool_schema(root(**{"not": {"required": ["a"]}}), policy="describe")
    assert "not" not in described
    assert described["description"] == 'Also must match the JSON Schema {"not":{"required":["a"]}}.'
    with pytest.raises(UnsupportedSchemaError, match="'not'") as info:
        sanitize_tool_schema(root(**{"not": {"required": ["a"]}}), policy="refuse")
    assert info.value.path == "/not"


def test_exact_negations_and_conditionals_are_kept() -> None:
    kept = root(**{"not": {"properties": {"a": {"const": "x"}}, "required": ["a"]},
                   "if": {"properties": {"b": {"type": "integer"}}, "required": ["b"]},
                   "then": {"properties": {"a": {"type": "string"}}, "required": ["a"]}})
    report = sanitize_tool_schema_report(kept, policy="refuse")
    assert report.schema["not"] == {"properties": {"a": {"type": "string", "const": "x"}},
                                    "required": ["a"]}
    assert report.schema["then"] == kept["then"] and report.schema["if"] == kept["if"]
    assert not report.relaxed


def test_an_inexact_if_group_goes_to_the_policy_whole() -> None:
    group = {"if": {"required": ["a"]}, "then": {"required": ["b"]}}
    report = sanitize_tool_schema_report(root(**group))
    assert not {"if", "then"} & set(report.schema)
    assert [c.kind for c in report.changes] == ["keyword_dropped"]
    with pytest.raises(UnsupportedSchemaError, match="'if', 'then'"):
        sanitize_tool_schema(root(**group), policy="refuse")


def test_an_unknown_policy_is_a_usage_error() -> None:
    with pytest.raises(ValueError, match="policy"):
        sanitize_tool_schema(root(), policy="ignore")  # type: ignore[arg-type]


def test_structured_output_policy() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "not": {"const": "x"}}},
              "required": ["a"]}
    with pytest.raises(UnsupportedSchemaError, match="'not'"):
        strict_json_schema(schema)
    described = strict_json_schema(schema, policy="describe")["properties"]["a"]
    assert described == {"type": "string",
                         "description": 'Also must match the JSON Schema {"not":{"const":"x"}}.'}
    assert strict_json_schema(schema, policy="drop")["properties"]["a"] == {"type": "string"}


# -- the property: no silent narrowing ------------------------------------------------------------

# Rewrites that may refuse a value the original accepted (each reported); everything else the
# tool target does is exact or widening.
NARROWING = {"multi_type_collapsed", "nullable_collapsed", "ref_siblings_override"}

_leaf = st.sampled_from([{"type": "string"}, {"type": "integer"}, {"enum": ["x", "y"]},
                         {"type": ["string", "null"]}, {"const": 2}, {"minimum": 1},
                         {"type": "object", "properties": {"z": {"type": "integer"}},
                          "required": ["z"], "additionalProperties": False}])
_sub = st.recursive(_leaf, lambda inner: st.one_of(
    st.builds(lambda r: {"required": r}, st.lists(st.sampled_from(["a", "b", "c"]), min_size=1,
                                                  max_size=2, unique=True)),
    st.builds(lambda p: {"properties": p}, st.dictionaries(st.sampled_from(["a", "b"]), inner,
                                                          max_size=2)),
    st.builds(lambda k, bs: {k: bs}, st.sampled_from(["anyOf", "allOf", "oneOf"]),
              st.lists(inner, min_size=1, max_size=2)),
    st.builds(lambda s: {"not": s}, inner),
), max_leaves=5)
tool_schemas = st.fixed_dictionaries(
    {"type": st.just("object"),
     "properties": st.fixed_dictionaries({"a": _sub, "b": _sub})},
    optional={"required": st.lists(st.sampled_from(["a", "b"]), unique=True),
              "not": _sub, "if": _sub, "then": _sub, "else": _sub,
              "anyOf": st.lists(_sub, min_size=1, max_size=2),
              "allOf": st.lists(_sub, min_size=1, max_size=2),
              "dependentRequired": st.just({"a": ["b"]}),
              "patternProperties": st.just({"^x": {"type": "integer"}}),
              "additionalProperties": st.booleans()})
arguments = st.dictionaries(st.sampled_from(["a", "b", "c", "x1"]), st.one_of(
    st.none(), st.integers(0, 3), st.sampled_from(["x", "y", ""]),
    st.dictionaries(st.sampled_from(["z", "a"]), st.integers(0, 2), max_size=2)), max_size=3)


@settings(max_examples=300, deadline=None)
@given(tool_schemas, arguments)
def test_a_value_the_original_accepts_survives_the_rewrite(schema: dict[str, Any],
                                                          value: dict[str, Any]) -> None:
    report = sanitize_tool_schema_report(schema)
    if NARROWING & {c.kind for c in report.changes}:
        return
    if jsonschema.Draft202012Validator(schema).is_valid(value):
        assert jsonschema.Draft202012Validator(report.schema).is_valid(value), report
        assert first_schema_violation(value, report.schema) is None
