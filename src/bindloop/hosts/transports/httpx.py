"""An httpx transport for CPython (optional extra ``bindloop[httpx]``).

Implements :class:`bindloop.wire.Transport`: joins the base URL and the adapter's path, adds the
host's headers (credentials live here, never in the core), and streams the body, decoded from its
``content-encoding`` (httpx asks for gzip). httpx's own failures become
:class:`bindloop.wire.TransportError` so routing can classify them; a body that does not decode
is a :class:`bindloop.wire.WireDecodeError`. Their messages pass the transport's ``redactor``
(built from ``base_url`` and ``headers``), and httpx's exception stays chained only when it shows
no credential either. Leaving ``open()`` — normally, by an error, or by
cancellation — closes the response.

An httpx client and its pooled connections belong to the event loop that opened them. A transport
that owns its client therefore keeps one per event loop: a model built once (at module level, in a
fixture) serves ``anyio.run`` after ``anyio.run``, asyncio and trio alike, over keep-alive
connections. A client the host passes in is the host's: used from a second event loop it is refused
with a :class:`~bindloop.errors.UsageError` saying so, never the ``Event loop is closed`` of a pooled
connection deep inside httpx.

Log records go to the ``bindloop.hosts.transports.httpx`` logger: DEBUG for every response's status
and time to headers, WARNING for a request that failed before or while its body arrived. They name
the request by its redacted URL and carry the redacted error text: no header, key or query
credential reaches a log.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio.lowlevel

from bindloop.errors import UsageError
from bindloop.wire import HttpRequest, TransportError, WireDecodeError
from bindloop.wire import Redactor, request_url, transport_settings

__all__ = ("HttpxTransport",)

_log = logging.getLogger(__name__)


def _httpx() -> Any:
    try:
        import httpx
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("HttpxTransport needs httpx: pip install httpx (bindloop's httpx extra)") from exc
    return httpx


class _Response:
    __slots__ = ("_httpx", "_redactor", "_resp", "_where")

    def __init__(self, resp: Any, httpx: Any, redactor: Redactor, where: str) -> None:
        self._resp = resp
        self._httpx = httpx
        self._redactor = redactor
        self._where = where

    @property
    def status(self) -> int:
        return int(self._resp.status_code)

    @property
    def headers(self) -> Sequence[tuple[str, str]]:
        return list(self._resp.headers.multi_items())

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        # aiter_bytes, not aiter_raw: the body decoded from its content-encoding, which httpx
        # negotiated (accept-encoding: gzip, deflate) and the decoder cannot read compressed.
        scrub = self._redactor
        try:
            async for chunk in self._resp.aiter_bytes():
                yield chunk
        except self._httpx.TimeoutException as exc:
            raise _logged(self._where, scrub.exception(TransportError(
                f"timed out reading the response: {exc}", kind="timeout"), cause=exc))
        except self._httpx.TransportError as exc:
            raise _logged(self._where, scrub.exception(TransportError(
                f"the connection failed mid-response: {exc!r}"), cause=exc))
        except self._httpx.DecodingError as exc:
            encoding = self._resp.headers.get("content-encoding", "identity")
            raise _logged(self._where, scrub.exception(WireDecodeError(
                f"the response body is not valid {encoding} content: {exc}"), cause=exc))


def _logged(where: str, error: Exception) -> Exception:
    """``error`` (already redacted), recorded on the module's logger first."""
    _log.warning("%s failed: %s: %s", where, type(error).__name__, error)
    return error


class HttpxTransport:
    """``base_url`` is the provider's base (``https://api.openai.com/v1``, ``https://api.anthropic.com``,
    ``https://generativelanguage.googleapis.com``); ``headers`` are added to every request (use the
    adapter's ``auth_headers(key)``). Pass ``client`` to share a connection pool; otherwise one is
    created per transport (close it with :meth:`aclose`). ``connect_timeout`` bounds connecting only;
    the rest (the wait for headers and every read) is deliberately unbounded here, because
    :class:`~bindloop.wire.ModelAdapter`'s stream watchdog bounds it, cancelling ``open()`` itself
    when the headers never come (httpx then drops the connection). Every request carries that
    timeout, so a shared ``client``'s own timeouts (httpx's default: 5 s per read) never cut a
    pause the watchdog's budgets allow."""

    def __init__(self, base_url: str, *, headers: Sequence[tuple[str, str]] = (),
                 client: Any = None, connect_timeout: float = 30.0) -> None:
        self._base, self._shown, self._headers, self._query = transport_settings(
            "HttpxTransport", base_url, headers)
        self.redactor = Redactor.for_credentials(base_url, self._headers)
        httpx = _httpx()
        self._httpx = httpx
        self._own = client is None
        self._timeout = httpx.Timeout(None, connect=connect_timeout)
        self._client: Any = client
        # The event loop the client is bound to (anyio tokens compare equal for one loop).
        self._loop: object = None

    def _client_for_this_loop(self) -> Any:
        loop = anyio.lowlevel.current_token()
        if self._loop == loop:
            return self._client
        if not self._own:
            if self._loop is not None:
                raise UsageError(
                    "HttpxTransport: the httpx client passed as client= was first used on another "
                    "event loop, and an httpx client cannot move between loops; omit client= (the "
                    "transport then keeps one client per loop) or build a transport per loop")
            self._loop = loop
            return self._client
        # A client of an earlier loop cannot be closed from this one (its loop may be closed): its
        # connections are dropped with it (the garbage collector closes their sockets), and this loop
        # gets a fresh pool.
        self._client = self._httpx.AsyncClient(timeout=self._timeout)
        self._loop = loop
        return self._client

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Response]:
        httpx = self._httpx
        scrub = self.redactor
        url = request_url(self._base, request.path, self._query)
        client = self._client_for_this_loop()
        req = client.build_request(request.method, url,
                                         headers=[*request.headers, *self._headers],
                                         content=request.body, timeout=self._timeout)
        where = f"{request.method} {scrub.text(self._shown + request.path)}"
        started = time.monotonic()
        try:
            resp = await client.send(req, stream=True)
        except httpx.TimeoutException as exc:
            raise _logged(where, scrub.exception(TransportError(
                f"timed out connecting: {exc}", kind="timeout"), cause=exc))
        except httpx.TransportError as exc:
            raise _logged(where, scrub.exception(TransportError(
                f"could not reach {self._shown}: {exc!r}"), cause=exc))
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug("%s -> %d in %.0f ms", where, resp.status_code,
                       (time.monotonic() - started) * 1000.0)
        try:
            yield _Response(resp, httpx, scrub, where)
        finally:
            await resp.aclose()

    def __repr__(self) -> str:
        # The headers hold the credentials: a repr shows only where requests go.
        return f"HttpxTransport({self._shown!r})"

    async def aclose(self) -> None:
        """Close the client this transport owns, if it was opened on the running event loop (a
        client of an earlier loop is already unusable and is only dropped). A passed-in client is
        the host's to close."""
        if not self._own or self._client is None:
            return
        client, loop = self._client, self._loop
        self._client, self._loop = None, None
        if loop == anyio.lowlevel.current_token():
            await client.aclose()
