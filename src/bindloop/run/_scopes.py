"""The anyio side of deadlines and signals: the only part of run control that awaits.

The core never starts a timer. A host that wants a deadline to interrupt an awaiting call runs
:func:`watch_deadline` in its own task group (or uses :func:`call_with_deadline`, which does it), and
:func:`cancel_on_signal` turns any :class:`~bindloop.signal.AbortSignal` — a deadline's, a bridged JS
``AbortSignal``'s, a caller's — into an anyio cancel scope.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

import anyio

from .._timers import wait_woken
from ..errors import RunCancelledError
from ..signal import AbortSignal
from ._deadline import RunDeadline

__all__ = ("call_with_deadline", "cancel_on_signal", "watch_deadline")

T = TypeVar("T")


async def watch_deadline(deadline: RunDeadline) -> None:
    """Sleep (with anyio) until ``deadline`` expires by its own clock, then check it so its signal
    fires. Returns when the signal fires or the deadline is disposed. With an injected clock that does
    not advance in real time, this re-checks after each real-time sleep of the remaining budget."""
    while not deadline.disposed:
        remaining = deadline.remaining_ms()  # a check: fires the signal once expired
        if remaining <= 0.0:
            return
        wake = anyio.Event()
        remove_waker = deadline._add_waker(wake.set)
        remove_listener = deadline.signal.add_listener(lambda _reason: wake.set())
        try:
            await wait_woken(wake, remaining / 1000.0)
        finally:
            remove_waker()
            remove_listener()
        if deadline.signal.aborted:
            return


@contextmanager
def cancel_on_signal(signal: AbortSignal | None) -> Iterator[anyio.CancelScope]:
    """A cancel scope that is cancelled when ``signal`` fires (at once if it already has). The
    listener is removed on exit. Read ``scope.cancelled_caught`` afterwards, or use
    :func:`call_with_deadline` to get the typed error."""
    with anyio.CancelScope() as scope:
        if signal is None:
            yield scope
            return

        def on_abort(_reason: object) -> None:
            scope.cancel()

        remove = signal.add_listener(on_abort)
        try:
            yield scope
        finally:
            remove()


async def call_with_deadline(
    deadline: RunDeadline,
    fn: Callable[[], Awaitable[T]],
    *,
    external: AbortSignal | None = None,
) -> T:
    """Await ``fn()``, cancelling it when ``deadline`` expires or ``external`` fires.

    Raises :class:`~bindloop.errors.RunTimeoutError` on expiry and
    :class:`~bindloop.errors.RunCancelledError` when ``external`` fired; otherwise returns ``fn()``'s
    value or propagates its exception. Does not dispose ``deadline`` (its owner does).
    """
    deadline.throw_if_timed_out()
    if external is not None and external.aborted:
        raise RunCancelledError(_reason_text(external))
    result: list[T] = []
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_deadline, deadline)
            # Two scopes rather than with_external(): their listeners go away on exit, so a long run
            # making many calls does not accumulate links on the deadline.
            with cancel_on_signal(deadline.signal), cancel_on_signal(external):
                result.append(await fn())
            tg.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise
    if result:
        return result[0]
    if deadline.signal.aborted:
        deadline.throw_if_timed_out()
    raise RunCancelledError(_reason_text(external))


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


def _reason_text(signal: AbortSignal | None) -> str:
    if signal is None or signal.reason is None:
        return "run cancelled"
    return f"run cancelled: {signal.reason}"
