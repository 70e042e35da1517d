from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import given, strategies as st

from bindloop.errors import PortContractError
from bindloop.routing import (
    AttemptOutcome,
    BreakerKey,
    OnlyPolicy,
    OrderedPolicy,
    RouteCandidate,
    RouteCursor,
    RoutePlan,
    RoutePlanError,
    RouteResult,
    RouteStage,
    RouteUnavailableError,
    build_route_plan,
    canonical_model_id,
    create_circuit_breaker,
    execute_route_plan,
    max_route_attempts,
    provider_id,
)
from bindloop.routing.failures import (
    FAILURE_CATEGORIES,
    failure_disposition,
)
from bindloop.signal import AbortController
from routing_fakes import candidate, fail, ok, transports

MODEL = canonical_model_id("openai/gpt-example")
FALLBACK = canonical_model_id("anthropic/claude-example")


def plan_for(*providers: str, fallback: bool = False, defect_retries: int = 1) -> RoutePlan:
    return build_route_plan(
        primary_model=MODEL, fallback_model=FALLBACK if fallback else None,
        policy_for=lambda m: OrderedPolicy(providers=tuple(provider_id(p) for p in providers)),
        transports=transports(*providers), defect_retries=defect_retries,
    ).plan


Script = dict[tuple[str, str], list[Any]]


def scripted(script: Script, calls: list[tuple[str, str, int]]) -> Any:
    """An attempt fn answering from per-(provider, model) queues: a category string fails, a
    ("out", category) tuple fails with produced output, anything else succeeds with that value."""

    async def attempt(c: RouteCandidate, cursor: RouteCursor) -> AttemptOutcome[str]:
        calls.append((c.provider_id, c.canonical_model_id, cursor.attempt))
        step = script[(c.provider_id, c.canonical_model_id)].pop(0)
        if isinstance(step, tuple):
            return fail(c, cursor, step[1], produced_output=True)
        if step in FAILURE_CATEGORIES:
            return fail(c, cursor, step, status=503 if step == "server_error" else None)
        return ok(step)

    return attempt


def run(plan: RoutePlan, attempt: Any, **kw: Any) -> RouteResult[str]:
    async def main() -> RouteResult[str]:
        return await execute_route_plan(plan=plan, attempt=attempt, **kw)

    return anyio.run(main)


def test_tutorial_503_falls_over_to_backup_and_records_breaker_failure() -> None:
    calls: list[tuple[str, str, int]] = []
    breaker = create_circuit_breaker(now=lambda: 0.0, failure_threshold=1)
    result = run(plan_for("primary", "backup"),
                 scripted({("primary", MODEL): ["server_error"], ("backup", MODEL): ["hello"]}, calls),
                 breaker=breaker)
    assert result.ok and result.value == "hello"
    assert result.served.provider_id == "backup" and result.fallback_kind == "provider"
    assert [(a.provider_id, a.outcome, a.category, a.action, a.status_code) for a in result.attempts] == [
        ("primary", "failed", "server_error", "traverse", 503), ("backup", "succeeded", None, None, None)]
    primary_key = BreakerKey.for_candidate(plan_for("primary").stages[0].candidates[0])
    assert breaker.state(primary_key).state == "open"


def test_defect_retry_stays_on_endpoint_then_traverses() -> None:
    calls: list[tuple[str, str, int]] = []
    result = run(plan_for("a", "b", defect_retries=2),
                 scripted({("a", MODEL): ["response_defect", "response_defect", "fine"]}, calls))
    assert result.ok and result.fallback_kind == "none" and result.cursor.attempt == 2
    calls.clear()
    result = run(plan_for("a", "b", defect_retries=1),
                 scripted({("a", MODEL): ["response_defect"] * 2, ("b", MODEL): ["fine"]}, calls))
    assert calls == [("a", MODEL, 0), ("a", MODEL, 1), ("b", MODEL, 0)]
    assert result.ok and result.fallback_kind == "provider"


def test_model_fallback_and_context_length_skips_rest_of_stage() -> None:
    calls: list[tuple[str, str, int]] = []
    result = run(plan_for("a", "b", fallback=True),
                 scripted({("a", MODEL): ["context_length"], ("a", FALLBACK): ["from fallback"]}, calls))
    assert result.ok and result.fallback_kind == "model" and result.value == "from fallback"
    assert calls == [("a", MODEL, 0), ("a", FALLBACK, 0)]  # b was never tried for MODEL


