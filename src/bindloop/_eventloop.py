"""The running asyncio event loop, when there is one: :func:`running_asyncio_loop`.

On asyncio (CPython, Pyodide's ``WebLoop``, workerd) the core takes a few jobs to the loop itself
where anyio would cost a task group per use: the run root's stream consumers become plain tasks
(``bindloop.agent``), a streamed call's stall watchdog becomes a timer callback
(``bindloop.wire``). On any other backend (trio) they run in anyio task groups.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop

__all__ = ("running_asyncio_loop",)


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
