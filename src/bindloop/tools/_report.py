"""What the sanitizer changed: one record per rewrite, so a host can log it and a test can reason
about which rewrites may widen the set of accepted values."""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from ..errors import UsageError

__all__ = (
    "RELAXING_CHANGES",
    "SanitizedSchema",
    "SchemaChange",
    "SchemaChangeKind",
    "SchemaSanitizeError",
)

SchemaChangeKind: TypeAlias = Literal[
    "schema_keyword_removed",
    "type_array_scalar",
    "nullable_union",
    "nullable_collapsed",
    "nullable_unsatisfiable",
    "nullable_keyword",
    "multi_type_collapsed",
    "type_inferred",
    "type_dropped",
    "enum_values_filtered",
    "enum_moved_to_description",
    "enum_dropped_empty",
    "const_moved_to_description",
    "required_dropped",
    "additional_properties_dropped",
    "boolean_schema",
    "ref_inlined",
    "ref_siblings_override",
    "ref_cycle_cut",
    "defs_removed",
    "root_type_added",
    "root_properties_added",
    "tuple_items_unified",
    "tuple_positions_merged",
    "closed_items_bounded",
    "false_schema_dropped",
]

RELAXING_CHANGES: frozenset[str] = frozenset(
    {
        # Each of these can make the sanitized schema accept a value the original refused. The
        # rest are equivalences or tightenings (a collapsed union accepts a subset of the original).
        "nullable_keyword",  # OpenAPI ``nullable: true`` means nothing to JSON Schema proper
        "type_dropped",
        "enum_moved_to_description",
        "enum_dropped_empty",
        "const_moved_to_description",
        "required_dropped",
        "additional_properties_dropped",
        "ref_cycle_cut",
        # a keyword beside $ref replaces the target's (JSON Schema 2020-12 would require both)
        "ref_siblings_override",
        "tuple_positions_merged",  # each position now accepts any position's schema
        "false_schema_dropped",  # the slot no longer refuses extra items / properties
    }
)


class SchemaChange(msgspec.Struct, frozen=True, kw_only=True):
    """One rewrite: ``path`` is a JSON Pointer into the *input* schema (after ``$ref`` inlining the
    pointer follows the referencing site, not the definition)."""

    path: str
    kind: SchemaChangeKind

    @property
    def relaxes(self) -> bool:
        """Whether this rewrite may admit values the original schema refused."""
        return self.kind in RELAXING_CHANGES


class SanitizedSchema(msgspec.Struct, frozen=True, kw_only=True):
    """A sanitized schema and the rewrites that produced it, in walk order."""

    schema: dict[str, object]
    changes: tuple[SchemaChange, ...] = ()

    @property
    def relaxed(self) -> bool:
        """True when some rewrite may admit values the original refused (see :data:`RELAXING_CHANGES`)."""
        return any(change.relaxes for change in self.changes)


class SchemaSanitizeError(UsageError):
    """The input cannot be turned into a schema a strict provider accepts without guessing: it is not
    a JSON Schema object, it nests deeper (or expands larger) than the configured bound, it contains a
    cycle of Python objects, an unresolvable or external ``$ref``, or an unknown type name.

    ``path`` is a JSON Pointer to the offending node; drop or fix that one tool rather than the list.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(f"{message} (at {path or '/'})")
        self.path = path
