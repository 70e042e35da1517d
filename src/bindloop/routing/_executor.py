"""Execute a route plan: the one place that decides which candidate is called next.

The attempt function performs one call and reports facts (:class:`AttemptSuccess` or
:class:`AttemptFailure`); the executor alone applies the disposition table, the defect-retry bound, the
``produced_output`` clamp and the circuit breaker. It sleeps nowhere: a defect retry is immediate and a
``Retry-After`` only lengthens a breaker cooldown, so traversal never waits on an upstream's say-so.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Generic, Literal, NoReturn, TypeAlias, TypeVar

import msgspec

from ..errors import PortContractError, UsageError
from ..signal import AbortSignal
from ._breaker import BreakerKey, CircuitBreaker
from ._failure import DispositionAction, RouteCursor, failure_disposition
from ._errors import AttemptError, FailureCategory
from ._ids import CanonicalModelId, ProviderId
from ._plan import RouteCandidate, RoutePlan, validate_route_plan
from ._errors import RouteUnavailableError

__all__ = (
    "AttemptFailure",
    "AttemptFn",
    "AttemptOutcome",
    "AttemptRecord",
    "AttemptSuccess",
    "FallbackKind",
    "RouteFailure",
    "RouteFailureReason",
    "RouteResult",
    "RouteSuccess",
    "execute_route_plan",
)

T = TypeVar("T")

FallbackKind: TypeAlias = Literal["none", "provider", "model"]
RouteFailureReason: TypeAlias = Literal[
    "propagated", "cancelled", "exhausted", "circuit_open", "no_candidates"
]


class AttemptSuccess(msgspec.Struct, Generic[T], frozen=True):
    """The call succeeded with ``value``."""

    value: T


class AttemptFailure(msgspec.Struct, frozen=True, kw_only=True):
    """The call failed. ``produced_output`` says the attempt already emitted something the user
    has seen and cannot be retracted; routing then stops (propagate-only)."""

    error: AttemptError
    produced_output: bool = False


AttemptOutcome: TypeAlias = AttemptSuccess[T] | AttemptFailure
AttemptFn: TypeAlias = Callable[[RouteCandidate, RouteCursor], Awaitable[AttemptOutcome[T]]]


class AttemptRecord(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One line of the executor's log (JSON-serializable). ``outcome`` ``circuit_open`` means the
    breaker refused and ``attempt`` was not called."""

    cursor: RouteCursor
    provider_id: ProviderId
    canonical_model_id: CanonicalModelId
    outcome: Literal["succeeded", "failed", "circuit_open"]
    category: FailureCategory | None = None
    action: DispositionAction | None = None
    status_code: int | None = None
    produced_output: bool = False


class RouteSuccess(msgspec.Struct, Generic[T], frozen=True, kw_only=True):
    """``value`` came from ``served`` at ``cursor``. ``fallback_kind``: ``none`` (the first
    candidate of the primary stage, possibly after a defect retry), ``provider`` (a later candidate
    of the primary stage), ``model`` (a fallback stage — also when the primary model had no
    candidate and so no stage)."""

    value: T
    served: RouteCandidate
    cursor: RouteCursor
    fallback_kind: FallbackKind
    attempts: tuple[AttemptRecord, ...]

    @property
    def ok(self) -> Literal[True]:
        return True


class RouteFailure(msgspec.Struct, frozen=True, kw_only=True):
    """No candidate served. ``reason``: ``propagated`` (a failure whose disposition, or clamp, said
    stop — ``error`` is it), ``cancelled`` (the signal fired or the attempt reported cancellation),
    ``exhausted`` (every candidate failed; ``error`` is the last), ``circuit_open`` (every candidate
    was refused by the breaker; ``error`` is the last real failure, if any), ``no_candidates``
    (the plan is empty)."""

    reason: RouteFailureReason
    error: AttemptError | None
    attempts: tuple[AttemptRecord, ...]

    @property
    def ok(self) -> Literal[False]:
        return False

    def raise_error(self) -> NoReturn:
        """Raise ``error`` (or a :class:`RouteUnavailableError` when there is none)."""
        if self.error is not None:
            raise self.error
        raise RouteUnavailableError(self.reason)


RouteResult: TypeAlias = RouteSuccess[T] | RouteFailure


