"""The bound on one run's event log, the same for every binding: :class:`LogQuota` counts the
bytes of frames a run logged, and once they reach the bound the run is stopped and its stream
ends with the protocol's error (:class:`LogFullError`, told to the client as ``log_full``).
:func:`~bindloop.hosts.chat.run.drive_run` applies it, so a run that streams without end (a
model that never stops talking, a tool reporting in a loop) cannot grow its log -- memory, a
SQLite file, a Durable Object -- without bound. A live run is never evicted for it: it is
stopped, and its log keeps every frame it logged, up to the error."""

from __future__ import annotations

from collections.abc import Sequence

from bindloop.errors import RunStoppedError

__all__ = ("DEFAULT_MAX_LOG_BYTES", "LogFullError", "LogQuota")

DEFAULT_MAX_LOG_BYTES = 8 * 1024 * 1024
"""The default bound on one run's log: 8 MiB of frames (``ChatApp(max_log_bytes=)``, the
Worker's ``MAX_LOG_BYTES``) -- hundreds of long answers with their tool calls, or a 1 MiB AG-UI
state echoed a few times."""


class LogFullError(RunStoppedError):
    """A run's log reached its quota and the run was stopped: ``logged`` bytes of frames against
    ``max_bytes``. The host logs it; the client reads ``log_full``
    (:func:`~bindloop.hosts.chat.errors.error_text`)."""

    def __init__(self, logged: int, max_bytes: int) -> None:
        super().__init__(f"the run's log reached {logged} bytes of frames, its quota is "
                         f"{max_bytes} bytes: the run was stopped")
        self.logged = logged
        self.max_bytes = max_bytes


class LogQuota:
    """The bytes of frames one run logged (``used``: those logged before this object counted,
    e.g. a continuation's replay of the run it continues) against ``max_bytes``.

    :meth:`add` counts a batch of frames that was logged. The quota is checked between batches:
    a batch begun under the quota is logged whole (the stream stays well formed: a part it
    opens is known to the client when the error closes it), so a log holds at most
    ``max_bytes``, plus the batch that reached it, plus the closing error frames."""

    __slots__ = ("max_bytes", "used")

    def __init__(self, max_bytes: int, *, used: int = 0) -> None:
        if max_bytes < 1 or used < 0:
            raise ValueError(f"LogQuota(max_bytes=) must be at least 1 and used= at least 0, "
                             f"got {max_bytes!r} and {used!r}")
        self.max_bytes = max_bytes
        self.used = used

    @property
    def reached(self) -> bool:
        """The frames logged are at or past the quota: the run logs nothing more but its end."""
        return self.used >= self.max_bytes

    def add(self, payloads: Sequence[bytes]) -> bool:
        """Count ``payloads`` (logged); whether the quota is reached now."""
        return self.count(sum(len(p) for p in payloads))

    def count(self, size: int) -> bool:
        """Count ``size`` bytes of frames logged; whether the quota is reached now."""
        self.used += size
        return self.reached

    def error(self) -> LogFullError:
        """The reason the run was stopped, for the host's log and the client's category."""
        return LogFullError(self.used, self.max_bytes)
