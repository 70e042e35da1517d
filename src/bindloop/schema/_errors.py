"""The schema package's errors: a schema that cannot be rewritten, a keyword the policy refuses,
and an answer that does not match the schema it was asked for."""

from __future__ import annotations

from ..errors import ProviderError, UsageError

__all__ = ("InvalidOutputError", "SchemaSanitizeError", "UnsupportedSchemaError")


class SchemaSanitizeError(UsageError):
    """The input cannot be turned into a schema a strict provider accepts without guessing: it is not
    a JSON Schema object, it nests deeper (or expands larger) than the configured bound, it contains a
    cycle of Python objects, an unresolvable or external ``$ref``, or an unknown type name.

    ``path`` is a JSON Pointer to the offending node; drop or fix that one tool rather than the list.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(f"{message} (at {path or '/'})")
        self.path = path


class UnsupportedSchemaError(UsageError):
    """A schema uses a construct its target cannot carry and the rewrite's policy is ``"refuse"``
    (structured output's default), or ``prompt_agent(schema)`` got a type msgspec cannot describe.
    The message names the JSON Pointer and the keyword; ``path`` is the pointer (``""`` for the
    root)."""

    def __init__(self, message: str, *, path: str = "") -> None:
        super().__init__(message)
        self.path = path


class InvalidOutputError(ProviderError):
    """A model's answer did not decode into the requested schema; ``reason`` is what a re-ask tells
    the model. Raised by :meth:`~bindloop.schema.OutputSpec.decode` and caught by the agent, which
    re-asks or, with the attempts used up, raises ``StructuredOutputError``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
