"""Resolving active skill refs into bodies: registry first, one batched call for the rest."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from .._awaitable import isawaitable
from typing import TypeAlias

import msgspec

from ..errors import PortContractError
from ._model import (
    PLATFORM_PREFIX,
    ResolvedSkill,
    SkillInstructions,
    SkillSummary,
    UnresolvedSkill,
)
from ._registry import SkillRegistry

__all__ = ("ExternalSkill", "ExternalSkillSource", "resolve_active_skill_instructions")


class ExternalSkill(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A host-stored skill body. Leave ``content_sha`` unset to have the registry's hash computed."""

    ref: str
    name: str
    body: str
    content_sha: str | None = None


ExternalSkillSource: TypeAlias = Callable[
    [tuple[str, ...], Mapping[str, str]],
    Awaitable[Sequence[ExternalSkill]] | Sequence[ExternalSkill],
]
"""``source(refs, pinned_shas)``: every non-platform ref of one resolution, in one call. For a ref
with a pinned sha, return the body that has that sha (a replay must see what the past run saw)."""


async def resolve_active_skill_instructions(
    *,
    active_refs: Iterable[str],
    available: Iterable[SkillSummary],
    registry: SkillRegistry,
    external_source: ExternalSkillSource | None = None,
    pinned_shas: Mapping[str, str] | None = None,
) -> SkillInstructions:
    """Render the active skills, in total order (origin, then name, then ref).

    A ref must be in ``available`` (else ``not_available``). ``platform:<name>`` refs come from the
    registry; every other ref goes to ``external_source`` in a single batched call (none made when
    there are no such refs). Each rendered skill records the sha of the body it rendered; with
    ``pinned_shas`` a ref resolves only to the body with that sha (``pinned_content_unavailable``
    otherwise), so an eval replays against the instructions the original run saw.

    Raises
    ------
    PortContractError
        ``external_source`` returned something other than a sequence of :class:`ExternalSkill`.
    """
    pins = dict(pinned_shas or {})
    offered = {s.ref: s for s in available}
    resolved: list[ResolvedSkill] = []
    unresolved: list[UnresolvedSkill] = []
    external: list[str] = []
    for ref in dict.fromkeys(active_refs):
        summary = offered.get(ref)
        if summary is None:
            unresolved.append(UnresolvedSkill(ref=ref, reason="not_available"))
        elif ref.startswith(PLATFORM_PREFIX):
            body = registry.body(ref)
            if body is None:
                unresolved.append(UnresolvedSkill(ref=ref, reason="not_found"))
                continue
            sha = registry.digest(body)
            if ref in pins and pins[ref] != sha:
                unresolved.append(UnresolvedSkill(ref=ref, reason="pinned_content_unavailable"))
                continue
            resolved.append(ResolvedSkill(ref=ref, name=summary.name, origin=summary.origin,
                                          body=body, content_sha=sha))
        else:
            external.append(ref)
    if external and external_source is None:
        unresolved.extend(UnresolvedSkill(ref=r, reason="no_external_source") for r in external)
    elif external and external_source is not None:
        refs = tuple(sorted(external))
        value = external_source(refs, {r: pins[r] for r in refs if r in pins})
        got = await value if isawaitable(value) else value
        if isinstance(got, (str, bytes)) or not isinstance(got, Sequence) or not all(
            isinstance(s, ExternalSkill) for s in got
        ):
            raise PortContractError("external_source must return a sequence of ExternalSkill")
        by_ref = {s.ref: s for s in got}
        for ref in refs:
            item = by_ref.get(ref)
            if item is None:
                unresolved.append(UnresolvedSkill(ref=ref, reason="not_found"))
                continue
            sha = item.content_sha or registry.digest(item.body)
            if ref in pins and pins[ref] != sha:
                unresolved.append(UnresolvedSkill(ref=ref, reason="pinned_content_unavailable"))
                continue
            resolved.append(ResolvedSkill(ref=ref, name=item.name, origin="external",
                                          body=item.body, content_sha=sha))
    resolved.sort(key=lambda s: (s.origin, s.name, s.ref))
    unresolved.sort(key=lambda u: u.ref)
    return SkillInstructions(skills=tuple(resolved), unresolved=tuple(unresolved))
