"""The running asyncio event loop, when there is one: :func:`running_asyncio_loop`.

On asyncio (CPython, Pyodide's ``WebLoop``, workerd) the core takes a few jobs to the loop itself
where anyio would cost a task group per use: the run root's stream consumers become plain tasks
(``bindloop.agent``), a streamed call's stall watchdog becomes a timer callback
(``bindloop.wire``). On any other backend (trio) they run in anyio task groups.
"""

from __future__ import annotations

import sys
from contextvars import Context, copy_context
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop

__all__ = ("asyncio_callback_context", "running_asyncio_loop")


def running_asyncio_loop() -> AbstractEventLoop | None:
    """The asyncio loop running this code, or ``None`` (no loop runs in this thread, or the backend
    is another one). Never imports asyncio: a trio run never loads it, and a running asyncio loop
    means the module is loaded already."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return None
    try:
        return asyncio.get_running_loop()  # type: ignore[no-any-return]
    except RuntimeError:
        return None


def asyncio_callback_context() -> Context:
    """A copy of the current context for plain callbacks of the running asyncio loop, in which
    anyio sees asyncio running as it does in a task: a callback runs outside every task, where
    sniffio (what anyio asks, when installed) would find no async library, so an injected clock
    reading ``anyio.current_time()`` would fail there. Call it from a task of the loop."""
    context = copy_context()
    sniffio = sys.modules.get("sniffio")
    if sniffio is not None:
        context.run(sniffio.current_async_library_cvar.set, "asyncio")
    return context
