"""A loopback TCP proxy that can cut or blackhole a connection at a chosen request: how the fault
tests drop a store's connection mid-commit (before the statement reaches the server, or after it
reached the server but before the answer came back), make it go silent the way a dead network
does, or play a server that is still starting up."""

from __future__ import annotations

import select
import socket
import struct
import threading
from typing import Literal

__all__ = ("CuttingProxy",)

Fault = Literal["cut", "blackhole"]
Starting = Literal["redis", "postgres"]

# What a server still loading its data answers (redis: every command; postgres: the startup
# packet, then it closes the connection).
_REDIS_LOADING = b"-LOADING Redis is loading the dataset in memory\r\n"
_PG_STARTING = b"".join((b"SFATAL\0", b"VFATAL\0", b"C57P03\0",
                         b"Mthe database system is starting up\0", b"\0"))
_PG_NEGOTIATIONS = (80877103, 80877104)  # SSLRequest, GSSENCRequest: answered "N"


class CuttingProxy:
    """Forwards 127.0.0.1:``port`` to ``target_port``.

    :meth:`cut_on` arms a fault: the next client chunk containing ``marker`` is dropped
    (``"before"``) or forwarded (``"after"``); then a ``"cut"`` closes both sockets, and a
    ``"blackhole"`` forwards nothing more in either direction — not even a close — while both
    sockets stay open, as on a network that went silent (until the server ends its side, or
    :meth:`close`). ``times`` faults, then it forwards normally again.

    :meth:`starting` makes it answer as a server still starting up instead of forwarding (Redis:
    ``LOADING`` to every command; Postgres: ``57P03`` to every connection); :attr:`refusals`
    counts those answers.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._listener = socket.socket()
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = int(self._listener.getsockname()[1])
        self._lock = threading.Lock()
        self._marker: bytes | None = None
        self._when: Literal["before", "after"] = "before"
        self._fault: Fault = "cut"
        self._times = 0
        self._starting: Starting | None = None
        self.cuts = 0
        """Faults that fired (cuts and blackholes)."""
        self.blackholes = 0
        self.refusals = 0
        self.client_chunks = 0
        """Chunks read from clients: a client that pipelines sends its statements in one."""
        self.server_ended_blackholed = threading.Event()
        """Set once the server closed a connection this proxy had blackholed (its own timeout
        ended the session the client could no longer reach)."""
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @classmethod
    def to(cls, address: str) -> CuttingProxy:
        """A proxy to the server at ``address`` (a Redis URL or a libpq DSN)."""
        if address.startswith("redis://"):
            return cls(int(address.rsplit(":", 1)[1].split("/")[0]))
        return cls(int(next(p[5:] for p in address.split() if p.startswith("port="))))

    def via(self, address: str) -> str:
        """``address`` (a Redis URL or a libpq DSN) with the proxy in place of the server."""
        if address.startswith("redis://"):
            host, tail = address.rsplit(":", 1)
            _, slash, db = tail.partition("/")
            return f"{host}:{self.port}{slash}{db}"
        return " ".join([*(p for p in address.split() if not p.startswith("port=")),
                         f"port={self.port}"])

    def cut_on(self, marker: bytes, when: Literal["before", "after"], times: int = 1,
               fault: Fault = "cut") -> None:
        with self._lock:
            self._marker, self._when, self._times, self._fault = marker, when, times, fault

    def starting(self, kind: Starting | None) -> None:
        """Answer as a ``kind`` server still starting up (``None``: forward again)."""
        with self._lock:
            self._starting = kind

    def _should_cut(self, chunk: bytes) -> tuple[Literal["before", "after"], Fault] | None:
        with self._lock:
            if self._times > 0 and self._marker is not None and self._marker in chunk:
                self._times -= 1
                self.cuts += 1
                self.blackholes += self._fault == "blackhole"
                return self._when, self._fault
        return None

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with self._lock:
            starting = self._starting
        if starting == "postgres":
            self._refuse_postgres(client)
            return
        try:
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
        except OSError:
            client.close()
            return
        self._pump(client, upstream)

    def _refuse_postgres(self, client: socket.socket) -> None:
        try:
            while True:
                head = _recv_exact(client, 8)
                length, code = struct.unpack("!II", head)
                _recv_exact(client, length - 8)
                if code in _PG_NEGOTIATIONS:
                    client.sendall(b"N")
                    continue
                client.sendall(b"E" + struct.pack("!I", len(_PG_STARTING) + 4) + _PG_STARTING)
                with self._lock:
                    self.refusals += 1
                return
        except (OSError, ValueError, struct.error):
            return
        finally:
            client.close()

    def _loading_reply(self, chunk: bytes) -> bytes | None:
        with self._lock:
            if self._starting != "redis":
                return None
            commands = max(1, _resp_commands(chunk))
            self.refusals += commands
        return _REDIS_LOADING * commands

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        watched = [client, upstream]
        blackholed = False
        try:
            while not self._closed and watched:
                ready, _, _ = select.select(watched, [], [], 0.5)
                for sock in ready:
                    chunk = sock.recv(65536)
                    if not chunk:
                        if blackholed and sock is upstream:
                            self.server_ended_blackholed.set()
                            return
                        if blackholed:  # the client's goodbye is lost in the silence too
                            watched.remove(sock)
                            continue
                        return
                    if blackholed:
                        continue  # read and dropped: nothing crosses any more
                    if sock is client:
                        with self._lock:
                            self.client_chunks += 1
                        loading = self._loading_reply(chunk)
                        if loading is not None:
                            client.sendall(loading)
                            continue
                        fault = self._should_cut(chunk)
                        if fault is None:
                            upstream.sendall(chunk)
                            continue
                        when, kind = fault
                        if when == "after":
                            upstream.sendall(chunk)
                        if kind == "cut":
                            return
                        blackholed = True
                    else:
                        client.sendall(chunk)
        except OSError:
            return
        finally:
            for sock in (client, upstream):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        part = sock.recv(n - len(data))
        if not part:
            raise OSError("closed")
        data += part
    return data


def _resp_commands(chunk: bytes) -> int:
    """How many RESP commands (arrays of bulk strings) a chunk holds."""
    count, i = 0, 0
    while i < len(chunk) and chunk[i:i + 1] == b"*":
        end = chunk.index(b"\r\n", i)
        items = int(chunk[i + 1:end])
        i = end + 2
        for _ in range(items):
            end = chunk.index(b"\r\n", i)
            i = end + 2 + int(chunk[i + 1:end]) + 2
        count += 1
    return count
