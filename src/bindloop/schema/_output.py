"""Decoding a model's structured answer: :class:`OutputSpec` holds the strict schema sent to the
provider and decodes the answer against the type or the original JSON Schema (the one validator
checks what the strict form could only describe)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import msgspec

from ._errors import InvalidOutputError
from ._strict import accepts_null, base_schema, strict_json_schema
from ._validate import MAX_DEPTH, first_schema_violation

__all__ = ("OutputSpec", "output_spec")

_NAME = re.compile(r"[^A-Za-z0-9_-]+")


class OutputSpec:
    """What a prompt asks for: the strict ``schema`` sent to the provider (wrapped in a
    ``{"result": ...}`` object when its root is not an object), its ``name``, and :meth:`decode`."""

    __slots__ = ("_decoder", "_defs", "_original", "_type", "name", "schema", "wrapped")

    def __init__(self, source: object) -> None:
        base = base_schema(source)
        strict = strict_json_schema(base)
        self.wrapped = strict.get("type") != "object"
        if self.wrapped:
            defs = strict.pop("$defs", None)
            strict = {"type": "object", "properties": {"result": strict}, "required": ["result"],
                      "additionalProperties": False}
            if defs:
                strict["$defs"] = defs
        self.schema = strict
        self._original = base
        self._defs: Mapping[str, Any] = base.get("$defs", {})
        self._type = None if isinstance(source, Mapping) else source
        # A typed, unwrapped answer is first decoded straight into the type: when that succeeds
        # the answer had no null the type refuses, so the general path (JSON -> builtins ->
        # drop synthetic nulls -> convert) would return an equal value, slower.
        self._decoder: Any = (msgspec.json.Decoder(source) if self._type is not None
                              and not self.wrapped else None)
        title = base.get("title") if isinstance(base.get("title"), str) else None
        raw = title or getattr(source, "__name__", None) or "final_result"
        self.name = _NAME.sub("_", str(raw))[:64] or "final_result"

    def decode(self, text: str) -> Any:
        """The answer ``text`` as the requested value, or :class:`~bindloop.schema.InvalidOutputError`."""
        if self._decoder is not None:
            try:
                return self._decoder.decode(text)
            except (msgspec.DecodeError, msgspec.ValidationError):
                pass  # the general path below gives the reason (or undoes a synthetic null)
        try:
            data = msgspec.json.decode(text.strip() or "null")
        except msgspec.DecodeError as exc:
            raise InvalidOutputError(f"the answer is not valid JSON ({exc})") from None
        if self.wrapped:
            if not isinstance(data, dict) or "result" not in data:
                raise InvalidOutputError('the answer must be a JSON object {"result": ...}')
            data = data["result"]
        data = _drop_synthetic_nulls(data, self._original, self._defs, self._original)
        if self._type is not None:
            try:
                return msgspec.convert(data, self._type)
            except msgspec.ValidationError as exc:
                raise InvalidOutputError(f"the answer does not match the schema: {exc}") from None
        problem = first_schema_violation(data, self._original)
        if problem is not None:
            raise InvalidOutputError(f"the answer does not match the schema: {problem}")
        return data


def output_spec(schema: object) -> OutputSpec:
    """The :class:`OutputSpec` of ``schema`` (a type msgspec can describe, or a JSON Schema dict)."""
    return OutputSpec(schema)


def _resolve(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    """Follow ``$ref`` into ``defs`` (bounded: a reference chain longer than 64 ends as ``{}``)."""
    seen = 0
    while "$ref" in schema and seen < 64:
        ref = schema["$ref"]
        schema = defs.get(ref.rsplit("/", 1)[-1], {}) if isinstance(ref, str) else {}
        seen += 1
    return schema


def _drop_synthetic_nulls(value: Any, schema: Mapping[str, Any], defs: Mapping[str, Any],
                          root: Mapping[str, Any], depth: int = 0) -> Any:
    """Undo the strict form's nullable optionals: a ``null`` the original schema would not accept,
    for a property it did not require, means "absent" (so the type's default applies)."""
    schema = _resolve(schema, defs)
    if depth > MAX_DEPTH:
        return value  # the validator reports the nesting
    if isinstance(value, dict):
        props = schema.get("properties")
        if isinstance(props, Mapping):
            required = set(schema.get("required", ()))
            out = {}
            for key, item in value.items():
                sub = props.get(key)
                if isinstance(sub, Mapping):
                    if item is None and key not in required and not accepts_null(
                            _resolve(sub, defs)):
                        continue
                    out[key] = _drop_synthetic_nulls(item, sub, defs, root, depth + 1)
                else:
                    out[key] = item
            return out
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_drop_synthetic_nulls(v, schema["items"], defs, root, depth + 1) for v in value]
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list) and value is not None:
        for b in branches:
            if isinstance(b, Mapping):
                candidate = _drop_synthetic_nulls(value, b, defs, root, depth + 1)
                if first_schema_violation(candidate, b, root=root) is None:
                    return candidate
    return value
