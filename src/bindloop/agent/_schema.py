"""Structured-output schemas: the strict-mode converter, and decoding an answer against a type or a
JSON Schema dict.

The strict form follows OpenAI's documented structured-output rules (every object closed with
``additionalProperties: false``, every property listed in ``required`` — optional ones made nullable,
an object at the root, only the supported keywords), which is also a shape Gemini's schema subset and
Anthropic accept. Keywords the strict form cannot carry are not dropped silently: they are written
into the ``description`` (the model still reads them) and the decoder checks them after the fact.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, TypeAlias

import msgspec

from ..errors import UnsupportedSchemaError

__all__ = ("OutputSpec", "output_spec", "strict_json_schema")

Schema: TypeAlias = dict[str, Any]

# Keywords the strict form keeps as they are.
_KEPT = frozenset({"type", "properties", "required", "additionalProperties", "items", "enum",
                   "const", "anyOf", "$ref", "$defs", "description", "title"})
# Keywords moved into the description (and checked by the decoder).
_MOVED = frozenset({"minLength", "maxLength", "pattern", "format", "minimum", "maximum",
                    "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems",
                    "uniqueItems", "minProperties", "maxProperties", "examples",
                    "contentEncoding", "contentMediaType"})
# Keywords dropped: annotations that carry nothing the model or the decoder needs.
_DROPPED = frozenset({"$schema", "$id", "$comment", "deprecated", "readOnly", "writeOnly",
                      "default", "discriminator"})  # discriminator: the tag is a const already
# Everything else is refused, naming the keyword (not, if/then/else, patternProperties, ...).

_NAME = re.compile(r"[^A-Za-z0-9_-]+")


def _fail(path: str, message: str) -> UnsupportedSchemaError:
    return UnsupportedSchemaError(f"schema at {path or '<root>'}: {message}")


def _nullable(schema: Schema) -> Schema:
    if _accepts_null(schema, {}):
        return schema
    return {"anyOf": [schema, {"type": "null"}]}


def _accepts_null(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> bool:
    t = schema.get("type")
    if t == "null" or (isinstance(t, list) and "null" in t):
        return True
    if "const" in schema and schema["const"] is None:
        return True
    if isinstance(schema.get("enum"), list) and None in schema["enum"]:
        return True
    branches = schema.get("anyOf")
    return isinstance(branches, list) and any(
        isinstance(b, Mapping) and _accepts_null(b, defs) for b in branches)


def _describe(moved: dict[str, Any], description: object) -> str:
    encoded = ", ".join(f"{k}={msgspec.json.encode(v).decode()}" for k, v in sorted(moved.items()))
    note = f"Constraints: {encoded}."
    return f"{description} {note}" if isinstance(description, str) and description else note


def _convert(node: object, path: str, defs: Mapping[str, Any], inline: bool,
             stack: tuple[str, ...]) -> Schema:
    if node is True or node == {}:
        raise _fail(path, "an unconstrained value (`true` / `{}` / typing.Any) has no strict form: "
                          "give it a type")
    if not isinstance(node, Mapping):
        raise _fail(path, f"expected a schema object, got {type(node).__name__}")
    if "$ref" in node:
        ref = node["$ref"]
        name = ref.rsplit("/", 1)[-1] if isinstance(ref, str) else ""
        if not isinstance(ref, str) or not ref.startswith("#/$defs/") or name not in defs:
            raise _fail(path, f"$ref {ref!r} does not point into this schema's $defs")
        if not inline:
            return {"$ref": ref}
        if name in stack:
            raise _fail(path, f"recursive $ref {ref!r} cannot be inlined (Gemini has no $ref): "
                              "use a non-recursive type for this provider")
        return _convert(defs[name], path, defs, inline, (*stack, name))
    out: Schema = {}
    moved: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED or key == "$defs":
            continue
        if key in _MOVED:
            moved[key] = value
        elif key == "oneOf" or key == "anyOf":
            if not isinstance(value, list) or not value:
                raise _fail(path, f"{key} must be a non-empty list")
            out["anyOf"] = [_convert(b, f"{path}/{key}/{i}", defs, inline, stack)
                            for i, b in enumerate(value)]
        elif key == "allOf":
            if not isinstance(value, list) or len(value) != 1:
                raise _fail(path, "allOf with more than one schema has no strict form: merge them")
            merged = _convert(value[0], f"{path}/allOf/0", defs, inline, stack)
            out.update({k: v for k, v in merged.items() if k not in out})
        elif key == "properties":
            if not isinstance(value, Mapping):
                raise _fail(path, "properties must be an object")
            out["properties"] = {name: _convert(sub, f"{path}/properties/{name}", defs, inline,
                                                stack) for name, sub in value.items()}
        elif key == "items":
            if isinstance(value, list):
                raise _fail(path, "tuple-form items (a fixed-length tuple type) has no strict form")
            out["items"] = _convert(value, f"{path}/items", defs, inline, stack)
        elif key == "prefixItems":
            raise _fail(path, "prefixItems (a tuple type) has no strict form: use a Struct")
        elif key == "additionalProperties":
            if value is not False:
                raise _fail(path, "additionalProperties other than false (a dict[str, X] type) "
                                  "has no strict form: use a Struct with named fields")
        elif key in _KEPT:
            out[key] = value
        else:
            raise _fail(path, f"keyword {key!r} is not supported in structured output (supported: "
                              f"{sorted(_KEPT | _MOVED)})")
    is_object = out.get("type") == "object" or "properties" in out
    if is_object:
        out["type"] = "object"
        props: dict[str, Schema] = out.setdefault("properties", {})
        required = set(node.get("required", ()))
        for name in list(props):
            if name not in required:
                props[name] = _nullable(props[name])
        out["required"] = list(props)
        out["additionalProperties"] = False
    if moved:
        out["description"] = _describe(moved, out.get("description"))
    return out


def _base_schema(schema: object) -> Schema:
    if isinstance(schema, Mapping):
        return dict(schema)
    try:
        return msgspec.json.schema(schema, ref_template="#/$defs/{name}")
    except (TypeError, ValueError) as exc:
        raise UnsupportedSchemaError(
            f"prompt_agent: {schema!r} is not a type msgspec can describe ({exc}); pass a "
            "msgspec.Struct, dataclass, TypedDict, list[...] / union of those, or a JSON Schema "
            "dict") from exc


def strict_json_schema(schema: object, *, inline_refs: bool = False) -> Schema:
    """The strict structured-output form of ``schema`` (a type msgspec can describe, or a JSON
    Schema dict).

    Every object is closed and lists every property as required, optional ones made nullable;
    ``oneOf`` becomes ``anyOf``; constraint keywords move into the ``description``. ``$ref`` into
    ``$defs`` is kept (OpenAI and Anthropic accept it) or, with ``inline_refs=True``, inlined for
    providers without references (Gemini; a recursive type is then refused). The root may be any
    schema here; :func:`output_spec` wraps a non-object root for the wire.

    Raises :class:`~bindloop.errors.UnsupportedSchemaError` naming the path and keyword of anything
    outside the supported subset.
    """
    base = _base_schema(schema)
    defs = base.get("$defs", {})
    if not isinstance(defs, Mapping):
        raise _fail("", "$defs must be an object")
    root: Mapping[str, Any] = base
    if "$ref" in base and set(base) <= {"$ref", "$defs"}:
        # A named type's schema is a bare reference; the wire wants the object at the root.
        ref = base["$ref"]
        name = ref.rsplit("/", 1)[-1] if isinstance(ref, str) else ""
        if name in defs and isinstance(ref, str) and ref.startswith("#/$defs/"):
            root = defs[name]
    out = _convert(root, "", defs, inline_refs, ())
    if not inline_refs and defs:
        out["$defs"] = {name: _convert(sub, f"/$defs/{name}", defs, False, ())
                        for name, sub in sorted(defs.items())}
    return out


class InvalidOutput(Exception):
    """An answer that did not decode; ``reason`` is what the re-ask tells the model."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class OutputSpec:
    """What a prompt asks for: the strict ``schema`` sent to the provider (wrapped in a
    ``{"result": ...}`` object when its root is not an object), its ``name``, and :meth:`decode`."""

    __slots__ = ("_decoder", "_defs", "_original", "_type", "name", "schema", "wrapped")

    def __init__(self, source: object) -> None:
        base = _base_schema(source)
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
        """The answer ``text`` as the requested value, or :class:`InvalidOutput`."""
        if self._decoder is not None:
            try:
                return self._decoder.decode(text)
            except (msgspec.DecodeError, msgspec.ValidationError):
                pass  # the general path below gives the reason (or undoes a synthetic null)
        try:
            data = msgspec.json.decode(text.strip() or "null")
        except msgspec.DecodeError as exc:
            raise InvalidOutput(f"the answer is not valid JSON ({exc})") from None
        if self.wrapped:
            if not isinstance(data, dict) or "result" not in data:
                raise InvalidOutput('the answer must be a JSON object {"result": ...}')
            data = data["result"]
        data = _drop_synthetic_nulls(data, self._original, self._defs)
        if self._type is not None:
            try:
                return msgspec.convert(data, self._type)
            except msgspec.ValidationError as exc:
                raise InvalidOutput(f"the answer does not match the schema: {exc}") from None
        problem = validate(data, self._original, self._defs, "$")
        if problem is not None:
            raise InvalidOutput(f"the answer does not match the schema: {problem}")
        return data


