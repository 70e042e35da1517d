"""The skill registry: what your own source ships, hashed at registration."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..errors import UsageError
from ._model import (
    Sha256Hex,
    SkillOrigin,
    SkillSpec,
    SkillSummary,
    platform_ref,
    sha256_hex,
)

__all__ = ("OnWarn", "SkillRegistry", "create_skill_registry", "skill_name_problem")

OnWarn = Callable[[str, Mapping[str, Any]], None]

_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")  # used with fullmatch: ``$`` admits a trailing "\n"
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024


def skill_name_problem(name: str) -> str | None:
    """Why ``name`` breaks the Agent Skills naming rule (1-64 chars of ``a-z0-9`` and single inner
    hyphens), or ``None``."""
    if not 1 <= len(name) <= MAX_NAME_CHARS:
        return f"must be 1-{MAX_NAME_CHARS} characters"
    if not _NAME.fullmatch(name):
        return "must be lowercase letters, digits and single inner hyphens"
    return None


class _Entry:
    __slots__ = ("body", "summary")

    def __init__(self, summary: SkillSummary, body: str) -> None:
        self.summary = summary
        self.body = body


class SkillRegistry:
    """Skills by name, each with the sha of its body computed when it was registered. Made by
    :func:`create_skill_registry`; there is no shared default."""

    __slots__ = ("_entries", "_hash", "_on_warn")

    def __init__(self, *, on_warn: OnWarn | None, sha256: Sha256Hex) -> None:
        self._entries: dict[str, _Entry] = {}
        self._on_warn = on_warn
        self._hash = sha256

    def __repr__(self) -> str:
        return f"SkillRegistry(skills={sorted(self._entries)!r})"

    def warn(self, message: str, **fields: Any) -> None:
        """Report a lenient-path problem to ``on_warn`` (dropped when unwired)."""
        if self._on_warn is not None:
            self._on_warn(message, fields)

    def digest(self, body: str) -> str:
        """The content sha of ``body`` under this registry's hash."""
        return self._hash(body.encode("utf-8"))

    def _add(self, skill: SkillSpec, origin: SkillOrigin, plugin: str | None) -> SkillSummary:
        if not isinstance(skill, SkillSpec):
            raise UsageError(f"expected a SkillSpec, got {type(skill).__name__}")
        if skill.name in self._entries:
            raise UsageError(f"skill {skill.name!r} is already registered")
        if not skill.description.strip():
            raise UsageError(f"skill {skill.name!r} has no description")
        problem = skill_name_problem(skill.name)
        if problem is not None:
            self.warn("skill name breaks the Agent Skills naming rule", skill=skill.name,
                      problem=problem)
        if len(skill.description) > MAX_DESCRIPTION_CHARS:
            self.warn("skill description is longer than the catalog allows", skill=skill.name,
                      chars=len(skill.description), limit=MAX_DESCRIPTION_CHARS)
        if not skill.body.strip():
            self.warn("skill body is empty", skill=skill.name)
        summary = SkillSummary(
            ref=platform_ref(skill.name), name=skill.name, description=skill.description,
            when_to_use=skill.when_to_use, origin=origin, plugin=plugin,
            content_sha=self.digest(skill.body),
        )
        self._entries[skill.name] = _Entry(summary, skill.body)
        return summary

    def register_platform(self, skill: SkillSpec) -> SkillSummary:
        """Register a skill every agent is offered.

        Raises
        ------
        UsageError
            The name is taken or the description is empty.
        """
        return self._add(skill, "platform", None)

    def register_plugin(self, plugin: str, skill: SkillSpec) -> SkillSummary:
        """Register a skill offered only to agents that can load ``plugin`` (a recipe for tools an
        agent cannot call is noise).

        Raises
        ------
        UsageError
            The name is taken or the description is empty.
        """
        if not plugin:
            raise UsageError("register_plugin needs a plugin name")
        return self._add(skill, "plugin", plugin)

    def get(self, ref: str) -> SkillSummary | None:
        """The summary for a ``platform:<name>`` ref, else ``None``."""
        entry = self._lookup(ref)
        return None if entry is None else entry.summary

    def body(self, ref: str) -> str | None:
        """The registered body for a ``platform:<name>`` ref, else ``None``."""
        entry = self._lookup(ref)
        return None if entry is None else entry.body

    def _lookup(self, ref: str) -> _Entry | None:
        name = ref.removeprefix("platform:") if ref.startswith("platform:") else None
        return None if name is None else self._entries.get(name)

    def summaries(self, *, available_plugins: Iterable[str] | None = None) -> tuple[SkillSummary, ...]:
        """Platform skills plus the skills of ``available_plugins``, ordered by origin then name."""
        plugins = frozenset(available_plugins or ())
        chosen = [e.summary for e in self._entries.values()
                  if e.summary.plugin is None or e.summary.plugin in plugins]
        return tuple(sorted(chosen, key=lambda s: (s.origin, s.name)))


def create_skill_registry(*, on_warn: OnWarn | None = None,
                          sha256: Sha256Hex = sha256_hex) -> SkillRegistry:
    """A new, empty skill registry. ``on_warn(message, fields)`` hears about lenient-path problems
    (naming rule, over-long description, empty body); ``sha256`` is the content-digest port."""
    return SkillRegistry(on_warn=on_warn, sha256=sha256)
