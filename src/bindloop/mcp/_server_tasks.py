"""Tasks the server asks this client to run (the experimental tasks utility of 2025-11-25, with
the client as the receiver): a ``sampling/createMessage`` or ``elicitation/create`` carrying a
``task`` is answered at once with the task (``CreateTaskResult``); the work — the same handler an
ordinary request reaches — runs in the client's background task group, and the server polls
``tasks/get``, lists ``tasks/list``, stops it with ``tasks/cancel`` and collects the outcome with
``tasks/result``, which waits until the task is done and answers exactly what the request would
have: its result (with the ``io.modelcontextprotocol/related-task`` ``_meta``) or its JSON-RPC
error.

Bounds and limits: a task is kept ``ttl`` ms from its creation (the server's ask, at most
``_MAX_TTL_MS``; then it is forgotten); at most ``_MAX_TASKS`` at once (the oldest finished ones go
first; with every slot working, a new one is refused). A client used without ``async with`` (a
bare ``connect()``) has no task group: the work then runs before the task is answered, already
finished. Task ids come from the client's ``task_ids`` port (default ``task-1``, ``task-2``, ...:
only the server this session talks to can ask for them); times from its ``wall_clock``.

A base class of :class:`~bindloop.mcp.McpHttpClient`, not public API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import msgspec

from ..clock import Clock, iso_timestamp
from ._errors import McpError, McpRequestRefused
from ._pending import CALLING
from ._serve import ServerRequestHandlers, serve_request
from ._session import McpDiscarded, McpServerRequest
from ._tasks import TERMINAL_TASK_STATUSES, McpTask
from ._urlwait import UrlElicitations

__all__ = ("ServerTasks",)

_INVALID_PARAMS = -32602
_INTERNAL = -32603
_MAX_TTL_MS = 3_600_000
_MAX_TASKS = 256
_POLL_MS = 500
_PAGE = 100
_TASKED = frozenset({"sampling/createMessage", "elicitation/create"})
RELATED_TASK = "io.modelcontextprotocol/related-task"


class _Entry:
    __slots__ = ("cancel", "created_ms", "done", "error", "method", "result", "status",
                 "status_message", "task_id", "ttl", "updated_ms")

    def __init__(self, task_id: str, method: str, created_ms: float, ttl: int) -> None:
        self.task_id = task_id
        self.method = method
        self.status = "working"
        self.status_message: str | None = None
        self.created_ms = created_ms
        self.updated_ms = created_ms
        self.ttl = ttl
        self.result: dict[str, Any] | None = None
        self.error: McpRequestRefused | None = None
        self.done = anyio.Event()
        self.cancel = anyio.CancelScope()

    def view(self) -> McpTask:
        return McpTask(task_id=self.task_id, status=self.status,
                       status_message=self.status_message, created_at=iso_timestamp(self.created_ms),
                       last_updated_at=iso_timestamp(self.updated_ms), ttl=self.ttl,
                       poll_interval=_POLL_MS)


class ServerTasks(UrlElicitations):
    _handlers: ServerRequestHandlers
    _tasks: anyio.abc.TaskGroup | None
    _wall: Clock
    _task_ids: Callable[[], str]
    _server_tasks: dict[str, _Entry]

    def server_tasks(self) -> tuple[McpTask, ...]:
        """The tasks the server asked this client to run and that are still kept, oldest
        first (what ``tasks/list`` answers)."""
        self._expire()
        return tuple(entry.view() for entry in self._server_tasks.values())

    def forget_server_tasks(self) -> None:
        """Drop every task the server asked for, cancelling the ones still working (done when
        the server ended the session: a new session's server cannot ask for them)."""
        entries, self._server_tasks = list(self._server_tasks.values()), {}
        for entry in entries:
            entry.cancel.cancel()

    def _tasked(self, request: McpServerRequest) -> bool:
        """Whether ``request`` is a task-augmented request this client runs as a task."""
        params = request.params or {}
        return (request.method in _TASKED and isinstance(params.get("task"), dict)
                and "tasks" in self._handlers.capabilities())

    async def _start_task(self, request: McpServerRequest) -> dict[str, Any]:
        params = dict(request.params or {})
        asked = params.pop("task")
        ttl = asked.get("ttl")
        ttl_ms = min(ttl, _MAX_TTL_MS) if isinstance(ttl, int) and ttl > 0 else _MAX_TTL_MS
        self._expire()
        if len(self._server_tasks) >= _MAX_TASKS:
            finished = [k for k, e in self._server_tasks.items() if e.done.is_set()]
            if not finished:
                raise McpRequestRefused(f"this client runs at most {_MAX_TASKS} tasks at once",
                                        _INTERNAL)
            del self._server_tasks[finished[0]]
        entry = _Entry(self._task_ids(), request.method, self._wall(), ttl_ms)
        self._server_tasks[entry.task_id] = entry
        work = McpServerRequest(request_id=request.request_id, method=request.method,
                                params=params)
        if self._tasks is None:
            await self._run_task(entry, work)  # no background group: done before answering
        else:
            self._tasks.start_soon(self._run_task, entry, work)
        return {"task": msgspec.to_builtins(entry.view())}

    async def _run_task(self, entry: _Entry, work: McpServerRequest) -> None:
        with entry.cancel:
            try:
                entry.result = await serve_request(self._handlers, work)
                self._settle(entry, "completed", None)
            except McpRequestRefused as refusal:
                entry.error = refusal
                self._settle(entry, "failed", self.redact(refusal.message))
        if entry.cancel.cancel_called and not entry.done.is_set():
            self._settle(entry, "cancelled", "cancelled by the server")

    def _settle(self, entry: _Entry, status: str, message: str | None) -> None:
        entry.status, entry.status_message = status, message
        entry.updated_ms = self._wall()
        entry.done.set()

    def _expire(self) -> None:
        now = self._wall()
        for key in [k for k, e in self._server_tasks.items() if now >= e.created_ms + e.ttl]:
            entry = self._server_tasks.pop(key)
            entry.cancel.cancel()

    def _entry(self, params: dict[str, Any]) -> _Entry:
        self._expire()
        task_id = params.get("taskId")
        entry = self._server_tasks.get(task_id) if isinstance(task_id, str) else None
        if entry is None:
            raise McpRequestRefused(f"no task {task_id!r} here", _INVALID_PARAMS)
        return entry

    async def _task_request(self, request: McpServerRequest) -> dict[str, Any]:
        """``tasks/get``, ``tasks/list``, ``tasks/cancel`` and ``tasks/result`` (this one waits
        for the task to finish)."""
        params = request.params or {}
        if request.method == "tasks/list":
            return self._task_page(params.get("cursor"))
        entry = self._entry(params)
        if request.method == "tasks/get":
            return dict(msgspec.to_builtins(entry.view()))
        if request.method == "tasks/cancel":
            if entry.status in TERMINAL_TASK_STATUSES:
                raise McpRequestRefused(f"task {entry.task_id!r} is {entry.status} already",
                                        _INVALID_PARAMS)
            entry.cancel.cancel()
            self._settle(entry, "cancelled", "cancelled by the server")
            return dict(msgspec.to_builtins(entry.view()))
        await entry.done.wait()
        if entry.error is not None:
            raise entry.error
        if entry.result is None:
            raise McpRequestRefused(f"task {entry.task_id!r} was {entry.status}", _INTERNAL)
        meta = dict(entry.result.get("_meta") or {})
        meta[RELATED_TASK] = {"taskId": entry.task_id}
        return {**entry.result, "_meta": meta}

    def _task_page(self, cursor: object) -> dict[str, Any]:
        tasks = self.server_tasks()
        start = 0
        if cursor is not None:
            ids = [t.task_id for t in tasks]
            if not isinstance(cursor, str) or cursor not in ids:
                raise McpRequestRefused(f"unknown tasks/list cursor {cursor!r}",
                                        _INVALID_PARAMS)
            start = ids.index(cursor)
        page: dict[str, Any] = {"tasks": [msgspec.to_builtins(t)
                                          for t in tasks[start:start + _PAGE]]}
        if start + _PAGE < len(tasks):
            page["nextCursor"] = tasks[start + _PAGE].task_id
        return page

    async def _reply_later(self, request: McpServerRequest) -> None:
        # tasks/result waits for its task: answered from the background so the stream it came
        # on goes on; a failure to deliver the answer reaches on_event, never the task group.
        try:
            await self._reply(request)
        except McpError as exc:
            self._report(McpDiscarded(reason=f"could not answer {request.method}: {exc.detail}"))

    async def _serve(self, request: McpServerRequest) -> None:
        if request.method == "tasks/result" and self._tasks is not None:
            self._tasks.start_soon(self._reply_later, request)
            return
        await self._reply(request)

    async def _reply(self, request: McpServerRequest) -> None:
        """Answer a server request through the host's ports (or as a task), redacted."""
        params = request.params or {}
        if (request.method == "elicitation/create" and params.get("mode") == "url"
                and isinstance(params.get("elicitationId"), str)):
            self._expect_completion(params["elicitationId"])  # before the user can finish
        origin = CALLING.get()
        serving = None if origin is not None and origin[0] == self.server else CALLING.set(
            (self.server, None))  # outside this server's calls: the GET stream, a task
        try:
            if self._tasked(request):
                result = await self._start_task(request)
            elif request.method.startswith("tasks/"):
                result = await self._task_request(request)
            else:
                result = await serve_request(self._handlers, request)
        except McpRequestRefused as refusal:
            await self._notify(self.session.respond_error(request.request_id, refusal.code,
                                                          self.redact(refusal.message)))
            return
        finally:
            if serving is not None:
                CALLING.reset(serving)
        await self._notify(self.session.respond(request.request_id, result))