def test_fallback_success_is_a_model_fallback_even_when_the_primary_stage_is_absent() -> None:
    # No transport serves the primary model, so the plan's only stage is the fallback's.
    build = build_route_plan(
        primary_model=MODEL, fallback_model=FALLBACK,
        policy_for=lambda m: OrderedPolicy(providers=(provider_id("a"),)),
        transports=transports("a", models=frozenset({FALLBACK})),
    )
    assert [s.role for s in build.plan.stages] == ["fallback"]
    calls: list[tuple[str, str, int]] = []
    result = run(build.plan, scripted({("a", FALLBACK): ["from fallback"]}, calls))
    assert result.ok and result.cursor.stage == 0 and result.fallback_kind == "model"


@pytest.mark.parametrize("category", ["invalid_request", "client_error", "content_filter", "cancelled"])
def test_propagating_categories_stop_at_once(category: str) -> None:
    calls: list[tuple[str, str, int]] = []
    result = run(plan_for("a", "b", fallback=True), scripted({("a", MODEL): [category]}, calls))
    assert not result.ok and len(calls) == 1
    assert result.reason == ("cancelled" if category == "cancelled" else "propagated")
    assert result.error is not None and result.error.category == category
    with pytest.raises(type(result.error)):
        result.raise_error()


def test_produced_output_clamps_a_traversable_failure() -> None:
    calls: list[tuple[str, str, int]] = []
    breaker = create_circuit_breaker(now=lambda: 0.0, failure_threshold=1)
    result = run(plan_for("a", "b"), scripted({("a", MODEL): [("out", "server_error")]}, calls),
                 breaker=breaker)
    assert not result.ok and result.reason == "propagated" and len(calls) == 1
    assert result.attempts[0].produced_output and result.attempts[0].action == "propagate"
    # The breaker still learned about the 5xx.
    assert breaker.snapshot()[0].state == "open"


def test_exhausted_returns_the_last_error() -> None:
    calls: list[tuple[str, str, int]] = []
    result = run(plan_for("a", "b"),
                 scripted({("a", MODEL): ["timeout"], ("b", MODEL): ["rate_limited"]}, calls))
    assert not result.ok and result.reason == "exhausted"
    assert result.error is not None and result.error.category == "rate_limited"


def test_open_circuits_are_skipped_and_all_open_is_reported() -> None:
    breaker = create_circuit_breaker(now=lambda: 0.0, failure_threshold=1)
    plan = plan_for("a", "b")
    breaker.record_failure(BreakerKey.for_candidate(plan.stages[0].candidates[0]))
    calls: list[tuple[str, str, int]] = []
    result = run(plan, scripted({("b", MODEL): ["ok"]}, calls), breaker=breaker)
    assert result.ok and calls == [("b", MODEL, 0)] and result.attempts[0].outcome == "circuit_open"
    breaker.record_failure(BreakerKey.for_candidate(plan.stages[0].candidates[1]))
    result = run(plan, scripted({}, calls), breaker=breaker)
    assert not result.ok and result.reason == "circuit_open" and result.error is None
    with pytest.raises(RouteUnavailableError):
        result.raise_error()


def test_probe_released_when_attempt_raises_or_returns_non_recordable() -> None:
    clock = [0.0]
    breaker = create_circuit_breaker(now=lambda: clock[0], failure_threshold=1, cooldown_ms=10)
    plan = plan_for("a")
    key = BreakerKey.for_candidate(plan.stages[0].candidates[0])
    breaker.record_failure(key)
    clock[0] = 10

    async def boom(c: RouteCandidate, cursor: RouteCursor) -> AttemptOutcome[str]:
        raise KeyError("host bug")

    with pytest.raises(KeyError):
        run(plan, boom, breaker=breaker)
    assert breaker.state(key).probe_in_flight is False
    calls: list[tuple[str, str, int]] = []
    result = run(plan, scripted({("a", MODEL): ["provider_bad_request"]}, calls), breaker=breaker)
    assert not result.ok and breaker.state(key).probe_in_flight is False
    assert breaker.state(key).state == "half_open"  # no recordable outcome: still half-open


def test_signal_checked_before_each_attempt() -> None:
    controller = AbortController()
    calls: list[tuple[str, str, int]] = []

    async def attempt(c: RouteCandidate, cursor: RouteCursor) -> AttemptOutcome[str]:
        calls.append((c.provider_id, c.canonical_model_id, cursor.attempt))
        controller.abort("user left")
        return fail(c, cursor, "server_error")

    result = run(plan_for("a", "b"), attempt, signal=controller.signal)
    assert not result.ok and result.reason == "cancelled" and len(calls) == 1


