"""Cancellation signals that a pure core can poll and a host can bridge.

:class:`AbortController` / :class:`AbortSignal` mirror the JavaScript pair on purpose: in Pyodide and
Workers the host bridges a JS ``AbortSignal`` by calling :meth:`AbortController.abort` from its
listener, and on CPython a host aborts from any task. The core only polls ``signal.aborted`` at
documented points and reads ``reason``; listeners let a driver wake up (e.g. set an anyio event).

A source that is read rather than pushed — a deadline's clock, a host's "should this stop?" — is a
*check* on the signal (:meth:`AbortSignal.add_check`): :meth:`AbortSignal.poll` runs the checks and
fires the signal with the first reason one returns. The tool loop polls its signal at every
boundary between iterations, so a deadline is one more signal.
"""

from __future__ import annotations

from collections.abc import Callable

from ._awaitable import isawaitable
from .errors import UsageError

__all__ = ("AbortController", "AbortSignal", "any_signal", "linked_signal")


class AbortSignal:
    """Fires at most once; once aborted it stays aborted. Listeners run synchronously, in the order
    they were added, when the signal fires (or immediately if it already has)."""

    __slots__ = ("_aborted", "_checks", "_listeners", "_reason")

    def __init__(self) -> None:
        self._aborted = False
        self._reason: object = None
        self._listeners: list[Callable[[object], None]] = []
        # Made by the first add_check(): most signals (one per model call) are never polled.
        self._checks: list[Callable[[], object]] | None = None

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def reason(self) -> object:
        """What the aborter passed (``None`` if nothing); meaningful only once aborted."""
        return self._reason

    def add_listener(self, listener: Callable[[object], None]) -> Callable[[], None]:
        """Call ``listener(reason)`` when the signal fires. Returns a callable that removes it."""
        if self._aborted:
            listener(self._reason)
            return lambda: None
        self._listeners.append(listener)
        return _Removal(self, listener)

    def add_check(self, check: Callable[[], object]) -> Callable[[], None]:
        """Add a polled source: ``check()`` returns ``None`` while it holds, or the reason to fire
        with (an exception it returns is the reason, not raised; one it raises propagates out of
        :meth:`poll`). Returns a function that removes it."""
        checks = self._checks
        if checks is None:
            checks = self._checks = []
        checks.append(check)

        def remove() -> None:
            try:
                checks.remove(check)
            except ValueError:
                pass

        return remove

    def poll(self) -> bool:
        """Run the checks in the order they were added, up to the first that returns a reason
        (which fires the signal unless it has fired already), then return :attr:`aborted`. The
        checks run whether or not the signal has fired: a source that raises is always asked."""
        for check in self._checks or ():
            reason = check()
            if isawaitable(reason):
                close = getattr(reason, "close", None)
                if close is not None:
                    close()
                raise UsageError(f"a signal's check must be a plain function; {check!r} returned "
                                 f"{type(reason).__name__} (a check is polled, never awaited)")
            if reason is not None:
                self._fire(reason)
                break
        return self._aborted

    def _fire(self, reason: object) -> None:
        if self._aborted:
            return
        self._aborted = True
        self._reason = reason
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener(reason)

    @staticmethod
    def aborted_with(reason: object = None) -> AbortSignal:
        """A signal that has already fired."""
        signal = AbortSignal()
        signal._fire(reason)
        return signal


class AbortController:
    """Owns one :class:`AbortSignal` and is the only thing that can fire it."""

    __slots__ = ("signal",)

    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: object = None) -> None:
        """Fire the signal (idempotent: the first reason wins)."""
        self.signal._fire(reason)


class _Removal:
    """What :meth:`AbortSignal.add_listener` returns: calling it removes the listener (once; a
    listener already removed or already called is not an error). One small object rather than a
    closure and its cells: a model call adds a listener and keeps the remover while it runs."""

    __slots__ = ("_listener", "_signal")

    def __init__(self, signal: AbortSignal, listener: Callable[[object], None]) -> None:
        self._signal = signal
        self._listener = listener

    def __call__(self) -> None:
        try:
            self._signal._listeners.remove(self._listener)
        except ValueError:
            pass


def any_signal(*signals: AbortSignal | None) -> AbortSignal:
    """A signal that fires when any of ``signals`` fires, with that signal's reason; polling it
    polls them. ``None`` entries are ignored; with a single real signal that signal itself is
    returned."""
    real = [s for s in signals if s is not None]
    if len(real) == 1:
        return real[0]
    combined = AbortController()
    for s in real:
        s.add_listener(combined.abort)
    combined.signal.add_check(_polling(real))
    return combined.signal


def linked_signal(*signals: AbortSignal | None) -> tuple[AbortSignal | None, Callable[[], None]]:
    """Like :func:`any_signal` (polling it polls ``signals``), with the function that unlinks it: for a signal built per call
    from a long-lived one (a model's, a run's), which would otherwise keep a listener for every
    call. ``None`` entries are ignored; no real signal gives ``None``; a single one, or one that
    has already fired, is returned itself (nothing to unlink)."""
    real = [s for s in signals if s is not None]
    fired = next((s for s in real if s.aborted), None)
    if fired is not None or len(real) <= 1:
        return (fired if fired is not None else real[0] if real else None), _nothing
    combined = AbortController()
    removers = [s.add_listener(combined.abort) for s in real]
    removers.append(combined.signal.add_check(_polling(real)))

    def unlink() -> None:
        for remove in removers:
            remove()

    return combined.signal, unlink


def _nothing() -> None:
    return None


def _polling(sources: list[AbortSignal]) -> Callable[[], object]:
    """The check of a combined signal: poll each source (a fired one fires the combined signal
    through its listener, with its reason)."""

    def check() -> object:
        for source in sources:
            if source.poll():
                return source.reason
        return None

    return check
