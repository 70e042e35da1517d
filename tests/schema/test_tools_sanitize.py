"""Each sanitizer rewrite, by example."""

from __future__ import annotations

from typing import Any

import pytest

from bindloop.errors import UsageError
from bindloop.schema import (
    RELAXING_CHANGES,
    SchemaSanitizeError,
    sanitize_tool_schema,
    sanitize_tool_schema_report,
)


def obj(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def prop(schema: dict[str, Any], **extra: Any) -> Any:
    return sanitize_tool_schema({**obj(x=schema), **extra})["properties"]["x"]


def kinds(schema: Any, **kw: Any) -> set[str]:
    return {c.kind for c in sanitize_tool_schema_report(schema, **kw).changes}


def test_nullable_property_becomes_a_union_with_annotations_outside() -> None:
    out = prop({"type": ["string", "null"], "minLength": 1, "description": "A name.",
                "title": "Name", "default": None})
    assert out == {
        "anyOf": [{"type": "string", "minLength": 1}, {"type": "null"}],
        "description": "A name.", "title": "Name", "default": None,
    }


def test_openapi_nullable_keyword_is_read_as_null_type() -> None:
    assert prop({"type": "integer", "nullable": True}) == {
        "anyOf": [{"type": "integer"}, {"type": "null"}]}


def test_nullable_enum_keeps_strings_on_the_typed_branch() -> None:
    assert prop({"enum": ["a", "b", None]}) == {
        "anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]}


def test_enum_that_refuses_null_is_not_widened_to_a_union() -> None:
    assert prop({"type": ["string", "null"], "enum": ["a"]}) == {"type": "string", "enum": ["a"]}


def test_nullable_at_the_root_collapses() -> None:
    out = sanitize_tool_schema({"type": ["object", "null"], "properties": {}})
    assert out == {"type": "object", "properties": {}}


def test_nullable_in_a_root_branch_collapses() -> None:
    out = sanitize_tool_schema({"anyOf": [{"type": ["object", "null"], "properties": {}},
                                          {"type": "object", "properties": {"a": {}}}]})
    assert out["anyOf"][0] == {"type": "object", "properties": {}}


def test_nullable_overlay_branch_collapses_and_keeps_its_required() -> None:
    schema = obj(x={"type": "object", "properties": {"a": {"type": "string"}},
                    "anyOf": [{"type": ["object", "null"], "required": ["a"]}]})
    out = sanitize_tool_schema(schema)["properties"]["x"]
    assert out["anyOf"] == [{"type": "object", "required": ["a"]}]


def test_genuine_multi_type_union_collapses_to_the_first_type_with_a_note() -> None:
    out = prop({"type": ["string", "number", "boolean"], "description": "Value."})
    assert out == {"type": "string", "description": "Value. Accepts string, number or boolean."}


def test_single_element_type_array_becomes_a_scalar() -> None:
    assert prop({"type": ["integer"]}) == {"type": "integer"}


def test_enum_on_a_non_string_moves_to_the_description() -> None:
    out = prop({"type": "integer", "enum": [1, 2, 3]})
    assert out == {"type": "integer", "description": "Allowed values: 1, 2, 3."}
    assert "enum_moved_to_description" in RELAXING_CHANGES


def test_string_enum_without_type_gains_type_string() -> None:
    assert prop({"enum": ["a", "b"]}) == {"type": "string", "enum": ["a", "b"]}


def test_string_const_survives_and_other_consts_become_notes() -> None:
    assert prop({"const": "v"}) == {"type": "string", "const": "v"}
    assert prop({"const": 3}) == {"type": "integer", "description": "Must be 3."}


def test_required_entries_without_a_property_are_dropped() -> None:
    out = sanitize_tool_schema({**obj(a={"type": "string"}), "required": ["a", "ghost", "a"]})
    assert out["required"] == ["a"]
    assert "required_dropped" in kinds({**obj(), "required": ["ghost"]})


def test_composition_branch_required_resolves_against_the_enclosing_node() -> None:
    schema = {**obj(a={"type": "string"}, b={"type": "string"}),
              "anyOf": [{"required": ["a"]}, {"required": ["b", "nope"]}]}
    assert sanitize_tool_schema(schema)["anyOf"] == [{"required": ["a"]}, {"required": ["b"]}]


def test_nested_additional_properties_false_is_removed_but_kept_at_the_root() -> None:
    out = sanitize_tool_schema({**obj(x={**obj(), "additionalProperties": False}),
                                "additionalProperties": False})
    assert out["additionalProperties"] is False
    assert out["properties"]["x"] == {"type": "object", "properties": {}}


def test_a_parameter_named_like_a_keyword_is_a_name() -> None:
    schema = obj(properties={"type": ["string", "null"]}, type={"type": "integer"},
                 required={"type": "boolean"})
    schema["required"] = ["properties", "type", "required"]
    out = sanitize_tool_schema(schema)
    assert set(out["properties"]) == {"properties", "type", "required"}
    assert out["properties"]["properties"]["anyOf"][1] == {"type": "null"}
    assert out["required"] == ["properties", "type", "required"]


def test_schema_keyword_is_stripped_everywhere() -> None:
    out = sanitize_tool_schema({"$schema": "x", **obj(a={"$schema": "y", "type": "string"})})
    assert out == {"type": "object", "properties": {"a": {"type": "string"}}}


def test_root_defaults_to_an_empty_object() -> None:
    assert sanitize_tool_schema({}) == {"type": "object", "properties": {}}
    assert sanitize_tool_schema(True) == {"type": "object", "properties": {}}


def test_non_object_root_is_refused() -> None:
    with pytest.raises(SchemaSanitizeError, match="object schema"):
        sanitize_tool_schema({"type": "string"})


def test_boolean_subschemas() -> None:
    assert prop(True) == {}
    with pytest.raises(SchemaSanitizeError, match="false"):
        sanitize_tool_schema(obj(x=False))


@pytest.mark.parametrize("bad", [
    {"type": "object", "properties": []},
    {"type": "object", "properties": {"x": 3}},
    {"type": "object", "properties": {"x": {"type": "strnig"}}},
    {"type": "object", "required": "x"},
    {"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json"}}},
    {"type": "object", "properties": {"x": {"$ref": "#/$defs/missing"}}},
    {"type": "object", "properties": {"x": {"anyOf": {"type": "string"}}}},
    ["not", "a", "schema"],
])
def test_malformed_input_is_a_typed_error_naming_the_path(bad: Any) -> None:
    with pytest.raises(SchemaSanitizeError) as info:
        sanitize_tool_schema(bad)
    assert isinstance(info.value, UsageError)
    assert info.value.path is not None


