"""Route plans: which (provider, model) bindings a completion may use, in which order.

A plan is built once per completion from three inputs: the models (primary, then fallbacks), a policy
per model (the only ordering input), and the host's :class:`PlannerTransport` objects (which answer
"are you up?" and "can you serve this model with these requirements?"). The result is a frozen,
secret-free value: it names credential *sources* and opaque non-secret scopes, never credentials, so it
can be logged, snapshotted in a test, or persisted with :func:`encode_route_plan`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Literal, Protocol, TypeAlias

import msgspec

from ..errors import PortContractError, UsageError
from ._ids import CanonicalModelId, ProviderId, canonical_model_id, provider_id
from ._errors import RoutePlanError

__all__ = (
    "Availability",
    "OnlyPolicy",
    "OrderedPolicy",
    "PlannerTransport",
    "RecordedSkip",
    "ResolvedCandidate",
    "Resolution",
    "RouteCandidate",
    "RoutePlan",
    "RoutePlanBuild",
    "RoutePolicy",
    "RouteRequirements",
    "RouteSkip",
    "RouteStage",
    "SkipReason",
    "StageRole",
    "Unserved",
    "build_route_plan",
    "decode_route_plan",
    "encode_route_plan",
    "max_route_attempts",
    "validate_route_plan",
)


class RouteRequirements(msgspec.Struct, frozen=True, kw_only=True):
    """What every candidate must offer: all of ``capabilities``, and room for
    ``requested_max_completion_tokens`` when both sides state a number."""

    capabilities: frozenset[str] = frozenset()
    requested_max_completion_tokens: int | None = None


class RouteCandidate(msgspec.Struct, frozen=True, kw_only=True):
    """One concrete binding: a provider serving a canonical model under its own invocation name.

    ``credential_source`` names where the credential comes from (``"platform"``, ``"tenant"``, ...)
    and ``credential_scope`` is an optional opaque, non-secret tag (a tenant id hash, say). Both end
    up in circuit-breaker keys and logs, so neither may hold a secret.
    """

    provider_id: ProviderId
    canonical_model_id: CanonicalModelId
    provider_invocation_model: str
    credential_source: str
    credential_scope: str | None = None
    credit_eligible: bool = True
    capabilities: frozenset[str] = frozenset()
    max_completion_tokens: int | None = None
    pricing_basis: str = "provider_reported"
    binding_fingerprint: str = ""


class Availability(msgspec.Struct, frozen=True, kw_only=True):
    """A transport's answer to "are you available right now?"."""

    available: bool
    reason: str | None = None


class ResolvedCandidate(msgspec.Struct, frozen=True, kw_only=True, tag="candidate", tag_field="kind"):
    """The transport can serve the model: here is the binding."""

    candidate: RouteCandidate


class RecordedSkip(msgspec.Struct, frozen=True, kw_only=True, tag="skip", tag_field="kind"):
    """The transport could serve the model but declines now; the plan records why."""

    reason: str


class Unserved(msgspec.Struct, frozen=True, kw_only=True, tag="unserved", tag_field="kind"):
    """The transport does not carry this model at all. Not recorded: it is the ordinary case."""


Resolution: TypeAlias = ResolvedCandidate | RecordedSkip | Unserved


class PlannerTransport(Protocol):
    """What the planner asks of a host transport. Both methods are pure reads; neither may do I/O
    that the plan then depends on being repeatable."""

    @property
    def id(self) -> ProviderId: ...

    def get_availability(self) -> Availability: ...

    def resolve_candidate(
        self, model: CanonicalModelId, requirements: RouteRequirements
    ) -> Resolution: ...


class OrderedPolicy(msgspec.Struct, frozen=True, kw_only=True, tag="ordered", tag_field="mode"):
    """Try ``providers`` in this order (duplicates after the first are ignored)."""

    providers: tuple[ProviderId, ...]


class OnlyPolicy(msgspec.Struct, frozen=True, kw_only=True, tag="only", tag_field="mode"):
    """A hard fence: this model is served by ``provider`` or not at all. Honoured when the plan is
    built (no other provider becomes a candidate) and when it runs (the executor refuses a plan whose
    stage names another provider)."""

    provider: ProviderId


RoutePolicy: TypeAlias = OrderedPolicy | OnlyPolicy
StageRole: TypeAlias = Literal["primary", "fallback"]
SkipReason: TypeAlias = Literal[
    "no_transport",           # the policy names a provider the host did not supply a transport for
    "unavailable",            # get_availability() said no
    "transport_skip",         # resolve_candidate() returned a RecordedSkip
    "missing_capability",     # the candidate lacks a required capability
    "max_completion_tokens",  # the candidate's ceiling is below the requested completion size
    "duplicate_model",        # a fallback repeats an earlier stage's model
]