async def execute_route_plan(
    *,
    plan: RoutePlan,
    attempt: AttemptFn[T],
    breaker: CircuitBreaker | None = None,
    signal: AbortSignal | None = None,
) -> RouteResult[T]:
    """Walk ``plan`` and return the first success, or why there was none.

    Only candidates in ``plan`` are ever passed to ``attempt`` (the plan is validated first; a plan
    that breaks its own policy raises :class:`~bindloop.routing.RoutePlanError`), and at most
    :func:`~bindloop.routing.max_route_attempts` calls are made. ``signal`` is checked before every
    call. An exception raised by ``attempt`` itself propagates (after releasing a held probe):
    classify failures into :class:`AttemptFailure` inside it. A value of the wrong type is a
    :class:`~bindloop.errors.PortContractError`.
    """
    validate_route_plan(plan)
    if breaker is not None and not isinstance(breaker, CircuitBreaker):
        raise UsageError("breaker must come from create_circuit_breaker()")
    log: list[AttemptRecord] = []
    last_error: AttemptError | None = None
    if not any(stage.candidates for stage in plan.stages):
        return RouteFailure(reason="no_candidates", error=None, attempts=())

    # Indexes over ranges, not enumerate(): this frame waits across the whole route, and
    # enumerate() keeps two tracked objects per loop alive through it.
    stages = plan.stages
    for si in range(len(stages)):
        stage = stages[si]
        candidates = stage.candidates
        for ci in range(len(candidates)):
            candidate = candidates[ci]
            key = BreakerKey.for_candidate(candidate)
            retries = 0
            while True:
                cursor = RouteCursor(stage=si, candidate=ci, attempt=retries)
                if signal is not None and signal.aborted:
                    return RouteFailure(reason="cancelled", error=last_error, attempts=tuple(log))
                permit = None if breaker is None else breaker.try_acquire(key)
                if permit is not None and not permit.admitted:
                    log.append(_record(cursor, candidate, "circuit_open"))
                    break
                try:
                    outcome = await attempt(candidate, cursor)
                except BaseException:
                    if breaker is not None:
                        breaker.release_probe(key, permit)
                    raise
                if isinstance(outcome, AttemptSuccess):
                    if breaker is not None:
                        breaker.record_success(key, permit=permit)
                    log.append(_record(cursor, candidate, "succeeded"))
                    # By role, not index: an unserved primary leaves the fallback stage first.
                    kind: FallbackKind = ("model" if stage.role == "fallback"
                                          else "provider" if ci > 0 else "none")
                    return RouteSuccess(value=outcome.value, served=candidate, cursor=cursor,
                                        fallback_kind=kind, attempts=tuple(log))
                if not isinstance(outcome, AttemptFailure) or not isinstance(
                    outcome.error, AttemptError
                ):
                    if breaker is not None:
                        breaker.release_probe(key, permit)
                    raise PortContractError(
                        f"attempt returned {outcome!r}; expected AttemptSuccess or AttemptFailure"
                    )
                error = outcome.error
                last_error = error
                disposition = failure_disposition(error, produced_output=outcome.produced_output)
                if breaker is not None:
                    if disposition.breaker == "none":
                        breaker.release_probe(key, permit)
                    else:
                        breaker.record_failure(key, retry_after_ms=error.retry_after_ms,
                                               open_now=disposition.breaker == "open", permit=permit)
                log.append(_record(cursor, candidate, "failed", error=error,
                                   action=disposition.action,
                                   produced_output=outcome.produced_output))
                action = disposition.action
                if action == "propagate":
                    reason: RouteFailureReason = (
                        "cancelled" if error.category == "cancelled" else "propagated"
                    )
                    return RouteFailure(reason=reason, error=error, attempts=tuple(log))
                if action == "retry" and retries < plan.defect_retries:
                    retries += 1
                    continue
                break
            if log[-1].action == "next_stage":
                break  # the rest of this stage cannot help (e.g. the prompt is too long)

    all_refused = all(r.outcome == "circuit_open" for r in log)
    return RouteFailure(reason="circuit_open" if all_refused else "exhausted",
                        error=last_error, attempts=tuple(log))


def _record(
    cursor: RouteCursor,
    candidate: RouteCandidate,
    outcome: Literal["succeeded", "failed", "circuit_open"],
    *,
    error: AttemptError | None = None,
    action: DispositionAction | None = None,
    produced_output: bool = False,
) -> AttemptRecord:
    return AttemptRecord(
        cursor=cursor,
        provider_id=candidate.provider_id,
        canonical_model_id=candidate.canonical_model_id,
        outcome=outcome,
        category=None if error is None else error.category,
        action=action,
        status_code=None if error is None else error.status_code,
        produced_output=produced_output,
    )
