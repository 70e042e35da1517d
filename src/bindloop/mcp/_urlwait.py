"""URL-mode elicitation in the client (2025-11-25): the elicitations a user accepted, waiting
for the server's ``notifications/elicitation/complete``, and the URLElicitationRequired error
(-32042) answered by asking the host's URL handler, then waiting (bounded) before the refused call
goes once more. A base class of :class:`~bindloop.mcp.McpHttpClient`, not public API.
"""

from __future__ import annotations

import anyio

from ..errors import RunCancelledError
from ..signal import AbortSignal
from ._errors import McpRequestRefused, McpUrlElicitationRequired
from ._serve import ServerRequestHandlers, elicit
from ._listen import GetStreams
from ._session import McpDiscarded, McpElicitationComplete

__all__ = ("UrlElicitations",)

_MAX_URL_WAITS = 1024


class UrlElicitations(GetStreams):
    _url_wait_s: float
    _url_waits: dict[str, anyio.Event]

    async def wait_for_elicitation(self, elicitation_id: str, *,
                                   timeout_ms: float | None) -> bool:
        """Wait until the server announces that the URL-mode elicitation ``elicitation_id``
        (one the user accepted through this client) finished: ``True`` when it did (or had
        already), ``False`` after ``timeout_ms`` or for an id this client never accepted."""
        waiter = self._url_waits.get(elicitation_id)
        if waiter is None:
            return False
        with anyio.move_on_after(None if timeout_ms is None else timeout_ms / 1000.0):
            await waiter.wait()
        return waiter.is_set()

    async def _complete_url_elicitations(self, refused: McpUrlElicitationRequired,
                                         signal: AbortSignal | None,
                                         handlers: ServerRequestHandlers) -> bool:
        """Ask the URL handler about every elicitation of a -32042; when all are accepted, wait
        (bounded) for their completion. ``False``: no handler, or the user did not accept."""
        if handlers.url_elicitation is None or not refused.elicitations:
            return False
        if signal is not None and signal.aborted:
            raise RunCancelledError(_reason(signal))
        scope = anyio.CancelScope()  # the run's abort stops the asking and the waiting alike
        remove = signal.add_listener(lambda _reason: scope.cancel()) if signal else None
        accepted = True
        try:
            with scope:
                for asked in refused.elicitations:
                    assert asked.elicitation_id is not None
                    self._expect_completion(asked.elicitation_id)
                    try:
                        answer = await elicit(handlers, asked)
                    except McpRequestRefused:
                        answer = None
                    if answer is None or answer.action != "accept":
                        accepted = False
                        break
                if accepted:
                    with anyio.move_on_after(self._url_wait_s):
                        for asked in refused.elicitations:
                            waiter = self._url_waits.get(asked.elicitation_id or "")
                            if waiter is not None:
                                await waiter.wait()
        finally:
            if remove is not None:
                remove()
        if scope.cancel_called:
            raise RunCancelledError(_reason(signal))
        return accepted

    def _expect_completion(self, elicitation_id: str) -> None:
        if elicitation_id not in self._url_waits:
            while len(self._url_waits) >= _MAX_URL_WAITS:
                del self._url_waits[next(iter(self._url_waits))]
            self._url_waits[elicitation_id] = anyio.Event()

    def _elicitation_complete(self, event: McpElicitationComplete) -> None:
        waiter = self._url_waits.get(event.elicitation_id)
        if waiter is None or waiter.is_set():
            # Not one this client accepted, or announced twice: nothing to wake.
            self._report(McpDiscarded(reason=f"notifications/elicitation/complete for "
                                             f"{event.elicitation_id!r}, which this client is "
                                             "not waiting for"))
            return
        waiter.set()
        self._report(event)


def _reason(signal: AbortSignal | None) -> str:
    reason = None if signal is None or signal.reason is None else str(signal.reason)
    return reason or "cancelled while the user was elsewhere"
