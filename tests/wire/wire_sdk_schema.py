"""Validate a JSON value against an official SDK's request TypedDicts (generated from the
providers' OpenAPI specs): unknown keys, missing required keys, wrong literals and wrong scalar types
are all reported. A small walker over typing hints, so no extra dependency is needed."""

from __future__ import annotations

import collections.abc as cabc
import functools
import types
import typing
from typing import Any

from typing_extensions import NotRequired, Required, is_typeddict


def _unwrap(tp: Any) -> tuple[Any, bool | None]:
    origin = typing.get_origin(tp)
    if origin is Required:
        return typing.get_args(tp)[0], True
    if origin is NotRequired:
        return typing.get_args(tp)[0], False
    return tp, None


@functools.lru_cache(maxsize=None)
def _hints(tp: Any) -> tuple[dict[str, Any], frozenset[str]]:
    hints = typing.get_type_hints(tp, include_extras=True)
    required = set(getattr(tp, "__required_keys__", ()))
    for key, hint in hints.items():
        marked = _unwrap(hint)[1]
        if marked is True:
            required.add(key)
        elif marked is False:
            required.discard(key)
    return hints, frozenset(required)


def errors(value: Any, tp: Any, path: str = "$") -> list[str]:
    tp, _ = _unwrap(tp)
    if tp is Any or tp is object:
        return []
    origin = typing.get_origin(tp)
    if getattr(tp, "__name__", None) == "SequenceNotStr" or (
        origin is not None and getattr(origin, "__name__", None) == "SequenceNotStr"
    ):
        (item,) = typing.get_args(tp) or (Any,)
        if not isinstance(value, list):
            return [f"{path}: expected a list"]
        return [e for i, v in enumerate(value) for e in errors(v, item, f"{path}[{i}]")]
    if origin is typing.Annotated:
        return errors(value, typing.get_args(tp)[0], path)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(tp)
        found = [errors(value, o, path) for o in options]
        if any(not f for f in found):
            return []
        return [f"{path}: matches no branch of {tp}: " + "; ".join(min(found, key=len)[:3])]
    if origin is typing.Literal:
        return [] if value in typing.get_args(tp) else [f"{path}: {value!r} not in {typing.get_args(tp)}"]
    if is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{path}: expected an object for {tp.__name__}"]
        hints, required = _hints(tp)
        out = [f"{path}: unknown key {k!r} for {tp.__name__}" for k in value if k not in hints]
        out += [f"{path}: missing required {k!r} for {tp.__name__}" for k in required
                if k not in value]
        for k, v in value.items():
            if k in hints:
                out += errors(v, hints[k], f"{path}.{k}")
        return out
    if origin in (list, cabc.Iterable, cabc.Sequence, typing.List):
        (item,) = typing.get_args(tp) or (Any,)
        if not isinstance(value, list):
            return [f"{path}: expected a list"]
        return [e for i, v in enumerate(value) for e in errors(v, item, f"{path}[{i}]")]
    if origin in (dict, cabc.Mapping, typing.Dict):
        return [] if isinstance(value, dict) else [f"{path}: expected an object"]
    if tp is type(None):
        return [] if value is None else [f"{path}: expected null"]
    if tp is str:
        return [] if isinstance(value, str) else [f"{path}: expected a string"]
    if tp is bool:
        return [] if isinstance(value, bool) else [f"{path}: expected a bool"]
    if tp is int:
        return [] if isinstance(value, int) and not isinstance(value, bool) else [f"{path}: expected an int"]
    if tp is float:
        return [] if isinstance(value, (int, float)) and not isinstance(value, bool) else [f"{path}: expected a number"]
    if isinstance(tp, type):
        return [] if isinstance(value, tp) else [f"{path}: expected {tp.__name__}"]
    return []
