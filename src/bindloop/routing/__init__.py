"""Routing: route plans, the executor, the circuit breaker, failure classification.

Build a :class:`RoutePlan` with :func:`build_route_plan`, run it with :func:`execute_route_plan`
against an attempt function that reports facts, and let :func:`failure_disposition` (one table) and a
:class:`CircuitBreaker` decide what happens next. See docs/routing.md.
"""

from ._breaker import (
    BreakerAdmission as BreakerAdmission,
    BreakerKey as BreakerKey,
    BreakerPermit as BreakerPermit,
    BreakerSnapshot as BreakerSnapshot,
    CircuitBreaker as CircuitBreaker,
    CircuitState as CircuitState,
    create_circuit_breaker as create_circuit_breaker,
)
from ._classify import (
    AttemptClassification as AttemptClassification,
    TransportFailure as TransportFailure,
    TransportFailureKind as TransportFailureKind,
    classify_attempt_error as classify_attempt_error,
    is_cancellation as is_cancellation,
    neutral_status_category as neutral_status_category,
)
from ._executor import (
    AttemptFailure as AttemptFailure,
    AttemptFn as AttemptFn,
    AttemptOutcome as AttemptOutcome,
    AttemptRecord as AttemptRecord,
    AttemptSuccess as AttemptSuccess,
    FallbackKind as FallbackKind,
    RouteFailure as RouteFailure,
    RouteFailureReason as RouteFailureReason,
    RouteResult as RouteResult,
    RouteSuccess as RouteSuccess,
    execute_route_plan as execute_route_plan,
)
from ._errors import RouteUnavailableError as RouteUnavailableError
from ._failure import (
    FAILURE_DISPOSITIONS as FAILURE_DISPOSITIONS,
    AttemptTarget as AttemptTarget,
    BreakerEffect as BreakerEffect,
    DispositionAction as DispositionAction,
    FailureDisposition as FailureDisposition,
    RouteCursor as RouteCursor,
    failure_disposition as failure_disposition,
)
from ._errors import (
    FAILURE_CATEGORIES as FAILURE_CATEGORIES,
    AttemptError as AttemptError,
    FailureCategory as FailureCategory,
)
from ._ids import (
    CanonicalModelId as CanonicalModelId,
    ProviderId as ProviderId,
    canonical_model_id as canonical_model_id,
    provider_id as provider_id,
)
from ._errors import InvalidIdError as InvalidIdError
from ._plan import (
    Availability as Availability,
    OnlyPolicy as OnlyPolicy,
    OrderedPolicy as OrderedPolicy,
    PlannerTransport as PlannerTransport,
    RecordedSkip as RecordedSkip,
    Resolution as Resolution,
    ResolvedCandidate as ResolvedCandidate,
    RouteCandidate as RouteCandidate,
    RoutePlan as RoutePlan,
    RoutePlanBuild as RoutePlanBuild,
    RoutePolicy as RoutePolicy,
    RouteRequirements as RouteRequirements,
    RouteSkip as RouteSkip,
    RouteStage as RouteStage,
    SkipReason as SkipReason,
    StageRole as StageRole,
    Unserved as Unserved,
    build_route_plan as build_route_plan,
    decode_route_plan as decode_route_plan,
    encode_route_plan as encode_route_plan,
    max_route_attempts as max_route_attempts,
    validate_route_plan as validate_route_plan,
)
from ._errors import RoutePlanError as RoutePlanError
from ._retry_after import (
    clamp_retry_after_ms as clamp_retry_after_ms,
    parse_retry_after as parse_retry_after,
    retry_after_ms_from_headers as retry_after_ms_from_headers,
)

__all__ = (
    "AttemptClassification",
    "AttemptError",
    "AttemptFailure",
    "AttemptFn",
    "AttemptOutcome",
    "AttemptRecord",
    "AttemptSuccess",
    "AttemptTarget",
    "Availability",
    "BreakerAdmission",
    "BreakerEffect",
    "BreakerKey",
    "BreakerPermit",
    "BreakerSnapshot",
    "CanonicalModelId",
    "CircuitBreaker",
    "CircuitState",
    "DispositionAction",
    "FAILURE_CATEGORIES",
    "FAILURE_DISPOSITIONS",
    "FailureCategory",
    "FailureDisposition",
    "FallbackKind",
    "InvalidIdError",
    "OnlyPolicy",
    "OrderedPolicy",
    "PlannerTransport",
    "ProviderId",
    "RecordedSkip",
    "Resolution",
    "ResolvedCandidate",
    "RouteCandidate",
    "RouteCursor",
    "RouteFailure",
    "RouteFailureReason",
    "RoutePlan",
    "RoutePlanBuild",
    "RoutePlanError",
    "RoutePolicy",
    "RouteRequirements",
    "RouteResult",
    "RouteSkip",
    "RouteStage",
    "RouteSuccess",
    "RouteUnavailableError",
    "SkipReason",
    "StageRole",
    "TransportFailure",
    "TransportFailureKind",
    "Unserved",
    "build_route_plan",
    "canonical_model_id",
    "clamp_retry_after_ms",
    "classify_attempt_error",
    "create_circuit_breaker",
    "decode_route_plan",
    "encode_route_plan",
    "execute_route_plan",
    "failure_disposition",
    "is_cancellation",
    "max_route_attempts",
    "neutral_status_category",
    "parse_retry_after",
    "provider_id",
    "retry_after_ms_from_headers",
    "validate_route_plan",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
