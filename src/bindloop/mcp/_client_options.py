"""The grouped options of :class:`~bindloop.mcp.McpHttpClient`: how long and how much it waits and
reads (:class:`McpLimits`), and the clocks, sleep and id sources it is given
(:class:`McpClientPorts`). Both are frozen, and their defaults are the client's defaults, so
``McpHttpClient(transport, server="docs")`` needs neither."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Literal

import anyio
import msgspec

from ..clock import Clock, epoch_ms, monotonic_ms
from ..errors import UsageError
from ._protocol import RequestId

__all__ = ("McpClientPorts", "McpLimits")


class McpLimits(msgspec.Struct, frozen=True, kw_only=True):
    """How long and how much an MCP client waits and reads.

    ``timeout_ms`` bounds each request (``None``: unbounded); progress from the server starts it
    again, up to ``max_timeout_ms`` in all: ``"auto"`` is ten times the request's timeout, ``None``
    removes the overall bound. ``notify_timeout_ms`` bounds each fire-and-forget POST (a
    cancellation, the closing DELETE); ``url_elicitation_wait_ms`` how long a call refused with
    URLElicitationRequired waits for the server's ``notifications/elicitation/complete``.
    ``max_resumes`` bounds the resumptions in a row that bring nothing, ``max_body_bytes`` a JSON
    reply and one event-stream line or event, ``max_input_rounds`` how often a 2026-07-28 call
    answered ``input_required`` is sent again. Raises :class:`~bindloop.errors.UsageError` for a
    timeout that is not positive, a negative ``max_resumes``, a ``max_body_bytes`` or
    ``max_input_rounds`` below one."""

    timeout_ms: float | None = 30_000.0
    max_timeout_ms: float | Literal["auto"] | None = "auto"
    notify_timeout_ms: float = 2_000.0
    url_elicitation_wait_ms: float = 60_000.0
    max_resumes: int = 3
    max_body_bytes: int = 16 * 1024 * 1024
    max_input_rounds: int = 8

    def __post_init__(self) -> None:
        if self.timeout_ms is not None and not (self.timeout_ms > 0):
            raise UsageError(f"timeout_ms must be positive or None, got {self.timeout_ms!r}")
        if self.max_timeout_ms != "auto" and self.max_timeout_ms is not None and not (
                isinstance(self.max_timeout_ms, (int, float)) and self.max_timeout_ms > 0):
            raise UsageError(f"max_timeout_ms must be positive, 'auto' or None, "
                             f"got {self.max_timeout_ms!r}")
        if self.max_resumes < 0 or self.max_body_bytes < 1:
            raise UsageError("max_resumes must be >= 0 and max_body_bytes positive")
        if self.max_input_rounds < 1:
            raise UsageError("max_input_rounds must be >= 1")


class McpClientPorts(msgspec.Struct, frozen=True, kw_only=True):
    """The clocks, sleep and id sources an MCP client is given (nothing is read from the process).

    ``now`` times requests (milliseconds, monotonic); ``wall_clock`` stamps the tasks the client
    runs for the server; ``sleep`` waits before a resumption (the stream's ``retry``); ``ids``
    numbers JSON-RPC requests (default 1, 2, ... across renewed sessions) and ``task_ids`` names the
    client's tasks (default ``task-1``, ...)."""

    now: Clock = monotonic_ms
    wall_clock: Clock = epoch_ms
    sleep: Callable[[float], Awaitable[None]] = anyio.sleep
    ids: Callable[[], RequestId] | None = None
    task_ids: Callable[[], str] | None = None
