"""The event log each protocol run owns: every frame the run produced, addressed by offset, so a
client that dropped can read on from the last event it saw (SSE ``id:`` / ``Last-Event-ID``).

:class:`RunLogs` is the port and :class:`MemoryRunLogs` its in-memory version (one process); the
stores several processes share are ``bindloop.hosts.asgi.run_logs.SqliteRunLogs``,
``bindloop.hosts.stores.postgres_chat.PostgresRunLogs`` and
``bindloop.hosts.stores.redis_chat.RedisRunLogs``. A run holds a
**lease** (``lease_until_ms``) its process renews while it runs: a second run of the same chat is
refused while the lease is live (:class:`RunBusyError`).
"""

from __future__ import annotations

from typing import Literal, Protocol

import msgspec

from ..errors import UsageError
from ._errors import RunBusyError, RunsFullError

__all__ = ("MemoryRunLogs", "RunLogs", "RunRecord", "RunStatus")

RunStatus = Literal["running", "finished", "failed", "stopped", "interrupted", "continued"]


class RunRecord(msgspec.Struct, frozen=True, kw_only=True):
    run_id: str
    chat_id: str
    protocol: str
    status: RunStatus
    events: int
    lease_until_ms: float = 0.0
    stop_requested: bool = False
    continued_by: str | None = None
    """``continued``: the run that took this one over after its process died; its log repeats
    this one's first ``continued_at`` frames, byte for byte."""
    continued_at: int = 0
    claimed: bool = False
    """Its host stored what a continuation needs (logs that continue runs): lost, it is taken
    over."""
    saved: int = 0
    """The frames its log had at its last save: what a continuation repeats."""

    def live(self, now_ms: float) -> bool:
        """Running, and its process renewed the lease in time."""
        return self.status == "running" and self.lease_until_ms > now_ms


class RunLogs(Protocol):
    """The event log of each protocol run, addressed by offset, with the run's lease: ``begin``
    opens a run's log (refusing with :class:`RunBusyError` while the chat's latest run holds a live
    lease, with :class:`RunsFullError` when no room is left), ``renew`` extends the lease and says
    whether a stop was requested, ``append`` returns the frame's offset, ``read`` returns the
    frames after an offset, ``end`` closes the run with its status, ``delete_chat`` forgets a
    chat's runs."""

    def begin(self, run_id: str, chat_id: str, protocol: str, *, now_ms: float,
              lease_until_ms: float) -> None: ...
    def renew(self, run_id: str, lease_until_ms: float) -> bool: ...
    def request_stop(self, run_id: str) -> None: ...
    def append(self, run_id: str, payload: bytes) -> int: ...
    def end(self, run_id: str, status: RunStatus) -> None: ...
    def read(self, run_id: str, after: int | None) -> list[tuple[int, bytes]]: ...
    def record(self, run_id: str) -> RunRecord | None: ...
    def latest(self, chat_id: str, protocol: str) -> RunRecord | None: ...

    def delete_chat(self, chat_id: str, protocol: str, *, now_ms: float) -> bool:
        """Forget every run of the chat with all it stored (frames, request, saves); ``False``
        when it has none. A run of it still live (its lease) is refused with
        :class:`RunBusyError` and nothing is deleted."""
        ...


class _Run:
    __slots__ = ("chat_id", "events", "lease_until_ms", "protocol", "size", "started_ms", "status",
                 "stop")

    def __init__(self, chat_id: str, protocol: str, lease_until_ms: float,
                 started_ms: float) -> None:
        self.chat_id = chat_id
        self.started_ms = started_ms
        self.size = 0
        self.protocol = protocol
        self.status: RunStatus = "running"
        self.events: list[bytes] = []
        self.lease_until_ms = lease_until_ms
        self.stop = False


