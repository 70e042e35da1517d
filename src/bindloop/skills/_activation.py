"""Skill activation from the loop's ``activate(kind, names)`` port, and bounding how much can be
loaded."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Iterable, MutableMapping, MutableSet
from .._awaitable import isawaitable
from typing import TypeAlias

import msgspec

from ..errors import PortContractError
from ._catalog import estimate_tokens
from ._model import ResolvedSkill, SkillInstructions, SkillSummary

__all__ = (
    "DEFAULT_MAX_ACTIVE_SKILLS",
    "DEFAULT_MAX_SKILL_BODY_TOKENS",
    "ApplyInstructions",
    "ResolveActiveInstructions",
    "SkillActivation",
    "SkillActivationReport",
    "SkillLoadAdmission",
    "admit_skill_load",
    "create_skill_activation",
    "estimate_skill_body_tokens",
)

DEFAULT_MAX_ACTIVE_SKILLS = 8
DEFAULT_MAX_SKILL_BODY_TOKENS = 24_000

ResolveActiveInstructions: TypeAlias = Callable[
    [tuple[str, ...]], Awaitable[SkillInstructions] | SkillInstructions
]
ApplyInstructions: TypeAlias = Callable[[SkillInstructions], Awaitable[None] | None]


class SkillActivationReport(msgspec.Struct, frozen=True, kw_only=True):
    """What one activation did: refs ``added`` to the active set, refs ``already_active``, refs
    ``unavailable`` to this agent (ignored), and refs removed again because they did not resolve."""

    added: tuple[str, ...] = ()
    already_active: tuple[str, ...] = ()
    unavailable: tuple[str, ...] = ()
    unresolved: tuple[str, ...] = ()
    instructions: SkillInstructions = SkillInstructions()


class SkillActivation:
    """Made by :func:`create_skill_activation`. Mutates the host's ``active_skills`` set and
    ``loaded_skill_shas`` mapping in place, so a run that fails half-way still leaves a record of
    what it read."""

    __slots__ = ("_active", "_apply", "_available", "_shas", "_store")

    def __init__(self, *, available_skills: Iterable[SkillSummary], active_skills: MutableSet[str],
                 loaded_skill_shas: MutableMapping[str, str], store: ResolveActiveInstructions,
                 apply_instructions: ApplyInstructions) -> None:
        self._available = frozenset(s.ref for s in available_skills)
        self._active = active_skills
        self._shas = loaded_skill_shas
        self._store = store
        self._apply = apply_instructions

    async def activate(self, refs: Iterable[str]) -> SkillActivationReport:
        """Add ``refs`` to the active set, re-resolve the whole set, record each rendered sha and
        hand the instructions to ``apply_instructions``. A ref this agent is not offered is ignored;
        one that does not resolve is taken out of the active set again (reporting a skill as loaded
        when its body is missing is worse than losing it)."""
        wanted = tuple(dict.fromkeys(refs))
        unavailable = tuple(r for r in wanted if r not in self._available)
        already = tuple(r for r in wanted if r in self._available and r in self._active)
        added = tuple(r for r in wanted if r in self._available and r not in self._active)
        for ref in added:
            self._active.add(ref)
        value = self._store(tuple(sorted(self._active)))
        instructions = await value if isawaitable(value) else value
        if not isinstance(instructions, SkillInstructions):
            raise PortContractError("store.resolve_active_instructions must return SkillInstructions")
        for skill in instructions.skills:
            self._shas[skill.ref] = skill.content_sha
        dropped = tuple(u.ref for u in instructions.unresolved if u.ref in self._active)
        for ref in dropped:
            self._active.discard(ref)
        applied = self._apply(instructions)
        if isawaitable(applied):
            await applied
        return SkillActivationReport(added=tuple(r for r in added if r not in dropped),
                                     already_active=already, unavailable=unavailable,
                                     unresolved=dropped, instructions=instructions)


def create_skill_activation(
    *,
    available_skills: Iterable[SkillSummary],
    active_skills: MutableSet[str],
    loaded_skill_shas: MutableMapping[str, str],
    store: ResolveActiveInstructions,
    apply_instructions: ApplyInstructions,
) -> SkillActivation:
    """Wire skill loading into the loop: from the ``LoopHooks.activate(kind, names)`` hook, await
    ``activation.activate(names)`` for ``kind == "skills"`` (``LoopHooks(activate=lambda kind,
    names: activation.activate(names))`` when skills are all a tool activates). ``store`` resolves a tuple of active refs (typically a closure over
    :func:`resolve_active_skill_instructions`); ``apply_instructions`` re-renders your system prompt.
    ``active_skills`` and ``loaded_skill_shas`` are yours: set them before the first turn and
    persist them after the last."""
    return SkillActivation(available_skills=available_skills, active_skills=active_skills,
                           loaded_skill_shas=loaded_skill_shas, store=store,
                           apply_instructions=apply_instructions)


class SkillLoadAdmission(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """``admitted``, or a ``reason`` the model can read (hand it back as a validation error)."""

    admitted: bool
    reason: str | None = None


def _broken(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return True
    return not math.isfinite(value) or value < 0


def admit_skill_load(
    *,
    active_count: float | None = None,
    projected_body_tokens: float | None = None,
    max_active: int = DEFAULT_MAX_ACTIVE_SKILLS,
    max_body_tokens: int = DEFAULT_MAX_SKILL_BODY_TOKENS,
) -> SkillLoadAdmission:
    """Judge one more skill load. You measure, this judges.

    ``active_count`` is the number already active (admitted while below ``max_active``);
    ``projected_body_tokens`` is the size of every active body *including* the new one (admitted up
    to ``max_body_tokens``). An omitted measurement omits its bound — check the cheap count first,
    resolve bodies only if it passes. A broken measurement (NaN, infinite, negative, not a number)
    refuses: nonsense is not evidence of room.
    """
    if active_count is not None:
        if _broken(active_count):
            return SkillLoadAdmission(admitted=False,
                                      reason=f"cannot load: active skill count {active_count!r} "
                                             "is not a valid measurement")
        if active_count >= max_active:
            return SkillLoadAdmission(admitted=False,
                                      reason=f"cannot load: {int(active_count)} skills are active "
                                             f"and the limit is {max_active}; unload one first")
    if projected_body_tokens is not None:
        if _broken(projected_body_tokens):
            return SkillLoadAdmission(admitted=False,
                                      reason=f"cannot load: projected size {projected_body_tokens!r} "
                                             "is not a valid measurement")
        if projected_body_tokens > max_body_tokens:
            return SkillLoadAdmission(
                admitted=False,
                reason=f"cannot load: active skills would take about {int(projected_body_tokens)} "
                       f"tokens and the limit is {max_body_tokens}; unload one first")
    return SkillLoadAdmission(admitted=True)


def estimate_skill_body_tokens(
    instructions: SkillInstructions | str | Iterable[ResolvedSkill],
) -> int:
    """Estimated tokens of the rendered bodies (one per four characters, rounded up per body)."""
    if isinstance(instructions, str):
        return estimate_tokens(instructions)
    skills = instructions.skills if isinstance(instructions, SkillInstructions) else instructions
    return sum(estimate_tokens(s.body) for s in skills)
