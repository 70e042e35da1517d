"""The testing kit's errors: a script that ran out."""

from __future__ import annotations

from ..errors import UsageError

__all__ = (
    "ScriptExhaustedError",
)


class ScriptExhaustedError(UsageError):
    """The loop asked a scripted model for more turns than the script has. Raised rather than
    answering with an empty turn, so a test cannot pass while describing a run that never happened."""
