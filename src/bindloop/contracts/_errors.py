"""The contracts' own error: untrusted JSON text refused before it is decoded (``_json_bounds``)."""

from __future__ import annotations

from typing import Literal

from ..errors import UsageError

__all__ = ("JsonBoundsError", "JsonBoundsReason")

JsonBoundsReason = Literal["too_large", "too_deep", "malformed", "not_an_object"]


class JsonBoundsError(UsageError):
    """The text is refused. ``reason``: ``too_large`` (over ``max_bytes``: HTTP 413),
    ``too_deep`` (nested past ``max_depth``), ``malformed`` (not JSON) or ``not_an_object``
    (valid JSON, but ``require_object`` asked for an object) — the last three an HTTP 400.
    ``limit`` is the bound that was exceeded (``None`` for the last two). The message names the
    problem, never the body's content."""

    def __init__(self, reason: JsonBoundsReason, message: str, limit: int | None = None) -> None:
        super().__init__(message)
        self.reason: JsonBoundsReason = reason
        self.limit = limit
