"""The Tier-1 skill catalog: data in a stable order, within a token budget."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal, TypeAlias

import msgspec

from .._keyed import index_unique
from ..errors import PortContractError, UsageError
from ._model import SkillSummary

__all__ = (
    "DEFAULT_SKILL_CATALOG_BUDGET",
    "CatalogDetail",
    "CatalogEntry",
    "SkillCatalog",
    "SkillCost",
    "default_skill_line_cost",
    "estimate_tokens",
    "partition_skill_catalog",
)

CatalogDetail: TypeAlias = Literal["full", "name_only"]
SkillCost: TypeAlias = Callable[[SkillSummary, CatalogDetail], int]
DEFAULT_SKILL_CATALOG_BUDGET = 4_000
"""Tokens for the loadable part of the catalog: about eighty full lines at ~50 tokens each."""


def estimate_tokens(text: str) -> int:
    """A provider-neutral token estimate: one token per four characters, rounded up."""
    return -(-len(text) // 4)


def default_skill_line_cost(summary: SkillSummary, detail: CatalogDetail) -> int:
    """The cost of ``- name: description — when_to_use`` (or ``- name`` alone for name-only)."""
    if detail == "name_only":
        return estimate_tokens(f"- {summary.name}")
    line = f"- {summary.name}: {summary.description}"
    if summary.when_to_use:
        line += f" — {summary.when_to_use}"
    return estimate_tokens(line)


class CatalogEntry(msgspec.Struct, frozen=True, kw_only=True):
    """A loadable skill and how much of it to show."""

    summary: SkillSummary
    detail: CatalogDetail


class SkillCatalog(msgspec.Struct, frozen=True, kw_only=True):
    """``active``: loaded skills. ``loadable``: the rest, each ``full`` or ``name_only``.
    ``truncated``: some entry is name-only. ``tokens``: the loadable part's cost as measured."""

    active: tuple[SkillSummary, ...]
    loadable: tuple[CatalogEntry, ...]
    truncated: bool
    tokens: int


def _cost(cost: SkillCost, summary: SkillSummary, detail: CatalogDetail) -> int:
    value = cost(summary, detail)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise PortContractError(f"cost({summary.name!r}, {detail!r}) returned {value!r}; "
                                "expected a non-negative int")
    return value


def partition_skill_catalog(
    active: Iterable[str],
    available: Iterable[SkillSummary],
    *,
    budget: int | None = DEFAULT_SKILL_CATALOG_BUDGET,
    cost: SkillCost = default_skill_line_cost,
) -> SkillCatalog:
    """Split ``available`` into loaded and loadable, ordered by origin then name, and fit the
    loadable part into ``budget`` tokens.

    Overflow is marked ``name_only``, never dropped: a name is enough for the model to ask for the
    skill, a skill it cannot see is one it can never ask for. The longest prefix of full lines is
    kept such that it plus the name-only rest fits; if even every line name-only overflows, every
    line is name-only. ``budget=None`` means no bound. Returns data, not prose.

    Raises
    ------
    UsageError
        ``budget`` is negative or not an int, or two different summaries share a ``ref`` (an exact
        repeat is folded into one).
    PortContractError
        ``cost`` returned something other than a non-negative int.
    """
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)
                               or budget < 0):
        raise UsageError(f"budget must be a non-negative int or None, got {budget!r}")
    by_ref = index_unique(available, lambda s: s.ref,
                          lambda ref: f"two different skill summaries have the ref {ref!r}")
    wanted = set(active)
    ordered = sorted(by_ref.values(), key=lambda s: (s.origin, s.name, s.ref))
    loaded = tuple(s for s in ordered if s.ref in wanted)
    rest = [s for s in ordered if s.ref not in wanted]
    full = [_cost(cost, s, "full") for s in rest]
    short = [_cost(cost, s, "name_only") for s in rest]
    keep = len(rest)
    if budget is not None:
        total = sum(full)
        # Walk the split point down until full[:keep] + short[keep:] fits.
        while keep > 0 and total > budget:
            keep -= 1
            total += short[keep] - full[keep]
        if keep == 0:
            total = sum(short)
    else:
        total = sum(full)
    entries = tuple(CatalogEntry(summary=s, detail="full" if i < keep else "name_only")
                    for i, s in enumerate(rest))
    return SkillCatalog(active=loaded, loadable=entries, truncated=keep < len(rest),
                        tokens=total)


