"""Wall-clock budgets for a run, checked against an injected clock.

A :class:`RunDeadline` owns no timer and no thread. It is *checked*: :meth:`~RunDeadline.throw_if_timed_out`,
:attr:`~RunDeadline.timed_out` and :meth:`~RunDeadline.remaining_ms` read the clock, and the first check
at or past expiry fires :attr:`~RunDeadline.signal` (its reason is the :class:`~bindloop.errors.RunTimeoutError`),
and so does polling that signal (:meth:`~bindloop.signal.AbortSignal.poll`): hand the signal to the
tool loop (``ToolLoopPorts.signal``), which polls it between iterations and raises the error.
That keeps the core identical on CPython, Pyodide and Workers and testable with a stepping clock.

When something must be interrupted *between* checks — a model call that streams for minutes — run
:func:`~bindloop.run.watch_deadline` in the host's task group: it sleeps with anyio until expiry and
performs the check that fires the signal (see ``_scopes.py``).

Ownership: whoever reads :attr:`~RunDeadline.timed_out` creates the deadline and disposes it in a
``finally``. A loop handed a deadline must not dispose it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

from ..clock import Clock, monotonic_ms
from ..errors import RunTimeoutError, UsageError
from ..signal import AbortController, AbortSignal, linked_signal

__all__ = ("RunDeadline", "RunFailureStatus", "classify_run_failure", "create_run_deadline")

RunFailureStatus = Literal["timed_out", "failed"]


class RunDeadline:
    """A budget of ``timeout_ms`` starting at creation. See the module docstring."""

    __slots__ = ("_controller", "_disposed", "_now", "_removers", "_wakers", "expires_at_ms",
                 "label", "started_at_ms", "timeout_ms")

    def __init__(self, *, timeout_ms: float, label: str | None, now: Clock) -> None:
        self._now = now
        self.label = label
        self.timeout_ms = float(timeout_ms)
        self.started_at_ms = float(now())
        self.expires_at_ms = self.started_at_ms + self.timeout_ms
        self._controller = AbortController()
        self._disposed = False
        self._removers: list[Callable[[], None]] = []
        self._wakers: list[Callable[[], None]] = []
        self._controller.signal.add_check(self._expired)

    def _expired(self) -> RunTimeoutError | None:
        return self._error() if self._now() >= self.expires_at_ms else None

    @property
    def signal(self) -> AbortSignal:
        """Fires (reason: the :class:`~bindloop.errors.RunTimeoutError`) on the first check at or
        past expiry, polling it included. Only this deadline fires it: an external signal never
        does."""
        return self._controller.signal

    @property
    def disposed(self) -> bool:
        return self._disposed

    def _check(self) -> bool:
        if self._controller.signal.aborted:
            return True
        if self._now() >= self.expires_at_ms:
            self._controller.abort(self._error())
            return True
        return False

    def _error(self) -> RunTimeoutError:
        what = f"{self.label!r} " if self.label else ""
        return RunTimeoutError(f"run {what}timed out after {self.timeout_ms:g} ms", label=self.label)

    @property
    def timed_out(self) -> bool:
        """True once the budget is spent (a check; fires the signal the first time it is true).
        Stays false when only an external signal combined through :meth:`with_external` fired."""
        return self._check()

    def remaining_ms(self) -> float:
        """Milliseconds left, ``0.0`` once expired (a check, like :attr:`timed_out`)."""
        if self._check():
            return 0.0
        return max(0.0, self.expires_at_ms - self._now())

    def throw_if_timed_out(self) -> None:
        """Raise :class:`~bindloop.errors.RunTimeoutError` (carrying ``label``) if expired."""
        if self._check():
            reason = self._controller.signal.reason
            raise reason if isinstance(reason, RunTimeoutError) else self._error()

    def with_external(self, external: AbortSignal | None) -> AbortSignal:
        """A signal that fires when this deadline's signal or ``external`` fires, with that one's
        reason. Hand it to a transport. ``None`` returns :attr:`signal` itself. The links are
        removed by :meth:`dispose`."""
        if external is None:
            return self.signal
        if not isinstance(external, AbortSignal):
            raise UsageError(f"external must be an AbortSignal or None, got {type(external).__name__}")
        combined, unlink = linked_signal(self.signal, external)
        self._removers.append(unlink)
        assert combined is not None  # two real signals in
        return combined

    def dispose(self) -> None:
        """Detach every external link and wake any watcher so it returns. Idempotent. The clock
        checks keep working afterwards; only the links and watchers go."""
        self._disposed = True
        removers, self._removers = self._removers, []
        for remove in removers:
            remove()
        wakers, self._wakers = self._wakers, []
        for wake in wakers:
            wake()

    def _add_waker(self, wake: Callable[[], None]) -> Callable[[], None]:
        # Used by watch_deadline: dispose() calls `wake` so the watcher stops sleeping.
        self._wakers.append(wake)

        def remove() -> None:
            if wake in self._wakers:
                self._wakers.remove(wake)

        return remove

    def __repr__(self) -> str:
        return (f"RunDeadline(label={self.label!r}, timeout_ms={self.timeout_ms:g}, "
                f"fired={self._controller.signal.aborted}, disposed={self._disposed})")


def create_run_deadline(
    *, timeout_ms: float, label: str | None = None, now: Clock = monotonic_ms
) -> RunDeadline:
    """A :class:`RunDeadline` of ``timeout_ms`` (a finite number > 0) starting now."""
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, (int, float)) \
            or not math.isfinite(timeout_ms) or timeout_ms <= 0:
        raise UsageError(f"timeout_ms must be a finite number > 0, got {timeout_ms!r}")
    return RunDeadline(timeout_ms=timeout_ms, label=label, now=now)


def classify_run_failure(deadline: RunDeadline, error: BaseException) -> RunFailureStatus:
    """``timed_out`` if ``error`` is a :class:`~bindloop.errors.RunTimeoutError` or ``deadline`` has
    expired, else ``failed``. Handle caller cancellation first: it is neither."""
    if isinstance(error, RunTimeoutError) or deadline.timed_out:
        return "timed_out"
    return "failed"
