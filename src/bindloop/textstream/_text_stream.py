"""Streaming a turn's assistant text to a live surface, repaired across routing retries.

Routing answers a mid-stream failure by trying again (same endpoint, next provider, fallback model),
and every retry re-renders a turn the reader is already looking at. Clamping (once a byte has left,
``produced_output`` is true and routing stops) gives up the rest of the chain. This module asks one
question of the surface instead — can it be told to discard what it shows? — and, when it can, wipes it lazily on
the retry's first byte so the whole fallback chain stays available.

Two lifetime rules the code cannot enforce: build **one stream per turn** (outside the attempt
function and outside any structured-output retry loop — one per attempt never sees a retry, so the
bug only shows under fallback as two answers glued together), and **always call** ``finish()`` with
how the turn ended (an armed reset is still owed when the successful attempt emitted no text, the
ordinary shape of a tool-calling turn).

Reasoning deltas are not decided here (pass them to ``observe`` only if the product counts thinking
as output), and tool-call deltas are never output: a tool call is not a side effect until it is
dispatched after the turn, so clamping on it forfeits a fallback for nothing. A genuine mid-attempt
effect is reported with :meth:`TurnTextStream.mark_produced_output`.
"""

from __future__ import annotations

from typing import Literal, Protocol, TypeAlias

import msgspec

from ..errors import ProtocolError, UsageError

__all__ = (
    "TURN_RESET_REASONS",
    "TurnOutcome",
    "TurnResetEvent",
    "TurnResetReason",
    "TurnStreamEvent",
    "TurnStreamSink",
    "TurnTextEvent",
    "TurnTextStream",
    "create_turn_text_stream",
)

TurnResetReason: TypeAlias = Literal["attempt_failed", "structured_output_retry"]
"""Why the surface is told to discard what it rendered: the previous attempt failed and routing
moved on, or it succeeded but its output was rejected and re-asked."""

TURN_RESET_REASONS: tuple[TurnResetReason, ...] = ("attempt_failed", "structured_output_retry")

TurnOutcome: TypeAlias = Literal["succeeded", "failed"]


class TurnTextEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="text"):
    """Text for the surface to append.

    ``turn_id`` scopes the other two fields, which both restart each turn: ``seq`` is monotonic and
    gap-free within the turn (the client's ordering and de-duplication key) and ``epoch`` numbers the
    attempt that produced the text (the client's staleness key).
    """

    turn_id: str
    epoch: int
    seq: int
    text: str

    @property
    def kind(self) -> Literal["text"]:
        """The wire tag, readable like the JavaScript client reads it."""
        return "text"


class TurnResetEvent(msgspec.Struct, frozen=True, kw_only=True, tag_field="kind", tag="reset"):
    """Discard everything rendered for ``turn_id``; ``epoch`` is the attempt whose text follows."""

    turn_id: str
    epoch: int
    seq: int
    reason: TurnResetReason

    @property
    def kind(self) -> Literal["reset"]:
        """The wire tag, readable like the JavaScript client reads it."""
        return "reset"


TurnStreamEvent: TypeAlias = TurnTextEvent | TurnResetEvent


class TurnStreamSink(Protocol):
    """Where a turn's text goes.

    ``retractable`` is a property of the *surface*, not of the transport: a view that re-renders
    from the events it is sent is retractable; a message posted through a third-party API, an email,
    a webhook or an append-only row is not. Declare a sink that fans out to a mix ``False`` — the
    conservative answer costs a fallback, the optimistic one shows the reader duplicated text. It is
    read once, when the stream is created.

    ``emit`` may raise (a closed socket is ordinary); see :attr:`TurnTextStream.sink_errors`. A sink
    that buffers may drop a reset whose epoch never left its buffer, with the text it would wipe.
    """

    @property
    def retractable(self) -> bool: ...

    def emit(self, event: TurnStreamEvent, /) -> None: ...