def output_spec(schema: object) -> OutputSpec:
    return OutputSpec(schema)


def _resolve(schema: Mapping[str, Any], defs: Mapping[str, Any]) -> Mapping[str, Any]:
    seen = 0
    while "$ref" in schema and seen < 64:
        ref = schema["$ref"]
        schema = defs.get(ref.rsplit("/", 1)[-1], {}) if isinstance(ref, str) else {}
        seen += 1
    return schema


def _drop_synthetic_nulls(value: Any, schema: Mapping[str, Any], defs: Mapping[str, Any]) -> Any:
    """Undo the strict form's nullable optionals: a ``null`` the original schema would not accept,
    for a property it did not require, means "absent" (so the type's default applies)."""
    schema = _resolve(schema, defs)
    if isinstance(value, dict):
        props = schema.get("properties")
        if isinstance(props, Mapping):
            required = set(schema.get("required", ()))
            out = {}
            for key, item in value.items():
                sub = props.get(key)
                if isinstance(sub, Mapping):
                    if item is None and key not in required and not _accepts_null(
                            _resolve(sub, defs), defs):
                        continue
                    out[key] = _drop_synthetic_nulls(item, sub, defs)
                else:
                    out[key] = item
            return out
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [_drop_synthetic_nulls(v, schema["items"], defs) for v in value]
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list) and value is not None:
        for b in branches:
            if isinstance(b, Mapping):
                candidate = _drop_synthetic_nulls(value, b, defs)
                if validate(candidate, b, defs, "$") is None:
                    return candidate
    return value


