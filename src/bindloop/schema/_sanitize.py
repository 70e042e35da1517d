"""The tool target of the one schema rewriter: a tool's parameter schema for strict providers.

Strict validators (OpenAI strict mode, Gemini, Grok) reject the whole request — every tool — on the
first schema construct they do not accept. This walk rewrites a tool's parameter schema into the subset
they share, one node at a time, without ever mutating its input.

The walk is keyword-aware: a property *named* ``properties``, ``type`` or ``required`` is a name, never
a keyword. It is bounded: nesting depth and the number of nodes emitted (which ``$ref`` inlining can
multiply) are capped, and a cycle of Python objects is detected, so hostile input ends in a
:class:`SchemaSanitizeError` rather than a ``RecursionError`` or an exponential blow-up.

Negated and conditional subschemas (``not``, ``if`` with its ``then`` / ``else``) are kept only when
every rewrite inside them is exact: a rewrite that widens or narrows a positive schema inverts or
scrambles under ``not`` / ``if`` (``not: {required: [a]}`` with the ``required`` dropped — strict
providers refuse a ``required`` that names no property of its own node — would become ``not: {}``,
which nothing satisfies). Anything inexact there goes to the policy instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Literal

from ._errors import SchemaSanitizeError
from ._json import JSON_TYPES, escape, join_or, json_type_of, render_values, type_ok
from ._report import SanitizedSchema, SchemaPolicy
from ._walk import BoundedWalk

__all__ = ("RefMode", "sanitize_tool_schema", "sanitize_tool_schema_report")

RefMode = Literal["inline", "keep"]

# Keywords that describe a value rather than constrain its type. On a nullable union they stay on the
# wrapper, outside both branches; every other keyword belongs to the typed branch.
ANNOTATIONS: frozenset[str] = frozenset(
    {"title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
     "$comment"}
)

_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas")
_SCHEMA_SINGLES = ("contains", "propertyNames", "additionalItems", "unevaluatedItems",
                   "unevaluatedProperties")
# Kept only when every rewrite inside them is exact (see the module docstring).
_CONDITIONALS = (("not",), ("if", "then", "else"))
# Slots where ``false`` means "nothing more" rather than "nothing at all": strict providers refuse a
# boolean schema, so the ``false`` is dropped (bounded by ``maxItems`` where that is exact).
_CLOSING_SLOTS = frozenset({"additionalItems", "unevaluatedItems", "unevaluatedProperties"})
_COMPOSITIONS = ("anyOf", "oneOf", "allOf")
_HANDLED = frozenset({"type", "enum", "const", "nullable", "required", "description", "$ref",
                      "$schema", "$defs", "definitions", "items", "prefixItems",
                      "additionalProperties", "not", "if", "then", "else", *_SCHEMA_MAPS,
                      *_SCHEMA_SINGLES, *_COMPOSITIONS})
# Rewrites that keep the accepted set exactly: the only ones allowed inside ``not`` / ``if``.
_EXACT = frozenset({"schema_keyword_removed", "type_array_scalar", "nullable_union",
                    "nullable_unsatisfiable", "type_inferred", "enum_values_filtered",
                    "boolean_schema", "ref_inlined", "defs_removed", "tuple_items_unified",
                    "closed_items_bounded"})


class _Ctx(Enum):
    ROOT = "root"
    ROOT_BRANCH = "root_branch"  # a branch of the root's anyOf / oneOf / allOf
    OVERLAY = "overlay"  # a composition branch whose ``required`` resolves against the enclosing node
    NESTED = "nested"


_COLLAPSING = frozenset({_Ctx.ROOT, _Ctx.ROOT_BRANCH, _Ctx.OVERLAY})


def sanitize_tool_schema(
    schema: Mapping[str, object] | bool,
    *,
    refs: RefMode = "inline",
    policy: SchemaPolicy = "drop",
    max_depth: int = 64,
    max_nodes: int = 10_000,
) -> dict[str, object]:
    """Rewrite a tool's JSON Schema into the subset strict providers accept.

    Pure and idempotent: the input is never mutated and ``sanitize(sanitize(s)) == sanitize(s)``.
    See :func:`sanitize_tool_schema_report` for the list of rewrites.

    Raises
    ------
    SchemaSanitizeError
        For input that cannot be fixed without guessing (see that class).
    UnsupportedSchemaError
        With ``policy="refuse"``, for a ``not`` / ``if`` that cannot be kept exactly.
    """
    return sanitize_tool_schema_report(
        schema, refs=refs, policy=policy, max_depth=max_depth, max_nodes=max_nodes
    ).schema


def sanitize_tool_schema_report(
    schema: Mapping[str, object] | bool,
    *,
    refs: RefMode = "inline",
    policy: SchemaPolicy = "drop",
    max_depth: int = 64,
    max_nodes: int = 10_000,
) -> SanitizedSchema:
    """Sanitize and report every rewrite.

    Rewrites, by node:

    - ``$schema`` is removed everywhere.
    - A ``type`` array becomes a scalar. ``["T"]`` is ``T``. ``["T", "null"]`` becomes
      ``{"anyOf": [{"type": "T", ...type-bearing keywords}, {"type": "null"}], ...annotations}`` so
      the model can say "none" in the part of the declaration it treats as binding — except at the
      root, on a branch of the root's composition, and on a composition branch whose ``required``
      resolves against the enclosing node, where the null is dropped (the union is not accepted there).
      A genuine multi-type union keeps its first non-null type and names the rest in the description.
      OpenAPI ``nullable: true`` is read as ``"null"`` in the type.
    - A missing ``type`` is inferred from ``enum`` / ``const`` values.
    - ``enum`` / ``const`` survive only on strings; on any other type they move into the description.
      Enum values of the wrong type (unreachable anyway) are filtered out.
    - ``required`` keeps only names that exist in ``properties`` (a composition branch may also name
      the enclosing node's properties).
    - ``additionalProperties: false`` is removed below the root.
    - ``true`` as a schema becomes ``{}``; ``false`` is refused, except where it closes a sequence
      or an object: ``items: false`` / a tuple's ``false`` tail become ``maxItems``, and ``false``
      in ``additionalItems`` / ``unevaluatedItems`` / ``unevaluatedProperties`` is dropped.
    - A tuple (``prefixItems``, or the draft-7 array form of ``items``) becomes a plain array: its
      ``items`` is the positions' common schema, or an ``anyOf`` of the distinct position schemas
      with the order named in the description.
    - ``$ref`` (``refs="inline"``, the default): every local reference is inlined (siblings of the
      ``$ref`` override the target's keywords) and ``$defs`` / ``definitions`` are removed; a
      reference that would recurse into itself is cut to ``{"type": <its type>}`` with a note.
      ``refs="keep"``: references into ``#/$defs`` / ``#/definitions`` stay (and the definitions are
      sanitized in place), which keeps recursive schemas whole for providers that accept ``$ref``;
      a ``$ref`` at the root is still inlined, since the root must be an object.
    - The root gets ``type: "object"`` and ``properties: {}`` when it has neither, and must be an
      object schema.
    - ``not`` and ``if`` / ``then`` / ``else`` stay only when every rewrite inside them is exact;
      otherwise ``policy`` decides:
      ``"drop"`` (the default) removes them, ``"describe"`` writes them into the description,
      ``"refuse"`` raises. Unknown keywords (``dependentRequired``, bounds, ``format``, ...) are
      kept as they are.
    """
    walker = _Walker(schema, refs=refs, policy=policy, max_depth=max_depth, max_nodes=max_nodes)
    result = walker.node(schema, "", 0, _Ctx.ROOT, frozenset())
    return SanitizedSchema(schema=result, changes=tuple(walker.changes))


class _Walker(BoundedWalk):
    def __init__(self, root: object, *, refs: RefMode, policy: SchemaPolicy, max_depth: int,
                 max_nodes: int) -> None:
        super().__init__(root, policy=policy, max_depth=max_depth, max_nodes=max_nodes)
        self.refs = refs
        self.ref_stack: list[str] = []

    def keeps(self, ref: object) -> bool:
        return (self.refs == "keep" and isinstance(ref, str)
                and (ref.startswith("#/$defs/") or ref.startswith("#/definitions/")))

    # -- the walk ----------------------------------------------------------------------------

    def node(self, raw: object, path: str, depth: int, ctx: _Ctx,
             enclosing: frozenset[str]) -> dict[str, object]:
        if raw is True:
            self.note(path, "boolean_schema")
            raw = {}
        elif raw is False:
            raise SchemaSanitizeError("a `false` schema accepts nothing and has no strict form",
                                      path=path)
        if not isinstance(raw, Mapping):
            raise SchemaSanitizeError(
                f"expected a schema object, got {type(raw).__name__}", path=path
            )
        self.enter(raw, path, depth)
        if "$ref" in raw and (ctx is _Ctx.ROOT or not self.keeps(raw["$ref"])):
            return self.inline(raw, path, depth, ctx, enclosing)
        self.active.add(id(raw))
        try:
            return self.build(raw, path, depth, ctx, enclosing)
        finally:
            self.active.discard(id(raw))

    def inline(self, raw: Mapping[str, object], path: str, depth: int, ctx: _Ctx,
               enclosing: frozenset[str]) -> dict[str, object]:
        ref = raw["$ref"]
        target = self.resolve(ref, path)
        assert isinstance(ref, str)
        if ref in self.ref_stack:
            self.note(path, "ref_cycle_cut")
            kind = target.get("type") if isinstance(target, Mapping) else None
            name = ref.rsplit("/", 1)[-1]
            cut: dict[str, object] = {
                "type": kind if isinstance(kind, str) and kind in JSON_TYPES else "object",
                "description": f"A nested {name}; its structure repeats the enclosing one.",
            }
            if ctx is _Ctx.ROOT:
                # `{"$ref": "#"}` at the root: the cut stands for the root, so it gets the root's
                # finish too, in the key order a second pass writes (the output is a fixpoint).
                self.finish_root(cut, path)
                description = cut.pop("description")
                cut["description"] = description
            return cut
        if target is True:
            target = {}
        if not isinstance(target, Mapping):
            raise SchemaSanitizeError(f"$ref {ref!r} does not point at a schema object", path=path)
        merged: dict[str, object] = dict(target)
        siblings = {k: v for k, v in raw.items() if k != "$ref"}
        merged.update(siblings)
        self.note(path, "ref_inlined")
        if any(k in target and target[k] != v for k, v in siblings.items()):
            self.note(path, "ref_siblings_override")
        # The inlined target is walked as a fresh expansion: it may hold objects on the current
        # path (`items: {"$ref": "#"}` re-enters the array schema that holds it), which is
        # recursion for the ref stack to cut, as through `$defs`, not a cycle of Python objects.
        # A real object cycle inside the target is still caught within the expansion.
        self.ref_stack.append(ref)
        outer, self.active = self.active, set()
        try:
            return self.node(merged, path, depth + 1, ctx, enclosing)
        finally:
            self.active = outer
            self.ref_stack.pop()

    def build(self, raw: Mapping[str, object], path: str, depth: int, ctx: _Ctx,
              enclosing: frozenset[str]) -> dict[str, object]:
        out: dict[str, object] = {}
        own_props = _property_names(raw, path)
        if ctx is _Ctx.NESTED and _overlays(raw, own_props, enclosing):
            # Decided here, after any $ref was inlined, so a referenced overlay is seen as one.
            ctx = _Ctx.OVERLAY
        notes: list[str] = []

        for key, value in raw.items():
            if not isinstance(key, str):
                raise SchemaSanitizeError("schema key is not a string", path=path)
            sub = f"{path}/{escape(key)}"
            if key in _HANDLED:
                continue
            out[key] = self.copy_json(value, sub, depth + 1)

        if "$schema" in raw:
            self.note(f"{path}/$schema", "schema_keyword_removed")
        if "$ref" in raw:  # kept (refs="keep"): validated, left for the provider
            self.resolve(raw["$ref"], path)
            out["$ref"] = raw["$ref"]
        for defs_key in ("$defs", "definitions"):
            if defs_key not in raw:
                continue
            defs = raw[defs_key]
            if self.refs == "keep" and ctx is _Ctx.ROOT:
                if not isinstance(defs, Mapping):
                    raise SchemaSanitizeError(f"{defs_key} must be an object", path=path)
                out[defs_key] = {
                    name: self.node(d, f"{path}/{defs_key}/{escape(str(name))}", depth + 1,
                                    _Ctx.NESTED, frozenset())
                    for name, d in defs.items()
                }
            else:
                self.note(f"{path}/{defs_key}", "defs_removed")

        for key in _SCHEMA_MAPS:
            if key not in raw:
                continue
            mapping = raw[key]
            if not isinstance(mapping, Mapping):
                raise SchemaSanitizeError(f"{key} must be an object", path=f"{path}/{key}")
            out[key] = {
                name: self.node(sub, f"{path}/{key}/{escape(str(name))}", depth + 1,
                                _Ctx.NESTED, frozenset())
                for name, sub in mapping.items()
            }
        tail_key = self.array_items(raw, out, path, depth, notes)
        for key in _SCHEMA_SINGLES:
            if key not in raw or key == tail_key:
                continue
            if key in _CLOSING_SLOTS and raw[key] is False:
                self.note(f"{path}/{key}", "false_schema_dropped")
                continue
            out[key] = self.node(raw[key], f"{path}/{key}", depth + 1, _Ctx.NESTED, frozenset())
        for group in _CONDITIONALS:
            self.conditional({k: raw[k] for k in group if k in raw}, out, path, depth, notes)
        if "additionalProperties" in raw:
            extra = raw["additionalProperties"]
            if extra is False and ctx is not _Ctx.ROOT:
                self.note(f"{path}/additionalProperties", "additional_properties_dropped")
            elif isinstance(extra, bool):
                out["additionalProperties"] = extra
            else:
                out["additionalProperties"] = self.node(
                    extra, f"{path}/additionalProperties", depth + 1, _Ctx.NESTED, frozenset()
                )
        for key in _COMPOSITIONS:
            if key not in raw:
                continue
            branches = raw[key]
            if not isinstance(branches, (list, tuple)):
                raise SchemaSanitizeError(f"{key} must be an array", path=f"{path}/{key}")
            out[key] = [
                self.node(b, f"{path}/{key}/{i}", depth + 1,
                          _Ctx.ROOT_BRANCH if ctx is _Ctx.ROOT else _Ctx.NESTED, own_props)
                for i, b in enumerate(branches)
            ]

        if "required" in raw:
            required = raw["required"]
            if not isinstance(required, (list, tuple)) or not all(
                isinstance(r, str) for r in required
            ):
                raise SchemaSanitizeError("required must be an array of strings",
                                          path=f"{path}/required")
            known = own_props | enclosing
            kept = list(dict.fromkeys(r for r in required if r in known))
            if len(kept) < len(set(required)):
                self.note(f"{path}/required", "required_dropped")
            if kept:
                out["required"] = kept

        nullable = self.resolve_type(raw, out, path, depth, ctx, notes)

        description = raw.get("description")
        if description is not None and not isinstance(description, str):
            raise SchemaSanitizeError("description must be a string", path=f"{path}/description")
        if notes:
            joined = " ".join(notes)
            description = f"{description} {joined}" if description else joined
        if description is not None:
            out["description"] = description

        if ctx is _Ctx.ROOT:
            self.finish_root(out, path)
        if "type" in out:  # type first: stable, and the order readers expect
            out = {"type": out.pop("type"), **out}
        if nullable:
            self.note(path, "nullable_union")
            typed = {k: v for k, v in out.items() if k not in ANNOTATIONS}
            wrapper: dict[str, object] = {"anyOf": [typed, {"type": "null"}]}
            wrapper.update((k, v) for k, v in out.items() if k in ANNOTATIONS)
            return wrapper
        return out

    def conditional(self, present: dict[str, object], out: dict[str, object], path: str,
                    depth: int, notes: list[str]) -> None:
        """Keep ``not`` (or the ``if`` / ``then`` / ``else`` group) when every rewrite inside is
        exact; hand it to the policy otherwise (an inexact rewrite inverts under ``not`` and
        scrambles which branch an ``if`` picks)."""
        if not present:
            return
        mark = len(self.changes)
        kept = {key: self.node(sub, f"{path}/{key}", depth + 1, _Ctx.NESTED, frozenset())
                for key, sub in present.items()}
        if all(change.kind in _EXACT for change in self.changes[mark:]):
            out.update(kept)
            return
        del self.changes[mark:]
        self.unsupported(present, path, depth, "cannot be kept exactly for a strict provider "
                         "(a rewrite inside would change which values it accepts)", notes)

    def array_items(self, raw: Mapping[str, object], out: dict[str, object], path: str,
                    depth: int, notes: list[str]) -> str | None:
        """Settle ``items`` / ``prefixItems`` into one ``items`` schema; returns the keyword that
        served as the tuple's tail (consumed here), if any.

        Strict providers reject ``prefixItems`` (OpenAI: "array schema missing items"; Gemini: an
        unknown field), the draft-7 array form of ``items``, and ``false`` as a schema. A tuple
        becomes an array whose ``items`` is the positions' schema when they agree (exact), or an
        ``anyOf`` of the distinct position schemas with the order in the description (relaxing:
        positions are no longer enforced by the schema). A ``false`` tail becomes ``maxItems``.
        """
        items = raw.get("items")
        if "prefixItems" in raw:
            positions_key, tail_key = "prefixItems", "items"
            positions = raw["prefixItems"]
            if not isinstance(positions, (list, tuple)):
                raise SchemaSanitizeError("prefixItems must be an array", path=f"{path}/prefixItems")
        elif isinstance(items, (list, tuple)):
            positions_key, tail_key, positions = "items", "additionalItems", items
        else:
            if "items" not in raw:
                return None
            if items is False:  # no element is allowed: exactly an empty array
                self.note(f"{path}/items", "closed_items_bounded")
                out["maxItems"] = _tighter_max(raw.get("maxItems"), 0)
            else:
                out["items"] = self.node(items, f"{path}/items", depth + 1, _Ctx.NESTED,
                                         frozenset())
            return None

        branches = [self.node(s, f"{path}/{positions_key}/{i}", depth + 1, _Ctx.NESTED,
                              frozenset()) for i, s in enumerate(positions)]
        shape = _join_positions(branches)
        tail = raw.get(tail_key, True)
        bound = raw.get("maxItems")
        # pydantic closes a tuple with maxItems alone (no tail keyword); msgspec with ``false``.
        closed = tail is False or (isinstance(bound, int) and not isinstance(bound, bool)
                                   and bound <= len(branches))
        if tail is False:
            out["maxItems"] = _tighter_max(bound, len(branches))
        if not closed:
            # An absent tail admits anything after the positions.
            branches.append({} if tail_key not in raw else self.node(
                tail, f"{path}/{tail_key}", depth + 1, _Ctx.NESTED, frozenset()))
        distinct: list[dict[str, object]] = []
        for branch in branches:
            if branch not in distinct:
                distinct.append(branch)
        if len(distinct) == 1:  # every position (and any reachable tail) is one schema: exact
            self.note(f"{path}/{positions_key}", "tuple_items_unified")
            out["items"] = distinct[0]
        elif distinct:
            self.note(f"{path}/{positions_key}", "tuple_positions_merged")
            # An unconstrained position or tail makes the union unconstrained too.
            out["items"] = {} if {} in distinct else {"anyOf": distinct}
            notes.append(f"Items in order: {shape}" + ("." if closed else
                                                        ", then any further items."))
        else:  # an empty closed tuple
            self.note(f"{path}/{positions_key}", "closed_items_bounded")
        return tail_key

    def resolve_type(self, raw: Mapping[str, object], out: dict[str, object], path: str,
                     depth: int, ctx: _Ctx, notes: list[str]) -> bool:
        """Settle ``type`` / ``enum`` / ``const`` into ``out``; True when the node must become a
        nullable union."""
        types = _declared_types(raw, path)
        enum = raw.get("enum")
        if enum is not None and not isinstance(enum, (list, tuple)):
            raise SchemaSanitizeError("enum must be an array", path=f"{path}/enum")
        has_const = "const" in raw
        const = raw.get("const")
        if isinstance(raw.get("type"), (list, tuple)) and len(types or ()) == 1:
            self.note(f"{path}/type", "type_array_scalar")

        if raw.get("nullable") is True:
            self.note(f"{path}/nullable", "nullable_keyword")
            if types is not None and "null" not in types:
                types = [*types, "null"]
        if types is None and (enum or has_const):
            values = list(enum) if enum else [const]
            types = list(dict.fromkeys(_json_type(v, path) for v in values))
            self.note(f"{path}/type", "type_inferred")
        if types is None:
            if enum is not None and not enum:
                self.note(f"{path}/enum", "enum_dropped_empty")
            return False

        nullable = "null" in types
        if nullable and ((enum is not None and None not in enum)
                         or (has_const and const is not None)):
            # The enum / const already refuses null: the union would widen it.
            self.note(f"{path}/type", "nullable_unsatisfiable")
            nullable = False
        non_null = [t for t in types if t != "null"]
        if "integer" in non_null and "number" in non_null:
            non_null = [t for t in non_null if t != "integer"]
        chosen: str | None
        if len(non_null) > 1:
            chosen = non_null[0]
            self.note(f"{path}/type", "multi_type_collapsed")
            notes.append(f"Accepts {join_or(non_null)}.")
        elif non_null:
            chosen = non_null[0]
        elif nullable:
            chosen, nullable = "null", False
        else:
            chosen = None
            self.note(f"{path}/type", "type_dropped")

        if nullable and ctx in _COLLAPSING:
            self.note(f"{path}/type", "nullable_collapsed")
            nullable = False
        if chosen is not None:
            out["type"] = chosen

        if enum is not None:
            values = [self.copy_json(v, f"{path}/enum/{i}", depth + 1) for i, v in enumerate(enum)]
            matching = [v for v in values if chosen is None or type_ok(v, chosen)]
            if chosen == "string" or (chosen is None and all(isinstance(v, str) for v in values)):
                # ``None`` routed to the null branch is not a loss; anything else dropped is
                # unreachable under the settled type (a tightening, never a widening).
                if any(v not in matching and not (v is None and nullable) for v in values):
                    self.note(f"{path}/enum", "enum_values_filtered")
                if matching:
                    out["type"] = "string"  # also when the declared type was unsatisfiable
                    out["enum"] = matching
                else:
                    self.note(f"{path}/enum", "enum_dropped_empty")
            elif matching:
                self.note(f"{path}/enum", "enum_moved_to_description")
                notes.append(f"Allowed values: {render_values(matching)}.")
            else:
                self.note(f"{path}/enum", "enum_dropped_empty")
        if has_const and const is None and "null" not in types:
            # A null const the settled type cannot carry: say it rather than silently widen.
            self.note(f"{path}/const", "const_moved_to_description")
            notes.append("Must be null.")
        if has_const and const is not None:
            const = self.copy_json(const, f"{path}/const", depth + 1)
            if isinstance(const, str) and chosen == "string":
                out["const"] = const
            else:
                self.note(f"{path}/const", "const_moved_to_description")
                notes.append(f"Must be {render_values([const])}.")
        return nullable

    def finish_root(self, out: dict[str, object], path: str) -> None:
        composed = any(k in out for k in _COMPOSITIONS)
        kind = out.get("type")
        if kind is None and not composed:
            out["type"] = "object"
            self.note(path, "root_type_added")
            kind = "object"
        if kind is not None and kind != "object":
            raise SchemaSanitizeError(
                f"tool parameters must be an object schema, got type {kind!r}", path=path
            )
        if kind == "object" and "properties" not in out and not composed:
            out["properties"] = {}
            self.note(path, "root_properties_added")


def _tighter_max(existing: object, bound: int) -> int:
    if isinstance(existing, int) and not isinstance(existing, bool) and existing < bound:
        return existing
    return bound


def _join_positions(branches: list[dict[str, object]]) -> str:
    def shape(branch: dict[str, object]) -> str:
        kind = branch.get("type")
        if isinstance(kind, str):
            return kind
        union = branch.get("anyOf")
        if isinstance(union, list):
            kinds = [b.get("type") for b in union if isinstance(b, Mapping)]
            if all(isinstance(k, str) for k in kinds):
                return " or ".join(str(k) for k in kinds)
        return "any value"

    return ", ".join(f"{i}. {shape(b)}" for i, b in enumerate(branches, start=1))


def _property_names(raw: Mapping[str, object], path: str) -> frozenset[str]:
    props = raw.get("properties")
    if props is None:
        return frozenset()
    if not isinstance(props, Mapping):
        raise SchemaSanitizeError("properties must be an object", path=f"{path}/properties")
    return frozenset(k for k in props if isinstance(k, str))


def _overlays(raw: Mapping[str, object], own: frozenset[str], enclosing: frozenset[str]) -> bool:
    required = raw.get("required")
    return isinstance(required, (list, tuple)) and any(
        isinstance(r, str) and r not in own and r in enclosing for r in required
    )


def _declared_types(raw: Mapping[str, object], path: str) -> list[str] | None:
    if "type" not in raw:
        return None
    value = raw["type"]
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, (list, tuple)):
        raise SchemaSanitizeError("type must be a string or an array of strings", path=f"{path}/type")
    out: list[str] = []
    for name in names:
        if not isinstance(name, str) or name not in JSON_TYPES:
            raise SchemaSanitizeError(f"unknown type {name!r}", path=f"{path}/type")
        if name not in out:
            out.append(name)
    return out


def _json_type(value: object, path: str) -> str:
    kind = json_type_of(value)
    if kind is None:
        raise SchemaSanitizeError(f"not a JSON value: {type(value).__name__}", path=path)
    return kind
