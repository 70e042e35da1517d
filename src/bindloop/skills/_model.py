"""Skill data: what a source ships, what the catalog shows, what resolution renders."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Literal, TypeAlias

import msgspec

__all__ = (
    "PLATFORM_PREFIX",
    "ResolvedSkill",
    "Sha256Hex",
    "SkillInstructions",
    "SkillOrigin",
    "SkillSpec",
    "SkillSummary",
    "UnresolvedReason",
    "UnresolvedSkill",
    "platform_ref",
    "sha256_hex",
)

SkillOrigin: TypeAlias = Literal["platform", "plugin", "external"]
UnresolvedReason: TypeAlias = Literal[
    "not_available", "not_found", "no_external_source", "pinned_content_unavailable"
]
Sha256Hex: TypeAlias = Callable[[bytes], str]
"""A SHA-256 port: bytes in, lowercase hex digest out. Inject a native one if you prefer."""

PLATFORM_PREFIX = "platform:"


def sha256_hex(data: bytes) -> str:
    """The default :data:`Sha256Hex` (``hashlib``: pure, available on every runtime we target)."""
    return hashlib.sha256(data).hexdigest()


def platform_ref(name: str) -> str:
    """The ref of a skill the registry holds (platform- or plugin-contributed)."""
    return PLATFORM_PREFIX + name


class SkillSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A skill as its source ships it: a catalog line (``name``, ``description``, ``when_to_use``)
    and the ``body`` injected into the instructions once it is loaded."""

    name: str
    description: str
    body: str
    when_to_use: str | None = None


class SkillSummary(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A catalog entry. ``ref`` is what the model loads and what activation state persists
    (``platform:<name>`` for the registry's skills; any other string routes to the host's external
    source). ``content_sha`` identifies the body the registry holds (absent for external skills
    until resolved)."""

    ref: str
    name: str
    description: str
    origin: SkillOrigin
    when_to_use: str | None = None
    plugin: str | None = None
    content_sha: str | None = None


class ResolvedSkill(msgspec.Struct, frozen=True, kw_only=True):
    """A body ready to render, and the sha of exactly that body."""

    ref: str
    name: str
    origin: SkillOrigin
    body: str
    content_sha: str


class UnresolvedSkill(msgspec.Struct, frozen=True, kw_only=True):
    """An active ref that could not be rendered, and why."""

    ref: str
    reason: UnresolvedReason


class SkillInstructions(msgspec.Struct, frozen=True, kw_only=True):
    """The active skills' bodies in total order (origin, then name, then ref) — never load order, so
    a resumed session renders the same cacheable prefix — plus what did not resolve."""

    skills: tuple[ResolvedSkill, ...] = ()
    unresolved: tuple[UnresolvedSkill, ...] = ()

    @property
    def shas(self) -> Mapping[str, str]:
        """``ref -> content_sha`` for every rendered skill: persist it to pin a replay."""
        return {s.ref: s.content_sha for s in self.skills}
