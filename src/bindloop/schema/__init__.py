"""JSON Schema, in one home: the rewriter that turns a schema into what a target accepts, and the
validator that checks values against the original.

One rewriter, two targets, one :data:`SchemaPolicy` for what a target cannot carry exactly
(``"drop"``, ``"describe"`` or ``"refuse"``):

* :func:`sanitize_tool_schema` / :func:`sanitize_tool_schema_report` — a tool's parameters for
  strict providers (tools, ``define_tool``, MCP); reports every rewrite; policy ``"drop"``.
* :func:`strict_json_schema` / :func:`output_spec` — structured output's strict form (every object
  closed, every property required); policy ``"refuse"``.

:func:`first_schema_violation` is the one depth-bounded validator (JSON-Pointer paths); MCP tool
calls and structured answers are checked with it against the schema as the server or the caller
wrote it, so nothing a rewrite dropped goes unenforced. See docs/schema.md.
"""

from ._errors import (
    InvalidOutputError as InvalidOutputError,
    SchemaSanitizeError as SchemaSanitizeError,
    UnsupportedSchemaError as UnsupportedSchemaError,
)
from ._output import OutputSpec as OutputSpec, output_spec as output_spec
from ._report import (
    RELAXING_CHANGES as RELAXING_CHANGES,
    SanitizedSchema as SanitizedSchema,
    SchemaChange as SchemaChange,
    SchemaChangeKind as SchemaChangeKind,
    SchemaPolicy as SchemaPolicy,
)
from ._sanitize import (
    RefMode as RefMode,
    sanitize_tool_schema as sanitize_tool_schema,
    sanitize_tool_schema_report as sanitize_tool_schema_report,
)
from ._strict import strict_json_schema as strict_json_schema
from ._validate import first_schema_violation as first_schema_violation

__all__ = (
    "RELAXING_CHANGES",
    "InvalidOutputError",
    "OutputSpec",
    "RefMode",
    "SanitizedSchema",
    "SchemaChange",
    "SchemaChangeKind",
    "SchemaPolicy",
    "SchemaSanitizeError",
    "UnsupportedSchemaError",
    "first_schema_violation",
    "output_spec",
    "sanitize_tool_schema",
    "sanitize_tool_schema_report",
    "strict_json_schema",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
