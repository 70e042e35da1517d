"""What a resumed stream sends of a run's log while that run may be dead: :class:`Liveness`, the
one rule both bindings hold events back by, and :class:`LogFollower`, the Worker's follower of a
Session object's log built on it (the ASGI app applies :class:`Liveness` to its store's
:class:`~bindloop.stores.RunRecord` in ``ChatApp._tail``).

The rule: a continuable run served by another process (isolate) may have died while its lease
still looks live -- a client reconnects right after a kill. Its continuation repeats the log
only up to the run's last save, so what the run logged after that save is held back until the
run shows it is alive (it logs more, or renews its lease, after the follower first saw it). If
it is dead, its lease runs out, it is continued from the save, and the stream goes on with the
continuation there; so a resume never ends early and never mixes two attempts' events.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ("Liveness", "LogFollower")


class Liveness:
    """Whether the run a follower reads is known to be alive: seen live, and seen to log more
    events or renew its lease since this follower first saw it (a run it switches to is watched
    afresh)."""

    def __init__(self) -> None:
        self._first: tuple[str, int, float] | None = None  # (run, logged, lease end) first seen
        self._proven = ""

    def alive(self, run: str, *, logged: int, lease_until_ms: float, live: bool) -> bool:
        """Note what run ``run`` shows now -- ``logged`` events, a lease until
        ``lease_until_ms``, ``live``: that lease is not out -- and answer whether it is proven
        alive (once proven, it stays so while its lease is live)."""
        if self._first is None or self._first[0] != run:
            self._first = (run, logged, lease_until_ms)
        if live and (logged > self._first[1] or lease_until_ms > self._first[2]):
            self._proven = run
        return live and self._proven == run


Logged = list[Any]
"""One logged event: ``[offset, event, payload]``."""
Next = Literal["more", "wait", "reread", "end"]


class LogFollower:
    """What a reconnected stream sends of a chat's log (the batches the Worker's Session object's
    ``read_log`` answers: ``run``, ``events``, ``ended``, ``live``, ``lost``, ``saved``,
    ``continues``, and ``logged``/``expires`` -- the run's event count and lease end -- for
    :class:`Liveness`), following run ``run`` after offset ``after``.

    What the run logged after its last save is held back until it is proven alive
    (:class:`Liveness`; the module docstring says why); a run that ended is sent whole. If the
    run is dead, its continuation repeats the log up to that save, and the stream goes on with
    the continuation there. A stream that sent nothing yet follows the next run from its start;
    one that already sent more than a continuation repeats (a newer request, or events of the
    dead attempt streamed while it was proven alive) ends, and its client reconnects. So what one
    stream sends is always the start of one run's stream."""

    def __init__(self, run: str, after: int) -> None:
        self.run = run
        self.after = after  # where the next read starts
        self.sent = after  # the last offset sent to the client
        self._held: list[Logged] = []
        self._liveness = Liveness()

    def take(self, batch: dict[str, Any]) -> tuple[list[Logged], Next]:
        """The events of ``batch`` to send now, in order, and what to do next: read again at
        once (``more``; ``reread``: the stream switched to the batch's newer run), after a
        pause (``wait``), or close the stream (``end``)."""
        if batch["run"] != self.run:
            cont = batch["continues"]
            repeats = cont is not None and cont["run"] == self.run and self.sent <= cont["offset"]
            if self.sent >= 0 and not repeats:
                return [], "end"
            self.run, self.after, self._held = batch["run"], self.sent, []
            return [], "reread"
        events: list[Logged] = batch["events"]
        if events:
            self.after = events[-1][0]
        self._held.extend(events)
        # A batch without ``logged``/``expires`` (a Session object of an older release, during
        # its upgrade): the events read so far stand for the count, the lease end never moves.
        alive = self._liveness.alive(self.run, logged=int(batch.get("logged", self.after + 1)),
                                     lease_until_ms=float(batch.get("expires", 0)),
                                     live=bool(batch["live"]))
        sure = alive or batch["ended"]
        over = not batch["live"] and not batch["ended"] and not batch["lost"] and not events
        out: list[Logged] = []  # (over: given up, never continued)
        while self._held and (sure or over or self._held[0][0] <= batch["saved"]):
            out.append(self._held.pop(0))
        if out:
            self.sent = out[-1][0]
        if (batch["ended"] and not events) or over:  # (an ended log may have more to read)
            return out, "end"
        return out, "more" if events else "wait"
