"""The Worker's HTTP plumbing, one home for every route: bounded JSON bodies, JSON answers, the
route table, and the Server-Sent Events stream (a ``TransformStream`` fed from a background task,
with keep-alive comments while the run is quiet).

A new route is one :meth:`Routes.add` call in ``entry.py``; a new stream dialect (another
protocol's framing) is a different ``frame`` passed to :class:`EventStream`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import js  # type: ignore[import-not-found]
import msgspec
from pyodide.ffi import JsException  # type: ignore[import-not-found]
from workers import Response  # type: ignore[import-not-found]

from bindloop.hosts.workers.agent import BODY_TIMEOUT_S, MAX_BODY_BYTES, MAX_BODY_DEPTH, HttpError
from bindloop.contracts import JsonBoundsError, decode_json_bounded
from bindloop.hosts.chat.bodies import BodyBound, BodyRefused

JSON_HEADERS = {"content-type": "application/json"}
SSE_HEADERS = {"content-type": "text/event-stream", "cache-control": "no-store"}

_BOUNDS_ANSWER = {"too_large": (413, "body_too_large"), "too_deep": (400, "body_too_deep"),
                  "malformed": (400, "malformed_json"), "not_an_object": (400, "malformed_json")}


def json_response(status: int, body: dict[str, Any]) -> Response:
    """``body`` as JSON; a 429 or 503 says ``Retry-After: 1``, as the ASGI host's."""
    headers = {**JSON_HEADERS, "retry-after": "1"} if status in (429, 503) else JSON_HEADERS
    return Response(json.dumps(body), status=status, headers=headers)


async def read_text(request: Any, *, max_bytes: int = MAX_BODY_BYTES,
                    timeout_s: float = BODY_TIMEOUT_S) -> str:
    """The body as text, bounded while it streams as the ASGI host's
    (:class:`~bindloop.hosts.chat.bodies.BodyBound`): a declared ``Content-Length`` over
    ``max_bytes`` is a 413 before anything is read, and so is a body (chunked, or lying about its
    length) the moment it passes ``max_bytes`` -- never read whole first (a Worker has 128 MB); a
    body not whole within ``timeout_s`` is a 408. Invalid UTF-8 becomes U+FFFD, as ``text()``."""
    bound = BodyBound(max_bytes=max_bytes, timeout_s=timeout_s)
    try:
        length = request.headers.get("content-length")
        bound.declared(None if length is None else str(length))
        stream = getattr(request, "js_object", request).body
        if stream is None:
            return ""
        reader = stream.getReader()
    except BodyRefused as exc:
        raise HttpError(exc.status, exc.code, str(exc)) from None

    async def read_one() -> Any:
        return await reader.read()

    deadline = asyncio.get_running_loop().time() + timeout_s
    finished = False
    try:
        while True:
            left = deadline - asyncio.get_running_loop().time()
            try:
                result = await asyncio.wait_for(read_one(), max(left, 0.0))
            except asyncio.TimeoutError:
                raise bound.timed_out() from None
            if result.done:
                finished = True
                break
            bound.add(bytes(result.value.to_bytes()))
    except BodyRefused as exc:
        raise HttpError(exc.status, exc.code, str(exc)) from None
    finally:
        if not finished:
            try:
                await reader.cancel()
            except Exception:  # the stream is already broken: nothing more to release
                pass
    return bound.body().decode("utf-8", errors="replace")


async def read_json(request: Any) -> dict[str, Any]:
    """The body as a JSON object, bounded before it is parsed: a body over ``MAX_BODY_BYTES`` is a
    413 (while it streams: :func:`read_text`), one nested deeper than ``MAX_BODY_DEPTH`` a 400 -- a
    recursive parse of 10,000 brackets would overflow the JS stack and abort the isolate with every
    stream in it."""
    raw = await read_text(request)
    try:
        body: dict[str, Any] = decode_json_bounded(raw, max_bytes=MAX_BODY_BYTES,
                                                   max_depth=MAX_BODY_DEPTH, require_object=True)
    except JsonBoundsError as exc:
        status, code = _BOUNDS_ANSWER[exc.reason]
        raise HttpError(status, code, str(exc)) from None
    return body


Handler = Callable[[Any, Any, "re.Match[str]"], Awaitable[Response]]


