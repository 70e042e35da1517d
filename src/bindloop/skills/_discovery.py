"""The Agent Skills Discovery index (``/.well-known/agent-skills/index.json``), RFC v0.2.0."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, TypeAlias

import msgspec

from ..errors import UsageError
from ._model import Sha256Hex, sha256_hex
from ._registry import MAX_DESCRIPTION_CHARS, skill_name_problem

__all__ = (
    "AGENT_SKILLS_DISCOVERY_SCHEMA",
    "ArtifactType",
    "DiscoveryArtifact",
    "build_agent_skills_discovery_index",
)

AGENT_SKILLS_DISCOVERY_SCHEMA = "https://schemas.agentskills.io/discovery/0.2.0/schema.json"
ArtifactType: TypeAlias = Literal["skill-md", "archive"]


class DiscoveryArtifact(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One published skill: its single artifact's exact bytes (a SKILL.md, or an archive) and where
    it is served. ``url`` defaults to ``/.well-known/agent-skills/<name>/SKILL.md`` for a SKILL.md;
    an archive must name its own."""

    name: str
    description: str
    content: bytes | str
    type: ArtifactType = "skill-md"
    url: str | None = None


def build_agent_skills_discovery_index(
    artifacts: Iterable[DiscoveryArtifact], *, sha256: Sha256Hex = sha256_hex
) -> dict[str, Any]:
    """The discovery document: ``$schema`` plus one entry per skill (``name``, ``type``,
    ``description``, ``url``, ``digest`` = ``sha256:`` + the hex SHA-256 of the artifact bytes as
    served; text is encoded UTF-8), ordered by name. Serve the returned dict as JSON.

    Raises
    ------
    UsageError
        A name breaks the Agent Skills naming rule or repeats, a description is empty or over 1024
        characters, or an archive has no ``url``.
    """
    entries: dict[str, dict[str, str]] = {}
    for artifact in artifacts:
        problem = skill_name_problem(artifact.name)
        if problem is not None:
            raise UsageError(f"skill name {artifact.name!r} {problem}")
        if artifact.name in entries:
            raise UsageError(f"skill {artifact.name!r} is listed twice")
        if not artifact.description.strip() or len(artifact.description) > MAX_DESCRIPTION_CHARS:
            raise UsageError(f"skill {artifact.name!r}: description must be 1-"
                             f"{MAX_DESCRIPTION_CHARS} characters")
        url = artifact.url
        if url is None:
            if artifact.type == "archive":
                raise UsageError(f"archive skill {artifact.name!r} needs a url")
            url = f"/.well-known/agent-skills/{artifact.name}/SKILL.md"
        data = artifact.content.encode("utf-8") if isinstance(artifact.content, str) \
            else artifact.content
        entries[artifact.name] = {
            "name": artifact.name,
            "type": artifact.type,
            "description": artifact.description,
            "url": url,
            "digest": f"sha256:{sha256(data)}",
        }
    return {"$schema": AGENT_SKILLS_DISCOVERY_SCHEMA,
            "skills": [entries[name] for name in sorted(entries)]}