_TYPES: Mapping[str, Any] = MappingProxyType({
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) or (
        isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
})


def validate(value: Any, schema: Mapping[str, Any], defs: Mapping[str, Any],
             path: str) -> str | None:
    """The first way ``value`` breaks ``schema`` (the supported subset), or ``None``."""
    schema = _resolve(schema, defs)
    t = schema.get("type")
    if t is not None:
        kinds = t if isinstance(t, list) else [t]
        if not any(_TYPES.get(k, lambda v: False)(value) for k in kinds):
            return f"{path}: expected {' or '.join(map(str, kinds))}, got {type(value).__name__}"
    if "const" in schema and value != schema["const"]:
        return f"{path}: expected {schema['const']!r}"
    if isinstance(schema.get("enum"), list) and value not in schema["enum"]:
        return f"{path}: expected one of {schema['enum']!r}"
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and not any(
                validate(value, b, defs, path) is None for b in branches if isinstance(b, Mapping)):
            return f"{path}: matches none of the {key} alternatives"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{path}: shorter than {schema['minLength']}"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{path}: longer than {schema['maxLength']}"
        if isinstance(schema.get("pattern"), str) and re.search(schema["pattern"], value) is None:
            return f"{path}: does not match {schema['pattern']!r}"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{path}: less than {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{path}: greater than {schema['maximum']}"
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            return f"{path}: not greater than {schema['exclusiveMinimum']}"
        if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
            return f"{path}: not less than {schema['exclusiveMaximum']}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"{path}: not a finite number"
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return f"{path}: fewer than {schema['minItems']} items"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{path}: more than {schema['maxItems']} items"
        items = schema.get("items")
        if isinstance(items, Mapping):
            for i, item in enumerate(value):
                if (problem := validate(item, items, defs, f"{path}[{i}]")) is not None:
                    return problem
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                return f"{path}: missing required property {name!r}"
        for name, item in value.items():
            sub = props.get(name) if isinstance(props, Mapping) else None
            if isinstance(sub, Mapping):
                if (problem := validate(item, sub, defs, f"{path}.{name}")) is not None:
                    return problem
            elif schema.get("additionalProperties") is False:
                return f"{path}: unexpected property {name!r}"
    return None
