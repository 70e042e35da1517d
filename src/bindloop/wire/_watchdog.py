"""A stall watchdog for streamed completions.

An SDK's timeout bounds establishing the request, not the silence between streamed chunks, so a
provider that stops mid-stream hangs the turn forever. The watchdog owns three budgets and an abort
signal for the transport:

- a generous *first-token* budget, armed by :meth:`StreamWatchdog.open` and re-armed by every
  reasoning chunk: the wait for answer output, which covers a reasoning model's hidden thinking and
  the pause between its visible thinking and its first answer token;
- a tight *inter-chunk* budget, armed only by answer output (text, refusal, tool-call deltas): once
  the answer flows, a long silence means the stream is dead;
- an absolute *total* cap from ``open()``.

The two idle budgets measure the *provider's* silence. While the consumer holds what the stream
produced (:meth:`StreamWatchdog.pause` .. :meth:`StreamWatchdog.resume`) they stand still, so a slow
consumer is never mistaken for a stalled provider; the total cap keeps counting.

The idle budgets do not count the client's own event-loop lag either. An overloaded loop runs
the supervisor late, and the task that reads the stream just as late, so chunks the provider sent
in time sit unread: :meth:`StreamWatchdog.supervise` measures how late its timer fired on the
injected clock (past a 10 ms tolerance for timer jitter) and, instead of deciding at once, gives
that time back to the idle clock twice over — once because it was the loop's time, not the
provider's, once for the starved reader to catch up — at most one idle budget per silence, so a
dead stream on a loop that never catches up still stalls after twice its budget (plus however
late the loop runs that last check). :attr:`StreamWatchdog.loop_lag_ms` adds up what it measured.

The core is sans-I/O: :meth:`StreamWatchdog.check` compares the budgets with the injected clock and
fires the signal, so tests drive it with a stepping clock and no sleeps. :meth:`StreamWatchdog.supervise`
is the anyio task that calls ``check`` at the next deadline for a live stream.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, TypeAlias

import anyio
import anyio.lowlevel
import msgspec

from .._eventloop import asyncio_callback_context
from .._timers import TIMER_SLICE_S, wait_woken
from ..clock import Clock, monotonic_ms
from ..errors import ProtocolError, UsageError
from ..signal import AbortController, AbortSignal
from ._errors import StreamStalledError

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop, Handle
    from contextvars import Context

__all__ = (
    "ChunkKind",
    "StallKind",
    "StreamBudgets",
    "StreamStall",
    "StreamWatchdog",
    "create_stream_watchdog",
)

ChunkKind: TypeAlias = Literal["answer", "reasoning", "none"]
"""What one streamed chunk carried: answer output (content, refusal, tool-call deltas), reasoning
only, or nothing (a role-only, usage-only or keep-alive chunk)."""

StallKind: TypeAlias = Literal["first_token", "inter_chunk", "total"]
"""Which budget ran out: the wait for answer output, the gap inside the answer, or the overall cap."""

_CHUNK_KINDS = frozenset(("answer", "reasoning", "none"))

_LAG_TOLERANCE_MS = 10.0
"""How late the supervisor's timer may fire and still count as on time (timer jitter); beyond it
the lateness is the event loop's lag, not the provider's silence."""


class StreamStall(msgspec.Struct, frozen=True, kw_only=True):
    """What stalled. ``elapsed_ms`` is the silence (or, for ``total``, the time since ``open()``)
    measured when the stall was detected; it is at least ``budget_ms``."""

    kind: StallKind
    budget_ms: float
    elapsed_ms: float
    answer_chunks: int
    reasoning_chunks: int


class StreamBudgets(msgspec.Struct, frozen=True, kw_only=True):
    """The watchdog's budgets in ms of its clock; ``None`` disables one. The one home of their
    defaults and of their check.

    ``first_token_ms`` bounds the wait for the first answer output (armed by
    :meth:`StreamWatchdog.open`; a model adapter opens the watchdog when the request is sent, so it
    covers the wait for headers too — and, for a non-streamed call, whose headers come only once
    the whole reply is generated, the whole generation), ``inter_chunk_ms`` the silence between
    chunks once the answer flows, ``total_ms`` the whole call. Each must be a finite positive
    number or ``None``; anything else (NaN, infinity, zero, negative, a bool, a string) raises
    :class:`~bindloop.errors.UsageError` naming the field, rather than silently tearing down or
    never guarding healthy streams.
    """

    first_token_ms: float | None = 120_000.0
    inter_chunk_ms: float | None = 30_000.0
    total_ms: float | None = 600_000.0

    def __post_init__(self) -> None:
        for name in ("first_token_ms", "inter_chunk_ms", "total_ms"):
            value = getattr(self, name)
            if value is None:
                continue
            # NaN compares false with everything (a budget that never fires), infinity is not how
            # a budget is disabled (None is), and zero or less tears down every stream at once.
            if (isinstance(value, bool) or not isinstance(value, (int, float))
                    or not math.isfinite(value) or value <= 0):
                raise UsageError(f"StreamBudgets.{name} must be a finite positive number of "
                                 f"milliseconds or None, got {value!r}")


_DEFAULT_BUDGETS = StreamBudgets()


class StreamWatchdog:
    """Watches one streamed completion; build one per attempt with :func:`create_stream_watchdog`.

    Lifecycle: create before the request (hand ``signal`` to the transport), ``open()`` once the
    stream is established, ``observed_chunk(kind)`` for every chunk (``observed_progress()`` for bytes
    that complete none), ``pause()`` / ``resume()`` around the consumer's time, and in the failure
    path call :meth:`stall` *before* ``dispose()``. These only record progress; deadlines are
    evaluated by :meth:`check` (called by :meth:`supervise`, or by the host).
    """

    __slots__ = (
        "_answer_chunks", "_answer_mode", "_cap", "_clock", "_context", "_controller_abort",
        "_disposed",
        "_excused", "_external", "_first_token_ms", "_idle_since", "_inter_chunk_ms",
        "_loop", "_opened_at", "_paused_at", "_provisional", "_reasoning_chunks",
        "_remove_listener", "_stall",
        "_target", "_timer", "_total_ms", "_until", "_wake", "fired", "loop_lag_ms", "signal",
    )

    def __init__(self, *, budgets: StreamBudgets, external: AbortSignal | None,
                 clock: Clock) -> None:
        if not isinstance(budgets, StreamBudgets):
            raise UsageError(f"budgets must be a StreamBudgets, got {type(budgets).__name__}")
        # float(): an int budget must not make clock arithmetic integer-typed downstream.
        self._first_token_ms = _ms(budgets.first_token_ms)
        self._inter_chunk_ms = _ms(budgets.inter_chunk_ms)
        self._total_ms = _ms(budgets.total_ms)
        self._external = external
        self._clock = clock
        self._opened_at: float | None = None
        self._cap: float | None = None  # the clock reading the total cap runs out at
        self._idle_since = 0.0
        self._excused = 0.0  # loop lag given back to the idle clock since the last progress
        self.loop_lag_ms = 0.0
        """How late, in all, :meth:`supervise` found its timer firing past the 10 ms tolerance
        (the client's event-loop lag, not counted as silence)."""
        self._paused_at: float | None = None
        self._answer_mode = False
        self._answer_chunks = 0
        self._reasoning_chunks = 0
        self._stall: StreamStall | None = None
        self._disposed = False
        self._wake: Callable[[], None] | None = None
        # The deadline a sleeping supervisor wakes at (None: it sleeps until poked), and whether
        # it is an early one (see _next_wait).
        self._target: float | None = None
        self._provisional = False
        # supervise_on()'s: its loop, the callback it has pending (a timer or a next turn), and
        # the loop time its sleep ends at (a Pyodide timer is sliced).
        self._loop: AbstractEventLoop | None = None
        self._context: Context | None = None  # what its callbacks run in
        self._timer: Handle | None = None
        self._until = 0.0
        controller = AbortController()
        self.signal: AbortSignal = controller.signal
        """Fires when a budget runs out (reason: :class:`StreamStalledError`) or when ``external``
        fires (its reason). Hand it to the transport."""
        self._remove_listener: Callable[[], None] | None = None
        # The controller's own bound method (not one of this watchdog's: no cycle through self).
        self._controller_abort: Callable[[object], None] = controller.abort
        self.fired = False
        """Whether :attr:`signal` fired (a plain attribute: the per-chunk paths read it)."""
        # Every firing goes through _abort(), which sets `fired` before the signal's listeners
        # run; the signal holds no listener of this watchdog's, so a disposed watchdog is freed by
        # reference counting rather than left to the cyclic garbage collector.
        if external is not None:
            self._remove_listener = external.add_listener(self._abort)

    def _abort(self, reason: object) -> None:
        """Fire :attr:`signal` with ``reason`` (the first reason wins), ``fired`` set first and a
        sleeping supervisor woken: the stream ends."""
        self.fired = True
        self._poke()
        self._controller_abort(reason)

    @property
    def opened(self) -> bool:
        return self._opened_at is not None

    @property
    def next_deadline_ms(self) -> float | None:
        """The clock reading at which :meth:`check` would next fire, or ``None`` when nothing is armed
        (not opened, already fired, or disposed). While paused only the total cap is armed."""
        if self._opened_at is None or self._disposed or self.fired:
            return None
        idle = self._idle_budget()
        deadline = None if idle is None else self._idle_since + idle
        cap = self._cap
        if cap is not None and (deadline is None or cap < deadline):
            deadline = cap
        return deadline

    @property
    def paused(self) -> bool:
        return self._paused_at is not None

    def _idle_budget(self) -> float | None:
        """The idle budget running now: none while paused."""
        if self._paused_at is not None:
            return None
        return self._inter_chunk_ms if self._answer_mode else self._first_token_ms

    def open(self) -> None:
        """The stream is established: arm the first-token budget and the total cap. Once only."""
        if self._disposed or self.fired:
            return
        if self._opened_at is not None:
            raise ProtocolError("StreamWatchdog.open() called twice; build one watchdog per attempt")
        self._opened_at = self._idle_since = self._clock()
        if self._total_ms is not None:
            self._cap = self._opened_at + self._total_ms
        self._poke()

    def observed_chunk(self, kind: ChunkKind) -> None:
        """Record what a chunk carried. ``"answer"`` arms (and re-arms) the inter-chunk budget;
        ``"reasoning"`` puts the stream back on the first-token budget from now; ``"none"`` is not
        progress and re-arms nothing. A no-op once the watchdog fired or was disposed."""
        if kind not in _CHUNK_KINDS:
            raise UsageError(f"chunk kind must be 'answer', 'reasoning' or 'none', got {kind!r}")
        if self._disposed or self.fired:
            return
        if self._opened_at is None:
            # Without open() no budget is armed, and the stream would run unwatched while looking
            # watched.
            raise ProtocolError("StreamWatchdog.observed_chunk() before open()")
        if kind == "none":
            return
        # While paused the chunk arrived when the pause began (the consumer's time since then is
        # not the provider's silence, and resume() adds it back).
        paused_at = self._paused_at
        self._idle_since = self._clock() if paused_at is None else paused_at
        self._excused = 0.0
        if kind == "answer":
            self._answer_chunks += 1
            self._answer_mode = True
        else:
            self._reasoning_chunks += 1
            self._answer_mode = False
        if self._wake is not None and paused_at is None:
            self._wake_if_earlier()  # while paused no idle budget runs: resume() decides

    def observed_progress(self) -> None:
        """Bytes arrived that complete no chunk yet (a large event still arriving): the provider is
        not silent, so the idle budget of the current mode restarts from now, without counting a
        chunk or changing mode. Keep-alives are not progress: do not report them. A no-op once the
        watchdog fired or was disposed."""
        if self._disposed or self.fired:
            return
        if self._opened_at is None:
            raise ProtocolError("StreamWatchdog.observed_progress() before open()")
        paused_at = self._paused_at
        self._idle_since = self._clock() if paused_at is None else paused_at
        self._excused = 0.0

    def pause(self) -> None:
        """The consumer holds what the stream produced: stop the idle clock (first-token and
        inter-chunk) until :meth:`resume`. The total cap keeps counting. Idempotent; a no-op once
        the watchdog fired or was disposed."""
        if self._disposed or self.fired or self._paused_at is not None:
            return
        if self._opened_at is None:
            raise ProtocolError("StreamWatchdog.pause() before open()")
        self._paused_at = self._clock()

    def resume(self) -> None:
        """The stream waits on the provider again: the idle clock restarts where :meth:`pause`
        stopped it (its start moves later by the time paused). Idempotent."""
        paused_at = self._paused_at
        if paused_at is None:
            return
        self._paused_at = None
        idle_since = self._idle_since = self._idle_since + self._clock() - paused_at
        if self._wake is not None and not (self._disposed or self.fired):
            # _wake_if_earlier() inline: this runs before every read of the stream.
            budget = self._inter_chunk_ms if self._answer_mode else self._first_token_ms
            deadline = self._cap if budget is None else idle_since + budget
            target = self._target
            if deadline is not None and (target is None or deadline < target):
                self._poke()

    def _wake_if_earlier(self) -> None:
        # Only a deadline earlier than the one a sleeping supervisor waits for (the first answer
        # chunk after a generous wait, a resume after it re-slept on the total cap alone) needs it
        # woken; a later one is found when it wakes anyway, so steady streaming costs no wakes.
        # The supervisor's target is min(idle deadline then, cap) <= cap, so only the idle
        # deadline can come earlier (the cap never moves): that is the one compare made here.
        budget = self._inter_chunk_ms if self._answer_mode else self._first_token_ms
        deadline = self._cap if budget is None else self._idle_since + budget
        target = self._target
        if deadline is not None and (target is None or deadline < target):
            self._poke()

    def check(self) -> StreamStall | None:
        """Compare the armed budgets with the clock now; on the first one exceeded, record the stall
        and fire :attr:`signal`. Returns the stall recorded so far (``None`` while healthy, and always
        ``None`` after the external signal fired or the watchdog was disposed without a stall)."""
        if self._stall is not None or self._disposed or self.fired:
            return self._stall
        deadline = self.next_deadline_ms
        if deadline is None:
            return None
        now = self._clock()
        if now < deadline:
            return None
        assert self._opened_at is not None
        candidates: list[tuple[float, StreamStall]] = []
        idle = self._idle_budget()
        if idle is not None and now >= self._idle_since + idle:
            kind: StallKind = "inter_chunk" if self._answer_mode else "first_token"
            candidates.append((self._idle_since + idle,
                               self._make_stall(kind, idle, now - self._idle_since)))
        if self._total_ms is not None and now >= self._opened_at + self._total_ms:
            candidates.append((self._opened_at + self._total_ms,
                               self._make_stall("total", self._total_ms, now - self._opened_at)))
        # Report the budget that ran out first.
        self._stall = min(candidates, key=lambda c: c[0])[1]
        self._abort(StreamStalledError(self._stall))
        return self._stall

    def _make_stall(self, kind: StallKind, budget: float, elapsed: float) -> StreamStall:
        return StreamStall(kind=kind, budget_ms=budget, elapsed_ms=elapsed,
                           answer_chunks=self._answer_chunks,
                           reasoning_chunks=self._reasoning_chunks)

    def stall(self) -> StreamStall | None:
        """Whether the watchdog tore the stream down, and why. ``None`` when it did not — and also
        when the caller's own external signal fired, so a cancellation is never reported as a
        retriable upstream stall. Call it in the failure path, before :meth:`dispose`."""
        if self._external is not None and self._external.aborted:
            return None
        return self._stall

    def dispose(self) -> None:
        """Stop watching: detach from the external signal (a long-lived signal would otherwise keep
        one listener per attempt) and end :meth:`supervise`. Idempotent. :meth:`stall` still answers."""
        if self._disposed:
            return
        self._disposed = True
        if self._remove_listener is not None:
            self._remove_listener()
            self._remove_listener = None
        self._poke()

    def _poke(self) -> None:
        wake = self._wake
        if wake is not None:
            wake()
        elif self._timer is not None and (self._disposed or self.fired):
            self._end_timer()  # supervise_on() between a wake-up and its next sleep

    async def supervise(self) -> None:
        """Run as a task beside the stream: sleep until the next deadline, :meth:`check`, repeat.
        Returns once the watchdog fired, the external signal fired, or :meth:`dispose` was called.

        Never raises (bar cancellation): if reading the clock or checking fails, :attr:`signal` fires
        with that exception as its reason and this returns, so a stream it watches is torn down
        with the cause instead of an error escaping from the task group that runs it.

        Sleeps on the event loop's clock and re-checks on the injected one, so the two need only agree
        on the passage of time (a mock clock for tests: trio's ``MockClock`` with the injected clock
        reading it). A timer that fires late measures the loop's lag, which is not counted as
        silence (see the module docstring). :meth:`supervise_on` does the same without a task.
        """
        try:
            while not (self._disposed or self.fired):
                event = anyio.Event()
                self._wake = event.set
                woken = True
                try:
                    delay = self._next_wait()
                    if delay is None:
                        await event.wait()
                    elif delay > 0:
                        woken = await wait_woken(event, delay)
                    else:
                        await anyio.lowlevel.checkpoint()
                finally:
                    self._wake = None
                self._decide(self._target, woken)
        except Exception as exc:
            self._abort(exc)

    def supervise_on(self, loop: AbstractEventLoop) -> None:
        """Do what :meth:`supervise` does as callbacks of the running asyncio ``loop``, without a
        task: it sleeps until the next deadline on one ``loop.call_at`` timer, armed at once
        (where the task starts a turn later: called after :meth:`open`, it is armed for the
        deadline that set), is woken (a turn later, as a task would be) only when a deadline
        comes earlier than the one it sleeps for, and each time makes the same decision: the
        same re-check on the injected clock, the same loop lag given back, the same failure
        handling (an exception from the clock fires :attr:`signal` with it). A timer that runs
        out decides in its own callback, where the task decided a turn later. Under Pyodide a
        long sleep is armed in slices of at most a second, as
        :func:`~bindloop._timers.wait_woken` takes it. Ends, cancelling what it has pending,
        once the watchdog fired or :meth:`dispose` was called. Call it once per watchdog, from
        a task of ``loop``, instead of :meth:`supervise`.
        """
        if self._loop is not None or self._wake is not None:
            raise ProtocolError("StreamWatchdog is supervised already: call supervise_on() or "
                                "supervise() once per watchdog")
        self._loop = loop
        self._context = asyncio_callback_context()
        # Armed now (after open(): for the deadline it set), not a turn later: one timer a call.
        self._sleep()

    def _sleep(self) -> None:
        """supervise_on(): arm the timer for the next deadline (nothing armed: sleep until woken),
        or end once the watchdog fired or was disposed."""
        self._timer = None
        if self._disposed or self.fired:
            self._end_timer()
            return
        try:
            delay = self._next_wait()
        except Exception as exc:
            self._abort(exc)
            self._end_timer()
            return
        loop = self._loop
        assert loop is not None
        if delay is None:
            self._wake = self._wake_timer
        elif not delay > 0:  # not `<= 0`: a NaN (a broken clock) is due too, and check() says so
            # supervise(): a checkpoint, then a check
            self._timer = loop.call_soon(self._woken, context=self._context)
        else:
            # While asleep _wake holds self (a cycle): waking, firing and dispose() clear it.
            self._wake = self._wake_timer
            now = loop.time()
            self._until = now + delay
            if TIMER_SLICE_S is not None and delay > TIMER_SLICE_S:
                delay = TIMER_SLICE_S
            self._timer = loop.call_at(now + delay, self._timed_out, context=self._context)

    def _wake_timer(self) -> None:
        """supervise_on()'s sleep is woken (a deadline came earlier, or the end): what setting
        supervise()'s event does."""
        if self._disposed or self.fired:
            self._end_timer()
            return
        self._wake = None
        timer = self._timer
        if timer is not None:
            timer.cancel()
        loop = self._loop
        assert loop is not None
        self._timer = loop.call_soon(self._woken, context=self._context)

    def _woken(self) -> None:
        self._timer = None
        self._step(woken=True)

    def _timed_out(self) -> None:
        self._timer = None
        loop = self._loop
        assert loop is not None
        if TIMER_SLICE_S is not None and (left := self._until - loop.time()) > 0:
            self._timer = loop.call_at(loop.time() + min(left, TIMER_SLICE_S), self._timed_out,
                                       context=self._context)
            return
        self._wake = None
        self._step(woken=False)

    def _step(self, *, woken: bool) -> None:
        try:
            self._decide(self._target, woken)
        except Exception as exc:
            self._abort(exc)
        self._sleep()

    def _end_timer(self) -> None:
        timer = self._timer
        self._timer = self._loop = self._wake = self._context = None
        if timer is not None:
            timer.cancel()

    def _next_wait(self) -> float | None:
        """Set what a supervisor now going to sleep waits for (``_target``; ``None``: nothing is
        armed, it sleeps until woken) and return the seconds until then (``None`` with it). That
        is the next deadline, or, while the first-token budget runs and a shorter inter-chunk
        budget is set, the reading at which the inter-chunk budget would run out had the answer
        begun when the first-token wait did (``_provisional``): the first answer chunk then arms
        a deadline no earlier than the one slept for, so it wakes nothing (waking would cost a
        loop turn and a timer more on every call); a wait that reaches the early reading first
        finds nothing due and sleeps again (:meth:`_decide`)."""
        deadline = self._target = self.next_deadline_ms
        self._provisional = False
        if deadline is None:
            return None
        now = self._clock()
        inter = self._inter_chunk_ms
        if inter is not None and not self._answer_mode and self._paused_at is None:
            early = self._idle_since + inter
            if now < early < deadline:
                deadline = self._target = early
                self._provisional = True
        return (deadline - now) / 1000.0

    def _decide(self, deadline: float | None, woken: bool) -> None:
        """A wait for ``deadline`` ended, by a wake-up (``woken``) or by its timer: give a late
        timer's lag back to the idle clock (then wait again), else :meth:`check`. An early
        wait's timer (:meth:`_next_wait`) decides nothing until a deadline is due, and then
        decides for that deadline, as its own timer would have."""
        if not woken and self._provisional:
            self._provisional = False
            due = self.next_deadline_ms
            if due is None or self._clock() < due:
                return
            deadline = due
        if not woken and deadline is not None and self._excuse_lag(deadline):
            return
        self.check()

    def _excuse_lag(self, deadline: float) -> bool:
        """The timer for ``deadline`` fired: if late past the tolerance, and an idle budget is what
        ran out, give the lateness back to the idle clock (twice: it was the loop's time, and the
        reader starved as long needs as long to catch up), within one idle budget per silence.
        True when something was given back (the supervisor sleeps again instead of checking)."""
        if self._disposed or self.fired:
            return False
        lag = self._clock() - deadline
        if lag <= _LAG_TOLERANCE_MS:
            return False
        self.loop_lag_ms += lag
        idle = self._idle_budget()
        if idle is None or self._cap == deadline:
            return False  # the total cap is wall time as the caller lives it: never excused
        excuse = min(2.0 * lag, idle - self._excused)
        if excuse <= 0:
            return False
        self._excused += excuse
        self._idle_since += excuse
        return True


def _ms(value: float | None) -> float | None:
    return None if value is None else float(value)


def create_stream_watchdog(
    *,
    first_token_ms: float | None = _DEFAULT_BUDGETS.first_token_ms,
    inter_chunk_ms: float | None = _DEFAULT_BUDGETS.inter_chunk_ms,
    total_ms: float | None = _DEFAULT_BUDGETS.total_ms,
    budgets: StreamBudgets | None = None,
    external: AbortSignal | None = None,
    clock: Clock = monotonic_ms,
) -> StreamWatchdog:
    """A :class:`StreamWatchdog` for one attempt.

    Budgets are milliseconds of ``clock``, given one by one (checked as :class:`StreamBudgets`
    checks them: a bad one raises :class:`~bindloop.errors.UsageError` here) or as an already
    checked ``budgets``, which then wins. ``external`` is the caller's cancellation: it aborts
    :attr:`StreamWatchdog.signal` too, but is never reported as a stall.
    """
    if budgets is None:
        budgets = StreamBudgets(first_token_ms=first_token_ms, inter_chunk_ms=inter_chunk_ms,
                                total_ms=total_ms)
    return StreamWatchdog(budgets=budgets, external=external, clock=clock)
