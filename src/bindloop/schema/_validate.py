"""The one schema validator: the first place a JSON value breaks a JSON Schema (2020-12), as a
JSON-Pointer path and a reason.

Supported subset, enforced exactly: boolean schemas; ``type``, ``enum``, ``const``; string length
(in code points) and ``pattern``; number bounds and ``multipleOf``; ``items`` / ``prefixItems``
(and the draft-7 array ``items`` with ``additionalItems``), ``contains`` / ``minContains`` /
``maxContains``, item counts and ``uniqueItems``; ``properties``, ``patternProperties``,
``additionalProperties``, ``propertyNames``, ``required``, ``dependentRequired``,
``dependentSchemas``, property counts; ``allOf`` / ``anyOf`` / ``oneOf`` / ``not`` /
``if`` / ``then`` / ``else``; local ``$ref`` (``#``, ``#/$defs/...``, any JSON Pointer into the
root). Not enforced: ``format`` (an annotation in 2020-12), ``unevaluated*``, ``$dynamicRef``,
remote references, and a ``pattern`` Python's ``re`` cannot compile (left to the server).

Depth is bounded (schema nesting plus ``$ref`` hops), so a hostile schema or value ends in a
violation message, never a ``RecursionError``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ._json import escape, is_number, json_equal, json_type_of, type_ok

__all__ = ("first_schema_violation",)

MAX_DEPTH = 64


def first_schema_violation(value: Any, schema: object, *, root: object = None,
                           max_depth: int = MAX_DEPTH) -> str | None:
    """The first place ``value`` breaks ``schema``, as ``"<json pointer>: <why>"`` (``/`` for the
    value itself), or ``None`` when it conforms.

    ``root`` is the document local ``$ref`` pointers resolve against (``schema`` itself by
    default); ``max_depth`` bounds schema nesting and ``$ref`` hops together.
    """
    return _Check(schema if root is None else root, max_depth).check(value, schema, "", 0)


def _show(value: Any) -> str:
    return json_type_of(value) or type(value).__name__


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class _Check:
    __slots__ = ("max_depth", "root")

    def __init__(self, root: object, max_depth: int) -> None:
        self.root = root
        self.max_depth = max_depth

    def check(self, value: Any, schema: object, path: str, depth: int) -> str | None:
        where = path or "/"
        if schema is True:
            return None
        if schema is False:
            return f"{where}: no value is allowed here"
        if not isinstance(schema, Mapping):
            return None
        if depth > self.max_depth:
            return f"{where}: nests deeper than {self.max_depth} levels"
        if "$ref" in schema:
            target = self.resolve(schema["$ref"])
            if target is not None:
                problem = self.check(value, target, path, depth + 1)
                if problem:
                    return problem
        return (self.check_value(value, schema, where)
                or self.check_string(value, schema, where)
                or self.check_number(value, schema, where)
                or self.check_array(value, schema, path, depth)
                or self.check_object(value, schema, path, depth)
                or self.check_compositions(value, schema, path, depth))

    def resolve(self, ref: object) -> object:
        if not isinstance(ref, str) or not ref.startswith("#"):
            return None  # remote: not enforced
        target: object = self.root
        pointer = ref[1:]
        if pointer and not pointer.startswith("/"):
            return None  # an anchor: not enforced
        for raw_token in pointer.split("/")[1:]:
            token = raw_token.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and token in target:
                target = target[token]
            elif isinstance(target, Sequence) and not isinstance(target, str) \
                    and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
            else:
                return None
        return target

    def check_value(self, value: Any, schema: Mapping[str, Any], where: str) -> str | None:
        kind = schema.get("type")
        if isinstance(kind, str) and not type_ok(value, kind):
            return f"{where}: expected {kind}, got {_show(value)}"
        if isinstance(kind, list) and kind and not any(type_ok(value, k) for k in kind
                                                       if isinstance(k, str)):
            return f"{where}: expected one of {kind}, got {_show(value)}"
        if "const" in schema and not json_equal(value, schema["const"]):
            return f"{where}: must be {schema['const']!r}"
        enum = schema.get("enum")
        if isinstance(enum, list) and not any(json_equal(value, member) for member in enum):
            return f"{where}: must be one of {enum!r}"
        return None

    def check_string(self, value: Any, schema: Mapping[str, Any], where: str) -> str | None:
        if not isinstance(value, str):
            return None
        problem = _size(where, len(value), schema, "Length", ("shorter", "longer", "characters"))
        if problem:
            return problem
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            matched = _search(pattern, value)
            if matched is False:
                return f"{where}: does not match pattern {pattern!r}"
        return None

    def check_number(self, value: Any, schema: Mapping[str, Any], where: str) -> str | None:
        if not is_number(value):
            return None
        for key, words in (("minimum", "at least"), ("maximum", "at most"),
                           ("exclusiveMinimum", "more than"), ("exclusiveMaximum", "less than")):
            bound = schema.get(key)
            if is_number(bound) and not _within(value, key, bound):
                return f"{where}: must be {words} {bound}"
        step = schema.get("multipleOf")
        if is_number(step) and step > 0 and not _multiple(value, step):
            return f"{where}: must be a multiple of {step}"
        return None

    def check_array(self, value: Any, schema: Mapping[str, Any], path: str,
                    depth: int) -> str | None:
        if not isinstance(value, (list, tuple)):
            return None
        where = path or "/"
        problem = _size(where, len(value), schema, "Items", ("fewer", "more", "items"))
        if problem:
            return problem
        if schema.get("uniqueItems") is True:
            for i, item in enumerate(value):
                if any(json_equal(item, other) for other in value[:i]):
                    return f"{where}: items must be unique"
        prefix, rest = schema.get("prefixItems"), schema.get("items")
        if isinstance(rest, list):  # the draft-7 tuple form
            prefix, rest = rest, schema.get("additionalItems", True)
        positions = prefix if isinstance(prefix, list) else []
        for index, item in enumerate(value):
            sub = positions[index] if index < len(positions) else rest
            if sub is None:
                continue
            problem = self.check(item, sub, f"{path}/{index}", depth + 1)
            if problem:
                return problem
        return self.check_contains(value, schema, path, depth)

    def check_contains(self, value: Sequence[Any], schema: Mapping[str, Any], path: str,
                       depth: int) -> str | None:
        if "contains" not in schema:
            return None
        where = path or "/"
        found = sum(1 for i, item in enumerate(value)
                    if self.check(item, schema["contains"], f"{path}/{i}", depth + 1) is None)
        low, high = _int(schema.get("minContains")), _int(schema.get("maxContains"))
        low = 1 if low is None else low
        if found < low:
            return f"{where}: fewer than {low} items match contains"
        if high is not None and found > high:
            return f"{where}: more than {high} items match contains"
        return None

    def check_object(self, value: Any, schema: Mapping[str, Any], path: str,
                     depth: int) -> str | None:
        if not isinstance(value, Mapping):
            return None
        where = path or "/"
        problem = _size(where, len(value), schema, "Properties", ("fewer", "more", "properties"))
        if problem:
            return problem
        required = schema.get("required")
        if isinstance(required, list):
            for name in required:
                if isinstance(name, str) and name not in value:
                    return f"{where}: missing required property {name!r}"
        dependent = schema.get("dependentRequired")
        if isinstance(dependent, Mapping):
            for trigger, names in dependent.items():
                if trigger in value and isinstance(names, list):
                    for name in names:
                        if isinstance(name, str) and name not in value:
                            return (f"{where}: property {name!r} is required when {trigger!r} "
                                    "is present")
        return (self.check_properties(value, schema, path, depth)
                or self.check_dependent_schemas(value, schema, path, depth))

    def check_properties(self, value: Mapping[str, Any], schema: Mapping[str, Any], path: str,
                         depth: int) -> str | None:
        where = path or "/"
        properties = schema.get("properties")
        props = properties if isinstance(properties, Mapping) else {}
        patterns = schema.get("patternProperties")
        pattern_map = patterns if isinstance(patterns, Mapping) else {}
        extra = schema.get("additionalProperties", True)
        names = schema.get("propertyNames", True)
        for name, item in value.items():
            sub = f"{path}/{escape(str(name))}"
            if names is not True:
                problem = self.check(name, names, where, depth + 1)
                if problem:
                    return f"{where}: property name {name!r} is not allowed ({problem})"
            matched = name in props
            if matched:
                problem = self.check(item, props[name], sub, depth + 1)
                if problem:
                    return problem
            for pattern, pattern_schema in pattern_map.items():
                hit = _search(pattern, str(name)) if isinstance(pattern, str) else False
                if hit is not False:  # a pattern Python cannot compile is not held against it
                    matched = True
                problem = self.check(item, pattern_schema, sub, depth + 1) if hit else None
                if problem:
                    return problem
            if not matched:
                if extra is False:
                    return f"{where}: unexpected property {name!r}"
                problem = self.check(item, extra, sub, depth + 1)
                if problem:
                    return problem
        return None

    def check_dependent_schemas(self, value: Mapping[str, Any], schema: Mapping[str, Any],
                                path: str, depth: int) -> str | None:
        dependent = schema.get("dependentSchemas")
        if not isinstance(dependent, Mapping):
            return None
        for trigger, sub in dependent.items():
            if trigger in value:
                problem = self.check(value, sub, path, depth + 1)
                if problem:
                    return problem
        return None

    def check_compositions(self, value: Any, schema: Mapping[str, Any], path: str,
                           depth: int) -> str | None:
        where = path or "/"
        all_of = schema.get("allOf")
        if isinstance(all_of, list):
            for branch in all_of:
                problem = self.check(value, branch, path, depth + 1)
                if problem:
                    return problem
        any_of = schema.get("anyOf")
        if isinstance(any_of, list) and any_of:
            problems = [self.check(value, branch, path, depth + 1) for branch in any_of]
            if all(problems):
                return f"{where}: matches none of the anyOf branches ({problems[0]})"
        one_of = schema.get("oneOf")
        if isinstance(one_of, list) and one_of:
            matched = sum(1 for branch in one_of if self.check(value, branch, path, depth + 1)
                          is None)
            if matched != 1:
                return f"{where}: matches {matched} of the oneOf branches, expected exactly 1"
        if "not" in schema and self.check(value, schema["not"], path, depth + 1) is None:
            return f"{where}: must not match the schema under not"
        if "if" in schema:
            chosen = "then" if self.check(value, schema["if"], path, depth + 1) is None else "else"
            if chosen in schema:
                problem = self.check(value, schema[chosen], path, depth + 1)
                if problem:
                    return problem
        return None


def _size(where: str, size: int, schema: Mapping[str, Any], keyword: str,
          words: tuple[str, str, str]) -> str | None:
    """``min<keyword>`` / ``max<keyword>`` against ``size``."""
    low, high = _int(schema.get(f"min{keyword}")), _int(schema.get(f"max{keyword}"))
    fewer, more, noun = words
    if low is not None and size < low:
        return f"{where}: {fewer} than {low} {noun}"
    if high is not None and size > high:
        return f"{where}: {more} than {high} {noun}"
    return None


def _search(pattern: str, text: str) -> bool | None:
    """Whether ``pattern`` matches somewhere in ``text`` (JSON Schema patterns are unanchored);
    ``None`` for an ECMA-only pattern Python cannot compile (the server judges it)."""
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return None


def _within(value: float, key: str, bound: float) -> bool:
    if key == "minimum":
        return value >= bound
    if key == "maximum":
        return value <= bound
    if key == "exclusiveMinimum":
        return value > bound
    return value < bound


def _multiple(value: float, step: float) -> bool:
    if isinstance(value, int) and isinstance(step, int):
        return value % step == 0
    quotient = value / step
    return not math.isfinite(quotient) or math.isclose(quotient, round(quotient), abs_tol=1e-9)
