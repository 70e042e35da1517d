"""The bounded walk every schema rewrite runs on: nesting depth and emitted nodes are capped (``$ref``
inlining can multiply them), a cycle of Python objects is caught, JSON values are copied without
ever mutating the input, local ``$ref`` pointers resolve, each rewrite is recorded, and a construct
the target cannot carry is handled by one :data:`~bindloop.schema.SchemaPolicy`.

Hostile input ends in a :class:`SchemaSanitizeError` (malformed) or an
:class:`UnsupportedSchemaError` (refused by policy), never a ``RecursionError`` or a blow-up.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import msgspec

from ._errors import SchemaSanitizeError, UnsupportedSchemaError
from ._json import escape
from ._report import SchemaChange, SchemaChangeKind, SchemaPolicy

__all__ = ("POLICIES", "BoundedWalk")

POLICIES: frozenset[str] = frozenset({"drop", "describe", "refuse"})

_ENCODER = msgspec.json.Encoder(order="sorted")


class BoundedWalk:
    """Bookkeeping shared by the rewriters (one instance per rewrite, never shared)."""

    def __init__(self, root: object, *, policy: SchemaPolicy, max_depth: int,
                 max_nodes: int) -> None:
        if max_depth < 1 or max_nodes < 1:
            raise SchemaSanitizeError("max_depth and max_nodes must be positive", path="")
        if policy not in POLICIES:
            raise SchemaSanitizeError(f"unknown policy {policy!r} (drop, describe or refuse)",
                                      path="")
        self.root = root
        self.policy = policy
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.nodes = 0
        self.changes: list[SchemaChange] = []
        self.active: set[int] = set()  # ids of the Python containers on the current path

    def note(self, path: str, kind: SchemaChangeKind) -> None:
        self.changes.append(SchemaChange(path=path, kind=kind))

    def enter(self, value: object, path: str, depth: int) -> None:
        if depth > self.max_depth:
            raise SchemaSanitizeError(f"schema nests deeper than {self.max_depth} levels", path=path)
        self.nodes += 1
        if self.nodes > self.max_nodes:
            raise SchemaSanitizeError(
                f"schema expands to more than {self.max_nodes} nodes (check $ref fan-out)", path=path
            )
        if id(value) in self.active:
            raise SchemaSanitizeError("schema contains a cycle of objects", path=path)

    def copy_json(self, value: object, path: str, depth: int) -> object:
        """A bounded deep copy of a plain JSON value (enum members, defaults, unknown keywords)."""
        if value is None or isinstance(value, (str, bool, int)):
            return value
        if isinstance(value, float):
            if not math.isfinite(value):
                raise SchemaSanitizeError("schema contains a non-finite number", path=path)
            return value
        if isinstance(value, (Mapping, list, tuple)):
            self.enter(value, path, depth)
            self.active.add(id(value))
            try:
                if isinstance(value, Mapping):
                    out: dict[str, object] = {}
                    for key, item in value.items():
                        if not isinstance(key, str):
                            raise SchemaSanitizeError("object key is not a string", path=path)
                        out[key] = self.copy_json(item, f"{path}/{escape(key)}", depth + 1)
                    return out
                return [self.copy_json(item, f"{path}/{i}", depth + 1)
                        for i, item in enumerate(value)]
            finally:
                self.active.discard(id(value))
        raise SchemaSanitizeError(f"not a JSON value: {type(value).__name__}", path=path)

    def resolve(self, ref: object, path: str) -> object:
        """The target of a local ``$ref`` (a JSON Pointer into the root)."""
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaSanitizeError(f"only local $ref pointers are supported, got {ref!r}",
                                      path=path)
        pointer = ref[1:]
        if pointer and not pointer.startswith("/"):
            raise SchemaSanitizeError(f"$ref anchors are not supported: {ref!r}", path=path)
        target: object = self.root
        for raw_token in pointer.split("/")[1:]:
            token = raw_token.replace("~1", "/").replace("~0", "~")
            if isinstance(target, Mapping) and token in target:
                target = target[token]
            elif isinstance(target, (list, tuple)) and token.isdigit() and int(token) < len(target):
                target = target[int(token)]
            else:
                raise SchemaSanitizeError(f"$ref does not resolve: {ref!r}", path=path)
        return target

    def unsupported(self, keywords: Mapping[str, object], path: str, depth: int, why: str,
                    notes: list[str]) -> None:
        """Apply the policy to ``keywords`` (taken from the node at ``path``), which the target
        cannot carry exactly: ``drop`` records them dropped, ``describe`` appends them to ``notes``
        (the node's description), ``refuse`` raises naming them."""
        names = ", ".join(repr(k) for k in sorted(keywords))
        where = f"{path}/{escape(sorted(keywords)[0])}" if len(keywords) == 1 else path
        if self.policy == "refuse":
            raise UnsupportedSchemaError(
                f"schema at {path or '<root>'}: {names} {why}", path=where)
        if self.policy == "drop":
            self.note(where, "keyword_dropped")
            return
        copied = self.copy_json(dict(keywords), path, depth + 1)
        notes.append(f"Also must match the JSON Schema {_ENCODER.encode(copied).decode()}.")
        self.note(where, "keyword_described")
