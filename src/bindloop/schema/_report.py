"""What a rewrite changed: one record per rewrite, so a host can log it and a test can reason about
which rewrites may widen the set of accepted values; and the policy for what a target cannot carry."""

from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

__all__ = (
    "RELAXING_CHANGES",
    "SanitizedSchema",
    "SchemaChange",
    "SchemaChangeKind",
    "SchemaPolicy",
)

SchemaPolicy: TypeAlias = Literal["drop", "describe", "refuse"]
"""What a rewrite does with a construct its target cannot carry exactly: ``"drop"`` removes it
(reported as ``keyword_dropped``), ``"describe"`` removes it and writes it into the node's
``description`` for the model to read (``keyword_described``), ``"refuse"`` raises
:class:`~bindloop.schema.UnsupportedSchemaError` naming the path and keyword. Either way the
original schema is what a validator checks values against, so nothing dropped goes unenforced."""

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
    "keyword_dropped",
    "keyword_described",
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
        # a construct the target cannot carry exactly, removed by the policy (``describe`` leaves
        # it for the model to read, but no schema validator sees it any more)
        "keyword_dropped",
        "keyword_described",
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
