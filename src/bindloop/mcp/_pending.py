"""Elicitation the host answers later: :class:`PendingElicitations` is an elicitation port that,
instead of asking a user itself, holds each server request as a :class:`PendingElicitation` the
host lists and answers — ``accept(content)`` (checked against the requested schema), ``decline``
or ``cancel`` — the way it decides a pending approval.

A legacy (2025-11-25) server's elicitation arrives in the middle of a tool call, as a request
bound to the live connection (the call's own event stream, or the session's); the server holds
its tool's work open until it hears the answer, so the run (the tool call inside it) waits here
until the host answers, the ``timeout_ms`` passes (the server is answered ``cancel``, as if the
user dismissed the form), or the run is aborted (the call is cancelled on the server and the
entry goes away). Such an entry lives in this process only.

A 2026-07-28 server asks with ``input_required`` instead and keeps nothing open: with
``durable=True`` such a call is not held here but ends as a suspend carrying the request (see
:mod:`bindloop.mcp._deferred`), so the question survives the process in the run's checkpoint.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

import anyio
import msgspec

from ..schema import first_schema_violation
from ._elicit import ElicitationRequest, ElicitationResult, fill_defaults
from ..errors import UsageError
from ._errors import ElicitationContentError, ElicitationNotPendingError

__all__ = (
    "CALLING",
    "RUN_AGENT",
    "ElicitationContentError",
    "ElicitationNotPendingError",
    "PendingElicitation",
    "PendingElicitations",
    "checked_content",
)

CALLING: ContextVar[tuple[str, str | None] | None] = ContextVar("bindloop_mcp_calling",
                                                                 default=None)
"""(server, MCP tool) of the request being served: set by the client around a tool call and
around each server request it answers, read when an elicitation becomes pending."""

RUN_AGENT: ContextVar[str | None] = ContextVar("bindloop_mcp_run_agent", default=None)
"""The agent whose run makes the current MCP tool call (set by the tools ``equip_mcp`` equips)."""


class PendingElicitation(msgspec.Struct, frozen=True, kw_only=True):
    """An elicitation waiting for the host: ``id`` (this inbox's), the ``server`` that asked and
    the MCP ``tool`` whose call it came in (``None`` outside a call), the ``agent`` whose run
    made that call (``None`` outside an agent run), and the request itself: ``message``,
    ``requested_schema`` (form mode), ``mode``, ``url`` and ``elicitation_id`` (URL mode)."""

    id: str
    server: str | None
    tool: str | None
    agent: str | None
    message: str
    mode: str
    requested_schema: dict[str, Any] | None = None
    url: str | None = None
    elicitation_id: str | None = None


def checked_content(entry: PendingElicitation, content: object) -> dict[str, Any]:
    """A form answer's ``content`` with the schema's defaults filled in, checked against
    ``entry``'s requested schema by the one validator.

    Raises
    ------
    ElicitationContentError
        The content is not an object, or (defaults filled in) breaks the schema.
    """
    if content is not None and not isinstance(content, Mapping):
        raise ElicitationContentError(entry.id, "/", "the content must be an object")
    filled = fill_defaults(dict(content or {}), entry.requested_schema)
    if entry.requested_schema is not None:
        problem = first_schema_violation(filled, entry.requested_schema)
        if problem is not None:
            pointer, _, reason = problem.partition(": ")
            raise ElicitationContentError(entry.id, pointer or "/", reason or problem)
    return filled


class _Waiting:
    __slots__ = ("answer", "answered", "entry")

    def __init__(self, entry: PendingElicitation) -> None:
        self.entry = entry
        self.answered = anyio.Event()
        self.answer: ElicitationResult | None = None


class PendingElicitations:
    """An :data:`~bindloop.mcp.server_requests.ElicitationHandler` that suspends: give it as
    ``ServerRequestHandlers(elicitation=...)`` (and/or ``url_elicitation=``).

    Each request becomes a :class:`PendingElicitation` in :meth:`pending` (``on_pending`` is
    called with it too, and :meth:`next` returns it to whoever waits) until the host answers it
    with :meth:`accept`, :meth:`decline` or :meth:`cancel`, or ``timeout_ms`` passes (``None``: no
    bound), which answers ``cancel``. ``ids()`` mints the entries' ids (default
    ``elicitation-1``, ``elicitation-2``, ...).

    ``accept(content)`` checks ``content``, with the schema's ``default`` values filled in for
    the fields left out, against the requested schema with the one validator
    (:func:`bindloop.schema.first_schema_violation`) and raises :class:`ElicitationContentError`
    when it does not conform (nothing is sent; the entry stays pending). A URL-mode entry is
    accepted without content (the interaction happens at its URL).

    ``durable=True``: a 2026-07-28 ``tools/call`` answered ``input_required`` with an elicitation
    for this port is not held here: the call raises :class:`~bindloop.mcp.server_requests.McpInputPending`, which
    an MCP tool of the loop returns as a ``waiting_for_reply`` suspend keeping the request in the
    checkpoint (:func:`~bindloop.mcp.server_requests.pending_mcp_inputs`, :func:`~bindloop.mcp.server_requests.answer_mcp_input`).
    A legacy server's elicitation still waits here.
    """

    def __init__(self, *, timeout_ms: float | None = 600_000.0,
                 ids: Callable[[], str] | None = None,
                 on_pending: Callable[[PendingElicitation], object] | None = None,
                 durable: bool = False) -> None:
        if timeout_ms is not None and not timeout_ms > 0:
            raise UsageError(f"timeout_ms must be positive or None, got {timeout_ms!r}")
        if ids is None:
            counter = itertools.count(1)
            ids = lambda: f"elicitation-{next(counter)}"  # noqa: E731
        self._ids: Callable[[], str] = ids
        self._timeout_s = None if timeout_ms is None else timeout_ms / 1000.0
        self._on_pending = on_pending
        self._waiting: dict[str, _Waiting] = {}
        self._arrived: anyio.Event | None = None
        self.durable = durable
        """2026-07-28 input is kept in the run's checkpoint instead of waiting here."""

    def pending(self) -> tuple[PendingElicitation, ...]:
        """The elicitations waiting for an answer, oldest first."""
        return tuple(w.entry for w in self._waiting.values())

    async def next(self, *, timeout_ms: float | None = None) -> PendingElicitation | None:
        """The oldest pending elicitation, waiting for one to arrive (at most ``timeout_ms``;
        ``None`` then)."""
        with anyio.move_on_after(None if timeout_ms is None else timeout_ms / 1000.0):
            while not self._waiting:
                if self._arrived is None or self._arrived.is_set():
                    self._arrived = anyio.Event()
                await self._arrived.wait()
        return next(iter(self._waiting.values())).entry if self._waiting else None

    def accept(self, which: PendingElicitation | str,
               content: Mapping[str, Any] | None = None) -> None:
        """Answer ``accept``; for a form, with ``content`` (checked against its schema).

        Raises
        ------
        ElicitationContentError
            The content (defaults filled in) breaks the requested schema; still pending.
        ElicitationNotPendingError
            Nothing is waiting under that id.
        """
        waiting = self._find(which)
        entry = waiting.entry
        if entry.mode == "url":
            if content:
                raise UsageError(f"elicitation {entry.id!r} is URL mode: accept it without "
                                 "content (the user enters nothing here)")
            self._answer(waiting, ElicitationResult(action="accept"))
            return
        self._answer(waiting, ElicitationResult(action="accept",
                                                content=checked_content(entry, content)))

    def decline(self, which: PendingElicitation | str) -> None:
        """Answer ``decline`` (the user said no)."""
        self._answer(self._find(which), ElicitationResult(action="decline"))

    def cancel(self, which: PendingElicitation | str) -> None:
        """Answer ``cancel`` (the user dismissed it without choosing)."""
        self._answer(self._find(which), ElicitationResult(action="cancel"))

    async def __call__(self, request: ElicitationRequest) -> ElicitationResult:
        origin = CALLING.get()
        entry = PendingElicitation(
            id=self._ids(), server=None if origin is None else origin[0],
            tool=None if origin is None else origin[1], agent=RUN_AGENT.get(),
            message=request.message, mode=request.mode,
            requested_schema=request.requested_schema, url=request.url,
            elicitation_id=request.elicitation_id)
        waiting = _Waiting(entry)
        self._waiting[entry.id] = waiting
        try:
            if self._arrived is not None:
                self._arrived.set()
            if self._on_pending is not None:
                self._on_pending(entry)
            with anyio.move_on_after(self._timeout_s):
                await waiting.answered.wait()
        finally:
            self._waiting.pop(entry.id, None)  # answered, timed out, or the call was cancelled
        return waiting.answer or ElicitationResult(action="cancel")

    def _find(self, which: PendingElicitation | str) -> _Waiting:
        key = which.id if isinstance(which, PendingElicitation) else which
        waiting = self._waiting.get(key) if isinstance(key, str) else None
        if waiting is None or waiting.answered.is_set():
            raise ElicitationNotPendingError(f"no elicitation {key!r} is waiting for an answer "
                                             "(answered already, timed out, or its call ended)")
        return waiting

    @staticmethod
    def _answer(waiting: _Waiting, answer: ElicitationResult) -> None:
        waiting.answer = answer
        waiting.answered.set()
