from __future__ import annotations

import msgspec
import pytest

from bindloop.errors import PortContractError
from bindloop.routing import (
    InvalidIdError,
    OnlyPolicy,
    OrderedPolicy,
    ResolvedCandidate,
    RoutePlan,
    RoutePlanError,
    RouteRequirements,
    RouteStage,
    build_route_plan,
    canonical_model_id,
    decode_route_plan,
    encode_route_plan,
    max_route_attempts,
    provider_id,
    validate_route_plan,
)
from routing_fakes import FakeTransport, candidate, transports

MODEL = canonical_model_id("openai/gpt-example")
FALLBACK = canonical_model_id("anthropic/claude-example")


def ordered(*names: str) -> OrderedPolicy:
    return OrderedPolicy(providers=tuple(provider_id(n) for n in names))


@pytest.mark.parametrize("good", ["openai/gpt-example", "meta-llama/llama-3.1-8b", "x/Y:free",
                                  "a.b_c/m+v"])
def test_canonical_model_id_accepts(good: str) -> None:
    assert canonical_model_id(good) == good


@pytest.mark.parametrize("bad", ["", "gpt", "OpenAI/gpt", "a/b/c", "a/ b", "/m", "a/", " a/b",
                                 "a/b\n", "a/" + "m" * 300, 3, None])
def test_canonical_model_id_refuses(bad: object) -> None:
    with pytest.raises(InvalidIdError) as info:
        canonical_model_id(bad)
    assert info.value.kind == "canonical model id"


@pytest.mark.parametrize("bad", ["", "Primary", "-x", "a b", "a/b", "x" * 65, 1])
def test_provider_id_refuses(bad: object) -> None:
    with pytest.raises(InvalidIdError):
        provider_id(bad)
    assert provider_id("azure-eu_2") == "azure-eu_2"


def test_tutorial_plan_two_providers_no_skips() -> None:
    build = build_route_plan(
        primary_model=MODEL,
        requirements=RouteRequirements(capabilities=frozenset({"chat_completions"})),
        policy_for=lambda m: ordered("primary", "backup"),
        transports=transports("primary", "backup"),
    )
    assert [c.provider_id for c in build.plan.stages[0].candidates] == ["primary", "backup"]
    assert build.skips == ()
    assert build.plan.stages[0].role == "primary"


def test_policy_order_is_the_only_ordering_input() -> None:
    ts = transports("a", "b", "c")
    build = build_route_plan(primary_model=MODEL, policy_for=lambda m: ordered("c", "a", "c", "b"),
                             transports=ts)
    assert [c.provider_id for c in build.plan.stages[0].candidates] == ["c", "a", "b"]


def test_skips_are_recorded_with_reasons() -> None:
    ts = transports("up")
    ts[provider_id("down")] = FakeTransport(id=provider_id("down"), available=False)
    ts[provider_id("busy")] = FakeTransport(id=provider_id("busy"), skip_reason="quota")
    ts[provider_id("nocap")] = FakeTransport(id=provider_id("nocap"), capabilities=frozenset())
    ts[provider_id("small")] = FakeTransport(id=provider_id("small"), max_completion_tokens=100)
    ts[provider_id("other")] = FakeTransport(id=provider_id("other"), models=frozenset({"x/y"}))
    build = build_route_plan(
        primary_model=MODEL,
        requirements=RouteRequirements(capabilities=frozenset({"chat_completions"}),
                                       requested_max_completion_tokens=1000),
        policy_for=lambda m: ordered("ghost", "down", "busy", "nocap", "small", "other", "up"),
        transports=ts,
    )
    assert [c.provider_id for c in build.plan.stages[0].candidates] == ["up"]
    got = [(s.provider_id, s.reason, s.detail) for s in build.skips]
    assert got == [
        ("ghost", "no_transport", None),
        ("down", "unavailable", "down"),
        ("busy", "transport_skip", "quota"),
        ("nocap", "missing_capability", "chat_completions"),
        ("small", "max_completion_tokens", "1000 > 100"),
    ]  # "other" is unserved: not a skip


def test_unavailable_transport_is_not_asked_to_resolve() -> None:
    ts = transports("a", available=False)
    build_route_plan(primary_model=MODEL, policy_for=lambda m: ordered("a"), transports=ts)
    assert ts[provider_id("a")].calls == ["availability"]


def test_only_policy_is_a_plan_time_fence() -> None:
    ts = transports("a", "b", "c")
    build = build_route_plan(primary_model=MODEL, policy_for=lambda m: OnlyPolicy(provider=provider_id("b")),
                             transports=ts)
    assert [c.provider_id for c in build.plan.stages[0].candidates] == ["b"]
    assert ts[provider_id("a")].calls == [] and ts[provider_id("c")].calls == []