def test_empty_plan_and_contract_errors() -> None:
    result = run(RoutePlan(stages=()), scripted({}, []))
    assert not result.ok and result.reason == "no_candidates"

    async def bad(c: RouteCandidate, cursor: RouteCursor) -> Any:
        return "just a string"

    with pytest.raises(PortContractError):
        run(plan_for("a"), bad)
    tampered = RoutePlan(stages=(RouteStage(role="primary", model=MODEL,
                                            policy=OnlyPolicy(provider=provider_id("a")),
                                            candidates=(candidate("b", MODEL),)),))
    with pytest.raises(RoutePlanError):
        run(tampered, scripted({}, []))


# --- properties --------------------------------------------------------------------------------

OUTCOMES = st.one_of(
    st.sampled_from(sorted(FAILURE_CATEGORIES)),
    st.tuples(st.just("out"), st.sampled_from(sorted(FAILURE_CATEGORIES))),
    st.just("success"),
)
PROVIDERS = ["p0", "p1", "p2", "p3"]
MODELS = ["v/m0", "v/m1", "v/m2"]


@st.composite
def plans(draw: st.DrawFn) -> RoutePlan:
    n_models = draw(st.integers(1, 3))
    policies = {}
    for m in MODELS[:n_models]:
        if draw(st.booleans()):
            policies[m] = OnlyPolicy(provider=provider_id(draw(st.sampled_from(PROVIDERS))))
        else:
            chosen = draw(st.lists(st.sampled_from(PROVIDERS), min_size=1, max_size=3, unique=True))
            policies[m] = OrderedPolicy(providers=tuple(provider_id(p) for p in chosen))
    # Only three of the four providers have transports, so policies can name a missing one.
    return build_route_plan(
        primary_model=MODELS[0], fallback_model=MODELS[1:n_models],
        policy_for=lambda m: policies[m], transports=transports("p0", "p1", "p2"),
        defect_retries=draw(st.integers(0, 2)),
    ).plan


@given(plan=plans(), outcomes=st.lists(OUTCOMES, min_size=30, max_size=30),
       use_breaker=st.booleans())
def test_executor_properties(plan: RoutePlan, outcomes: list[Any], use_breaker: bool) -> None:
    feed = iter(outcomes)
    called: list[tuple[RouteCandidate, RouteCursor, Any]] = []

    async def attempt(c: RouteCandidate, cursor: RouteCursor) -> AttemptOutcome[str]:
        step = next(feed)
        called.append((c, cursor, step))
        if step == "success":
            return ok(f"{c.provider_id}:{c.canonical_model_id}")
        if isinstance(step, tuple):
            return fail(c, cursor, step[1], produced_output=True)
        return fail(c, cursor, step)

    breaker = create_circuit_breaker(now=lambda: 0.0, failure_threshold=1) if use_breaker else None
    result = run(plan, attempt, breaker=breaker)

    # Never a candidate outside the plan, and the plan's own policies hold.
    for c, cursor, _ in called:
        stage = plan.stages[cursor.stage]
        assert stage.candidates[cursor.candidate] == c
        if isinstance(stage.policy, OnlyPolicy):
            assert c.provider_id == stage.policy.provider  # an `only` stage never traverses
    assert len(called) <= max_route_attempts(plan)
    # Cursors only move forward; a repeat of one candidate follows a retry disposition.
    keys = [(cur.stage, cur.candidate, cur.attempt) for _, cur, _ in called]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    for (_, prev, step), (_, cur, _) in zip(called, called[1:]):
        if (cur.stage, cur.candidate) == (prev.stage, prev.candidate):
            assert step == "response_defect" and cur.attempt == prev.attempt + 1
            assert cur.attempt <= plan.defect_retries
    # A clamped failure, or any propagating one, is the last call.
    for i, (_, _, step) in enumerate(called):
        category = step[1] if isinstance(step, tuple) else step
        if step != "success" and failure_disposition(
                category, produced_output=isinstance(step, tuple)).action == "propagate":
            assert i == len(called) - 1 and not result.ok
    if result.ok:
        last_c, last_cursor, last_step = called[-1]
        assert last_step == "success" and result.served == last_c and result.cursor == last_cursor
        role = plan.stages[last_cursor.stage].role
        expected = ("model" if role == "fallback"
                    else "provider" if last_cursor.candidate else "none")
        assert result.fallback_kind == expected
    else:
        assert all(step != "success" for _, _, step in called)
    assert sum(1 for a in result.attempts if a.outcome != "circuit_open") == len(called)
