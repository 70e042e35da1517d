"""Real Postgres and Redis servers for the store tests, started here and stopped by PID.

Each server runs from the Debian binaries (``make store-servers`` installs them), on a free
127.0.0.1 port, with its data in a temporary directory that is removed afterwards. Postgres refuses
to run as root, so as root it runs as the ``postgres`` user the Debian package creates.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ("PostgresServer", "RedisServer", "free_port", "postgres_bin", "redis_bin")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    if found:
        return Path(found[-1]).parent
    which = shutil.which("postgres")
    return Path(which).parent if which else None


def redis_bin() -> str | None:
    return shutil.which("redis-server")


def _wait_port(port: int, proc: subprocess.Popen[bytes], what: str, timeout: float = 30.0,
               log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text()[-2000:] if log and log.exists() else ""
            raise RuntimeError(f"{what} exited with {proc.returncode}: {tail}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on 127.0.0.1:{port} in {timeout} s")


def _stop(proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class PostgresServer:
    """``initdb`` into a temporary directory, then ``postgres`` on a free port (trust auth)."""

    def __init__(self) -> None:
        bindir = postgres_bin()
        if bindir is None:
            raise RuntimeError("postgres binaries not found: run `make store-servers`")
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="bindloop-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._as_root = os.geteuid() == 0
        if self._as_root:
            shutil.chown(self.root, "postgres", "postgres")
        subprocess.run([str(bindir / "initdb"), "-D", str(self.data), "-U", "postgres",
                        "-A", "trust", "-E", "UTF8", "--no-sync"], check=True,
                       capture_output=True, **self._user())

    def _user(self) -> dict[str, str]:
        return {"user": "postgres", "group": "postgres"} if self._as_root else {}

    @property
    def dsn(self) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"

    def start(self) -> None:
        for _ in range(3):
            self.port = free_port()
            with open(self.log, "ab") as log:
                self.proc = subprocess.Popen(
                    [str(self.bindir / "postgres"), "-D", str(self.data), "-p", str(self.port),
                     "-k", str(self.root), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                     "-c", "max_connections=200"],
                    stdout=log, stderr=log, **self._user())  # type: ignore[call-overload]
            try:
                _wait_port(self.port, self.proc, "postgres", log=self.log)
                self._wait_accepting()
                return
            except RuntimeError:
                _stop(self.proc)
        raise RuntimeError(f"postgres did not start: {self.log.read_text()[-2000:]}")

    def _wait_accepting(self, timeout: float = 30.0) -> None:
        # The port opens before recovery ends ("the database system is starting up").
        deadline = time.monotonic() + timeout
        while subprocess.run([str(self.bindir / "pg_isready"), "-q", "-h", "127.0.0.1", "-p",
                              str(self.port)]).returncode != 0:
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres is not accepting connections on {self.port}")
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        _stop(self.proc, sig)
        self.proc = None

    def restart(self) -> None:
        port = self.port
        self.stop(signal.SIGINT)  # "fast" shutdown: sessions are cut, data is kept
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [str(self.bindir / "postgres"), "-D", str(self.data), "-p", str(port),
                 "-k", str(self.root), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                 "-c", "max_connections=200"],
                stdout=log, stderr=log, **self._user())  # type: ignore[call-overload]
        _wait_port(port, self.proc, "postgres", log=self.log)
        self._wait_accepting()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class RedisServer:
    """``redis-server`` on a free port, append-only file on (a checkpoint store needs it)."""

    def __init__(self) -> None:
        binary = redis_bin()
        if binary is None:
            raise RuntimeError("redis-server not found: run `make store-servers`")
        self.binary = binary
        self.root = Path(tempfile.mkdtemp(prefix="bindloop-redis-"))
        self.log = self.root / "server.log"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _spawn(self, *extra: str) -> None:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--dir",
                 str(self.root), "--save", "", "--appendonly", "yes", "--appendfsync", "always",
                 "--protected-mode", "no", *extra], stdout=log, stderr=log)

    def start(self) -> None:
        for _ in range(3):
            self.port = free_port()
            self._spawn()
            assert self.proc is not None
            try:
                _wait_port(self.port, self.proc, "redis-server", log=self.log)
                return
            except RuntimeError:
                _stop(self.proc)
        raise RuntimeError(f"redis-server did not start: {self.log.read_text()[-2000:]}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        _stop(self.proc, sig)
        self.proc = None

    def restart(self, key_load_delay_us: int = 0) -> None:
        """Stop and start again on the same port and data. ``key_load_delay_us`` makes it load
        each key of the append-only file's RDB base that much slower (Redis's own test hook), so
        it answers ``LOADING`` for a while after the port opens."""
        self.stop()
        self._spawn(*(("--key-load-delay", str(key_load_delay_us),
                       "--loading-process-events-interval-bytes", "1024")
                      if key_load_delay_us else ()))
        assert self.proc is not None
        _wait_port(self.port, self.proc, "redis-server", log=self.log)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)
