"""Checking a tool call's arguments against the (sanitized) JSON Schema the model was shown.

A deliberately small validator for the keywords a sanitized tool schema carries: ``type``,
``enum`` / ``const``, ``properties`` / ``required`` / ``additionalProperties``, ``items``, the
``anyOf`` / ``oneOf`` / ``allOf`` compositions, and the common bounds (length, size, range,
``pattern``, ``multipleOf``). Keywords it does not know are not enforced (the server validates
too); what it does enforce, it enforces exactly. Depth is bounded, so a hostile schema or value
ends in an error message, never a ``RecursionError``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

__all__ = ("first_schema_violation",)

_MAX_DEPTH = 64


def first_schema_violation(value: Any, schema: Mapping[str, Any]) -> str | None:
    """The first place ``value`` breaks ``schema``, as ``"<json pointer>: <why>"``, or ``None``."""
    return _check(value, schema, "", 0)


def _type_ok(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    return True  # an unknown type name constrains nothing we can check


def _json_type(value: Any) -> str:
    for kind in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _type_ok(value, kind):
            return kind
    return type(value).__name__


def _check(value: Any, schema: Any, path: str, depth: int) -> str | None:
    if schema is True or not isinstance(schema, Mapping):
        return None
    if depth > _MAX_DEPTH:
        return f"{path or '/'}: nests deeper than {_MAX_DEPTH} levels"
    where = path or "/"
    kind = schema.get("type")
    if isinstance(kind, str) and not _type_ok(value, kind):
        return f"{where}: expected {kind}, got {_json_type(value)}"
    if isinstance(kind, list) and kind and not any(_type_ok(value, k) for k in kind
                                                   if isinstance(k, str)):
        return f"{where}: expected one of {kind}, got {_json_type(value)}"
    if "const" in schema and not _equal(value, schema["const"]):
        return f"{where}: must be {schema['const']!r}"
    enum = schema.get("enum")
    if isinstance(enum, list) and not any(_equal(value, member) for member in enum):
        return f"{where}: must be one of {enum!r}"
    problem = (_check_string(value, schema, where) or _check_number(value, schema, where)
               or _check_array(value, schema, path, depth)
               or _check_object(value, schema, path, depth))
    if problem:
        return problem
    return _check_compositions(value, schema, path, depth)


def _check_string(value: Any, schema: Mapping[str, Any], where: str) -> str | None:
    if not isinstance(value, str):
        return None
    min_len, max_len = schema.get("minLength"), schema.get("maxLength")
    if isinstance(min_len, int) and len(value) < min_len:
        return f"{where}: shorter than {min_len} characters"
    if isinstance(max_len, int) and len(value) > max_len:
        return f"{where}: longer than {max_len} characters"
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        try:
            matched = re.search(pattern, value) is not None
        except re.error:
            return None  # an ECMA-only pattern Python cannot compile: the server judges it
        if not matched:
            return f"{where}: does not match pattern {pattern!r}"
    return None


def _check_number(value: Any, schema: Mapping[str, Any], where: str) -> str | None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    for key, words in (("minimum", "at least"), ("maximum", "at most"),
                       ("exclusiveMinimum", "more than"), ("exclusiveMaximum", "less than")):
        bound = schema.get(key)
        if isinstance(bound, (int, float)) and not isinstance(bound, bool) and not _within(
                value, key, bound):
            return f"{where}: must be {words} {bound}"
    step = schema.get("multipleOf")
    if isinstance(step, (int, float)) and not isinstance(step, bool) and step > 0:
        quotient = value / step
        if math.isfinite(quotient) and not math.isclose(quotient, round(quotient), abs_tol=1e-9):
            return f"{where}: must be a multiple of {step}"
    return None


def _check_array(value: Any, schema: Mapping[str, Any], path: str, depth: int) -> str | None:
    if not isinstance(value, list):
        return None
    where = path or "/"
    min_items, max_items = schema.get("minItems"), schema.get("maxItems")
    if isinstance(min_items, int) and len(value) < min_items:
        return f"{where}: fewer than {min_items} items"
    if isinstance(max_items, int) and len(value) > max_items:
        return f"{where}: more than {max_items} items"
    if schema.get("uniqueItems") is True:
        seen: list[Any] = []
        for item in value:
            if any(_equal(item, other) for other in seen):
                return f"{where}: items must be unique"
            seen.append(item)
    items = schema.get("items")
    if isinstance(items, Mapping):
        for index, item in enumerate(value):
            problem = _check(item, items, f"{path}/{index}", depth + 1)
            if problem:
                return problem
    return None


def _check_object(value: Any, schema: Mapping[str, Any], path: str, depth: int) -> str | None:
    if not isinstance(value, dict):
        return None
    where = path or "/"
    required = schema.get("required")
    if isinstance(required, list):
        for name in required:
            if isinstance(name, str) and name not in value:
                return f"{where}: missing required property {name!r}"
    properties = schema.get("properties")
    props = properties if isinstance(properties, Mapping) else {}
    extra = schema.get("additionalProperties")
    for name, item in value.items():
        sub = f"{path}/{_escape(name)}"
        if name in props:
            problem = _check(item, props[name], sub, depth + 1)
        elif extra is False:
            problem = f"{where}: unexpected property {name!r}"
        else:
            problem = _check(item, extra, sub, depth + 1) if isinstance(extra, Mapping) else None
        if problem:
            return problem
    return None


def _check_compositions(value: Any, schema: Mapping[str, Any], path: str,
                        depth: int) -> str | None:
    where = path or "/"
    all_of = schema.get("allOf")
    if isinstance(all_of, list):
        for branch in all_of:
            problem = _check(value, branch, path, depth + 1)
            if problem:
                return problem
    any_of = schema.get("anyOf")
    if isinstance(any_of, list) and any_of:
        problems = [_check(value, branch, path, depth + 1) for branch in any_of]
        if all(problems):
            return f"{where}: matches none of the anyOf branches ({problems[0]})"
    one_of = schema.get("oneOf")
    if isinstance(one_of, list) and one_of:
        matched = sum(1 for branch in one_of if _check(value, branch, path, depth + 1) is None)
        if matched != 1:
            return f"{where}: matches {matched} of the oneOf branches, expected exactly 1"
    return None


def _within(value: float, key: str, bound: float) -> bool:
    if key == "minimum":
        return value >= bound
    if key == "maximum":
        return value <= bound
    if key == "exclusiveMinimum":
        return value > bound
    return value < bound


def _equal(a: Any, b: Any) -> bool:
    # JSON equality: true is not 1, and 1 equals 1.0.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(type(a) is type(b) and a == b) or (_is_number(a) and _is_number(b) and a == b)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")
