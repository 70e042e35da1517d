"""The failure taxonomy: categories, the disposition table, and the facts an attempt reports.

An attempt function never decides route order. It reports *facts* — a category, the status code,
a ``Retry-After`` — and :func:`failure_disposition` turns a category into what the executor does
next and what the circuit breaker learns. Keeping that table in one place is the point: a transport
cannot reorder routing by accident.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Literal, TypeAlias, get_args

import msgspec

from ..errors import UsageError
from ._errors import AttemptError, FailureCategory
from ._ids import CanonicalModelId, ProviderId

__all__ = (
    "FAILURE_DISPOSITIONS",
    "AttemptTarget",
    "BreakerEffect",
    "DispositionAction",
    "FailureDisposition",
    "RouteCursor",
    "failure_disposition",
)

DispositionAction: TypeAlias = Literal["retry", "traverse", "next_stage", "propagate"]
BreakerEffect: TypeAlias = Literal["none", "record", "open"]


class FailureDisposition(msgspec.Struct, frozen=True, kw_only=True):
    """What the executor does with a failure and what the circuit breaker learns.

    ``action``: ``retry`` re-calls the same candidate (at most ``plan.defect_retries`` times, then
    behaves as ``traverse``); ``traverse`` moves to the next candidate, then the next stage;
    ``next_stage`` skips the rest of this stage; ``propagate`` stops and returns the failure.
    ``breaker``: ``none`` (the endpoint's health says nothing), ``record`` (count one failure),
    ``open`` (open the circuit at once). ``same_provider_retry``: whether the failure is transient
    enough to call the *same* provider again before any output (``bindloop.wire.is_retryable``
    reads this column, for ``ModelAdapter``'s own retries and
    ``bindloop.agent.middleware.create_retry_middleware``; routing's own ``retry`` action is for response
    defects).
    """

    action: DispositionAction
    breaker: BreakerEffect
    same_provider_retry: bool = False


def _d(action: DispositionAction, breaker: BreakerEffect, *,
       same_provider_retry: bool = False) -> FailureDisposition:
    return FailureDisposition(action=action, breaker=breaker,
                              same_provider_retry=same_provider_retry)


FAILURE_DISPOSITIONS: MappingProxyType[str, FailureDisposition] = MappingProxyType({
    "cancelled": _d("propagate", "none"),
    "client_error": _d("propagate", "none"),
    "invalid_request": _d("propagate", "none"),
    "content_filter": _d("propagate", "none"),
    "context_length": _d("next_stage", "none"),
    "provider_bad_request": _d("traverse", "none"),
    "auth": _d("traverse", "open"),
    "model_not_found": _d("traverse", "open"),
    "rate_limited": _d("traverse", "record", same_provider_retry=True),
    "server_error": _d("traverse", "record", same_provider_retry=True),
    "timeout": _d("traverse", "record", same_provider_retry=True),
    "connection": _d("traverse", "record", same_provider_retry=True),
    "stream_stall": _d("traverse", "record", same_provider_retry=True),
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


def failure_disposition(
    failure: AttemptError | FailureCategory, *, produced_output: bool = False
) -> FailureDisposition:
    """Look ``failure``'s category up in :data:`FAILURE_DISPOSITIONS`.

    ``produced_output=True`` (the attempt already showed the user something it cannot take back)
    clamps the action to ``propagate`` (and ``same_provider_retry`` to false) but keeps the breaker
    effect: the endpoint's health is the same fact either way.
    """
    category = failure.category if isinstance(failure, AttemptError) else failure
    try:
        disposition = FAILURE_DISPOSITIONS[category]
    except KeyError:
        raise UsageError(f"unknown failure category {category!r}") from None
    if produced_output:
        return _CLAMPED[disposition.breaker]
    return disposition
