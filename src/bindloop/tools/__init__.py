"""Tool schemas for strict providers: :func:`sanitize_tool_schema` rewrites a tool's JSON Schema into
the subset that strict validators accept, so one bad tool never gets the whole tool list rejected."""

from ._report import (
    RELAXING_CHANGES as RELAXING_CHANGES,
    SanitizedSchema as SanitizedSchema,
    SchemaChange as SchemaChange,
    SchemaChangeKind as SchemaChangeKind,
    SchemaSanitizeError as SchemaSanitizeError,
)
from ._sanitize import (
    RefMode as RefMode,
    sanitize_tool_schema as sanitize_tool_schema,
    sanitize_tool_schema_report as sanitize_tool_schema_report,
)

__all__ = (
    "RELAXING_CHANGES",
    "RefMode",
    "SanitizedSchema",
    "SchemaChange",
    "SchemaChangeKind",
    "SchemaSanitizeError",
    "sanitize_tool_schema",
    "sanitize_tool_schema_report",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
