"""A scripted provider server: real HTTP/1.1 on 127.0.0.1, replies taken from a script.

For integration tests and the provider demo. Each request's path starts with a route prefix
(``/openai/...``); the server pops the next :class:`ScriptedReply` queued for that prefix. A reply can
stream its chunks (chunked transfer encoding, optional delay, optionally gzip-encoded), stall
before sending its headers or after some chunks (the connection stays open until the client gives up, which is recorded in
:attr:`ScriptedProviderServer.hangups`), or drop the connection after some chunks.
It runs its own asyncio loop on a background thread, so a client on any event loop (asyncio, trio)
can use it. Every request is recorded for assertions.
"""

from __future__ import annotations

import asyncio
import threading
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType

from bindloop.contracts import ModelTurnResult

from .provider_replies import render_body, render_sse

__all__ = ("RecordedRequest", "ScriptedProviderServer", "ScriptedReply", "error_reply", "turn_reply")


@dataclass(frozen=True)
class ScriptedReply:
    """One response. ``stall_after`` / ``drop_after`` count chunks sent before stalling / dropping;
    ``stall_before_headers`` reads the request and then sends nothing at all. ``gzip`` sends the
    body with ``content-encoding: gzip``: one gzip stream, flushed after every chunk, so a streamed
    reply still arrives chunk by chunk."""

    status: int = 200
    headers: tuple[tuple[str, str], ...] = ()
    chunks: tuple[bytes, ...] = ()
    delay_s: float = 0.0
    stall_after: int | None = None
    drop_after: int | None = None
    streamed: bool = True
    stall_before_headers: bool = False
    gzip: bool = False


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes


def turn_reply(wire: str, turn: ModelTurnResult, *, stream: bool, model: str = "scripted-model",
               gzip: bool = False, **options: object) -> ScriptedReply:
    """The reply ``wire`` would send for ``turn``, streamed as SSE or as one JSON body (``gzip``:
    content-encoded, as a provider answers a client that accepts it)."""
    encoding = (("content-encoding", "gzip"),) if gzip else ()
    if stream:
        return ScriptedReply(headers=(("content-type", "text/event-stream"), *encoding),
                             chunks=tuple(render_sse(wire, turn, model=model)), gzip=gzip,
                             **options)  # type: ignore[arg-type]
    return ScriptedReply(headers=(("content-type", "application/json"), *encoding),
                         chunks=(render_body(wire, turn, model=model),), streamed=False,
                         gzip=gzip, **options)  # type: ignore[arg-type]


def _gzip_chunks(chunks: tuple[bytes, ...]) -> tuple[bytes, ...]:
    """``chunks`` as one gzip stream, one piece per chunk (each flushed, so it can be decoded as
    it arrives); the last piece carries the gzip trailer."""
    compressor = zlib.compressobj(wbits=31)  # 16 + 15: the gzip container
    out = [compressor.compress(chunk) + compressor.flush(zlib.Z_SYNC_FLUSH) for chunk in chunks]
    tail = compressor.flush()
    return (*out[:-1], out[-1] + tail) if out else (tail,)


def error_reply(status: int, body: bytes, *, retry_after: str | None = None) -> ScriptedReply:
    headers = [("content-type", "application/json")]
    if retry_after is not None:
        headers.append(("retry-after", retry_after))
    return ScriptedReply(status=status, headers=tuple(headers), chunks=(body,), streamed=False)


_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            413: "Payload Too Large", 429: "Too Many Requests", 500: "Internal Server Error",
            503: "Service Unavailable", 529: "Overloaded"}