def test_refs_are_inlined_with_sibling_overrides() -> None:
    schema = {**obj(x={"$ref": "#/$defs/Name", "description": "Override."}),
              "$defs": {"Name": {"type": "string", "description": "Base.", "minLength": 1}}}
    assert sanitize_tool_schema(schema) == {
        "type": "object",
        "properties": {"x": {"type": "string", "minLength": 1, "description": "Override."}},
    }


def test_recursive_ref_is_cut_when_inlining_and_kept_in_keep_mode() -> None:
    node = {"type": "object", "properties": {"children": {"type": "array",
                                                          "items": {"$ref": "#/$defs/Node"}}}}
    schema = {"$ref": "#/$defs/Node", "$defs": {"Node": node}}
    inlined = sanitize_tool_schema_report(schema)
    items = inlined.schema["properties"]["children"]["items"]
    assert items["type"] == "object" and "Node" in items["description"]
    assert inlined.relaxed
    kept = sanitize_tool_schema(schema, refs="keep")
    assert kept["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert kept["$defs"]["Node"]["type"] == "object"


def test_pointer_escapes_resolve() -> None:
    schema = {**obj(x={"$ref": "#/$defs/a~1b~0c"}), "$defs": {"a/b~c": {"type": "boolean"}}}
    assert sanitize_tool_schema(schema)["properties"]["x"] == {"type": "boolean"}


def test_report_lists_paths_in_the_input() -> None:
    report = sanitize_tool_schema_report(obj(x={"type": ["string", "null"]}))
    assert [(c.path, c.kind) for c in report.changes] == [("/properties/x", "nullable_union")]
    assert not report.relaxed


def test_unknown_keywords_are_copied_not_shared() -> None:
    meta = {"deep": [1, 2]}
    schema = obj(x={"type": "string", "x-meta": meta})
    out = sanitize_tool_schema(schema)
    assert out["properties"]["x"]["x-meta"] == meta
    assert out["properties"]["x"]["x-meta"] is not meta


def test_non_finite_number_is_refused() -> None:
    with pytest.raises(SchemaSanitizeError, match="non-finite"):
        sanitize_tool_schema(obj(x={"type": "number", "maximum": float("inf")}))


def test_bounds_must_be_positive() -> None:
    with pytest.raises(ValueError):
        sanitize_tool_schema({}, max_depth=0)


# -- tuples and closing `false` schemas (strict providers reject prefixItems and `false`) --------

def test_fixed_homogeneous_tuple_becomes_a_bounded_array() -> None:
    schema = obj(x={"type": "array", "minItems": 2, "maxItems": 2,
                    "prefixItems": [{"type": "number"}, {"type": "number"}], "items": False})
    report = sanitize_tool_schema_report(schema)
    assert report.schema["properties"]["x"] == {
        "type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "number"}}
    assert not report.relaxed
    assert "tuple_items_unified" in {c.kind for c in report.changes}


def test_fixed_mixed_tuple_becomes_a_described_array_of_a_union() -> None:
    schema = obj(x={"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                    "items": False})
    report = sanitize_tool_schema_report(schema)
    x = report.schema["properties"]["x"]
    assert x["items"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert x["maxItems"] == 2 and "prefixItems" not in x
    assert "1. integer" in x["description"] and "2. string" in x["description"]
    assert report.relaxed  # positions are no longer enforced
    assert sanitize_tool_schema(report.schema) == report.schema


def test_tuple_closed_by_max_items_alone_keeps_its_position_types() -> None:
    # pydantic's form: prefixItems + minItems/maxItems, no `items`.
    typed = {"type": "array", "minItems": 2, "maxItems": 2}
    report = sanitize_tool_schema_report(obj(
        bbox={**typed, "prefixItems": [{"type": "number"}, {"type": "number"}]},
        pair={**typed, "prefixItems": [{"type": "integer"}, {"type": "string"}]}))
    props = report.schema["properties"]
    assert props["bbox"] == {**typed, "items": {"type": "number"}}
    assert props["pair"]["items"] == {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    assert props["pair"]["description"] == "Items in order: 1. integer, 2. string."


def test_open_tuple_tail_is_part_of_the_union() -> None:
    x = prop({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "integer"}})
    assert x["items"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert x["description"] == "Items in order: 1. string, then any further items."
    assert prop({"type": "array", "prefixItems": [{"type": "string"}]})["items"] == {}


def test_draft7_tuple_with_additional_items_false_is_converted_too() -> None:
    x = prop({"type": "array", "items": [{"type": "string"}, {"type": "string"}],
              "additionalItems": False})
    assert x == {"type": "array", "items": {"type": "string"}, "maxItems": 2}


def test_items_false_alone_bounds_the_array_to_empty() -> None:
    x = prop({"type": "array", "items": False})
    assert x == {"type": "array", "maxItems": 0}


@pytest.mark.parametrize("key", ["unevaluatedItems", "unevaluatedProperties", "additionalItems"])
def test_false_in_a_closing_slot_is_dropped_with_a_note(key: str) -> None:
    report = sanitize_tool_schema_report(obj(x={"type": "array", "items": {}, key: False}))
    assert key not in report.schema["properties"]["x"]
    assert any(c.kind == "false_schema_dropped" and c.path == f"/properties/x/{key}"
               for c in report.changes)


def test_false_as_a_value_schema_is_still_refused() -> None:
    with pytest.raises(SchemaSanitizeError, match="false"):
        sanitize_tool_schema(obj(x={"type": "array", "items": {"not": False}}))


# -- anyOf of plain typed branches is exempt from the type-array collapse (docs/tools.md) --------

def test_any_of_of_plain_scalar_types_passes_through_while_a_type_array_collapses() -> None:
    union = {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}]}
    report = sanitize_tool_schema_report(obj(x=union))
    assert report.schema["properties"]["x"] == union and report.changes == ()
    assert prop({"type": ["integer", "string", "null"]}) == {
        "anyOf": [{"type": "integer"}, {"type": "null"}], "description": "Accepts integer or string."}


def test_a_sibling_overriding_a_ref_target_keyword_is_recorded_as_relaxing() -> None:
    """Found by Hypothesis: ``type: string`` beside a ``$ref`` to an object schema is unsatisfiable
    in JSON Schema 2020-12 (both apply) but accepts strings once inlined (the sibling wins)."""
    from bindloop.schema import sanitize_tool_schema_report

    schema = {"type": "object", "properties": {"a": {"type": "string", "$ref": "#/$defs/A"}},
              "$defs": {"A": {"type": "object", "properties": {}}}}
    report = sanitize_tool_schema_report(schema)
    kinds = {c.kind: c.relaxes for c in report.changes}
    assert kinds.get("ref_siblings_override") is True
    # a sibling that repeats the target's own value overrides nothing
    same = {"type": "object", "properties": {"a": {"type": "object", "$ref": "#/$defs/A"}},
            "$defs": {"A": {"type": "object", "properties": {}}}}
    assert "ref_siblings_override" not in {c.kind for c in sanitize_tool_schema_report(same).changes}
