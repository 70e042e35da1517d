"""The server's own GET stream: opened by hand (:meth:`listen`) or in the background by
``async with`` the client, reopened from its last event id when the server ends it; for a
2026-07-28 server, ``subscriptions/listen`` in its place. A base class of
:class:`~bindloop.mcp.McpHttpClient`, not public API.
"""

from __future__ import annotations

from collections.abc import Callable

import anyio
import anyio.abc

from ..errors import UsageError
from ._errors import McpError, McpProtocolError
from ._exchange import HttpExchange, StreamRead, content_type
from ._session import McpRequestFailed
from ._session import McpDiscarded, McpEvent

__all__ = ("GetStreams",)


class GetStreams(HttpExchange):
    listening: int

    async def listen(self) -> bool:
        """Open the server's own event stream (GET) and route what arrives on it — ``tools/
        list_changed``, logging, server requests — until the server ends the stream or the caller
        cancels (run it in a task; ``async with`` the client does). Returns ``False`` at once when
        the server offers no such stream (HTTP 405), ``True`` when a stream ended.

        Raises
        ------
        McpError
            Any other status, or a stream that is not MCP.
        """
        return await self._listen(lambda: None) is not None

    async def _subscribe(self, opened: Callable[[], None]) -> StreamRead | None:
        """One ``subscriptions/listen`` stream (2026-07-28), asking for every list change:
        ``None`` when the server refuses it (a JSON-RPC error: it has no such method), else what
        it brought before it ended (the server's answer closes the subscription)."""
        out = self.session.request("subscriptions/listen", {"notifications": {
            "toolsListChanged": True, "promptsListChanged": True,
            "resourcesListChanged": True}})
        request_id = out.request_id
        assert request_id is not None
        what = "subscriptions/listen"
        try:
            async with self._open(self._http("POST", out.body, out=out), what) as resp:
                if resp.status in (400, 404, 405) and content_type(resp) == "application/json":
                    refused = await self._modern_refusal(resp, out)
                    return None if isinstance(refused, McpRequestFailed) else StreamRead()
                await self._check_status(resp, what, expect_answer=True)
                if content_type(resp) == "application/json":
                    body = await self._read_body(resp, what)
                    answer = await self._take(self.session.receive(body), request_id)
                    return None if isinstance(answer, McpRequestFailed) else StreamRead()
                if content_type(resp) != "text/event-stream":
                    raise McpProtocolError(self.server, "answered subscriptions/listen without "
                                                        "an event stream")
                self.listening += 1
                opened()
                try:
                    state = await self._read_stream(resp, request_id, what)
                finally:
                    self.listening -= 1
            if isinstance(state.answer, McpRequestFailed):
                return None
            return state
        finally:
            self.session.cancel(request_id)  # a stream cut off has no answer: forget it

    async def _listen(self, opened: Callable[[], None],
                      last_event_id: str | None = None) -> StreamRead | None:
        """One GET stream (resumed after ``last_event_id``): ``None`` when the server has none
        (405), else what it brought before it ended."""
        if self.session.phase != "ready":
            raise UsageError(f"MCP server {self.server!r}: connect() before listen()")
        request = self._http("GET", b"", accept="text/event-stream", last_event_id=last_event_id)
        async with self._open(request, "GET stream") as resp:
            if resp.status == 405:
                return None
            await self._check_status(resp, "GET stream", expect_answer=True)
            if content_type(resp) != "text/event-stream":
                raise McpProtocolError(self.server, "answered the GET stream without an event "
                                                    "stream")
            self.listening += 1
            opened()
            try:
                state = await self._read_stream(resp, None, "GET stream", last_event_id)
            finally:
                self.listening -= 1
        return state

    async def _listen_quietly(self, *, task_status: anyio.abc.TaskStatus[None]
                              = anyio.TASK_STATUS_IGNORED) -> None:
        # The background GET stream: reopened when the server ends it (three times in a row at
        # most without anything arriving), given up on 405 or any error — calls still work
        # without it, and the failure reaches on_event.
        started = False

        def opened() -> None:
            nonlocal started
            if not started:
                started = True
                task_status.started()

        quiet = 0
        last_id: str | None = None
        try:
            while quiet < 3 and self.session.phase == "ready":
                try:
                    state = (await self._subscribe(opened) if self.session.era == "modern"
                             else await self._listen(opened, last_id))
                except McpError as exc:
                    self._report(_listen_failed(exc))
                    return
                if state is None:
                    return
                if state.answer is not None:
                    return  # the server closed the subscription itself (shutting down)
                quiet = 0 if state.events else quiet + 1
                last_id = state.last_id or last_id
                # The stream's own retry, as for a resumption (half a second without one).
                await self._sleep(min(state.retry_ms or 500, 30_000) / 1000.0)
        finally:
            opened()


def _listen_failed(exc: McpError) -> McpEvent:
    return McpDiscarded(reason=f"the GET stream failed: {exc.detail}")
