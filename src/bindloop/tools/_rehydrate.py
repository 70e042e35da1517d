"""Restoring a persisted activation set: a hint re-validated against what resolves now."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from .._awaitable import isawaitable
from typing import Literal, TypeAlias, cast

import msgspec

from ..errors import RunCancelledError

__all__ = (
    "DropReason",
    "DroppedActivation",
    "RehydratedActivation",
    "ResolveOutcome",
    "rehydrate_activation",
)

DropReason: TypeAlias = Literal["unknown", "unavailable", "unreachable"]
ResolveOutcome: TypeAlias = Literal[True, "unknown", "unavailable", "unreachable"]
_REASONS: frozenset[str] = frozenset({"unknown", "unavailable", "unreachable"})


class DroppedActivation(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A persisted entry that no longer resolves. ``names`` are the persisted spellings that
    canonicalized to ``name``; ``detail`` carries the message when ``resolve`` raised, or what it
    returned when that was neither ``True`` nor a reason."""

    name: str
    reason: DropReason
    names: tuple[str, ...] = ()
    detail: str | None = None


class RehydratedActivation(msgspec.Struct, frozen=True, kw_only=True):
    """``active``: canonical names that resolved, in first-persisted order. ``dropped``: the rest."""

    active: tuple[str, ...]
    dropped: tuple[DroppedActivation, ...] = ()


async def rehydrate_activation(
    names: Iterable[str],
    *,
    canonicalize_name: Callable[[str], str],
    resolve: Callable[[str], Awaitable[ResolveOutcome] | ResolveOutcome],
) -> RehydratedActivation:
    """Re-validate persisted plugin names against current reality.

    Each name is canonicalized (so a renamed plugin survives through its alias) and de-duplicated
    before ``resolve`` sees it, so two legacy names for one plugin cost one reconnect. ``resolve``
    returns ``True`` or a drop reason and may be async (a reconnect can happen inside it); it is
    called one name at a time, in first-persisted order. A ``resolve`` that raises drops that name as
    ``unreachable`` with the message in ``detail`` — the walk never fails the run — except for
    :class:`~bindloop.errors.RunCancelledError` and non-``Exception`` cancellations, which propagate.

    Any other answer from ``resolve`` (``False``, ``None``, an unknown reason string) drops the name
    as ``unknown`` with ``detail`` naming what was returned: like an exception, it never fails the
    walk.
    """
    spellings: dict[str, list[str]] = {}
    for name in names:
        spellings.setdefault(canonicalize_name(name), []).append(name)
    active: list[str] = []
    dropped: list[DroppedActivation] = []
    for canonical, persisted in spellings.items():
        originals = tuple(n for n in persisted if n != canonical)
        try:
            value = resolve(canonical)
            outcome = await value if isawaitable(value) else value
        except RunCancelledError:
            raise
        except Exception as exc:
            dropped.append(DroppedActivation(name=canonical, reason="unreachable", names=originals,
                                             detail=f"{type(exc).__name__}: {exc}"))
            continue
        if outcome is True:
            active.append(canonical)
        elif isinstance(outcome, str) and outcome in _REASONS:
            dropped.append(DroppedActivation(name=canonical, reason=cast(DropReason, outcome),
                                             names=originals))
        else:
            # Anything else (``False``, ``None``, a typo'd reason) says "not resolvable" without
            # saying why: drop it as unknown, naming the answer, rather than fail the run.
            dropped.append(DroppedActivation(name=canonical, reason="unknown", names=originals,
                                             detail=f"resolve returned {_bounded_repr(outcome)}"))
    return RehydratedActivation(active=tuple(active), dropped=tuple(dropped))


def _bounded_repr(value: object, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."
