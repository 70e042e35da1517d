"""Hypothesis strategies for hostile-but-JSON tool schemas (test helper)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

TYPE_NAMES = ["string", "number", "integer", "boolean", "object", "array", "null"]
# Names a naive walker would confuse with keywords.
PROP_NAMES = st.sampled_from(["a", "b", "c", "properties", "type", "required", "enum", "items",
                              "$schema", "anyOf", "description"])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.sampled_from([0.5, -1.5]),
                    st.sampled_from(["x", "y", "", "null"]))


def _type_value() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from(TYPE_NAMES),
        st.lists(st.sampled_from(TYPE_NAMES), min_size=1, max_size=3, unique=True),
    )


@st.composite
def _decorate(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    node = dict(base)
    if draw(st.booleans()):
        node["type"] = draw(_type_value())
    if draw(st.integers(0, 4)) == 0:
        node["enum"] = draw(st.lists(SCALARS, min_size=1, max_size=4))
    if draw(st.integers(0, 6)) == 0:
        node["const"] = draw(SCALARS)
    if draw(st.integers(0, 3)) == 0:
        node["description"] = draw(st.sampled_from(["d", "A value.", ""]))
    if draw(st.integers(0, 5)) == 0:
        node["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    if draw(st.integers(0, 6)) == 0:
        node["nullable"] = True
    if draw(st.integers(0, 5)) == 0:
        node["minLength"] = draw(st.integers(0, 2))
    if draw(st.integers(0, 5)) == 0:
        node["maximum"] = draw(st.integers(0, 3))
    if draw(st.integers(0, 6)) == 0:
        node["default"] = draw(SCALARS)
    if draw(st.integers(0, 7)) == 0:
        node["$ref"] = draw(st.sampled_from(["#/$defs/A", "#/$defs/B"]))
    return node


def _leaf() -> st.SearchStrategy[Any]:
    return st.one_of(st.just(True), st.builds(dict).flatmap(_decorate))


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    @st.composite
    def obj(draw: st.DrawFn) -> dict[str, Any]:
        props = draw(st.dictionaries(PROP_NAMES, children, max_size=3))
        node: dict[str, Any] = {"type": draw(st.sampled_from(["object", ["object", "null"]])),
                                "properties": props}
        if draw(st.booleans()):
            node["required"] = draw(st.lists(PROP_NAMES, max_size=3))
        if draw(st.integers(0, 2)) == 0:
            node["additionalProperties"] = draw(st.sampled_from([False, True]))
        if draw(st.integers(0, 3)) == 0:
            node["anyOf"] = [
                {"required": draw(st.lists(PROP_NAMES, min_size=1, max_size=2))},
                draw(children),
            ]
        return draw(_decorate(node)) if draw(st.integers(0, 3)) == 0 else node

    @st.composite
    def arr(draw: st.DrawFn) -> dict[str, Any]:
        node: dict[str, Any] = {"type": draw(st.sampled_from(["array", ["array", "null"]]))}
        shape = draw(st.integers(0, 5))
        if shape == 0:  # a fixed tuple, as msgspec / pydantic emit it
            positions = draw(st.lists(children, max_size=3))
            node.update(prefixItems=positions, items=False)
            if draw(st.booleans()):
                node.update(minItems=len(positions), maxItems=len(positions))
        elif shape == 1:  # a tuple with a schema (or absent) tail
            node["prefixItems"] = draw(st.lists(children, min_size=1, max_size=2))
            if draw(st.booleans()):
                node["items"] = draw(children)
        elif shape == 2:
            node["items"] = False
        else:
            node["items"] = draw(children)
        if draw(st.integers(0, 4)) == 0:
            node[draw(st.sampled_from(["unevaluatedItems", "unevaluatedProperties",
                                       "additionalItems"]))] = False
        return node

    @st.composite
    def comp(draw: st.DrawFn) -> dict[str, Any]:
        key = draw(st.sampled_from(["anyOf", "oneOf", "allOf"]))
        return {key: draw(st.lists(children, min_size=1, max_size=3))}

    return st.one_of(obj(), arr(), comp())


SUBSCHEMAS = st.recursive(_leaf(), _extend, max_leaves=12)


@st.composite
def tool_schemas(draw: st.DrawFn, *, refs: bool = True) -> dict[str, Any]:
    """A parameters root: an object (sometimes nullable, sometimes a composition), optionally with
    ``$defs`` that the nodes may reference — including themselves (cycles)."""
    props = draw(st.dictionaries(PROP_NAMES, SUBSCHEMAS, max_size=4))
    root: dict[str, Any] = {"properties": props}
    shape = draw(st.integers(0, 5))
    if shape == 0:
        root["type"] = ["object", "null"]
    elif shape == 1:
        root = {"anyOf": [{"type": ["object", "null"], "properties": props},
                          {"type": "object", "properties": {}}]}
    elif shape != 2:
        root["type"] = "object"
    if draw(st.booleans()):
        root["required"] = draw(st.lists(PROP_NAMES, max_size=4))
    if draw(st.booleans()):
        root["$schema"] = "http://json-schema.org/draft-07/schema#"
    if draw(st.integers(0, 3)) == 0:
        root["additionalProperties"] = False
    root["$defs"] = {"A": draw(SUBSCHEMAS), "B": draw(SUBSCHEMAS)}
    if not refs:
        _strip_refs(root)
    return root


def _strip_refs(node: Any) -> None:
    if isinstance(node, dict):
        node.pop("$ref", None)
        for value in node.values():
            _strip_refs(value)
    elif isinstance(node, list):
        for value in node:
            _strip_refs(value)


JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(PROP_NAMES, inner, max_size=3)),
    max_leaves=8,
)


def values_for(schema: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values shaped by a (sanitized) schema — most are valid, some are not; callers filter."""
    if not isinstance(schema, dict) or depth > 6:
        return JSON_VALUES
    options: list[st.SearchStrategy[Any]] = []
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options.extend(values_for(b, depth + 1) for b in schema[key])
    if "enum" in schema:
        options.append(st.sampled_from(schema["enum"]))
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        required = [k for k in schema.get("required", []) if k in props]
        optional = {k: v for k, v in props.items() if k not in required}
        options.append(st.fixed_dictionaries(
            {k: values_for(props[k], depth + 1) for k in required},
            optional={k: values_for(v, depth + 1) for k, v in optional.items()},
        ))
    elif kind == "array":
        options.append(st.lists(values_for(schema.get("items"), depth + 1), max_size=2))
    elif kind == "string":
        options.append(st.sampled_from(["x", "", "yy"]))
    elif kind == "integer":
        options.append(st.integers(-3, 5))
    elif kind == "number":
        options.append(st.one_of(st.integers(-3, 5), st.sampled_from([0.5, 2.5])))
    elif kind == "boolean":
        options.append(st.booleans())
    elif kind == "null":
        options.append(st.none())
    options.append(JSON_VALUES)
    return st.one_of(options)
