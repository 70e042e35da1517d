"""The structured-output target of the one schema rewriter: the strict form a provider enforces.

The strict form follows OpenAI's documented structured-output rules (every object closed with
``additionalProperties: false``, every property listed in ``required`` — optional ones made nullable,
an object at the root, only the supported keywords), which is also a shape Gemini's schema subset and
Anthropic accept. Keywords the strict form cannot carry are not dropped silently: they are written
into the ``description`` (the model still reads them) and the decoder checks them after the fact.
Any other keyword goes to the :data:`~bindloop.schema.SchemaPolicy` (``"refuse"`` by default).
The walk is the same bounded walk the tool target runs on (depth, size and object cycles capped).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias

import msgspec

from ._errors import UnsupportedSchemaError
from ._report import SchemaPolicy
from ._walk import BoundedWalk

__all__ = ("accepts_null", "base_schema", "strict_json_schema")

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
# Everything else goes to the policy, naming the keyword (not, if/then/else, patternProperties, ...).


def _fail(path: str, message: str) -> UnsupportedSchemaError:
    return UnsupportedSchemaError(f"schema at {path or '<root>'}: {message}", path=path)


def _nullable(schema: Schema) -> Schema:
    if accepts_null(schema):
        return schema
    return {"anyOf": [schema, {"type": "null"}]}


def accepts_null(schema: Mapping[str, Any]) -> bool:
    """Whether ``schema`` says outright that ``null`` is allowed (a null type, const or enum
    member, or such an ``anyOf`` branch)."""
    t = schema.get("type")
    if t == "null" or (isinstance(t, list) and "null" in t):
        return True
    if "const" in schema and schema["const"] is None:
        return True
    if isinstance(schema.get("enum"), list) and None in schema["enum"]:
        return True
    branches = schema.get("anyOf")
    return isinstance(branches, list) and any(
        isinstance(b, Mapping) and accepts_null(b) for b in branches)


def _describe(moved: dict[str, Any], description: object) -> str:
    encoded = ", ".join(f"{k}={msgspec.json.encode(v).decode()}" for k, v in sorted(moved.items()))
    note = f"Constraints: {encoded}."
    return f"{description} {note}" if isinstance(description, str) and description else note


class _Strict(BoundedWalk):
    def __init__(self, root: object, defs: Mapping[str, Any], *, inline: bool,
                 policy: SchemaPolicy) -> None:
        super().__init__(root, policy=policy, max_depth=64, max_nodes=10_000)
        self.defs = defs
        self.inline = inline

    def convert(self, node: object, path: str, depth: int, stack: tuple[str, ...]) -> Schema:
        if node is True or node == {}:
            raise _fail(path, "an unconstrained value (`true` / `{}` / typing.Any) has no strict "
                              "form: give it a type")
        if not isinstance(node, Mapping):
            raise _fail(path, f"expected a schema object, got {type(node).__name__}")
        self.enter(node, path, depth)
        if "$ref" in node:
            ref = node["$ref"]
            name = ref.rsplit("/", 1)[-1] if isinstance(ref, str) else ""
            if not isinstance(ref, str) or not ref.startswith("#/$defs/") or name not in self.defs:
                raise _fail(path, f"$ref {ref!r} does not point into this schema's $defs")
            if not self.inline:
                return {"$ref": ref}
            if name in stack:
                raise _fail(path, f"recursive $ref {ref!r} cannot be inlined (Gemini has no $ref):"
                                  " use a non-recursive type for this provider")
            return self.convert(self.defs[name], path, depth + 1, (*stack, name))
        self.active.add(id(node))
        try:
            return self.build(node, path, depth, stack)
        finally:
            self.active.discard(id(node))

    def build(self, node: Mapping[str, Any], path: str, depth: int,
              stack: tuple[str, ...]) -> Schema:
        out: Schema = {}
        moved: dict[str, Any] = {}
        notes: list[str] = []
        for key, value in node.items():
            if key in _DROPPED or key == "$defs":
                continue
            if key in _MOVED:
                moved[key] = value
            elif key == "oneOf" or key == "anyOf":
                if not isinstance(value, list) or not value:
                    raise _fail(path, f"{key} must be a non-empty list")
                out["anyOf"] = [self.convert(b, f"{path}/{key}/{i}", depth + 1, stack)
                                for i, b in enumerate(value)]
            elif key == "allOf":
                if not isinstance(value, list) or len(value) != 1:
                    raise _fail(path, "allOf with more than one schema has no strict form: merge "
                                      "them")
                merged = self.convert(value[0], f"{path}/allOf/0", depth + 1, stack)
                out.update({k: v for k, v in merged.items() if k not in out})
            elif key == "properties":
                if not isinstance(value, Mapping):
                    raise _fail(path, "properties must be an object")
                out["properties"] = {name: self.convert(sub, f"{path}/properties/{name}",
                                                        depth + 1, stack)
                                     for name, sub in value.items()}
            elif key == "items":
                if isinstance(value, list):
                    raise _fail(path, "tuple-form items (a fixed-length tuple type) has no strict "
                                      "form")
                out["items"] = self.convert(value, f"{path}/items", depth + 1, stack)
            elif key == "prefixItems":
                raise _fail(path, "prefixItems (a tuple type) has no strict form: use a Struct")
            elif key == "additionalProperties":
                if value is not False:
                    raise _fail(path, "additionalProperties other than false (a dict[str, X] "
                                      "type) has no strict form: use a Struct with named fields")
            elif key in _KEPT:
                out[key] = self.copy_json(value, f"{path}/{key}", depth + 1)
            else:
                self.unsupported({key: value}, path, depth, "is not supported in structured "
                                 f"output (supported: {sorted(_KEPT | _MOVED)})", notes)
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
        if notes:
            described = out.get("description")
            joined = " ".join(notes)
            out["description"] = f"{described} {joined}" if described else joined
        return out


def base_schema(schema: object) -> Schema:
    """``schema`` as a JSON Schema dict: a dict as given (copied), a type through msgspec."""
    if isinstance(schema, Mapping):
        return dict(schema)
    try:
        return msgspec.json.schema(schema, ref_template="#/$defs/{name}")
    except (TypeError, ValueError) as exc:
        raise UnsupportedSchemaError(
            f"prompt_agent: {schema!r} is not a type msgspec can describe ({exc}); pass a "
            "msgspec.Struct, dataclass, TypedDict, list[...] / union of those, or a JSON Schema "
            "dict") from exc


def strict_json_schema(schema: object, *, inline_refs: bool = False,
                       policy: SchemaPolicy = "refuse") -> Schema:
    """The strict structured-output form of ``schema`` (a type msgspec can describe, or a JSON
    Schema dict).

    Every object is closed and lists every property as required, optional ones made nullable;
    ``oneOf`` becomes ``anyOf``; constraint keywords move into the ``description``. ``$ref`` into
    ``$defs`` is kept (OpenAI and Anthropic accept it) or, with ``inline_refs=True``, inlined for
    providers without references (Gemini; a recursive type is then refused). The root may be any
    schema here; :func:`output_spec` wraps a non-object root for the wire.

    A keyword outside the supported subset goes to ``policy``: ``"refuse"`` (the default) raises
    :class:`~bindloop.schema.UnsupportedSchemaError` naming the path and keyword, ``"describe"``
    writes it into the description, ``"drop"`` removes it (the decoder checks the original schema
    either way). Structural limits (a tuple, an open map, ``allOf`` of several schemas, an
    unconstrained value, a recursive type to inline) are refused whatever the policy.
    """
    base = base_schema(schema)
    defs = base.get("$defs", {})
    if not isinstance(defs, Mapping):
        raise _fail("", "$defs must be an object")
    root: Mapping[str, Any] = base
    stack: tuple[str, ...] = ()
    if "$ref" in base and set(base) <= {"$ref", "$defs"}:
        # A named type's schema is a bare reference; the wire wants the object at the root.
        ref = base["$ref"]
        name = ref.rsplit("/", 1)[-1] if isinstance(ref, str) else ""
        if name in defs and isinstance(ref, str) and ref.startswith("#/$defs/"):
            root, stack = defs[name], (name,)
    walk = _Strict(base, defs, inline=inline_refs, policy=policy)
    out = walk.convert(root, "", 0, stack)
    if not inline_refs and defs:
        out["$defs"] = {name: walk.convert(sub, f"/$defs/{name}", 1, ())
                        for name, sub in sorted(defs.items())}
    return out


