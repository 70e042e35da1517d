"""A strict-provider schema checker written from the documented restrictions (test helper).

Restrictions: every schema node is an object; ``type`` is one known JSON type name (never an array —
nullability is spelled ``anyOf: [{...}, {"type": "null"}]``); ``enum`` / ``const`` appear only on
string nodes and hold only strings; every ``required`` entry names a property of the node (or, on a
composition branch, of the enclosing node); ``additionalProperties: false`` appears only at the root;
no ``$schema``, no ``nullable``, no ``prefixItems`` and no array-form ``items`` (tuples), no boolean
schema anywhere; the root is an object schema that is not nullable.
"""

from __future__ import annotations

from collections.abc import Mapping

TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}
MAPS = ("properties", "patternProperties", "dependentSchemas")
SINGLES = ("not", "contains", "propertyNames", "if", "then", "else", "additionalItems",
           "unevaluatedItems", "unevaluatedProperties")
COMPOSITIONS = ("anyOf", "oneOf", "allOf")


def violations(schema: object, *, allow_refs: bool = False) -> list[str]:
    found: list[str] = []
    if not isinstance(schema, Mapping):
        return ["root is not an object"]
    root_type = schema.get("type")
    if root_type is None and not any(k in schema for k in COMPOSITIONS):
        found.append("root has no type")
    elif root_type is not None and root_type != "object":
        found.append(f"root type is {root_type!r}")
    for key in COMPOSITIONS:
        for branch in schema.get(key, ()):
            if isinstance(branch, Mapping) and branch.get("type") == "null":
                found.append("root branch is null")
    _check(schema, "", True, frozenset(), found, allow_refs)
    return found


def _check(node: object, path: str, root: bool, enclosing: frozenset[str], found: list[str],
           allow_refs: bool) -> None:
    if not isinstance(node, Mapping):
        found.append(f"{path}: schema node is {type(node).__name__}")
        return
    if "$schema" in node:
        found.append(f"{path}: $schema present")
    if "nullable" in node:
        found.append(f"{path}: nullable keyword")
    if not allow_refs and ("$ref" in node or "$defs" in node or "definitions" in node):
        found.append(f"{path}: $ref/$defs present")
    kind = node.get("type")
    if kind is not None and (not isinstance(kind, str) or kind not in TYPES):
        found.append(f"{path}: type {kind!r} is not a single known type")
    if "enum" in node:
        enum = node["enum"]
        if kind != "string" or not isinstance(enum, list) or not enum or not all(
            isinstance(v, str) for v in enum
        ):
            found.append(f"{path}: enum {enum!r} on type {kind!r}")
    if "const" in node and (kind != "string" or not isinstance(node["const"], str)):
        found.append(f"{path}: const on type {kind!r}")
    props = node.get("properties", {})
    own = frozenset(props) if isinstance(props, Mapping) else frozenset()
    for name in node.get("required", ()):
        if name not in own and name not in enclosing:
            found.append(f"{path}: required {name!r} has no property")
    if node.get("additionalProperties") is False and not root:
        found.append(f"{path}: nested additionalProperties false")
    for key in MAPS:
        for name, sub in (node.get(key) or {}).items():
            _check(sub, f"{path}/{key}/{name}", False, frozenset(), found, allow_refs)
    for key in SINGLES:
        if key in node:
            _check(node[key], f"{path}/{key}", False, frozenset(), found, allow_refs)
    items = node.get("items")
    if isinstance(items, list):
        found.append(f"{path}: items is an array (tuple form)")
    elif items is not None:
        _check(items, f"{path}/items", False, frozenset(), found, allow_refs)
    if "prefixItems" in node:
        found.append(f"{path}: prefixItems present")
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        _check(extra, f"{path}/additionalProperties", False, frozenset(), found, allow_refs)
    for key in COMPOSITIONS:
        for i, sub in enumerate(node.get(key, ())):
            _check(sub, f"{path}/{key}/{i}", False, own, found, allow_refs)
    for defs in ("$defs", "definitions"):
        for name, sub in (node.get(defs) or {}).items():
            _check(sub, f"{path}/{defs}/{name}", False, frozenset(), found, allow_refs)
