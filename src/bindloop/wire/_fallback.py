"""``fallback_route``: a :class:`RoutedModel` over "this model, else that one" in one call.

The common route needs no routing vocabulary: models in order, each tried when the one before it
failed in a way the routing table falls back on (a 5xx, a 429, a refused connection, a stall before
output), a circuit breaker remembering failures across turns (so an endpoint that sent
``Retry-After`` is skipped until then), and everything else about routing left at its default.
The plan it builds is an ordinary :class:`~bindloop.routing.RoutePlan` (one stage, the candidates
in order), readable on ``RoutedModel.plan`` and in every route log.
"""

from __future__ import annotations

from collections.abc import Callable

from ..clock import Clock, monotonic_ms
from ..contracts import ModelTurnResult
from ..errors import UsageError
from ..routing import (
    CircuitBreaker,
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteResult,
    RouteStage,
    canonical_model_id,
    create_circuit_breaker,
    provider_id,
)
from ..signal import AbortSignal
from ._adapter import ModelAdapter
from ._routed import RoutedModel, TextStreamSource

__all__ = ("fallback_route",)

_DEFAULT_BREAKER = object()


def fallback_route(primary: ModelAdapter, *fallbacks: ModelAdapter,
                   names: tuple[str, ...] | None = None,
                   model: str = "route/fallback",
                   breaker: CircuitBreaker | None | object = _DEFAULT_BREAKER,
                   now: Clock = monotonic_ms,
                   defect_retries: int = 1,
                   on_route: Callable[[RouteResult[ModelTurnResult]], None] | None = None,
                   signal: AbortSignal | None = None,
                   text_stream: TextStreamSource | None = None) -> RoutedModel:
    """A :class:`RoutedModel` trying ``primary``, then each of ``fallbacks``, in order.

    ``names`` are the provider ids the route logs and the breaker key by (default ``primary``,
    ``fallback-1``, ``fallback-2``, ...); ``model`` the canonical model id the one stage serves (a
    label: each candidate calls its own adapter's ``options.model``). ``breaker`` defaults to a
    fresh :func:`~bindloop.routing.create_circuit_breaker` on ``now``: it is what carries a
    failure, and a provider's ``Retry-After``, from one turn to the next; pass ``None`` for a route
    without memory, or your own breaker to share it. ``defect_retries``, ``on_route``, ``signal``
    and ``text_stream`` are :class:`RoutedModel`'s and the plan's.

    Raises :class:`~bindloop.errors.UsageError` when a model is not a :class:`ModelAdapter`, the
    same adapter is given twice, or ``names`` does not name each model once.
    """
    models = (primary, *fallbacks)
    for i, m in enumerate(models):
        if not isinstance(m, ModelAdapter):
            which = "primary" if i == 0 else f"fallback {i}"
            raise UsageError(f"fallback_route: the {which} must be a ModelAdapter, got "
                             f"{type(m).__name__}")
    if len({id(m) for m in models}) != len(models):
        raise UsageError("fallback_route: the same ModelAdapter appears twice; a model cannot "
                         "be its own fallback")
    if names is None:
        names = ("primary", *(f"fallback-{i}" for i in range(1, len(models))))
    if not isinstance(names, tuple) or len(names) != len(models) or len(set(names)) != len(names):
        raise UsageError(f"fallback_route: names must be a tuple of {len(models)} distinct "
                         f"provider ids, one per model, got {names!r}")
    ids = tuple(provider_id(n) for n in names)
    canonical = canonical_model_id(model)
    stage = RouteStage(role="primary", model=canonical, policy=OrderedPolicy(providers=ids),
                       candidates=tuple(
                           RouteCandidate(provider_id=pid, canonical_model_id=canonical,
                                          provider_invocation_model=m.options.model,
                                          credential_source="platform")
                           for pid, m in zip(ids, models, strict=True)))
    if breaker is _DEFAULT_BREAKER:
        breaker = create_circuit_breaker(now=now)
    if breaker is not None and not isinstance(breaker, CircuitBreaker):
        raise UsageError("fallback_route: breaker must be a CircuitBreaker or None, got "
                         f"{type(breaker).__name__}")
    return RoutedModel(plan=RoutePlan(stages=(stage,), defect_retries=defect_retries),
                       models=dict(zip(ids, models, strict=True)), breaker=breaker,
                       on_route=on_route, signal=signal, text_stream=text_stream)
