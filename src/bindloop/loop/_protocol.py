"""The protocol half of the loop machine: effects out, the phase, refusals and the ERROR phase.

:class:`MachineProtocol` knows nothing of agents: it holds the queue of effects, the pending
request and the :class:`~bindloop.loop._phases.Phase`, pops effects, words every refusal, and keeps
the absorbing ``ERROR`` phase (:meth:`_fail`, what every later call raises). ``send()`` — route an
answer to its handler, check the phase it left against :data:`~bindloop.loop._phases.SUCCESSORS`,
fail on any raise — and the handlers are :class:`~bindloop.lowlevel.LoopMachine`'s.
"""

from __future__ import annotations

from collections import deque
from typing import NoReturn

from ..errors import BindloopError, ProtocolError
from ._effects import Effect, Request
from ._phases import REQUEST_PHASES, SUCCESSORS, Phase

__all__ = ("MachineProtocol",)

_ERROR = Phase.ERROR


class MachineProtocol:
    """Effects out, one phase at a time; the subclass's ``send()`` feeds answers in."""

    __slots__ = ("_effects", "_failure", "_pending", "_phase")

    # A subclass's __init__ sets them: an empty deque, None, Phase.IDLE, None.
    _effects: deque[Effect]
    _pending: Request | None
    _phase: Phase
    _failure: str | None

    @property
    def phase(self) -> Phase:
        """What the machine waits for: the pending request's phase, ``IDLE`` before ``start()``,
        ``DONE`` after :class:`~bindloop.lowlevel.Finish`, ``ERROR`` after a raise in ``send()``."""
        return self._phase

    @property
    def failure(self) -> str | None:
        """In ``ERROR``: what raised first (its type, and its message when it is one of
        bindloop's own errors — a foreign exception's text may hold a secret); else ``None``."""
        return self._failure

    @property
    def pending(self) -> Request | None:
        """The request awaiting an answer, or ``None``."""
        return self._pending

    def next_effect(self) -> Effect:
        """The next thing the driver must do. Raises :class:`ProtocolError` when the machine is
        waiting for an answer the driver has not given, is done, or is in ``ERROR``."""
        try:
            return self._effects.popleft()
        except IndexError:
            if self._phase is _ERROR:
                raise self._failed() from None
            raise ProtocolError(
                "no effect pending: the loop machine is waiting for an answer in phase "
                f"{self._phase.value!r}") from None

    def _request(self, request: Request) -> None:
        self._pending = request
        self._phase = REQUEST_PHASES[type(request)]
        self._effects.append(request)

    def _fail(self, exc: BaseException) -> None:
        if self._failure is None:
            name = type(exc).__name__
            self._failure = f"{name}: {exc}" if isinstance(exc, BindloopError) else name
        self._phase = _ERROR
        self._pending = None
        self._effects.clear()

    def _failed(self) -> ProtocolError:
        return ProtocolError(f"the loop machine is in its error phase after {self._failure}; it "
                             "accepts nothing more (a new run needs a new machine)")

    def _refuse(self, answer: object) -> NoReturn:
        phase = self._phase
        if phase is _ERROR:
            raise self._failed()
        if phase is Phase.IDLE or phase is Phase.DONE:
            error = ProtocolError(f"{type(answer).__name__} sent, but nothing is pending "
                                  f"(phase {phase.value!r})")
        elif (phase, type(answer)) not in SUCCESSORS:
            accepted = ", ".join(a.__name__ for p, a in SUCCESSORS if p is phase)
            error = ProtocolError(f"{type(answer).__name__} does not answer "
                                  f"{type(self._pending).__name__} (phase {phase.value!r}; it "
                                  f"accepts {accepted})")
        else:
            error = ProtocolError(f"{type(answer).__name__} sent before every effect was popped")
        self._fail(error)
        raise error
