"""The tool target's type rules: how ``type``, ``enum`` and ``const`` settle into the one scalar
type strict providers accept (a nullable union where it is accepted, the other types and the values
a string-only ``enum`` cannot carry written into the description)."""

from __future__ import annotations

from collections.abc import Mapping

from ._errors import SchemaSanitizeError
from ._json import JSON_TYPES, join_or, json_type_of, render_values, type_ok
from ._walk import BoundedWalk

__all__ = ("TypeRules",)


class TypeRules(BoundedWalk):
    """The type settlement of the tool target's walk (a mixin of its walker)."""

    def resolve_type(self, raw: Mapping[str, object], out: dict[str, object], path: str,
                     depth: int, collapse_null: bool, notes: list[str]) -> bool:
        """Settle ``type`` / ``enum`` / ``const`` into ``out``; True when the node must become a
        nullable union (never when ``collapse_null``: where the union is not accepted)."""
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

        if nullable and collapse_null:
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