@dataclass
class ScriptedProviderServer:
    """Use as a context manager; ``base_url(prefix)`` gives the URL a transport should use.

    ``keep_alive=True`` serves request after request on one connection (as real providers do), so a
    client's pooled connection outlives one call; otherwise every reply says ``connection: close``.
    A stalled or dropped reply ends its connection either way."""

    host: str = "127.0.0.1"
    keep_alive: bool = False
    connections: int = 0
    """How many connections clients have opened so far."""
    requests: list[RecordedRequest] = field(default_factory=list)
    hangups: list[str] = field(default_factory=list)
    """Paths of requests whose client closed the connection while the server was stalling."""
    _queues: dict[str, deque[ScriptedReply]] = field(default_factory=dict)
    _responders: dict[str, Callable[[RecordedRequest], ScriptedReply]] = field(default_factory=dict)
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _server: asyncio.base_events.Server | None = None
    _stop: asyncio.Event | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    port: int = 0

    def enqueue(self, prefix: str, *replies: ScriptedReply) -> None:
        with self._lock:
            self._queues.setdefault(prefix.strip("/"), deque()).extend(replies)

    def set_responder(self, prefix: str,
                      responder: Callable[[RecordedRequest], ScriptedReply]) -> None:
        """Answer requests under ``prefix`` with ``responder(request)`` once its queue is empty
        (a scripted provider that reads the transcript it was sent). Runs on the server thread."""
        with self._lock:
            self._responders[prefix.strip("/")] = responder

    def pending(self, prefix: str) -> int:
        with self._lock:
            return len(self._queues.get(prefix.strip("/"), ()))

    def hung_up(self, prefix: str) -> int:
        """How many stalled requests under ``prefix`` the client has hung up on so far."""
        key = "/" + prefix.strip("/") + "/"
        with self._lock:
            return sum(1 for path in self.hangups if path.startswith(key))

    def base_url(self, prefix: str) -> str:
        return f"http://{self.host}:{self.port}/{prefix.strip('/')}"

    def start(self) -> ScriptedProviderServer:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="scripted-provider-server")
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._serve(), self._loop).result(timeout=10)
        return self

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        self._server = await asyncio.start_server(self._handle, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        loop = self._loop
        if loop is None:
            return

        async def shutdown() -> None:
            assert self._server is not None and self._stop is not None
            self._stop.set()
            self._server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        assert self._thread is not None
        self._thread.join(timeout=10)
        loop.close()
        self._loop = None

    def __enter__(self) -> ScriptedProviderServer:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with self._lock:
            self.connections += 1
        try:
            while await self._one_request(reader, writer) and self.keep_alive:
                pass
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            # stop() cancels handlers still paused in delay_s or a stall: an ordinary end here.
            # Re-raised, asyncio's stream callback would log the cancelled task as an error.
            pass
        finally:
            writer.close()

    async def _one_request(self, reader: asyncio.StreamReader,
                           writer: asyncio.StreamWriter) -> bool:
        """Read one request and answer it; True when the connection can carry another."""
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = tuple((k.strip().lower(), v.strip()) for k, _, v in
                        (line.partition(":") for line in lines[1:] if line))
        length = int(dict(headers).get("content-length", "0"))
        body = await reader.readexactly(length) if length else b""
        request = RecordedRequest(method, path, headers, body)
        prefix = path.lstrip("/").split("/", 1)[0]
        with self._lock:
            self.requests.append(request)
            queue = self._queues.get(prefix)
            responder = self._responders.get(prefix)
            reply = queue.popleft() if queue else None
        if reply is None:
            reply = responder(request) if responder is not None else ScriptedReply(
                status=500, chunks=(b'{"error":{"message":"script exhausted"}}',),
                streamed=False)
        return await self._reply(reply, request, reader, writer)

    async def _stall(self, request: RecordedRequest, reader: asyncio.StreamReader) -> None:
        """Hold the connection open, silent, until the client hangs up (recorded) or we stop."""
        assert self._stop is not None
        stop = asyncio.ensure_future(self._stop.wait())
        eof = asyncio.ensure_future(reader.read())
        try:
            await asyncio.wait({stop, eof}, return_when=asyncio.FIRST_COMPLETED)
            if eof.done() and not eof.cancelled():  # EOF or a reset: either way, the client left
                eof.exception()  # retrieved, so asyncio does not log it as never retrieved
                with self._lock:
                    self.hangups.append(request.path)
        finally:
            stop.cancel()
            eof.cancel()

    async def _reply(self, reply: ScriptedReply, request: RecordedRequest,
                     reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        if reply.stall_before_headers:
            await self._stall(request, reader)
            return False
        status = f"HTTP/1.1 {reply.status} {_REASONS.get(reply.status, 'Status')}\r\n"
        chunks = _gzip_chunks(reply.chunks) if reply.gzip else reply.chunks
        head = [status, "connection: keep-alive\r\n" if self.keep_alive else "connection: close\r\n"]
        head += [f"{k}: {v}\r\n" for k, v in reply.headers]
        if reply.gzip and not any(k.lower() == "content-encoding" for k, _ in reply.headers):
            head.append("content-encoding: gzip\r\n")
        if reply.streamed:
            head.append("transfer-encoding: chunked\r\n")
        else:
            head.append(f"content-length: {sum(len(c) for c in chunks)}\r\n")
        writer.write(("".join(head) + "\r\n").encode("latin-1"))
        await writer.drain()
        for n, chunk in enumerate(chunks):
            if reply.stall_after is not None and n >= reply.stall_after:
                await self._stall(request, reader)
                return False
            if reply.drop_after is not None and n >= reply.drop_after:
                writer.transport.abort()
                return False
            if reply.delay_s:
                await asyncio.sleep(reply.delay_s)
            writer.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" if reply.streamed
                         else chunk)
            await writer.drain()
        if reply.drop_after is not None and reply.drop_after >= len(chunks):
            writer.transport.abort()
            return False
        if reply.streamed:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        return True
