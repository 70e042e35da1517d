"""What a reconnected client is sent of a Session object's log while the run it follows may be
dead (:class:`LogFollower`); the encoder inputs a run keeps to be continued are
:mod:`bindloop.hosts.asgi.replay`'s.
"""

from __future__ import annotations

from typing import Any, Literal

__all__ = ("LogFollower",)

Logged = list[Any]
"""One logged event: ``[offset, event, payload]``."""
Next = Literal["more", "wait", "reread", "end"]


class LogFollower:
    """What a reconnected stream sends of a chat's log (the batches the Session object's
    ``read_log`` answers), following run ``run`` after offset ``after``.

    What a run that is not known to be alive (its lease ran out) logged after its last save is
    held back: if the run is dead, its continuation repeats the log only up to that save, and
    the stream goes on with the continuation there. A stream that sent nothing yet follows the
    next run from its start; one that already sent more than a continuation repeats (a newer
    request, or events of the dead attempt) ends, and its client reconnects. So what one stream
    sends is always the start of one run's stream."""

    def __init__(self, run: str, after: int) -> None:
        self.run = run
        self.after = after  # where the next read starts
        self.sent = after  # the last offset sent to the client
        self._held: list[Logged] = []

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
        sure = batch["live"] or batch["ended"]
        over = not sure and not batch["lost"] and not events  # given up, never continued
        out: list[Logged] = []
        while self._held and (sure or over or self._held[0][0] <= batch["saved"]):
            out.append(self._held.pop(0))
        if out:
            self.sent = out[-1][0]
        if (batch["ended"] and not events) or over:  # (an ended log may have more to read)
            return out, "end"
        return out, "more" if events else "wait"
