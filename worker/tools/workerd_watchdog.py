"""Stop one ``workerd`` when the process that started it is gone, however it went (SIGKILL too).

    python -I -S workerd_watchdog.py PID [PIDFD]

``workerd_harness.Workerd`` starts this beside every ``workerd`` it starts. Its stdin is the read end
of a pipe whose write end only the harness holds: the kernel closes that end when the harness exits
for any reason, the read returns end-of-file, and this process sends the ``workerd`` SIGTERM, then
SIGKILL after 3 s. It exits as soon as the ``workerd`` ends by itself. ``PIDFD`` (Linux) is a pidfd
the harness opened on the still-unreaped child, so the signal can never reach a process that
reused the PID; without it the PID is signalled.

Standard library only, no ``site`` (``-I -S``): it starts in a few milliseconds.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time


def _alive(pid: int, pidfd: int) -> bool:
    if pidfd >= 0:
        ready, _, _ = select.select([pidfd], [], [], 0)  # readable once the process has ended
        return not ready
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal(pid: int, pidfd: int, signum: int) -> None:
    try:
        if pidfd >= 0:
            signal.pidfd_send_signal(pidfd, signum)
        else:
            os.kill(pid, signum)
    except ProcessLookupError:
        pass


def watch(pid: int, pidfd: int) -> int:
    # A terminal's ^C reaches the whole foreground group; stopping workerd then is the harness's job.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watched = [0] + ([pidfd] if pidfd >= 0 else [])
    while True:
        ready, _, _ = select.select(watched, [], [], None if pidfd >= 0 else 1.0)
        if pidfd in ready or not _alive(pid, pidfd):
            return 0  # workerd ended: nothing to do
        if 0 in ready and not os.read(0, 64):
            break  # the harness is gone
    _signal(pid, pidfd, signal.SIGTERM)
    deadline = time.monotonic() + 3.0
    while time.monotonic() < deadline:
        if not _alive(pid, pidfd):
            return 0
        time.sleep(0.05)
    _signal(pid, pidfd, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(watch(int(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else -1))
