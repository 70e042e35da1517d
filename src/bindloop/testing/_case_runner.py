"""Running the store kit's cases without pytest: the handles a case opens, its skip signal, a
``pytest.raises`` stand-in, and :func:`run_store_cases`, which reports each case's outcome."""

from __future__ import annotations

import re
import traceback
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Generic, Literal, TypeVar

import msgspec

from .._awaitable import resolve

__all__ = ("Case", "CaseResult", "CaseSkipped", "ManualClock", "Raised", "StoreHandles", "raises",
           "run_case", "run_store_cases")

E = TypeVar("E", bound=BaseException)


class CaseSkipped(Exception):  # noqa: N818 - a signal, not an error (not in bindloop's tree)
    """The case cannot apply to this store (the message says why). Raised by a case, reported
    by :func:`run_store_cases` as ``skipped`` and by the pytest suites as a skip; not public."""


class Raised(Generic[E]):
    """What :func:`raises` caught (``value``), once the block has run."""

    value: E


@contextmanager
def raises(kind: type[E], match: str | None = None) -> Iterator[Raised[E]]:
    """The block must raise ``kind`` (whose message ``re.search``-es ``match``), else
    ``AssertionError``: ``pytest.raises`` for code that runs without pytest."""
    caught: Raised[E] = Raised()
    try:
        yield caught
    except kind as exc:
        if match is not None and not re.search(match, str(exc)):
            raise AssertionError(f"{type(exc).__name__} raised, but {str(exc)!r} does not "
                                 f"match {match!r}") from exc
        caught.value = exc
        return
    raise AssertionError(f"did not raise {kind.__name__}")


class ManualClock:
    """A clock (ms) that moves only when told: leases expire exactly when the test says."""

    def __init__(self, value: float = 1_000_000.0) -> None:
        self.value = value

    def __call__(self) -> float:
        return self.value


class StoreHandles:
    """Opens handles through the author's factory and closes every one of them afterwards.
    ``process_runner`` is the author's runner for the several-process races (``None``: those
    cases are skipped)."""

    def __init__(self, factory: Callable[..., Any],
                 process_runner: Callable[..., Any] | None = None) -> None:
        self.factory = factory
        self.process_runner = process_runner
        self.opened: list[Any] = []

    async def open(self, **options: Any) -> Any:
        store = await resolve(self.factory(**options))
        self.opened.append(store)
        return store

    async def close(self) -> None:
        for store in reversed(self.opened):
            closer = getattr(store, "aclose", None) or getattr(store, "close", None)
            if closer is not None:
                await resolve(closer())
        self.opened.clear()

    async def race(self, job: Callable[[Any, int], Awaitable[Any]], count: int = 3) -> list[Any]:
        """``job(store, index)`` in ``count`` processes (or isolates) at once, through the
        runner; the results in index order."""
        if self.process_runner is None:
            raise CaseSkipped("no process_runner fixture: the multi-process race needs one")
        return list(await resolve(self.process_runner(self.factory, job, count)))


Case = Callable[[StoreHandles], Awaitable[None]]


# ---- running cases without pytest ---------------------------------------------------------------

class CaseResult(msgspec.Struct, frozen=True, kw_only=True):
    """One case's outcome: ``detail`` is the failure (its type, message and innermost frames)
    or why it was skipped."""

    name: str
    outcome: Literal["passed", "failed", "skipped"]
    detail: str = ""


async def run_case(name: str, case: Case, handles: StoreHandles) -> CaseResult:
    """Run one case on ``handles`` and close them; never raises for the store's failures."""
    try:
        try:
            await case(handles)
        finally:
            await handles.close()
    except CaseSkipped as exc:
        return CaseResult(name=name, outcome="skipped", detail=str(exc))
    except Exception as exc:  # the report carries every failure; the runner goes on
        frames = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-4:])
        return CaseResult(name=name, outcome="failed", detail=frames[-2000:])
    return CaseResult(name=name, outcome="passed")


async def run_store_cases(cases: Mapping[str, Case],
                          factory_for: Callable[[str], Callable[..., Any]], *,
                          process_runner: Callable[..., Any] | None = None) -> list[CaseResult]:
    """Run ``cases`` one after another, each on fresh handles from ``factory_for(name)`` (give
    every case its own namespace), and report each one's outcome."""
    results = []
    for name, case in cases.items():
        handles = StoreHandles(factory_for(name), process_runner)
        results.append(await run_case(name, case, handles))
    return results