def test_fallback_chain_builds_stages_and_dedupes_models() -> None:
    build = build_route_plan(
        primary_model=MODEL, fallback_model=[FALLBACK, MODEL, "google/gemini-example"],
        policy_for=lambda m: ordered("a", "b"), transports=transports("a", "b"),
    )
    assert [s.model for s in build.plan.stages] == [MODEL, FALLBACK, "google/gemini-example"]
    assert [s.role for s in build.plan.stages] == ["primary", "fallback", "fallback"]
    assert [(s.model, s.reason) for s in build.skips] == [(MODEL, "duplicate_model")]
    assert max_route_attempts(build.plan) == 3 * 2 * 2


def test_single_fallback_string_and_empty_stage_dropped() -> None:
    ts = transports("a", models=frozenset({MODEL}))
    build = build_route_plan(primary_model=MODEL, fallback_model=str(FALLBACK),
                             policy_for=lambda m: ordered("a"), transports=ts)
    assert [s.model for s in build.plan.stages] == [MODEL]


def test_plan_is_frozen_json_stable_and_round_trips() -> None:
    kw = dict(primary_model=MODEL, fallback_model=FALLBACK,
              requirements=RouteRequirements(capabilities=frozenset({"chat_completions"})),
              policy_for=lambda m: ordered("a", "b"),
              transports=transports("a", "b", capabilities=frozenset({"z", "chat_completions", "a"})))
    plan = build_route_plan(**kw).plan  # type: ignore[arg-type]
    again = build_route_plan(**kw).plan  # type: ignore[arg-type]
    data = encode_route_plan(plan)
    assert data == encode_route_plan(again)
    assert b'"capabilities":["a","chat_completions","z"]' in data
    assert decode_route_plan(data) == plan
    with pytest.raises(AttributeError):
        plan.defect_retries = 3  # type: ignore[misc]


def test_decode_refuses_garbage_and_policy_breaches() -> None:
    with pytest.raises(RoutePlanError):
        decode_route_plan(b"{")
    bad = RoutePlan(stages=(RouteStage(role="primary", model=MODEL,
                                       policy=OnlyPolicy(provider=provider_id("a")),
                                       candidates=(candidate("b", MODEL),)),))
    with pytest.raises(RoutePlanError, match="outside its 'only' policy"):
        decode_route_plan(msgspec.json.encode(bad))


@pytest.mark.parametrize("stage", [
    RouteStage(role="primary", model=MODEL, policy=OrderedPolicy(providers=(provider_id("a"),)),
               candidates=(candidate("a", str(FALLBACK)),)),
    RouteStage(role="primary", model=MODEL,
               policy=OrderedPolicy(providers=(provider_id("a"), provider_id("b"))),
               candidates=(candidate("b", MODEL), candidate("a", MODEL))),
    RouteStage(role="primary", model=MODEL, policy=OrderedPolicy(providers=(provider_id("a"),)),
               candidates=(candidate("a", MODEL), candidate("a", MODEL))),
])
def test_validate_refuses_inconsistent_plans(stage: RouteStage) -> None:
    with pytest.raises(RoutePlanError):
        validate_route_plan(RoutePlan(stages=(stage,)))


def test_port_contract_errors() -> None:
    class WrongCandidate(FakeTransport):
        def resolve_candidate(self, model, requirements):  # type: ignore[no-untyped-def]
            return ResolvedCandidate(candidate=candidate("zzz", str(model)))

    with pytest.raises(PortContractError, match="resolved"):
        build_route_plan(primary_model=MODEL, policy_for=lambda m: ordered("a"),
                         transports={provider_id("a"): WrongCandidate(id=provider_id("a"))})
    with pytest.raises(PortContractError, match="policy_for"):
        build_route_plan(primary_model=MODEL, policy_for=lambda m: "a",  # type: ignore[arg-type,return-value]
                         transports=transports("a"))

    class BadAvailability(FakeTransport):
        def get_availability(self):  # type: ignore[no-untyped-def]
            return True

    with pytest.raises(PortContractError, match="get_availability"):
        build_route_plan(primary_model=MODEL, policy_for=lambda m: ordered("a"),
                         transports={provider_id("a"): BadAvailability(id=provider_id("a"))})


def test_build_validates_its_inputs() -> None:
    with pytest.raises(InvalidIdError):
        build_route_plan(primary_model="nope", policy_for=lambda m: ordered("a"), transports={})
    with pytest.raises(InvalidIdError):
        build_route_plan(primary_model=MODEL, policy_for=lambda m: ordered("a"),
                         transports={"Bad Id": FakeTransport(id=provider_id("a"))})
    with pytest.raises(ValueError, match="defect_retries"):
        build_route_plan(primary_model=MODEL, policy_for=lambda m: ordered("a"), transports={},
                         defect_retries=-1)

