"""Skill registry, catalog budget, resolution, activation and admission."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.errors import PortContractError, UsageError
from bindloop.skills import (
    ExternalSkill,
    SkillInstructions,
    SkillSpec,
    SkillSummary,
    UnresolvedSkill,
    admit_skill_load,
    create_skill_activation,
    create_skill_registry,
    default_skill_line_cost,
    estimate_skill_body_tokens,
    partition_skill_catalog,
    skill_name_problem,
    resolve_active_skill_instructions,
)

pytestmark = pytest.mark.anyio

TRIAGE = SkillSpec(name="triaging-inbound-work", description="How this team triages requests.",
                   when_to_use="When asked to sort a queue.", body="1. Read.\n2. Rank.\n")
DRAFTING = SkillSpec(name="drafting", description="House drafting style.", body="Be brief.")


def registry_with_both(warnings: list[tuple[str, dict[str, Any]]] | None = None) -> Any:
    skills = create_skill_registry(
        on_warn=None if warnings is None else (lambda m, f: warnings.append((m, dict(f)))))
    skills.register_platform(TRIAGE)
    skills.register_plugin("documents", DRAFTING)
    return skills


def test_registration_hashes_the_body_and_gates_plugin_skills() -> None:
    skills = registry_with_both()
    (platform_only,) = skills.summaries()
    assert platform_only.ref == "platform:triaging-inbound-work"
    assert platform_only.content_sha == hashlib.sha256(TRIAGE.body.encode()).hexdigest()
    both = skills.summaries(available_plugins=["documents"])
    assert [(s.origin, s.name, s.plugin) for s in both] == [
        ("platform", "triaging-inbound-work", None), ("plugin", "drafting", "documents")]


def test_injected_hash_port_is_used() -> None:
    skills = create_skill_registry(sha256=lambda data: f"len{len(data)}")
    summary = skills.register_platform(DRAFTING)
    assert summary.content_sha == "len9"


def test_registration_refuses_duplicates_and_warns_on_lenient_problems() -> None:
    warnings: list[tuple[str, dict[str, Any]]] = []
    skills = registry_with_both(warnings)
    with pytest.raises(UsageError, match="already"):
        skills.register_platform(DRAFTING)
    with pytest.raises(UsageError, match="description"):
        skills.register_platform(SkillSpec(name="x", description=" ", body="b"))
    skills.register_platform(SkillSpec(name="Bad_Name", description="d" * 1100, body=""))
    assert [m for m, _ in warnings] == [
        "skill name breaks the Agent Skills naming rule",
        "skill description is longer than the catalog allows",
        "skill body is empty",
    ]
    assert warnings[0][1]["skill"] == "Bad_Name"


def summary(name: str, origin: Any = "platform", desc: str = "d") -> SkillSummary:
    return SkillSummary(ref=f"{origin}:{name}", name=name, description=desc, origin=origin)


def test_catalog_orders_by_origin_then_name_and_splits_active() -> None:
    available = [summary("b"), summary("a", "external"), summary("a")]
    catalog = partition_skill_catalog({"platform:b"}, available, budget=None)
    assert [s.ref for s in catalog.active] == ["platform:b"]
    assert [e.summary.ref for e in catalog.loadable] == ["external:a", "platform:a"]
    assert not catalog.truncated


def test_catalog_overflow_is_marked_name_only_never_dropped() -> None:
    available = [summary(f"s{i}", desc="x" * 200) for i in range(10)]
    full = default_skill_line_cost(available[0], "full")
    short = default_skill_line_cost(available[0], "name_only")
    budget = 3 * full + 7 * short
    catalog = partition_skill_catalog((), available, budget=budget)
    assert [e.detail for e in catalog.loadable] == ["full"] * 3 + ["name_only"] * 7
    assert catalog.truncated and catalog.tokens <= budget
    tiny = partition_skill_catalog((), available, budget=0)
    assert len(tiny.loadable) == 10 and all(e.detail == "name_only" for e in tiny.loadable)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", "e", "f"]),
                          st.sampled_from(["platform", "plugin", "external"]),
                          st.text(max_size=120)), unique_by=lambda t: (t[0], t[1])),
       st.integers(0, 200), st.randoms())
def test_catalog_is_order_independent_and_within_budget_when_possible(
    items: list[tuple[str, Any, str]], budget: int, rnd: Any
) -> None:
    available = [summary(n, o, d or "d") for n, o, d in items]
    shuffled = list(available)
    rnd.shuffle(shuffled)
    one = partition_skill_catalog((), available, budget=budget)
    two = partition_skill_catalog((), shuffled, budget=budget)
    assert msgspec.json.encode(one) == msgspec.json.encode(two)
    assert len(one.loadable) == len(available)
    floor = sum(default_skill_line_cost(s, "name_only") for s in available)
    assert one.tokens <= max(budget, floor)


@pytest.mark.parametrize("name", ["drafting\n", "a-b\n"])
def test_skill_name_rule_matches_the_whole_name(name: str) -> None:
    assert skill_name_problem(name) is not None
    assert skill_name_problem(name.rstrip("\n")) is None


def test_catalog_refuses_two_different_summaries_for_one_ref() -> None:
    first, second = summary("a", desc="one"), summary("a", desc="two")
    with pytest.raises(UsageError, match="platform:a"):
        partition_skill_catalog((), [first, second])
    with pytest.raises(UsageError, match="platform:a"):
        partition_skill_catalog((), [second, first])
    # An exact repeat is harmless: the output cannot depend on which copy was kept.
    twice = partition_skill_catalog((), [first, first], budget=None)
    assert [e.summary for e in twice.loadable] == [first]


def test_catalog_validates_budget_and_cost() -> None:
    with pytest.raises(UsageError):
        partition_skill_catalog((), [], budget=-1)
    with pytest.raises(PortContractError):
        partition_skill_catalog((), [summary("a")], cost=lambda s, d: -1)


async def test_resolution_is_in_total_order_and_records_shas() -> None:
    skills = registry_with_both()
    available = skills.summaries(available_plugins=["documents"])
    out = await resolve_active_skill_instructions(
        active_refs=["platform:drafting", "platform:triaging-inbound-work", "platform:drafting"],
        available=available, registry=skills)
    assert [s.name for s in out.skills] == ["triaging-inbound-work", "drafting"]  # platform < plugin
    assert out.shas["platform:drafting"] == skills.get("platform:drafting").content_sha
    assert out.unresolved == ()


async def test_unavailable_and_external_refs() -> None:
    skills = registry_with_both()
    available = [*skills.summaries(), summary("mine", "workspace"), summary("yours", "workspace")]
    calls: list[tuple[tuple[str, ...], dict[str, str]]] = []

    async def source(refs: tuple[str, ...], pins: Any) -> list[ExternalSkill]:
        calls.append((refs, dict(pins)))
        return [ExternalSkill(ref="workspace:mine", name="mine", body="my body")]

    out = await resolve_active_skill_instructions(
        active_refs=["workspace:yours", "platform:drafting", "workspace:mine"],
        available=available, registry=skills, external_source=source)
    assert calls == [(("workspace:mine", "workspace:yours"), {})]  # one batched call
    assert [(s.ref, s.body) for s in out.skills] == [("workspace:mine", "my body")]
    assert out.skills[0].content_sha == hashlib.sha256(b"my body").hexdigest()
    assert out.unresolved == (UnresolvedSkill(ref="platform:drafting", reason="not_available"),
                              UnresolvedSkill(ref="workspace:yours", reason="not_found"))
    none = await resolve_active_skill_instructions(
        active_refs=["workspace:mine"], available=available, registry=skills)
    assert none.unresolved == (UnresolvedSkill(ref="workspace:mine", reason="no_external_source"),)


async def test_pinned_shas_resolve_to_the_body_a_past_run_saw() -> None:
    skills = registry_with_both()
    available = [*skills.summaries(), summary("mine", "workspace")]
    versions = {"v1": "old body", "v2": "new body"}
    sha = {k: hashlib.sha256(v.encode()).hexdigest() for k, v in versions.items()}

    def source(refs: tuple[str, ...], pins: Any) -> list[ExternalSkill]:
        chosen = next((b for b in versions.values()
                       if hashlib.sha256(b.encode()).hexdigest() == pins.get(refs[0])),
                      versions["v2"])
        return [ExternalSkill(ref=refs[0], name="mine", body=chosen)]

    live = await resolve_active_skill_instructions(
        active_refs=["workspace:mine"], available=available, registry=skills,
        external_source=source)
    assert live.skills[0].body == "new body"
    pinned = await resolve_active_skill_instructions(
        active_refs=["workspace:mine", "platform:triaging-inbound-work"], available=available,
        registry=skills, external_source=source,
        pinned_shas={"workspace:mine": sha["v1"], "platform:triaging-inbound-work": "0" * 64})
    assert [(s.ref, s.body) for s in pinned.skills] == [("workspace:mine", "old body")]
    assert pinned.unresolved == (UnresolvedSkill(ref="platform:triaging-inbound-work",
                                                 reason="pinned_content_unavailable"),)


async def test_a_bad_external_source_is_a_port_contract_error() -> None:
    skills = create_skill_registry()
    with pytest.raises(PortContractError):
        await resolve_active_skill_instructions(
            active_refs=["w:x"], available=[summary("x", "w")], registry=skills,
            external_source=lambda refs, pins: "nope")  # type: ignore[arg-type,return-value]


async def test_activation_mutates_the_hosts_state_and_applies_instructions() -> None:
    skills = registry_with_both()
    available = skills.summaries()
    active: set[str] = set()
    shas: dict[str, str] = {}
    applied: list[SkillInstructions] = []

    async def store(refs: tuple[str, ...]) -> SkillInstructions:
        return await resolve_active_skill_instructions(active_refs=refs, available=available,
                                                       registry=skills)

    activation = create_skill_activation(available_skills=available, active_skills=active,
                                         loaded_skill_shas=shas, store=store,
                                         apply_instructions=applied.append)
    report = await activation.activate(["platform:triaging-inbound-work", "platform:drafting"])
    assert report.added == ("platform:triaging-inbound-work",)
    assert report.unavailable == ("platform:drafting",)
    assert active == {"platform:triaging-inbound-work"}
    assert shas == {"platform:triaging-inbound-work": available[0].content_sha}
    assert [s.name for s in applied[-1].skills] == ["triaging-inbound-work"]
    again = await activation.activate(["platform:triaging-inbound-work"])
    assert again.already_active == ("platform:triaging-inbound-work",) and again.added == ()


async def test_activation_drops_refs_that_do_not_resolve() -> None:
    available = [summary("ghost", "workspace")]
    active: set[str] = set()
    activation = create_skill_activation(
        available_skills=available, active_skills=active, loaded_skill_shas={},
        store=lambda refs: SkillInstructions(
            unresolved=tuple(UnresolvedSkill(ref=r, reason="not_found") for r in refs)),
        apply_instructions=lambda i: None)
    report = await activation.activate(["workspace:ghost"])
    assert report.unresolved == ("workspace:ghost",) and report.added == () and active == set()


@pytest.mark.parametrize("kwargs, admitted", [
    ({}, True),
    ({"active_count": 0}, True),
    ({"active_count": 7}, True),
    ({"active_count": 8}, False),
    ({"projected_body_tokens": 24_000}, True),
    ({"projected_body_tokens": 24_001}, False),
    ({"active_count": float("nan")}, False),
    ({"active_count": -1}, False),
    ({"projected_body_tokens": float("nan")}, False),
    ({"projected_body_tokens": -5}, False),
    ({"projected_body_tokens": float("inf")}, False),
    ({"active_count": True}, False),
    ({"active_count": 2, "max_active": 2}, False),
])
def test_admit_skill_load(kwargs: dict[str, Any], admitted: bool) -> None:
    decision = admit_skill_load(**kwargs)
    assert decision.admitted is admitted
    assert (decision.reason is None) is admitted


def test_estimate_skill_body_tokens() -> None:
    assert estimate_skill_body_tokens("abcd" * 10) == 10
    assert estimate_skill_body_tokens("abcde") == 2
    instructions = SkillInstructions(skills=())
    assert estimate_skill_body_tokens(instructions) == 0
