"""Routing: route plans, the executor and the circuit breaker.

Build a :class:`RoutePlan` with :func:`build_route_plan`, run it with :func:`execute_route_plan`
against an attempt function that reports facts, and let
:func:`bindloop.routing.failures.failure_disposition` (one table) and a :class:`CircuitBreaker`
decide what happens next. How a failure is classified (categories, the disposition table,
``Retry-After``) is the sub-namespace :mod:`bindloop.routing.failures`. See docs/routing.md.
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
    AttemptTarget as AttemptTarget,
    RouteCursor as RouteCursor,
)
from ._errors import (
    AttemptError as AttemptError,
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

__all__ = (
    "AttemptError",
    "AttemptFailure",
    "AttemptFn",
    "AttemptOutcome",
    "AttemptRecord",
    "AttemptSuccess",
    "AttemptTarget",
    "Availability",
    "BreakerAdmission",
    "BreakerKey",
    "BreakerPermit",
    "BreakerSnapshot",
    "CanonicalModelId",
    "CircuitBreaker",
    "CircuitState",
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
    "Unserved",
    "build_route_plan",
    "canonical_model_id",
    "create_circuit_breaker",
    "decode_route_plan",
    "encode_route_plan",
    "execute_route_plan",
    "max_route_attempts",
    "provider_id",
    "validate_route_plan",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)

# The sub-namespaces load with the package, so each object reports its public home from the first
# import on.
from . import failures  # noqa: E402, F401
