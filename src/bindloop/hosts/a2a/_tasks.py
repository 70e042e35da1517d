"""The A2A server's tasks: one task's fields, conversation and update log (:class:`Task`), and the
tasks and contexts the server keeps, by identity (:class:`TaskStore`).

A task's log holds the updates its streams still read, at absolute positions; it is dropped once
no run goes and no stream reads. The store keeps at most ``max_tasks``: past it the tasks that
ended longest ago are forgotten, with their contexts' transcripts.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import msgspec

from bindloop.contracts import Message
from bindloop.hosts.asgi.chat import scoped_chat_id
from bindloop.protocols.a2a import (
    A2aArtifact,
    A2aErrorCode,
    A2aMessage,
    A2aPending,
    A2aRpcError,
    A2aStatusUpdate,
    A2aStreamResponse,
    A2aTask,
    A2aTaskState,
    A2aTaskStatus,
    join_a2a_text_parts,
)

__all__ = ("Task", "TaskStore", "check_history_length", "status_event",
           "until_settled")


class Task:
    """One A2A task: its public fields, its conversation, and its run while one goes."""

    def __init__(self, task_id: str, context_id: str, identity: str, now_ms: float) -> None:
        self.id = task_id
        self.context_id = context_id
        self.identity = identity
        self.status = A2aTaskStatus(state="TASK_STATE_SUBMITTED")
        self.history: list[A2aMessage] = []
        self.artifacts: dict[str, A2aArtifact] = {}
        # The updates its streams still read: positions are absolute (``log_base`` is the first
        # one kept); once no run goes and no stream reads, the log is dropped (the task's fields
        # hold what it says).
        self.log: list[A2aStreamResponse] = []
        self.log_base = 0
        self.readers = 0
        self.changed = anyio.Event()
        self.ended = anyio.Event()
        self.scope = anyio.CancelScope()
        self.running = False
        self.transcript: tuple[Message, ...] = ()
        self.pending: tuple[A2aPending, ...] = ()
        self.updated_ms = now_ms
        self.runs = 0

    @property
    def state(self) -> str:
        return self.status.state

    @property
    def log_end(self) -> int:
        return self.log_base + len(self.log)

    def trim(self) -> None:
        """Drop the log when nothing needs it (no run, no stream)."""
        if not self.running and self.readers == 0:
            self.log_base += len(self.log)
            self.log = []

    def snapshot(self, history_length: int | None = None) -> A2aTask:
        history = tuple(self.history)
        if history_length is not None:
            history = history[len(history) - history_length:] if history_length > 0 else ()
        return A2aTask(id=self.id, context_id=self.context_id, status=self.status,
                       artifacts=tuple(self.artifacts.values()), history=history)

    def apply(self, update: A2aStreamResponse, now_ms: float) -> None:
        """Fold one update into the task and log it for its streams."""
        if update.status_update is not None:
            self.status = update.status_update.status
            if self.status.message is not None:
                self.history.append(self.status.message)
        elif update.artifact_update is not None:
            change = update.artifact_update
            old = self.artifacts.get(change.artifact.artifact_id)
            if change.append and old is not None:
                parts = join_a2a_text_parts(old.parts + change.artifact.parts)
                self.artifacts[old.artifact_id] = msgspec.structs.replace(old, parts=parts)
            else:
                self.artifacts[change.artifact.artifact_id] = change.artifact
        self.updated_ms = now_ms
        self.log.append(update)
        self.changed.set()
        self.changed = anyio.Event()


def check_history_length(length: int | None) -> None:
    """A request's ``historyLength``: none, or at least 0 (``INVALID_PARAMS`` otherwise)."""
    if length is not None and length < 0:
        raise A2aRpcError(A2aErrorCode.INVALID_PARAMS, "historyLength must be >= 0")


def status_event(task: Task, state: A2aTaskState, timestamp: str) -> A2aStatusUpdate:
    """``task``'s status update to ``state`` at ``timestamp``."""
    return A2aStatusUpdate(task_id=task.id, context_id=task.context_id,
                           status=A2aTaskStatus(state=state, timestamp=timestamp))


async def until_settled(task: Task) -> None:
    """Return once ``task`` runs no more (ended, or waiting on input)."""
    while task.running:
        await task.ended.wait()


class TaskStore:
    """The tasks (oldest first) and each context's last task, under ids scoped by identity: a task
    and a context belong to the identity that made them; another finds neither."""

    def __init__(self, max_tasks: int) -> None:
        self._max_tasks = max_tasks
        self._tasks: dict[str, Task] = {}  # scoped task id -> task, oldest first
        self._contexts: dict[str, str] = {}  # scoped context id -> scoped id of its last task

    def __iter__(self) -> Iterator[Task]:
        """Every task kept, oldest first."""
        return iter(self._tasks.values())

    def find(self, identity: str, task_id: str) -> Task:
        """``identity``'s task ``task_id``; ``TASK_NOT_FOUND`` when there is none."""
        task = self._tasks.get(scoped_chat_id(identity, task_id))
        if task is None:
            raise A2aRpcError(A2aErrorCode.TASK_NOT_FOUND, "task not found")
        return task

    def last_in_context(self, identity: str, context_id: str) -> Task | None:
        """The latest task of ``identity``'s context ``context_id``, if it is still kept."""
        return self._tasks.get(self._contexts.get(scoped_chat_id(identity, context_id), ""))

    def add(self, task: Task) -> None:
        """Keep ``task`` as the latest of its context."""
        key = scoped_chat_id(task.identity, task.id)
        self._tasks[key] = task
        self._contexts[scoped_chat_id(task.identity, task.context_id)] = key

    def forget_old(self) -> None:
        """Past ``max_tasks``, forget the tasks that ended longest ago (never a running one)."""
        while len(self._tasks) > self._max_tasks:
            oldest = next((k for k, t in self._tasks.items() if not t.running), None)
            if oldest is None:
                return
            gone = self._tasks.pop(oldest)
            ctx = scoped_chat_id(gone.identity, gone.context_id)
            if self._contexts.get(ctx) == oldest:
                del self._contexts[ctx]

    def list(self, identity: str, params: dict[str, Any]) -> dict[str, Any]:
        """The ``ListTasks`` result: ``identity``'s tasks, latest update first, filtered by
        ``contextId`` and ``status``, ``pageSize`` of them (1 to 100; no further pages)."""
        context = params.get("contextId")
        state = params.get("status")
        size = params.get("pageSize", 50)
        if not isinstance(size, int) or isinstance(size, bool) or not 1 <= size <= 100:
            raise A2aRpcError(A2aErrorCode.INVALID_PARAMS, "pageSize must be 1 to 100")
        if params.get("pageToken"):
            raise A2aRpcError(A2aErrorCode.INVALID_PARAMS, "unknown pageToken")
        mine = [t for t in self if t.identity == identity
                and (context is None or t.context_id == context)
                and (state in (None, "TASK_STATE_UNSPECIFIED") or t.state == state)]
        mine.sort(key=lambda t: t.updated_ms, reverse=True)
        with_artifacts = params.get("includeArtifacts") is True
        length = params.get("historyLength")
        if length is not None and (not isinstance(length, int) or isinstance(length, bool)):
            raise A2aRpcError(A2aErrorCode.INVALID_PARAMS, "historyLength must be an integer")
        check_history_length(length)
        tasks = []
        for t in mine[:size]:
            snap = t.snapshot(length)
            if not with_artifacts:
                snap = msgspec.structs.replace(snap, artifacts=())
            tasks.append(snap)
        return {"tasks": tasks, "nextPageToken": "", "pageSize": size, "totalSize": len(mine)}