class Routes:
    """``(method, path pattern) -> handler(owner, request, match)`` (``owner``: the entrypoint,
    so a handler is a plain method of it); a path that matches with another method is a 405
    naming the allowed ones, no match a 404."""

    def __init__(self) -> None:
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = []

    def add(self, method: str, pattern: str, handler: Handler) -> None:
        self._routes.append((method, re.compile(f"^{pattern}$"), handler))

    def copy(self) -> Routes:
        """A new table with these routes, to add more to without changing this one."""
        routes = Routes()
        routes._routes = list(self._routes)
        return routes

    async def dispatch(self, request: Any, owner: Any, path: str) -> Response:
        method = str(request.method)
        allowed = []
        for want, pattern, handler in self._routes:
            match = pattern.match(path)
            if match is None:
                continue
            if want == method:
                return await handler(owner, request, match)
            allowed.append(want)
        if allowed:
            raise HttpError(405, "method_not_allowed",
                            f"{method} {path}: use {' or '.join(sorted(set(allowed)))}")
        raise HttpError(404, "not_found", f"no route for {method} {path}")


def sse_frame(event: str, payload: str, event_id: str | None = None) -> str:
    """bindloop's own dialect: a named event whose data is one JSON value (``payload``, already
    encoded: one line), with its ``id`` when it has one (what a reconnect sends as
    ``Last-Event-ID``)."""
    head = "" if event_id is None else f"id: {event_id}\n"
    return f"{head}event: {event}\ndata: {payload}\n\n"


class EventStream:
    """An SSE response written from a background task (kept alive with ``ctx.waitUntil``).

    ``heartbeat_ms`` (``None``: off) writes a comment line (``: keep-alive``) whenever nothing was
    sent for that long -- a provider that stalls for a minute leaves proxies and browsers a live
    connection, not a silent one they time out. Comments are ignored by every SSE parser."""

    def __init__(self, *, heartbeat_ms: int | None = None,
                 frame: Callable[[str, str, str | None], str] = sse_frame,
                 headers: dict[str, str] | None = None) -> None:
        self._ts = js.TransformStream.new()
        self._writer = self._ts.writable.getWriter()
        self._encoder = js.TextEncoder.new()
        self._frame = frame
        self._headers = SSE_HEADERS if headers is None else headers
        self._closed = False
        self._watcher: asyncio.Future[None] | None = None  # on_gone's task, held while it waits
        self._quiet_since = float(js.Date.now())
        self._pinger = (None if heartbeat_ms is None
                        else asyncio.ensure_future(self._ping(heartbeat_ms)))

    def _write(self, text: str) -> None:
        if self._closed:
            return
        self._quiet_since = float(js.Date.now())
        # Writes queue in order; the readable side delivers each as it is written.
        self._writer.write(self._encoder.encode(text))

    def send(self, event: str, data: Any, event_id: str | None = None) -> None:
        """One event; ``data`` is anything msgspec encodes (a dict, a turn stream event)."""
        self.send_encoded(event, msgspec.json.encode(data).decode(), event_id)

    def send_encoded(self, event: str, payload: str, event_id: str | None = None) -> None:
        """One event whose data is already JSON text."""
        self._write(self._frame(event, payload, event_id))

    async def _ping(self, every_ms: int) -> None:
        while not self._closed:
            await asyncio.sleep(every_ms / 1000)
            if float(js.Date.now()) - self._quiet_since >= every_ms * 0.9:
                self._write(": keep-alive\n\n")

    def on_gone(self, gone: Callable[[], object], *, every_ms: int) -> None:
        """Call ``gone()`` once if the client goes away before :meth:`close`: the stream errors,
        or what was written is not taken for two checks ``every_ms`` apart (workerd does not
        error a response body whose client hung up: its writes just stop being taken; with a
        heartbeat of at most ``every_ms`` something is always waiting to be taken). For a stream
        whose work is the client's alone (an MCP call); a chat run outlives its client and never
        asks."""

        async def watch() -> None:
            stalled = 0
            while not self._closed:
                await asyncio.sleep(every_ms / 1000)
                room = self._writer.desiredSize  # null once errored; <= 0: a write not taken
                taken = isinstance(room, (int, float)) and room > 0
                stalled = 0 if taken else stalled + 1
                if stalled >= 2 and not self._closed:
                    gone()
                    return

        self._watcher = asyncio.ensure_future(watch())

    async def close(self) -> None:
        self._closed = True
        if self._pinger is not None:
            self._pinger.cancel()
        # A client that went away first has already errored the stream: nothing is left to tell it.
        with contextlib.suppress(JsException):
            await self._writer.close()

    def response(self) -> Response:
        return Response(self._ts.readable, status=200, headers=self._headers)
