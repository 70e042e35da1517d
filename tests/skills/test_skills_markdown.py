"""SKILL.md over an injected YAML port, and the discovery index."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import yaml as pyyaml
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.errors import UsageError
from bindloop.skills import (
    AGENT_SKILLS_DISCOVERY_SCHEMA,
    DiscoveryArtifact,
    SkillFormatError,
    SkillSpec,
    build_agent_skills_discovery_index,
    parse_skill_markdown,
    serialize_skill_markdown,
)


class PyYaml:
    def parse(self, text: str) -> Any:
        return pyyaml.safe_load(text)

    def stringify(self, value: Any) -> str:
        return str(pyyaml.safe_dump(dict(value), sort_keys=False, allow_unicode=True, width=10_000))


YAML = PyYaml()


def test_parse_reads_frontmatter_body_and_extra() -> None:
    raw = ("---\nname: pdf-tools\ndescription: Work with PDFs.\nwhen-to-use: For PDFs.\n"
           "license: MIT\nmetadata:\n  owner: docs\n---\n\n# PDF\nSteps.\n")
    parsed = parse_skill_markdown(raw, yaml=YAML)
    assert parsed.skill == SkillSpec(name="pdf-tools", description="Work with PDFs.",
                                     when_to_use="For PDFs.", body="# PDF\nSteps.\n")
    assert parsed.extra == {"license": "MIT", "metadata": {"owner": "docs"}}
    assert parsed.warnings == ()


def test_unquoted_colon_is_repaired_with_a_warning() -> None:
    raw = "---\nname: triage\ndescription: Use this when: the queue is long\n---\nBody"
    parsed = parse_skill_markdown(raw, yaml=YAML)
    assert parsed.skill.description == "Use this when: the queue is long"
    assert parsed.skill.body == "Body"
    assert len(parsed.warnings) == 1 and "description" in parsed.warnings[0]


def test_crlf_and_bom_are_tolerated() -> None:
    raw = "\ufeff---\r\nname: a\r\ndescription: d\r\n---\r\nline\r\n"
    parsed = parse_skill_markdown(raw, yaml=YAML)
    assert parsed.skill.body == "line\n"


@pytest.mark.parametrize("raw, match", [
    ("# no frontmatter", "no frontmatter"),
    ("---\nname: a\n---\nbody", "no description"),
    ("---\nname: a\ndescription: ''\n---\n", "no description"),
    ("---\n[unclosed\n---\n", "not YAML"),
    ("---\n- a list\n---\n", "not a mapping"),
    ("---\ndescription: {a: [}\n---\n", "not YAML"),
])
def test_parse_fails_only_on_non_yaml_or_missing_description(raw: str, match: str) -> None:
    with pytest.raises(SkillFormatError, match=match):
        parse_skill_markdown(raw, yaml=YAML)


def test_missing_name_is_defaulted_with_a_warning() -> None:
    raw = "---\ndescription: Handle invoices.\n---\n# Invoice Handling\n..."
    assert parse_skill_markdown(raw, yaml=YAML).skill.name == "invoice-handling"
    named = parse_skill_markdown(raw, yaml=YAML, fallback_name="invoices")
    assert named.skill.name == "invoices" and "name was missing" in named.warnings[0]
    bare = parse_skill_markdown("---\ndescription: Handle invoices.\n---\nx", yaml=YAML)
    assert bare.skill.name == "handle-invoices"


def test_scalar_fields_are_coerced_with_a_warning() -> None:
    parsed = parse_skill_markdown("---\nname: 42\ndescription: true\n---\n", yaml=YAML)
    assert parsed.skill.name == "42" and parsed.skill.description == "True"
    assert len(parsed.warnings) == 2


TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\ufeff\x85"),
               max_size=40)


@settings(max_examples=150, deadline=None)
@given(name=st.from_regex(r"[a-z0-9]+(-[a-z0-9]+)*", fullmatch=True).filter(lambda s: len(s) <= 64),
       description=TEXT.filter(lambda s: s.strip() == s and s != ""),
       when=st.one_of(st.none(), TEXT), body=TEXT,
       extra=st.dictionaries(st.sampled_from(["license", "metadata", "allowed-tools"]),
                             st.one_of(TEXT, st.dictionaries(st.sampled_from(["k"]), TEXT)),
                             max_size=2))
def test_serialize_then_parse_round_trips(name: str, description: str, when: str | None,
                                          body: str, extra: dict[str, Any]) -> None:
    skill = SkillSpec(name=name, description=description, when_to_use=when, body=body)
    text = serialize_skill_markdown(skill, yaml=YAML, extra=extra)
    parsed = parse_skill_markdown(text, yaml=YAML)
    assert parsed.skill == skill
    assert parsed.extra == extra
    assert parsed.warnings == ()


def test_serialize_refuses_extra_that_overrides_owned_fields() -> None:
    with pytest.raises(UsageError):
        serialize_skill_markdown(SkillSpec(name="a", description="d", body=""), yaml=YAML,
                                 extra={"name": "b"})


def test_discovery_index_v0_2_0() -> None:
    md = "---\nname: code-review\ndescription: Review code.\n---\nBody\n"
    index = build_agent_skills_discovery_index([
        DiscoveryArtifact(name="wrangler", description="Deploy workers.", content=b"\x1f\x8b",
                          type="archive", url="/.well-known/agent-skills/wrangler.tar.gz"),
        DiscoveryArtifact(name="code-review", description="Review code.", content=md),
    ])
    assert index == {
        "$schema": AGENT_SKILLS_DISCOVERY_SCHEMA,
        "skills": [
            {"name": "code-review", "type": "skill-md", "description": "Review code.",
             "url": "/.well-known/agent-skills/code-review/SKILL.md",
             "digest": "sha256:" + hashlib.sha256(md.encode()).hexdigest()},
            {"name": "wrangler", "type": "archive", "description": "Deploy workers.",
             "url": "/.well-known/agent-skills/wrangler.tar.gz",
             "digest": "sha256:" + hashlib.sha256(b"\x1f\x8b").hexdigest()},
        ],
    }


@pytest.mark.parametrize("artifact", [
    DiscoveryArtifact(name="Bad", description="d", content=""),
    DiscoveryArtifact(name="a--b", description="d", content=""),
    DiscoveryArtifact(name="ok", description="", content=""),
    DiscoveryArtifact(name="ok", description="d", content=b"", type="archive"),
])
def test_discovery_index_refuses_invalid_entries(artifact: DiscoveryArtifact) -> None:
    with pytest.raises(UsageError):
        build_agent_skills_discovery_index([artifact])


def test_discovery_index_refuses_duplicates() -> None:
    a = DiscoveryArtifact(name="a", description="d", content="")
    with pytest.raises(UsageError, match="twice"):
        build_agent_skills_discovery_index([a, a])
