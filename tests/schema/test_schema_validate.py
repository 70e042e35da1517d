"""The one validator against ``jsonschema`` as an oracle: on generated schemas and values from the
supported subset, whatever one accepts the other accepts. Plus paths, depth and ``$ref``."""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import given, settings, strategies as st

from bindloop.schema import first_schema_violation

NAMES = ["a", "b", "x1", "x2"]
_name = st.sampled_from(NAMES)
_names = st.lists(_name, max_size=3, unique=True)

scalars = st.one_of(
    st.sampled_from([{"type": t} for t in
                     ("string", "integer", "number", "boolean", "null", "array", "object")]),
    st.sampled_from([True, False, {}, {"type": ["string", "null"]}, {"enum": [1, "a", None]},
                     {"const": 1}, {"const": [1, {"a": True}]}, {"enum": [[1], {"a": 1}]}]),
    st.builds(lambda lo, hi: {"type": "string", "minLength": lo, "maxLength": hi},
              st.integers(0, 2), st.integers(0, 3)),
    st.sampled_from([{"pattern": "^a"}, {"pattern": "b$"}, {"type": "string", "pattern": "x"}]),
    st.builds(lambda k, v: {k: v}, st.sampled_from(
        ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]), st.integers(-2, 2)),
    st.builds(lambda m: {"multipleOf": m}, st.integers(1, 3)),
)


def _extend(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    objects = st.fixed_dictionaries({}, optional={
        "type": st.just("object"),
        "properties": st.dictionaries(_name, inner, max_size=3),
        "patternProperties": st.dictionaries(st.sampled_from(["^x", "1$"]), inner, max_size=2),
        "additionalProperties": st.one_of(st.booleans(), inner),
        "required": _names,
        "dependentRequired": st.dictionaries(_name, _names, max_size=2),
        "dependentSchemas": st.dictionaries(_name, inner, max_size=1),
        "propertyNames": st.sampled_from([{"maxLength": 1}, {"pattern": "^x"}]),
        "minProperties": st.integers(0, 2),
        "maxProperties": st.integers(0, 3),
    })
    arrays = st.fixed_dictionaries({}, optional={
        "type": st.just("array"),
        "items": inner,
        "prefixItems": st.lists(inner, max_size=2),
        "contains": inner,
        "minContains": st.integers(0, 2),
        "maxContains": st.integers(0, 2),
        "minItems": st.integers(0, 2),
        "maxItems": st.integers(0, 3),
        "uniqueItems": st.booleans(),
    })
    logic = st.one_of(
        st.builds(lambda k, bs: {k: bs}, st.sampled_from(["allOf", "anyOf", "oneOf"]),
                  st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda s: {"not": s}, inner),
        st.fixed_dictionaries({"if": inner}, optional={"then": inner, "else": inner}),
    )
    return st.one_of(objects, arrays, logic)


schemas = st.recursive(scalars, _extend, max_leaves=8)

values = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 4) | st.sampled_from([0.5, 2.0, -1.5])
    | st.sampled_from(["", "a", "ab", "xb", "b"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_name, inner, max_size=3),
    max_leaves=8)


@settings(max_examples=400, deadline=None)
@given(schemas, values)
def test_the_validator_agrees_with_jsonschema(schema: Any, value: Any) -> None:
    theirs = jsonschema.Draft202012Validator(schema).is_valid(value)
    ours = first_schema_violation(value, schema)
    assert (ours is None) is theirs, (schema, value, ours)


object_schemas = st.fixed_dictionaries({"type": st.just("object")}, optional={
    "properties": st.dictionaries(_name, schemas, max_size=3),
    "patternProperties": st.dictionaries(st.sampled_from(["^x", "1$"]), schemas, max_size=2),
    "additionalProperties": st.one_of(st.booleans(), scalars),
    "required": _names,
    "dependentRequired": st.dictionaries(_name, _names, min_size=1, max_size=2),
    "not": st.builds(lambda r: {"required": r}, _names),
    "if": st.builds(lambda r: {"required": r}, _names),
    "then": st.builds(lambda r: {"required": r}, _names),
})


@settings(max_examples=300, deadline=None)
@given(object_schemas, st.dictionaries(_name, values, max_size=4))
def test_the_validator_agrees_with_jsonschema_on_objects(schema: Any, value: Any) -> None:
    theirs = jsonschema.Draft202012Validator(schema).is_valid(value)
    ours = first_schema_violation(value, schema)
    assert (ours is None) is theirs, (schema, value, ours)


@settings(max_examples=150, deadline=None)
@given(schemas, values)
def test_references_into_defs_validate_like_the_inlined_schema(schema: Any, value: Any) -> None:
    wrapped = {"$defs": {"T": schema}, "type": "object", "properties": {"v": {"$ref": "#/$defs/T"}}}
    ours = first_schema_violation({"v": value}, wrapped)
    assert (ours is None) is jsonschema.Draft202012Validator(wrapped).is_valid({"v": value})
    assert (ours is None) is (first_schema_violation(value, schema) is None)


def test_violations_name_a_json_pointer() -> None:
    schema = {"type": "object", "properties": {"a/b": {"type": "array", "prefixItems": [
        {"type": "integer"}], "items": {"type": "string"}}}}
    assert first_schema_violation({"a/b": [1, 2]}, schema) == "/a~1b/1: expected string, got integer"
    assert first_schema_violation({"a/b": ["x"]}, schema) == "/a~1b/0: expected integer, got string"
    assert first_schema_violation({"a/b": [1, "x"]}, schema) is None
    dependent = {"dependentRequired": {"card": ["cvc"]}}
    assert first_schema_violation({"card": 1}, dependent) == \
        "/: property 'cvc' is required when 'card' is present"


def test_recursive_references_and_depth_are_bounded() -> None:
    tree = {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}}
    value: dict[str, Any] = {"kids": []}
    for _ in range(10):
        value = {"kids": [value]}
    assert first_schema_violation(value, tree) is None
    assert first_schema_violation({"kids": [{"kids": 1}]}, tree) == \
        "/kids/0/kids: expected array, got integer"
    loop = {"$ref": "#"}  # refers to itself without consuming the value
    assert "deeper" in (first_schema_violation(1, loop) or "")
    for _ in range(200):
        value = {"kids": [value]}
    assert "deeper" in (first_schema_violation(value, tree) or "")
