"""The routing package's errors: one classified attempt failure (and the categories it is
classified into), an inconsistent plan, a bad id, a route with nothing to attempt."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal, TypeAlias, get_args

from ..errors import ProviderError, UsageError

if TYPE_CHECKING:  # the binding an AttemptError names
    from ._failure import AttemptTarget

__all__ = (
    "FAILURE_CATEGORIES",
    "AttemptError",
    "FailureCategory",
    "InvalidIdError",
    "RoutePlanError",
    "RouteUnavailableError",
)


FailureCategory: TypeAlias = Literal[
    "cancelled",             # the caller (or its deadline) stopped the work
    "client_error",          # a bug on our side: an error the transport did not recognise
    "invalid_request",       # the request itself is malformed; every provider would refuse it
    "content_filter",        # the input was refused on policy grounds
    "context_length",        # the prompt does not fit this model
    "provider_bad_request",  # this provider rejects something another may accept
    "auth",                  # the credential was refused
    "model_not_found",       # this binding does not exist on the provider
    "rate_limited",          # 429 / quota
    "server_error",          # 5xx
    "timeout",               # the request timed out at the transport
    "connection",            # the connection failed or dropped
    "stream_stall",          # a stream watchdog tore a stalled stream down
    "response_defect",       # the provider answered with something unusable (bad JSON, empty turn)
]
FAILURE_CATEGORIES: frozenset[str] = frozenset(get_args(FailureCategory))


class RoutePlanError(UsageError):
    """A plan is inconsistent with its own policies or bounds (hand-built or tampered with)."""


class RouteUnavailableError(ProviderError):
    """No attempt failed, so there is no provider error to raise: the plan was empty, every circuit
    was open, or the run was cancelled before the first call. ``reason`` is the
    :class:`RouteFailure` reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"no route could be attempted: {reason}")
        self.reason = reason


class InvalidIdError(UsageError):
    """A model or provider id did not match its documented grammar."""

    def __init__(self, kind: str, value: object, rule: str) -> None:
        super().__init__(f"invalid {kind} {value!r}: {rule}")
        self.kind = kind
        self.value = value


class AttemptError(ProviderError):
    """One classified attempt failure: the facts routing decides on.

    ``retry_after_ms`` is the upstream's request (already parsed; ``None`` if absent) and only ever
    extends a breaker cooldown. ``cause`` is the original exception, also chained as ``__cause__``.
    """

    def __init__(
        self,
        category: FailureCategory,
        target: AttemptTarget | None = None,
        *,
        status_code: int | None = None,
        retry_after_ms: float | None = None,
        cause: BaseException | None = None,
        message: str | None = None,
    ) -> None:
        if category not in FAILURE_CATEGORIES:
            raise UsageError(f"unknown failure category {category!r}")
        if retry_after_ms is not None and (
            isinstance(retry_after_ms, bool)
            or not isinstance(retry_after_ms, (int, float))
            or not math.isfinite(retry_after_ms)
            or retry_after_ms < 0
        ):
            raise UsageError(f"retry_after_ms must be a finite number >= 0, got {retry_after_ms!r}")
        where = "" if target is None else f" from {target.provider_id}/{target.provider_invocation_model}"
        status = "" if status_code is None else f" (HTTP {status_code})"
        detail = message if message is not None else (str(cause) if cause is not None else "")
        super().__init__(f"{category}{status}{where}" + (f": {detail}" if detail else ""))
        self.category: FailureCategory = category
        self.target = target
        self.status_code = status_code
        self.retry_after_ms = None if retry_after_ms is None else float(retry_after_ms)
        self.cause = cause
        if cause is not None:
            self.__cause__ = cause