class MemoryRunLogs:
    """Run logs in this process's memory.

    ``keep`` bounds the runs held, ``max_bytes`` the bytes of their frames, and ``max_age_ms`` how
    long an ended run's log outlives its start. At each :meth:`begin` the runs past a bound that
    have ended are dropped, oldest (first begun) first; a run still ``running`` is never dropped (its stream and
    its next ``append`` need its log), so when every kept run is running, :meth:`begin` refuses
    the new one with :class:`RunsFullError` (the host answers 503) instead of dropping one in
    flight."""

    def __init__(self, keep: int = 1000, *, max_bytes: int = 256 * 1024 * 1024,
                 max_age_ms: float = 24 * 3_600_000) -> None:
        if keep < 1 or max_bytes < 1 or not max_age_ms > 0:
            raise UsageError("MemoryRunLogs(keep=, max_bytes=, max_age_ms=) must be positive")
        self._runs: dict[str, _Run] = {}
        self._latest: dict[tuple[str, str], str] = {}
        self._keep = keep
        self._max_bytes = max_bytes
        self._max_age_ms = max_age_ms
        self._bytes = 0

    def begin(self, run_id: str, chat_id: str, protocol: str, *, now_ms: float,
              lease_until_ms: float) -> None:
        if run_id in self._runs:
            raise UsageError(f"run {run_id!r} already has a log")
        latest = self.latest(chat_id, protocol)
        if latest is not None and latest.live(now_ms):
            raise RunBusyError(latest.run_id)
        if latest is not None and latest.status == "running":
            self._runs[latest.run_id].status = "interrupted"
        self._prune(now_ms)
        if len(self._runs) >= self._keep:
            raise RunsFullError(len(self._runs))
        self._runs[run_id] = _Run(chat_id, protocol, lease_until_ms, now_ms)
        self._latest[(chat_id, protocol)] = run_id

    def _prune(self, now_ms: float) -> None:
        """Drop ended runs, in the order they began, while a bound is passed (room is made for
        one more run). It stops at the first ended run within every bound -- the runs after it
        began later, so are no older -- so a begin costs the runs it drops and the running
        ones before them, not a pass over every log kept."""
        doomed: list[str] = []
        count, size = len(self._runs), self._bytes
        for run_id, run in self._runs.items():
            if run.status == "running":
                continue
            if (count < self._keep and size <= self._max_bytes
                    and now_ms - run.started_ms <= self._max_age_ms):
                break
            doomed.append(run_id)
            count, size = count - 1, size - run.size
        for run_id in doomed:
            run = self._runs.pop(run_id)
            self._bytes -= run.size
            if self._latest.get((run.chat_id, run.protocol)) == run_id:
                del self._latest[(run.chat_id, run.protocol)]

    def renew(self, run_id: str, lease_until_ms: float) -> bool:
        run = self._runs[run_id]
        run.lease_until_ms = lease_until_ms
        return run.stop

    def request_stop(self, run_id: str) -> None:
        self._runs[run_id].stop = True

    def append(self, run_id: str, payload: bytes) -> int:
        run = self._runs[run_id]
        run.events.append(payload)
        run.size += len(payload)
        self._bytes += len(payload)
        return len(run.events) - 1

    def end(self, run_id: str, status: RunStatus) -> None:
        self._runs[run_id].status = status

    def read(self, run_id: str, after: int | None) -> list[tuple[int, bytes]]:
        run = self._runs.get(run_id)
        if run is None:
            return []
        start = 0 if after is None else after + 1
        return list(enumerate(run.events[start:], start))

    def record(self, run_id: str) -> RunRecord | None:
        run = self._runs.get(run_id)
        if run is None:
            return None
        return RunRecord(run_id=run_id, chat_id=run.chat_id, protocol=run.protocol,
                         status=run.status, events=len(run.events),
                         lease_until_ms=run.lease_until_ms, stop_requested=run.stop)

    def latest(self, chat_id: str, protocol: str) -> RunRecord | None:
        run_id = self._latest.get((chat_id, protocol))
        return None if run_id is None else self.record(run_id)

    def delete_chat(self, chat_id: str, protocol: str, *, now_ms: float) -> bool:
        latest = self.latest(chat_id, protocol)
        if latest is not None and latest.live(now_ms):
            raise RunBusyError(latest.run_id)
        doomed = [r for r, run in self._runs.items()
                  if (run.chat_id, run.protocol) == (chat_id, protocol)]
        for run_id in doomed:
            self._bytes -= self._runs.pop(run_id).size
        self._latest.pop((chat_id, protocol), None)
        return bool(doomed)
