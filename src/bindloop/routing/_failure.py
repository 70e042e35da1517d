"""The failure taxonomy: categories, the disposition table, and the facts an attempt reports.

An attempt function never decides route order. It reports *facts* — a category, the status code,
a ``Retry-After`` — and :func:`failure_disposition` turns a category into what the executor does
next and what the circuit breaker learns. Keeping that table in one place is the point: a transport
cannot reorder routing by accident.
"""

from __future__ import annotations

import math
from types import MappingProxyType
from typing import Literal, TypeAlias, get_args

import msgspec

from ..errors import ProviderError, UsageError
from ._ids import CanonicalModelId, ProviderId

__all__ = (
    "FAILURE_CATEGORIES",
    "FAILURE_DISPOSITIONS",
    "AttemptError",
    "AttemptTarget",
    "BreakerEffect",
    "DispositionAction",
    "FailureCategory",
    "FailureDisposition",
    "RouteCursor",
    "failure_disposition",
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

DispositionAction: TypeAlias = Literal["retry", "traverse", "next_stage", "propagate"]
BreakerEffect: TypeAlias = Literal["none", "record", "open"]


class FailureDisposition(msgspec.Struct, frozen=True, kw_only=True):
    """What the executor does with a failure and what the circuit breaker learns.

    ``action``: ``retry`` re-calls the same candidate (at most ``plan.defect_retries`` times, then
    behaves as ``traverse``); ``traverse`` moves to the next candidate, then the next stage;
    ``next_stage`` skips the rest of this stage; ``propagate`` stops and returns the failure.
    ``breaker``: ``none`` (the endpoint's health says nothing), ``record`` (count one failure),
    ``open`` (open the circuit at once).
    """

    action: DispositionAction
    breaker: BreakerEffect


def _d(action: DispositionAction, breaker: BreakerEffect) -> FailureDisposition:
    return FailureDisposition(action=action, breaker=breaker)


FAILURE_DISPOSITIONS: MappingProxyType[str, FailureDisposition] = MappingProxyType({
    "cancelled": _d("propagate", "none"),
    "client_error": _d("propagate", "none"),
    "invalid_request": _d("propagate", "none"),
    "content_filter": _d("propagate", "none"),
    "context_length": _d("next_stage", "none"),
    "provider_bad_request": _d("traverse", "none"),
    "auth": _d("traverse", "open"),
    "model_not_found": _d("traverse", "open"),
    "rate_limited": _d("traverse", "record"),
    "server_error": _d("traverse", "record"),
    "timeout": _d("traverse", "record"),
    "connection": _d("traverse", "record"),
    "stream_stall": _d("traverse", "record"),
    "response_defect": _d("retry", "none"),
})
"""The disposition table (documented in docs/routing.md). Read-only."""

_CLAMPED: MappingProxyType[str, FailureDisposition] = MappingProxyType({
    effect: FailureDisposition(action="propagate", breaker=effect)
    for effect in get_args(BreakerEffect)
})


class RouteCursor(msgspec.Struct, frozen=True, kw_only=True):
    """Where an attempt sits in its plan: stage index, candidate index within the stage, and the
    0-based retry count on that candidate."""

    stage: int
    candidate: int
    attempt: int = 0


class AttemptTarget(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Which binding an attempt called, assembled by the attempt function from its candidate and
    cursor. ``duration_ms`` is the attempt's own measurement (optional)."""

    cursor: RouteCursor
    provider_id: ProviderId
    canonical_model_id: CanonicalModelId
    provider_invocation_model: str
    duration_ms: float | None = None


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


def failure_disposition(
    failure: AttemptError | FailureCategory, *, produced_output: bool = False
) -> FailureDisposition:
    """Look ``failure``'s category up in :data:`FAILURE_DISPOSITIONS`.

    ``produced_output=True`` (the attempt already showed the user something it cannot take back)
    clamps the action to ``propagate`` but keeps the breaker effect: the endpoint's health is the same
    fact either way.
    """
    category = failure.category if isinstance(failure, AttemptError) else failure
    try:
        disposition = FAILURE_DISPOSITIONS[category]
    except KeyError:
        raise UsageError(f"unknown failure category {category!r}") from None
    if produced_output:
        return _CLAMPED[disposition.breaker]
    return disposition
