"""JSON facts every schema step shares: the type names, which type a value has, JSON equality
(``true`` is not ``1``, ``1`` is ``1.0``), JSON-Pointer escaping and how values are written into a
description."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeGuard

import msgspec

__all__ = ("JSON_TYPES", "escape", "is_number", "join_or", "json_equal", "json_type_of",
           "render_values", "type_ok")

JSON_TYPES: frozenset[str] = frozenset(
    {"string", "number", "integer", "boolean", "object", "array", "null"}
)

_NOTE_ENCODER = msgspec.json.Encoder(order="sorted")


def is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def type_ok(value: object, kind: str) -> bool:
    """Whether ``value`` is of JSON Schema type ``kind`` (``integer`` includes ``1.0``); an unknown
    type name constrains nothing."""
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer())
    if kind == "number":
        return is_number(value)
    if kind == "string":
        return isinstance(value, str)
    if kind == "array":
        return isinstance(value, (list, tuple))
    if kind == "object":
        return isinstance(value, Mapping)
    return True


def json_type_of(value: object) -> str | None:
    """The JSON type name of ``value`` (``integer`` for a whole ``int``, ``number`` for a float), or
    ``None`` for a value JSON cannot carry."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return None


def json_equal(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1``, ``1`` equals ``1.0``, containers compare deeply."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if is_number(a) or is_number(b):
        return is_number(a) and is_number(b) and bool(a == b)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and bool(a == b)


def escape(token: str) -> str:
    """One JSON-Pointer reference token (RFC 6901)."""
    return token.replace("~", "~0").replace("/", "~1")


def join_or(names: list[str]) -> str:
    if len(names) == 1:
        return names[0]
    return ", ".join(names[:-1]) + " or " + names[-1]


def render_values(values: list[object]) -> str:
    try:
        return ", ".join(_NOTE_ENCODER.encode(v).decode() for v in values)
    except (TypeError, ValueError, OverflowError):
        return ", ".join(repr(v) for v in values)
