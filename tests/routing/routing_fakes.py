"""Fake planner transports and attempt functions for the routing tests."""

from __future__ import annotations

from dataclasses import dataclass, field

from bindloop.routing import (
    AttemptError,
    AttemptFailure,
    AttemptOutcome,
    AttemptSuccess,
    AttemptTarget,
    Availability,
    CanonicalModelId,
    ProviderId,
    RecordedSkip,
    Resolution,
    ResolvedCandidate,
    RouteCandidate,
    RouteCursor,
    RouteRequirements,
    Unserved,
    canonical_model_id,
    provider_id,
)
from bindloop.routing.failures import FailureCategory


@dataclass
class FakeTransport:
    id: ProviderId
    models: frozenset[str] = frozenset()  # empty: serves every model
    available: bool = True
    skip_reason: str | None = None
    capabilities: frozenset[str] = frozenset({"chat_completions"})
    max_completion_tokens: int | None = None
    scope: str | None = None
    calls: list[str] = field(default_factory=list)

    def get_availability(self) -> Availability:
        self.calls.append("availability")
        return Availability(available=self.available, reason=None if self.available else "down")

    def resolve_candidate(
        self, model: CanonicalModelId, requirements: RouteRequirements
    ) -> Resolution:
        self.calls.append(f"resolve:{model}")
        if self.models and model not in self.models:
            return Unserved()
        if self.skip_reason is not None:
            return RecordedSkip(reason=self.skip_reason)
        return ResolvedCandidate(candidate=candidate(self.id, model, self.capabilities,
                                                     self.max_completion_tokens, self.scope))


def candidate(
    pid: str,
    model: str,
    capabilities: frozenset[str] = frozenset({"chat_completions"}),
    max_completion_tokens: int | None = None,
    scope: str | None = None,
) -> RouteCandidate:
    return RouteCandidate(
        provider_id=provider_id(pid),
        canonical_model_id=canonical_model_id(model),
        provider_invocation_model=model.split("/", 1)[1],
        credential_source="platform" if scope is None else "tenant",
        credential_scope=scope,
        capabilities=capabilities,
        max_completion_tokens=max_completion_tokens,
        binding_fingerprint=f"{pid}:{model}",
    )


def transports(*names: str, **kw: object) -> dict[ProviderId, FakeTransport]:
    return {provider_id(n): FakeTransport(id=provider_id(n), **kw) for n in names}  # type: ignore[arg-type]


def target(c: RouteCandidate, cursor: RouteCursor) -> AttemptTarget:
    return AttemptTarget(cursor=cursor, provider_id=c.provider_id,
                         canonical_model_id=c.canonical_model_id,
                         provider_invocation_model=c.provider_invocation_model, duration_ms=1.0)


def fail(
    c: RouteCandidate,
    cursor: RouteCursor,
    category: FailureCategory,
    *,
    status: int | None = None,
    retry_after_ms: float | None = None,
    produced_output: bool = False,
) -> AttemptOutcome[str]:
    return AttemptFailure(
        error=AttemptError(category, target(c, cursor), status_code=status,
                           retry_after_ms=retry_after_ms),
        produced_output=produced_output,
    )


def ok(value: str) -> AttemptOutcome[str]:
    return AttemptSuccess(value)
