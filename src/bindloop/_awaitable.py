"""``isawaitable`` without importing :mod:`inspect` (about 9 ms of import time on CPython, more in
Pyodide): ports may return a value or an awaitable, and this is how the core tells them apart."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeGuard

__all__ = ("isawaitable", "resolve")


def isawaitable(value: Any) -> TypeGuard[Awaitable[Any]]:
    """True for coroutines, futures, tasks and anything else implementing ``__await__``.

    The same test ``collections.abc.Awaitable`` applies (``__await__`` on the type), without the
    ABC machinery: this runs several times per loop turn."""
    return hasattr(type(value), "__await__")


async def resolve(value: Any) -> Any:
    """``value`` itself, or what it awaits to: how the core calls a port that may be either."""
    return await value if isawaitable(value) else value
