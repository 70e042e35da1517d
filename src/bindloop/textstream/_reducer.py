"""The client half of the turn text stream: rendering events that may arrive reordered or twice.

On a real transport (a relay, a fan-out to several tabs, a reconnecting socket) a delta from a
failed attempt can arrive *after* the retry's reset, and text alone cannot be told from stale text.
The reducer uses all three keys an event carries: ``turn_id`` scopes everything (``epoch`` and
``seq`` restart each turn), ``seq`` orders and de-duplicates (drop at or below the last applied, hold
what arrives early), and only then ``epoch`` drops a stale attempt and a ``reset`` clears.

``seq`` is what makes the ``epoch`` rule sound: by epoch alone, a retry's text arriving before its own
reset would be accepted and then cleared by that reset, leaving the surface blank.

The same reducer exists in JavaScript (``harness/wasm/demo/turn-stream.js``); both run the JSON vectors in
``tests/textstream/vectors/turn_stream_vectors.json``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

import msgspec

from ..errors import UsageError
from ._text_stream import TurnResetEvent, TurnStreamEvent, TurnTextEvent

__all__ = ("ReduceOutcome", "TurnStreamReducer", "TurnView")

ReduceOutcome: TypeAlias = Literal["applied", "held", "duplicate", "stale", "resync_needed", "ended"]
"""What :meth:`TurnStreamReducer.apply` did with one event:

- ``applied``: it was next in ``seq`` order and changed the rendering (held events it unblocked
  were applied with it);
- ``held``: it arrived ahead of a gap and waits for the gap to fill;
- ``duplicate``: its ``seq`` was already applied or is already held;
- ``stale``: it was in order but from an attempt older than the newest seen, so it was dropped;
- ``resync_needed``: the hold buffer overflowed (now or earlier) — the gap will not fill, so stop
  rendering deltas for this turn and resync it from the persisted message;
- ``ended``: the turn already received its final signal (:meth:`TurnStreamReducer.end_turn`).
"""

class TurnView(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of one turn's rendering: a fresh value after every change, so a UI store that
    compares by identity re-renders. Key the rendered element by ``turn_id``, never by ``epoch``
    (keying by epoch turns every reset into an unmount that loses focus, selection and scroll)."""

    turn_id: str
    text: str
    epoch: int
    last_seq: int
    held: int
    resync_needed: bool


class _Turn:
    __slots__ = ("held", "last_seq", "newest_epoch", "parts", "resync_needed")

    def __init__(self) -> None:
        # -1, not 0: seq starts at 0, so starting at 0 would drop the first delta of every turn.
        self.last_seq = -1
        self.newest_epoch = -1
        self.parts: list[str] = []
        self.held: dict[int, TurnStreamEvent] = {}
        self.resync_needed = False

    def apply_in_order(self, event: TurnStreamEvent) -> bool:
        self.last_seq = event.seq
        if event.epoch < self.newest_epoch:
            return False
        self.newest_epoch = event.epoch
        if isinstance(event, TurnResetEvent):
            self.parts.clear()
        else:
            self.parts.append(event.text)
        return True


def _coerce(event: TurnStreamEvent | Mapping[str, Any]) -> TurnStreamEvent:
    if isinstance(event, (TurnTextEvent, TurnResetEvent)):
        return event
    if isinstance(event, Mapping):
        try:
            return msgspec.convert(event, TurnTextEvent | TurnResetEvent)
        except msgspec.ValidationError as exc:
            raise UsageError(f"not a turn stream event: {exc}") from exc
    raise UsageError(f"not a turn stream event: {type(event).__name__}")


class TurnStreamReducer:
    """Renders turn stream events per ``turn_id``, tolerating reordering and duplication.

    ``max_held`` bounds the early events held per turn (on a reconnect the gap never fills, and an
    unbounded buffer would freeze the surface while growing one entry per token); overflowing it
    marks the turn ``resync_needed``. ``remember_ended`` bounds how many ended turn ids are remembered
    so a late event cannot resurrect a finished turn.
    """

    __slots__ = ("_ended", "_max_held", "_remember_ended", "_turns")

    def __init__(self, *, max_held: int = 256, remember_ended: int = 1024) -> None:
        for name, value in (("max_held", max_held), ("remember_ended", remember_ended)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise UsageError(f"{name} must be a positive integer, got {value!r}")
        self._max_held = max_held
        self._remember_ended = remember_ended
        self._turns: dict[str, _Turn] = {}
        self._ended: OrderedDict[str, None] = OrderedDict()

    def apply(self, event: TurnStreamEvent | Mapping[str, Any]) -> ReduceOutcome:
        """Apply one event (a :class:`TurnTextEvent` / :class:`TurnResetEvent`, or its decoded JSON
        mapping). Raises :class:`~bindloop.errors.UsageError` only for something that is not an
        event."""
        event = _coerce(event)
        turn_id = event.turn_id
        if turn_id in self._ended:
            return "ended"
        turn = self._turns.get(turn_id)
        if turn is None:
            turn = self._turns[turn_id] = _Turn()
        if turn.resync_needed:
            return "resync_needed"
        if event.seq <= turn.last_seq:
            return "duplicate"
        if event.seq > turn.last_seq + 1:
            if event.seq in turn.held:
                return "duplicate"
            if len(turn.held) >= self._max_held:
                turn.resync_needed = True
                turn.held.clear()
                return "resync_needed"
            turn.held[event.seq] = event
            return "held"
        applied = turn.apply_in_order(event)
        while (early := turn.held.pop(turn.last_seq + 1, None)) is not None:
            turn.apply_in_order(early)
        return "applied" if applied else "stale"

    def end_turn(self, turn_id: str) -> None:
        """The turn's final signal (the persisted message landed, ``on_assistant_message`` fired):
        drop its state. Later events for it are answered ``ended``."""
        self._turns.pop(turn_id, None)
        self._ended[turn_id] = None
        self._ended.move_to_end(turn_id)
        while len(self._ended) > self._remember_ended:
            self._ended.popitem(last=False)

    def text(self, turn_id: str) -> str | None:
        """What the turn renders now, or ``None`` for a turn with no state (never seen or ended)."""
        turn = self._turns.get(turn_id)
        if turn is None:
            return None
        if len(turn.parts) > 1:
            turn.parts[:] = ["".join(turn.parts)]
        return turn.parts[0] if turn.parts else ""

    def view(self, turn_id: str) -> TurnView | None:
        """A fresh snapshot of the turn, or ``None`` for a turn with no state."""
        turn = self._turns.get(turn_id)
        text = self.text(turn_id)
        if turn is None or text is None:
            return None
        return TurnView(turn_id=turn_id, text=text, epoch=turn.newest_epoch,
                        last_seq=turn.last_seq, held=len(turn.held),
                        resync_needed=turn.resync_needed)

    def needs_resync(self, turn_id: str) -> bool:
        turn = self._turns.get(turn_id)
        return turn is not None and turn.resync_needed

    @property
    def turns(self) -> tuple[str, ...]:
        """Turn ids with live state, in first-seen order."""
        return tuple(self._turns)
