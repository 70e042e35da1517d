"""One rule for the catalogs of progressive disclosure (plugins and skills): summaries indexed by
their key, where an exact repeat folds into one and two different summaries under one key are
refused — keeping either would make the output depend on the input's order."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

from .errors import UsageError

__all__ = ("index_unique",)

T = TypeVar("T")


def index_unique(items: Iterable[T], key: Callable[[T], str],
                 conflict: Callable[[str], str]) -> dict[str, T]:
    """``items`` by ``key(item)``; :class:`~bindloop.errors.UsageError` with ``conflict(key)`` as
    its message when two unequal items share a key."""
    out: dict[str, T] = {}
    for item in items:
        k = key(item)
        if out.setdefault(k, item) != item:
            raise UsageError(conflict(k))
    return out