class RouteStage(msgspec.Struct, frozen=True, kw_only=True):
    """One model and its candidates, in policy order."""

    role: StageRole
    model: CanonicalModelId
    policy: RoutePolicy
    candidates: tuple[RouteCandidate, ...]


class RouteSkip(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Why a provider (or a whole fallback model) is not in the plan."""

    role: StageRole
    model: CanonicalModelId
    reason: SkipReason
    provider_id: ProviderId | None = None
    detail: str | None = None


class RoutePlan(msgspec.Struct, frozen=True, kw_only=True):
    """Stages in order (primary first). ``defect_retries`` bounds how many times one candidate is
    re-called for a ``retry`` disposition before the executor traverses. Stages with no candidate are
    left out (the skips say why), so a plan with no stages cannot be served."""

    stages: tuple[RouteStage, ...]
    defect_retries: int = 1


class RoutePlanBuild(msgspec.Struct, frozen=True, kw_only=True):
    """:func:`build_route_plan`'s answer: the plan and every recorded skip, in planning order."""

    plan: RoutePlan
    skips: tuple[RouteSkip, ...]


def build_route_plan(
    *,
    primary_model: CanonicalModelId | str,
    fallback_model: CanonicalModelId | str | Sequence[CanonicalModelId | str] | None = None,
    requirements: RouteRequirements = RouteRequirements(),
    policy_for: Callable[[CanonicalModelId], RoutePolicy],
    transports: Mapping[ProviderId, PlannerTransport] | Mapping[str, PlannerTransport],
    defect_retries: int = 1,
) -> RoutePlanBuild:
    """Build a plan: one stage per distinct model (``fallback_model`` may be one model or a chain),
    candidates in the order ``policy_for(model)`` gives.

    Ids are validated (:class:`~bindloop.routing.InvalidIdError`). A transport that answers with the
    wrong types, or with a candidate for another provider or model, is a
    :class:`~bindloop.errors.PortContractError`. Everything else that keeps a provider out of the plan
    is a :class:`RouteSkip`, never an exception.
    """
    if isinstance(defect_retries, bool) or not isinstance(defect_retries, int) or defect_retries < 0:
        raise UsageError(f"defect_retries must be a non-negative int, got {defect_retries!r}")
    if not isinstance(requirements, RouteRequirements):
        raise UsageError("requirements must be a RouteRequirements")
    models: list[tuple[StageRole, CanonicalModelId]] = [("primary", canonical_model_id(primary_model))]
    if fallback_model is not None:
        chain = [fallback_model] if isinstance(fallback_model, str) else list(fallback_model)
        models.extend(("fallback", canonical_model_id(m)) for m in chain)
    for key in transports:
        provider_id(key)

    stages: list[RouteStage] = []
    skips: list[RouteSkip] = []
    seen: set[CanonicalModelId] = set()
    for role, model in models:
        if model in seen:
            skips.append(RouteSkip(role=role, model=model, reason="duplicate_model"))
            continue
        seen.add(model)
        policy = policy_for(model)
        if not isinstance(policy, (OrderedPolicy, OnlyPolicy)):
            raise PortContractError(f"policy_for({model!r}) returned {policy!r}, not a RoutePolicy")
        candidates: list[RouteCandidate] = []
        for pid in _policy_providers(policy):
            transport = transports.get(pid)
            if transport is None:
                skips.append(RouteSkip(role=role, model=model, provider_id=pid, reason="no_transport"))
                continue
            candidate = _resolve(transport, pid, model, requirements, role, skips)
            if candidate is not None:
                candidates.append(candidate)
        if candidates:
            stages.append(RouteStage(role=role, model=model, policy=policy,
                                     candidates=tuple(candidates)))
    plan = RoutePlan(stages=tuple(stages), defect_retries=defect_retries)
    return RoutePlanBuild(plan=plan, skips=tuple(skips))


def _policy_providers(policy: RoutePolicy) -> tuple[ProviderId, ...]:
    if isinstance(policy, OnlyPolicy):
        return (provider_id(policy.provider),)
    out: list[ProviderId] = []
    for pid in policy.providers:
        pid = provider_id(pid)
        if pid not in out:
            out.append(pid)
    return tuple(out)


def _resolve(
    transport: PlannerTransport,
    pid: ProviderId,
    model: CanonicalModelId,
    requirements: RouteRequirements,
    role: StageRole,
    skips: list[RouteSkip],
) -> RouteCandidate | None:
    availability = transport.get_availability()
    if not isinstance(availability, Availability):
        raise PortContractError(f"transport {pid!r}: get_availability() returned {availability!r}")
    if not availability.available:
        skips.append(RouteSkip(role=role, model=model, provider_id=pid, reason="unavailable",
                               detail=availability.reason))
        return None
    resolution = transport.resolve_candidate(model, requirements)
    if isinstance(resolution, Unserved):
        return None
    if isinstance(resolution, RecordedSkip):
        skips.append(RouteSkip(role=role, model=model, provider_id=pid, reason="transport_skip",
                               detail=resolution.reason))
        return None
    if not isinstance(resolution, ResolvedCandidate):
        raise PortContractError(f"transport {pid!r}: resolve_candidate() returned {resolution!r}")
    candidate = resolution.candidate
    if candidate.provider_id != pid or candidate.canonical_model_id != model:
        raise PortContractError(
            f"transport {pid!r} resolved {model!r} to a candidate for "
            f"{candidate.provider_id!r}/{candidate.canonical_model_id!r}"
        )
    missing = requirements.capabilities - candidate.capabilities
    if missing:
        skips.append(RouteSkip(role=role, model=model, provider_id=pid, reason="missing_capability",
                               detail=",".join(sorted(missing))))
        return None
    wanted = requirements.requested_max_completion_tokens
    ceiling = candidate.max_completion_tokens
    if wanted is not None and ceiling is not None and wanted > ceiling:
        skips.append(RouteSkip(role=role, model=model, provider_id=pid,
                               reason="max_completion_tokens", detail=f"{wanted} > {ceiling}"))
        return None
    return candidate


def validate_route_plan(plan: RoutePlan) -> None:
    """Check that ``plan`` obeys its own policies: every candidate serves its stage's model, belongs
    to the stage's policy (an ``only`` stage holds exactly its pinned provider), appears once, and
    stages follow policy order. Raises :class:`RoutePlanError`; the executor calls this first, so a
    hand-built or decoded plan cannot route around a fence."""
    if not isinstance(plan, RoutePlan):
        raise RoutePlanError(f"expected a RoutePlan, got {type(plan).__name__}")
    if isinstance(plan.defect_retries, bool) or plan.defect_retries < 0:
        raise RoutePlanError(f"defect_retries must be >= 0, got {plan.defect_retries!r}")
    for si, stage in enumerate(plan.stages):
        allowed = _policy_providers(stage.policy)
        positions: list[int] = []
        for candidate in stage.candidates:
            if candidate.canonical_model_id != stage.model:
                raise RoutePlanError(
                    f"stage {si} serves {stage.model!r} but holds a candidate for "
                    f"{candidate.canonical_model_id!r}"
                )
            if candidate.provider_id not in allowed:
                raise RoutePlanError(
                    f"stage {si}: provider {candidate.provider_id!r} is outside its "
                    f"{_mode(stage.policy)!r} policy {list(allowed)!r}"
                )
            positions.append(allowed.index(candidate.provider_id))
        if positions != sorted(set(positions)):
            raise RoutePlanError(f"stage {si}: candidates repeat or break policy order")


def _mode(policy: RoutePolicy) -> str:
    return "only" if isinstance(policy, OnlyPolicy) else "ordered"


def max_route_attempts(plan: RoutePlan) -> int:
    """The most ``attempt`` calls executing ``plan`` can make: every candidate, each with its
    defect retries."""
    return sum(len(s.candidates) for s in plan.stages) * (1 + plan.defect_retries)


_ENCODER = msgspec.json.Encoder(order="deterministic")
_DECODER = msgspec.json.Decoder(RoutePlan)


def encode_route_plan(plan: RoutePlan) -> bytes:
    """JSON bytes for ``plan``; equal plans give equal bytes (sets are sorted)."""
    return _ENCODER.encode(plan)


def decode_route_plan(data: bytes | str) -> RoutePlan:
    """Read a plan written by :func:`encode_route_plan`. Malformed JSON or a plan that breaks its own
    policies raises :class:`RoutePlanError`, a bad id :class:`~bindloop.routing.InvalidIdError`."""
    try:
        plan = _DECODER.decode(data)
    except msgspec.DecodeError as exc:
        raise RoutePlanError(f"not a route plan: {exc}") from None
    for stage in plan.stages:
        canonical_model_id(stage.model)
        for candidate in stage.candidates:
            provider_id(candidate.provider_id)
            canonical_model_id(candidate.canonical_model_id)
    validate_route_plan(plan)
    return plan
