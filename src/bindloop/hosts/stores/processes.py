"""The process runner of the store conformance kit (``bindloop.testing.store_kit``).

:func:`run_in_processes` starts ``count`` fresh processes (forked from a clean forkserver, or
spawned: nothing of the caller is inherited but the arguments), each opens its own store handle with ``factory()``, waits at a barrier until all
are ready — so the writes really race — runs ``job(store, index)`` and reports the result. Outside
the fences: it starts processes.
"""

from __future__ import annotations

import multiprocessing
import queue
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ("run_in_processes",)


async def _child_main(factory: Callable[..., Any], job: Callable[[Any, int], Awaitable[Any]],
                      index: int, barrier: Any) -> Any:
    from bindloop._awaitable import resolve

    store = await resolve(factory())
    try:
        barrier.wait()
        return await job(store, index)
    finally:
        closer = getattr(store, "aclose", None) or getattr(store, "close", None)
        if closer is not None:
            await resolve(closer())


def _child(factory: Callable[..., Any], job: Callable[[Any, int], Awaitable[Any]], index: int,
           barrier: Any, out: Any) -> None:
    import anyio

    try:
        out.put((index, True, anyio.run(_child_main, factory, job, index, barrier)))
    except BaseException as exc:  # reported to the parent, which raises it
        out.put((index, False, f"{type(exc).__name__}: {exc}"))


def _context() -> Any:
    # Children fork from a forkserver that imported the store drivers once (a clean process,
    # not this one: no threads or event loops are inherited), so a race starts in milliseconds
    # instead of an interpreter start-up per child. Where there is no fork, spawn.
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    # Missing optional drivers are skipped by the preload (it ignores ImportError).
    ctx.set_forkserver_preload(["bindloop.hosts.stores.processes", "bindloop.testing.store_kit",
                                "bindloop.hosts.stores.sqlite", "bindloop.hosts.stores.postgres",
                                "bindloop.hosts.stores.redis", "anyio._backends._asyncio"])
    return ctx


def run_in_processes(factory: Callable[..., Any], job: Callable[[Any, int], Awaitable[Any]],
                     count: int, *, timeout_s: float = 120.0) -> list[Any]:
    """``job(store, i)`` in ``count`` processes at once; the results in index order. ``factory``
    and ``job`` must be picklable (module-level functions, ``functools.partial`` of them). A job
    that raises makes this raise ``RuntimeError`` with its message."""
    ctx = _context()
    barrier = ctx.Barrier(count, timeout=timeout_s)
    out = ctx.Queue()
    procs = [ctx.Process(target=_child, args=(factory, job, i, barrier, out), daemon=True)
             for i in range(count)]
    for p in procs:
        p.start()
    results: dict[int, Any] = {}
    errors: list[str] = []
    try:
        for _ in procs:
            index, ok, value = out.get(timeout=timeout_s)
            if ok:
                results[index] = value
            else:
                errors.append(f"process {index}: {value}")
    except queue.Empty:
        errors.append(f"only {len(results)} of {count} processes answered in {timeout_s} s")
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
    if errors:
        raise RuntimeError("; ".join(errors))
    return [results[i] for i in range(count)]
