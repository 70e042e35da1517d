"""Validated identifiers: canonical model ids and provider ids.

Both are plain ``str`` at run time (``NewType``), so they serialize as themselves; the parsers are the
only sanctioned way to mint one from untrusted text, and they refuse rather than normalize (a silently
lower-cased id would route to a different binding than the one the caller named).
"""

from __future__ import annotations

import re
from typing import NewType

from ._errors import InvalidIdError

__all__ = (
    "CanonicalModelId",
    "ProviderId",
    "canonical_model_id",
    "provider_id",
)

CanonicalModelId = NewType("CanonicalModelId", str)
"""``vendor/model``: e.g. ``openai/gpt-example``. Provider-neutral: it names a model, not a binding."""

ProviderId = NewType("ProviderId", str)
"""A host-chosen provider name such as ``primary`` or ``azure-eu``."""

_MAX_LEN = 200
# Vendor: lower-case slug. Model: a slug that may also carry upper case, dots, colons and plus signs
# (``llama-3.1-8b``, ``gpt-example:free``); no whitespace, no second slash.
_MODEL_RE = re.compile(r"[a-z0-9][a-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._:+-]*")
_PROVIDER_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")


def canonical_model_id(value: object) -> CanonicalModelId:
    """Parse a canonical model id (``vendor/model``).

    The vendor is a lower-case slug (``[a-z0-9][a-z0-9._-]*``); the model starts with a letter or
    digit and continues with letters, digits, ``.``, ``_``, ``:``, ``+`` or ``-``. At most 200
    characters. Raises :class:`InvalidIdError` otherwise.
    """
    if not isinstance(value, str):
        raise InvalidIdError("canonical model id", value, "expected a str")
    if len(value) > _MAX_LEN:
        raise InvalidIdError("canonical model id", value, f"longer than {_MAX_LEN} characters")
    if "/" not in value:
        raise InvalidIdError("canonical model id", value, "expected 'vendor/model'")
    if _MODEL_RE.fullmatch(value) is None:
        raise InvalidIdError(
            "canonical model id", value,
            "vendor must be a lower-case slug and model a slug of [A-Za-z0-9._:+-], one '/' between",
        )
    return CanonicalModelId(value)


def provider_id(value: object) -> ProviderId:
    """Parse a provider id: a lower-case slug of 1-64 characters (``[a-z0-9][a-z0-9_-]*``).

    Raises :class:`InvalidIdError` otherwise.
    """
    if not isinstance(value, str):
        raise InvalidIdError("provider id", value, "expected a str")
    if _PROVIDER_RE.fullmatch(value) is None:
        raise InvalidIdError(
            "provider id", value, "expected 1-64 characters of [a-z0-9_-], starting with [a-z0-9]"
        )
    return ProviderId(value)
