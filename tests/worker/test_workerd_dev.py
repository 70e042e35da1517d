"""``python worker/tools/workerd_harness.py dev DIR`` serves a Worker directory of its own (not the
template: a wrangler.jsonc with vars, a JSON var, a Durable Object class and its migration,
``.dev.vars``, a module in a sub-package) in real workerd, restarts it when a file changes (the
Durable Object's storage and the port kept), keeps serving the old code when the new config is
broken or raises at import, starts from a memory snapshot it wrote itself, and leaves no workerd
behind when it is stopped with SIGTERM, SIGINT or SIGHUP or killed with SIGKILL (its watchdog stops
the workerd).
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "worker" / "tools" / "workerd_harness.py"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="reads process states from /proc")

WRANGLER = """{
  // A Worker of its own: the harness reads this file, not the template's.
  "name": "dev-check",
  "main": "src/entry.py",
  "compatibility_date": "2026-11-01",
  "compatibility_flags": ["python_workers", "python_workers_314", "disable_python_external_sdk"],
  "vars": {"GREETING": "hello", "LIMIT": 3, "OVERRIDDEN": "from wrangler.jsonc"},
  "durable_objects": {"bindings": [{"name": "COUNTER", "class_name": "Counter"}]},
  "migrations": [{"tag": "v1", "new_sqlite_classes": ["Counter"]}],
}
"""

ENTRY = '''
from workers import DurableObject, Response, WorkerEntrypoint

from lib.helper import VERSION


class Counter(DurableObject):
    async def increment(self):
        n = int(await self.ctx.storage.get("n") or 0) + 1
        await self.ctx.storage.put("n", n)
        return n


class Default(WorkerEntrypoint):
    async def fetch(self, request):
        ns = self.env.COUNTER
        count = await ns.get(ns.idFromName("one")).increment()
        return Response.json({"greeting": self.env.GREETING, "limit": int(self.env.LIMIT),
                              "secret": self.env.SECRET, "overridden": self.env.OVERRIDDEN,
                              "version": VERSION, "count": int(count)})
'''


def _worker(root: Path) -> Path:
    (root / "src" / "lib").mkdir(parents=True)
    (root / "wrangler.jsonc").write_text(WRANGLER)
    (root / ".dev.vars").write_text("SECRET=s3cret\n")
    (root / "src" / "entry.py").write_text(ENTRY)
    (root / "src" / "lib" / "__init__.py").write_text("")
    (root / "src" / "lib" / "helper.py").write_text("VERSION = 1\n")
    return root


class Dev:
    """The dev command as a child process, its output read line by line."""

    def __init__(self, directory: Path, *args: str, sigint_ignored: bool = False) -> None:
        # sigint_ignored: started as a non-interactive shell starts a background job (`cmd &`),
        # with SIGINT ignored, which a Python program inherits.
        self.proc = subprocess.Popen(
            [sys.executable, str(HARNESS), "dev", str(directory), "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if sigint_ignored else None)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        assert self.proc.stdout is not None
        output = self.proc.stdout  # its own and workerd's, which it passes through
        threading.Thread(target=lambda: [self.lines.put(line) for line in output], daemon=True).start()

    def wait_for(self, pattern: str, timeout_s: float = 300) -> re.Match[str]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                assert self.proc.poll() is None, "".join(self.seen)
                continue
            self.seen.append(line)
            found = re.search(pattern, line)
            if found:
                return found
        raise AssertionError(f"no {pattern!r} in:\n{''.join(self.seen)}")

    def served(self) -> tuple[int, int, str]:
        """(port, workerd pid, the line) of the next start."""
        found = self.wait_for(r"\[workerd dev\] dev-check .* at http://127\.0\.0\.1:(\d+)/ "
                              r"\(workerd pid (\d+).*")
        return int(found[1]), int(found[2]), found[0]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _get(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=300) as resp:
        body: dict[str, Any] = json.loads(resp.read())
    return body


def _gone(pid: int, timeout_s: float = 20) -> bool:
    """Whether ``pid`` ended within ``timeout_s`` (exited, or a zombie left for init to reap)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


def test_dev_reloads_on_change_and_its_workerd_dies_with_it(tmp_path: Path) -> None:
    root = _worker(tmp_path / "w")
    dev = Dev(root, "--var", "OVERRIDDEN=from --var")
    try:
        port, first, _ = dev.served()
        assert _get(port) == {"greeting": "hello", "limit": 3, "secret": "s3cret",
                              "overridden": "from --var", "version": 1, "count": 1}
        (root / "src" / "lib" / "helper.py").write_text("VERSION = 2\n")
        dev.wait_for(r"helper\.py changed: restarting workerd")
        again, second, _ = dev.served()
        assert again == port and second != first and _gone(first)
        # The new code, the same Durable Object storage.
        assert _get(port) | {"count": 0} == {"greeting": "hello", "limit": 3, "secret": "s3cret",
                                             "overridden": "from --var", "version": 2, "count": 0}
        assert _get(port)["count"] == 3
        # A broken config is reported and the running Worker keeps serving.
        (root / "wrangler.jsonc").write_text(WRANGLER.replace('"main"', '"main": 1, "x"'))
        dev.wait_for(r"not reloaded \(wrangler\.jsonc changed\)")
        assert _get(port)["version"] == 2
        # A Worker that raises at import: reported, and the next change starts it again.
        (root / "src" / "lib" / "helper.py").write_text("VERSION = 1 / 0\n")
        (root / "wrangler.jsonc").write_text(WRANGLER)
        dev.wait_for(r"ZeroDivisionError")
        dev.wait_for(r"workerd did not start; its output is above; waiting for a change")
        (root / "src" / "lib" / "helper.py").write_text("VERSION = 3\n")
        _, third, _ = dev.served()
        assert _get(port)["version"] == 3
        # The parent killed outright: no cleanup runs in it, its watchdog stops workerd.
        os.kill(dev.proc.pid, signal.SIGKILL)
        dev.proc.wait()
        assert _gone(third), f"workerd {third} outlived its SIGKILLed parent"
    finally:
        dev.close()


def test_dev_starts_from_its_memory_snapshot_and_stops_on_sigterm_sigint_and_sighup(tmp_path: Path) -> None:
    root = _worker(tmp_path / "w")
    for signum, code, how, count in ((signal.SIGTERM, 128 + signal.SIGTERM, "memory snapshot written", 1),
                                     (signal.SIGINT, 130, "from its memory snapshot", 2),
                                     (signal.SIGHUP, 128 + signal.SIGHUP, "from its memory snapshot", 3)):
        dev = Dev(root, "--snapshot", sigint_ignored=signum == signal.SIGINT)
        try:
            port, pid, line = dev.served()
            assert how in line, line
            # The second run's Durable Object storage is the first's (DIR/.workerd-dev/storage).
            assert _get(port)["count"] == count
            dev.proc.send_signal(signum)
            assert dev.proc.wait(timeout=30) == code
            assert _gone(pid, timeout_s=1), f"workerd {pid} outlived the dev command's {signum!r}"
        finally:
            dev.close()
    [snapshot] = (root / ".workerd-dev" / "snapshots").glob("*/snapshot.bin")
    assert snapshot.stat().st_size > 1_000_000
