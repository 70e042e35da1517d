"""A loopback TCP proxy that can cut a connection at a chosen request: how the fault tests drop a
store's connection mid-commit (before the statement reaches the server, or after it reached the
server but before the answer came back)."""

from __future__ import annotations

import select
import socket
import threading
from typing import Literal

__all__ = ("CuttingProxy",)


class CuttingProxy:
    """Forwards 127.0.0.1:``port`` to ``target_port``. :meth:`cut_on` arms a cut: the next
    client chunk containing ``marker`` is dropped (``"before"``) or forwarded (``"after"``), then
    both sockets are closed; ``times`` cuts, then it forwards normally again."""

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
        self._times = 0
        self.cuts = 0
        self._closed = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def cut_on(self, marker: bytes, when: Literal["before", "after"], times: int = 1) -> None:
        with self._lock:
            self._marker, self._when, self._times = marker, when, times

    def _should_cut(self, chunk: bytes) -> Literal["before", "after"] | None:
        with self._lock:
            if self._times > 0 and self._marker is not None and self._marker in chunk:
                self._times -= 1
                self.cuts += 1
                return self._when
        return None

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                client.close()
                continue
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        try:
            while not self._closed:
                ready, _, _ = select.select([client, upstream], [], [], 0.5)
                for sock in ready:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    if sock is client:
                        cut = self._should_cut(chunk)
                        if cut == "after":
                            upstream.sendall(chunk)
                        if cut is not None:
                            return
                        upstream.sendall(chunk)
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
