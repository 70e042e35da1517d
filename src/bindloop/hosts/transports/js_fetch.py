"""A JS ``fetch`` transport for Pyodide (browser, Node) and Cloudflare Python Workers.

Importable everywhere, usable only where ``js`` and ``pyodide.ffi`` exist (they are imported when a
request is sent). The response body is streamed through its ``ReadableStream`` reader, one chunk
at a time; leaving ``open()`` — normally, by an error, or by cancellation, including a cancellation
while the headers are still awaited — aborts the request through an ``AbortController`` (first,
synchronously) and then cancels the reader, so the connection is closed. A GET or HEAD is sent
without a body (fetch refuses one, even empty); a non-empty body on them is a ``TransportError``.
Error messages pass the transport's ``redactor`` (built from ``base_url`` and ``headers``); the JS
exception stays chained only when it shows no credential either.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from bindloop.wire import HttpRequest, TransportError
from bindloop.wire import Redactor, request_url, transport_settings

__all__ = ("FetchTransport",)

_BODILESS = frozenset({"GET", "HEAD"})


def _js() -> tuple[Any, Any]:
    try:
        import js  # type: ignore[import-not-found]
        from pyodide import ffi  # type: ignore[import-not-found]
    except ImportError as exc:
        raise ImportError("FetchTransport runs only under Pyodide or Python Workers") from exc
    return js, ffi


class _Response:
    __slots__ = ("_ffi", "_headers", "_reader", "_redactor", "status")

    def __init__(self, resp: Any, reader: Any, ffi: Any, redactor: Redactor) -> None:
        self.status = int(resp.status)
        self._headers = [(str(pair[0]), str(pair[1])) for pair in resp.headers.entries()]
        self._reader = reader
        self._ffi = ffi
        self._redactor = redactor

    @property
    def headers(self) -> Sequence[tuple[str, str]]:
        return self._headers

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        if self._reader is None:
            return
        while True:
            try:
                result = await self._reader.read()
            except self._ffi.JsException as exc:
                raise self._redactor.exception(TransportError(
                    f"the connection failed mid-response: {exc}"), cause=exc)
            if result.done:
                return
            yield bytes(result.value.to_bytes())


class FetchTransport:
    """``base_url`` and ``headers`` as for :class:`~bindloop.hosts.transports.httpx.HttpxTransport`.
    ``fetch`` defaults to the global ``fetch`` (inject a Worker binding's ``fetch`` or a test double)."""

    def __init__(self, base_url: str, *, headers: Sequence[tuple[str, str]] = (),
                 fetch: Any = None) -> None:
        self._base, self._shown, self._headers, self._query = transport_settings(
            "FetchTransport", base_url, headers)
        self.redactor = Redactor.for_credentials(base_url, self._headers)
        self._fetch = fetch

    def __repr__(self) -> str:
        # The headers hold the credentials: a repr shows only where requests go.
        return f"FetchTransport({self._shown!r})"

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Response]:
        js, ffi = _js()
        controller = js.AbortController.new()
        headers = js.Headers.new()
        for name, value in (*request.headers, *self._headers):
            headers.append(name, value)
        fields: dict[str, Any] = {"method": request.method, "headers": headers,
                                  "signal": controller.signal}
        if request.method.upper() in _BODILESS:
            # fetch throws a TypeError for a GET or HEAD with any body, even an empty one.
            if request.body:
                where = self.redactor.text(f"{request.method} {self._shown}{request.path}")
                raise TransportError(f"{where}: fetch cannot "
                                     f"send a body with {request.method.upper()} "
                                     f"({len(request.body)} bytes given); use POST")
        else:
            fields["body"] = ffi.to_js(request.body)
        init = ffi.to_js(fields, dict_converter=js.Object.fromEntries)
        fetch = self._fetch if self._fetch is not None else js.fetch
        reader = None
        try:
            try:
                resp = await fetch(request_url(self._base, request.path, self._query), init)
            except ffi.JsException as exc:
                raise self.redactor.exception(TransportError(
                    f"could not reach {self._shown}: {exc}"), cause=exc)
            body = resp.body
            # No body (HEAD, 204): JS null, which Pyodide 314 hands over as ffi.jsnull, not None.
            if body is not None and body is not getattr(ffi, "jsnull", None):
                reader = body.getReader()
            yield _Response(resp, reader, ffi, self.redactor)
        finally:
            # Synchronous and first: this is the one step that must happen however we leave —
            # cancelled while awaiting headers (``reader`` is still None) or while awaiting
            # ``reader.cancel()`` below, which cancellation can interrupt.
            controller.abort()
            if reader is not None:
                try:
                    # A fetch double or binding may ignore the signal: release the body too.
                    await reader.cancel()
                except ffi.JsException:
                    pass  # already aborted, closed or errored: nothing left to release