class TurnTextStream:
    """The producer half for one turn; build it with :func:`create_turn_text_stream`.

    Call :meth:`begin_attempt` at the top of every attempt (the first included), :meth:`observe` for
    each content delta, and :meth:`finish` once however the turn ended. After ``finish`` every
    method is a no-op. Events reach the sink as frozen :class:`TurnTextEvent` /
    :class:`TurnResetEvent` values, with ``seq`` gap-free from 0 in emission order.
    """

    __slots__ = (
        "_emitted", "_epoch", "_ever_lost_reset", "_external_effect", "_finished", "_max_resets",
        "_reset_count", "_reset_pending", "_retractable", "_seq", "_sink", "_sink_errors",
        "_stale_surface", "_turn_id",
    )

    def __init__(self, *, turn_id: str, sink: TurnStreamSink, max_resets: int | None = None) -> None:
        if not isinstance(turn_id, str) or not turn_id:
            # Every plausible way to get here (an id read as `obj.id or ""`) collapses every turn
            # of a run into one scope on the client, the bug the field exists to prevent.
            raise UsageError(f"turn_id must be a non-empty string, got {turn_id!r}")
        if max_resets is not None and (
            isinstance(max_resets, bool) or not isinstance(max_resets, int) or max_resets < 0
        ):
            raise UsageError(
                f"max_resets must be a non-negative integer or None, got {max_resets!r}"
            )
        # Snapshotted, never re-read: a sink whose flag flipped after the first byte could otherwise
        # un-clamp routing after the executor was told the turn was replayable.
        retractable = getattr(sink, "retractable", None)
        if not isinstance(retractable, bool):
            raise UsageError(f"sink.retractable must be a bool, got {retractable!r}")
        if not callable(getattr(sink, "emit", None)):
            raise UsageError("sink.emit must be callable")
        self._turn_id = turn_id
        self._sink = sink
        self._max_resets = max_resets
        self._retractable = retractable
        self._epoch = -1
        self._seq = 0
        self._reset_count = 0
        self._sink_errors = 0
        self._finished = False
        # Text reached the sink at least once this turn (whether or not it can be taken back).
        self._emitted = False
        # Held, not sent, so an attempt that dies before producing anything leaves the previous
        # attempt's text on screen: partial text plus an error beats a blank space plus an error.
        self._reset_pending: TurnResetReason | None = None
        # The surface shows an epoch it will never be told to clear (a reset was lost, or the
        # budget ran out before one could be armed). Either way: stop writing to it, or the next
        # attempt's text is spliced onto the abandoned one.
        self._stale_surface = False
        # A reset was *ever* lost. Separate from _stale_surface, which clears when a later reset
        # lands, because produced_output must never un-latch.
        self._ever_lost_reset = False
        self._external_effect = False

    # -- read-outs ---------------------------------------------------------------------------------

    @property
    def turn_id(self) -> str:
        return self._turn_id

    @property
    def epoch(self) -> int:
        """The current attempt's epoch; ``-1`` before the first :meth:`begin_attempt`."""
        return self._epoch

    @property
    def reset_count(self) -> int:
        """Resets handed to the sink, including one whose ``emit`` raised (it spent the budget, and
        whether the client saw it cannot be known here)."""
        return self._reset_count

    @property
    def sink_errors(self) -> int:
        """Events whose ``emit`` raised. Emission continues after a failure: a momentarily closed
        socket should not end a healthy model turn. A failed text event on a retractable surface
        leaves the turn replayable; a failed *reset* latches :attr:`produced_output`, because a lost
        wipe cannot be repaired by sending more. This count is the host's cue to resync the client."""
        return self._sink_errors

    @property
    def finished(self) -> bool:
        return self._finished

    @property
    def produced_output(self) -> bool:
        """Whether output reached a surface the caller cannot take back — the flag the routing
        executor clamps on; put it on the failure outcome.

        False while a retractable surface still has a wipe available; latches true on a
        non-retractable surface's first byte (a raising ``emit`` included), a lost reset, a spent
        reset budget, or :meth:`mark_produced_output`. Monotonic. It answers "may routing replay this
        turn", not "did the reader see anything": do not source a metric from it.
        """
        if self._external_effect:
            return True
        if not self._emitted:
            return False
        return not self._retractable or self._ever_lost_reset or self._budget_spent()

    def _budget_spent(self) -> bool:
        return self._max_resets is not None and self._reset_count >= self._max_resets

    # -- operations --------------------------------------------------------------------------------

    def begin_attempt(self, reason: TurnResetReason | None = None) -> None:
        """Open an attempt: once per attempt function call (defect retry, provider traversal, model
        fallback) plus once per structured-output retry (``"structured_output_retry"``).

        After an attempt that emitted text this arms a reset, delivered lazily with the new attempt's
        first text (or by ``finish("succeeded")``). An explicit ``reason`` sticks until the reset is
        delivered: a later call without one does not overwrite it, which is what lets a caller's
        structured-output loop open the attempt with its reason and then re-enter an executor whose
        attempt function opens it again with the default.
        """
        if reason is not None and reason not in TURN_RESET_REASONS:
            raise UsageError(f"reset reason must be one of {TURN_RESET_REASONS}, got {reason!r}")
        if self._finished:
            return
        # The epoch advances on every attempt, owed reset or not: it identifies the attempt.
        self._epoch += 1
        if not self._emitted:
            return  # nothing on screen, nothing to retract
        if not self._retractable:
            # A permanent surface cannot honour a wipe, and a naive sink might delete a posted
            # message. produced_output latched on the first byte, so routing has already stopped.
            return
        if self._budget_spent():
            # No wipe left: this attempt's text would land on top of the last one. Whatever still
            # drives attempts is a caller-owned loop; stop writing instead of splicing.
            self._stale_surface = True
            return
        if reason is not None:
            self._reset_pending = reason
        elif self._reset_pending is None:
            self._reset_pending = "attempt_failed"

    def observe(self, text: str | None) -> None:
        """Forward one content delta. ``None`` and ``""`` are no-ops and not output (an empty content
        field showed the reader nothing). Raises :class:`~bindloop.errors.ProtocolError` before the
        first :meth:`begin_attempt` — checked even for empty text, so a host that forgot it fails on
        the first chunk instead of shipping retries that cannot be told apart."""
        if text is not None and not isinstance(text, str):
            raise UsageError(f"observe() takes text (str or None), got {type(text).__name__}")
        if self._finished:
            return
        if self._epoch < 0:
            raise ProtocolError(
                "observe() before begin_attempt(): every attempt, the first included, must open one, "
                "or a retry cannot be told apart from the attempt it replaces"
            )
        if not text:
            return
        # Checked before the flush: once the surface is stranded, a reset now would blank the
        # text the reader relies on and possibly be followed by nothing. One coherent (if stale)
        # answer beats a spliced one or an empty one.
        if self._stale_surface:
            return
        self._flush_reset()
        if self._stale_surface:  # the flush itself was lost
            return
        self._emitted = True
        # Stamped before delivery so a re-entrant sink that opens an attempt from inside emit()
        # cannot back-date this delta into the newer epoch.
        event = TurnTextEvent(turn_id=self._turn_id, epoch=self._epoch, seq=self._next_seq(),
                              text=text)
        self._deliver(event)

    def finish(self, outcome: TurnOutcome) -> None:
        """End the turn, saying how. Idempotent; afterwards every method is a no-op.

        ``"succeeded"`` flushes a still-armed reset (the failed attempt's narration must not stay on
        screen attributed to a turn that answered with tool calls only); ``"failed"`` drops it
        (partial text plus an error beats a wiped screen plus an error).
        """
        if outcome not in ("succeeded", "failed"):
            raise UsageError(f"finish() takes 'succeeded' or 'failed', got {outcome!r}")
        if self._finished:
            return
        self._finished = True
        if outcome == "succeeded":
            self._flush_reset()
        else:
            self._reset_pending = None

    def mark_produced_output(self) -> None:
        """Latch :attr:`produced_output` for an effect this module cannot see (a provider-side
        effect, a write a replay would repeat, a second surface the host wrote to). Irreversible; a
        no-op after :meth:`finish`. Does not stop emission: if this attempt succeeds its text is
        still the answer."""
        if self._finished:
            return
        self._external_effect = True

    # -- internals ---------------------------------------------------------------------------------

    def _next_seq(self) -> int:
        seq = self._seq
        self._seq += 1
        return seq

    def _deliver(self, event: TurnStreamEvent) -> bool:
        try:
            self._sink.emit(event)
        except Exception:
            # Counted, not raised: see sink_errors. BaseException (cancellation, KeyboardInterrupt)
            # still propagates.
            self._sink_errors += 1
            return False
        return True

    def _flush_reset(self) -> None:
        reason = self._reset_pending
        if reason is None:
            return
        self._reset_pending = None
        self._reset_count += 1
        event = TurnResetEvent(turn_id=self._turn_id, epoch=self._epoch, seq=self._next_seq(),
                               reason=reason)
        if self._deliver(event):
            self._stale_surface = False  # the wipe landed; writing is safe again
        else:
            self._stale_surface = True
            self._ever_lost_reset = True


def create_turn_text_stream(*, turn_id: str, sink: TurnStreamSink,
                            max_resets: int | None = None) -> TurnTextStream:
    """A :class:`TurnTextStream` for one turn.

    ``turn_id`` is required and must be a non-empty string unique among the turns a client may see
    at once (a message id, a run id plus a turn ordinal): an empty default would merge every turn
    into one scope on the client. It is a correlation label, not an authorization boundary — the
    sink must already be scoped to its recipient.

    ``max_resets`` caps how often the surface may be wiped in this turn. There is no default
    because tolerable flicker is a product judgement. Reaching it neither raises nor stops emission;
    it latches :attr:`TurnTextStream.produced_output`, so the next failure clamps routing. (It
    therefore also bounds how many endpoints record a failure with the circuit breaker per turn.)

    Raises :class:`~bindloop.errors.UsageError` for an empty ``turn_id``, a ``max_resets`` that is
    not a non-negative integer, or a sink without a bool ``retractable`` and a callable ``emit``.
    """
    return TurnTextStream(turn_id=turn_id, sink=sink, max_resets=max_resets)
