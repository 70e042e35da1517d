"""Crash test: SIGKILL a child process running tool-using agent sessions, restart, resume.

The parent starts the scripted provider server (OpenAI Chat wire over loopback HTTP, SSE) and a
child process that runs ``M`` sessions concurrently through ``run_from_checkpoint`` with a real
``ModelAdapter`` + ``HttpxTransport``, every checkpoint committed to a SQLite store. Each session
asks the model, which answers with one ``charge`` tool call per step and a final answer after
``STEPS`` of them. ``charge`` is a side effect (a ledger row) guarded by an idempotency receipt:
claimed with a lease, and the ledger row written in the same SQLite transaction that completes the
receipt — the protocol's recommended fence — so a crash lands both or neither, and an expired
``running`` receipt proves the row was never written (it is then reclaimed). That fence is what
makes the effect ``resumable`` in the receipt protocol's terms; an ``opaque`` effect (no such
trail) would come back ``ReceiptAmbiguous`` after a kill mid-effect, which this harness does not
exercise.

The parent kills the child at a seeded random moment after it reports ready, restarts it (which
resumes every unfinished session from the store), and repeats until every session is finished;
trials repeat with a fresh store until ``kills`` kills happened. Each trial's final transcripts
are compared with an uncrashed run's, and the ledger is checked: each (session, step) exactly once.

With Postgres and Redis the children reach the server through a fault proxy
(``tests/hosts/proxy.py``), and the stores run with their default settings: between kills the
parent arms connection faults at random statements — cuts before or after the statement reached
the server, and now and then a blackhole (the connection goes silent both ways, for the store's
own timeouts to end) — and restarts the server ``--restarts`` times over the run. A store error
inside the ``charge`` tool stops the run by default (bindloop's own infrastructure errors are fatal
unless a host says otherwise): the child resumes it from its last checkpoint, as a host does.

    python tests/hardening/crash_harness.py --kills 200 --sessions 8 --seed 1
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from bindloop.loop import ToolRunner

TENANT = "crash-test"
STEPS = 3
LEASE_MS = 250.0


# ---- the scripted provider (runs in the parent, on the server's thread) -----------------------

def responder() -> Any:
    import msgspec

    from bindloop.contracts import ModelTurnResult, ToolCall, TurnUsage, messages_from_openai
    from bindloop.contracts import ToolMessage, UserMessage
    from harness.fixtures.scripted_server import RecordedRequest, ScriptedReply, turn_reply

    def respond(request: RecordedRequest) -> ScriptedReply:
        body = msgspec.json.decode(request.body)
        messages = messages_from_openai(body["messages"])
        first = next(m for m in messages if isinstance(m, UserMessage))
        session = str(first.content).split()[1].rstrip(":")
        done = [m for m in messages if isinstance(m, ToolMessage)]
        usage = TurnUsage(input_tokens=10 * len(messages), output_tokens=7)
        if len(done) < STEPS:
            step = len(done)
            args = json.dumps({"session": session, "step": step, "amount": 10 + step})
            turn = ModelTurnResult(text=f"charging step {step}", usage=usage, tool_calls=(
                ToolCall(id=f"call_{session}_{step}", name="charge", arguments=args),))
        else:
            receipts = "; ".join(str(m.content) for m in done)
            turn = ModelTurnResult(text=f"session {session} done: {receipts}", usage=usage)
        return turn_reply("openai_chat", turn, stream=True, model=body["model"], delay_s=0.001)

    return respond


# ---- the child: run every unfinished session from the shared backend --------------------------

async def run_child(backend_kind: str, target: str, namespace: str, base_url: str,
                    sessions: int, pattern: str = "once") -> None:
    import anyio
    import httpx

    from bindloop.contracts import ToolCall, ToolDefinition, ToolResult, UserMessage
    from bindloop.hosts.transports.httpx import HttpxTransport
    from bindloop.run import (
        ReceiptAmbiguous,
        ReceiptExecute,
        ReceiptReplay,
        ReceiptWait,
        ToolCallReceiptKey,
        decide_tool_call_receipt,
        tool_call_args_hash,
    )
    from bindloop.checkpoints import (
        RestoredLoop,
        create_loop_checkpoint,
        run_from_checkpoint,
    )
    from bindloop.stores import (
        CheckpointConflictError,
        StoreError,
    )
    from bindloop.wire import ModelAdapter, OpenAIChatAdapter, WireOptions
    from crash_backends import CrashBackend

    store = CrashBackend(backend_kind, target, namespace)
    chat = OpenAIChatAdapter()
    client = httpx.AsyncClient()
    model = ModelAdapter(chat, HttpxTransport(base_url, headers=chat.auth_headers("crash-key"),
                                              client=client),
                         WireOptions(model="scripted", stream=True))
    tools = [ToolDefinition(name="charge", description="Charge the customer.",
                            parameters={"type": "object", "properties": {
                                "session": {"type": "string"}, "step": {"type": "integer"},
                                "amount": {"type": "integer"}}})]

    async def charge(call: ToolCall) -> ToolResult:
        args = json.loads(call.arguments)
        key = ToolCallReceiptKey(tenant_id=TENANT, run_id=args["session"], tool_name=call.name,
                                 args_hash=tool_call_args_hash(args))
        result = f"charged {args['amount']} for {args['session']}:{args['step']}"
        if pattern == "once":
            # The ledger row is written with the receipt, so a call no attempt has touched
            # needs no claim: one write records both (or finds the receipt another wrote).
            await anyio.sleep(0.002)  # the work before the write: a kill can land here
            state = await store.once_charge(key, result, args["session"], args["step"])
            if state is None:
                return ToolResult(content=result)
        else:
            state = await store.read(key)
        while True:
            # The receipt is the effect's trail (both land in one transaction), so an expired
            # running receipt is safe to reclaim: decided as a resumable effect.
            decision = decide_tool_call_receipt(state=state, effect="resumable", now=store.now)
            if isinstance(decision, ReceiptReplay):
                return ToolResult(content=str(decision.result))
            if isinstance(decision, ReceiptWait):
                await anyio.sleep(max(0.0, decision.lease_expires_at_ms - store.now()) / 1000)
            elif isinstance(decision, ReceiptAmbiguous):  # cannot happen with this fence
                raise RuntimeError(decision.reason)
            else:
                assert isinstance(decision, ReceiptExecute)
                if await store.claim(key, decision.attempt, LEASE_MS):
                    await anyio.sleep(0.002)  # the effect takes a moment: a kill can land mid-effect
                    if await store.complete_charge(key, decision.attempt, result,
                                                   args["session"], args["step"]):
                        return ToolResult(content=result)
            state = await store.read(key)

    async def one(n: int) -> None:
        ident = f"s{n:03d}"
        while True:
            try:
                cp = await store.load(ident)
                if cp is None:
                    cp = create_loop_checkpoint(
                        execution_id=ident, max_iterations=STEPS + 2,
                        messages=[UserMessage(content=f"session {ident}: charge")])
                    try:
                        await store.save(cp)
                    except CheckpointConflictError:
                        continue  # another process started it: follow the stored one
                if cp.status == "finished":
                    return
                await run_from_checkpoint(
                    checkpoint=cp, commit=store.commit,
                    restore=lambda c: RestoredLoop(
                        model=model,
                        capture_bindings=lambda: c.bindings,
                        runner=ToolRunner(run_tool_call=charge, build_tools=lambda: tools),
                    ))
            except CheckpointConflictError:
                # Another process advanced this session first (the single-writer fence): stop
                # this invocation and go on from what it stored.
                await anyio.sleep(0.005)
            except StoreError:
                # The store failed (a cut connection, a silent one, a server restarting): what
                # landed is in the store; resume from the last checkpoint.
                await anyio.sleep(0.05)

    print("ready", flush=True)
    async with anyio.create_task_group() as tg:
        for n in range(sessions):
            tg.start_soon(one, n)
    await client.aclose()
    await store.aclose()


# ---- the parent -------------------------------------------------------------------------------

@dataclass
class Report:
    kills: int = 0
    restarts: int = 0
    trials: int = 0
    sessions_finished: int = 0
    sessions: int = 0
    duplicates: int = 0
    lost: int = 0
    mismatched_transcripts: int = 0
    reclaimed: int = 0
    cuts: int = 0
    blackholes: int = 0
    server_restarts: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [f"kills: {self.kills}", f"restarts: {self.restarts}", f"trials: {self.trials}",
                f"sessions finished: {self.sessions_finished} / {self.sessions}",
                f"duplicates: {self.duplicates}", f"lost: {self.lost}",
                f"transcripts differing from the uncrashed run: {self.mismatched_transcripts}",
                f"effects applied by a reclaiming attempt (a kill held the lease): {self.reclaimed}",
                f"connection faults: {self.cuts} cut, {self.blackholes} blackholed",
                f"server restarts: {self.server_restarts}",
                f"wall time: {self.seconds:.1f} s"]


@dataclass
class Target:
    """Where a run's sessions live: the backend, its address, and a namespace per run."""

    kind: str
    address: str
    namespace: str
    pattern: str = "once"
    """How ``charge`` records its effect: ``once`` (``complete_once``: the receipt and the ledger
    row in one write, the claim protocol only when a receipt exists) or ``claim`` (claim, then
    ``complete_with``)."""

    def for_run(self, workdir: Path, name: str) -> Target:
        if self.kind == "sqlite":
            return Target("sqlite", str(workdir / f"{name}.db"), name, self.pattern)
        return Target(self.kind, self.address, f"{self.namespace}_{name}", self.pattern)


def _spawn(target: Target, base_url: str, sessions: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, __file__, "child", "--backend", target.kind, "--target", target.address,
         "--namespace", target.namespace, "--base-url", base_url, "--sessions", str(sessions),
         "--pattern", target.pattern],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_ready(proc: subprocess.Popen[str]) -> None:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if line.strip() != "ready":
        _, err = proc.communicate(timeout=30)
        raise RuntimeError(f"child did not start: {line!r} {err[-2000:]}")


def _run_async(fn: Any, *args: Any) -> Any:
    import anyio

    return anyio.run(fn, *args)


async def _prepare(target: Target) -> None:
    from crash_backends import CrashBackend

    backend = CrashBackend(target.kind, target.address, target.namespace)
    try:
        await backend.prepare()
    finally:
        await backend.aclose()


async def _outcome(target: Target, sessions: int
                   ) -> tuple[dict[str, Any], dict[tuple[str, int], int], int]:
    import msgspec

    from crash_backends import CrashBackend

    backend = CrashBackend(target.kind, target.address, target.namespace)
    try:
        finals: dict[str, Any] = {}
        for n in range(sessions):
            cp = await backend.load(f"s{n:03d}")
            finals[f"s{n:03d}"] = None if cp is None else (
                cp.status, msgspec.json.encode(cp.messages).decode())
        ledger: dict[tuple[str, int], int] = {}
        reclaimed = 0
        for session, step, attempt in await backend.ledger():
            ledger[(session, step)] = ledger.get((session, step), 0) + 1
            reclaimed += attempt > 1
    finally:
        await backend.aclose()
    return finals, ledger, reclaimed


def _finish(proc: subprocess.Popen[str]) -> None:
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"child failed (exit {proc.returncode}): {err[-3000:]}")


class Faults:
    """The fault proxy in front of a server, and the server itself (for restarts)."""

    def __init__(self, backend: str, address: str, server: Any, *, restarts: int,
                 blackhole_share: float, kills: int) -> None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
        from tests.hosts.proxy import CuttingProxy

        port = (int(address.rsplit(":", 1)[1].split("/")[0]) if backend == "redis" else
                int(next(p.split("=")[1] for p in address.split() if p.startswith("port="))))
        self.proxy = CuttingProxy(port)
        self.address = (f"redis://127.0.0.1:{self.proxy.port}/0" if backend == "redis" else
                        " ".join([*(p for p in address.split() if not p.startswith("port=")),
                                  f"port={self.proxy.port}"]))
        self.markers = ((b"EVALSHA", b"HGET", b"HMGET") if backend == "redis" else
                        # the receipts' and checkpoints' prepared statements by name (their
                        # SQL text travels only once per connection), and the rest by verb
                        (b"bindloop_", b"UPDATE", b"INSERT INTO", b"SELECT", b"COMMIT"))
        self.server = server
        self.blackhole_share = blackhole_share
        # Restarts spread evenly over the kills (none without a server started here).
        self.restart_at = ([] if server is None else
                           [kills * (i + 1) // (restarts + 1) for i in range(restarts)])

    def arm(self, rng: random.Random) -> None:
        fault = "blackhole" if rng.random() < self.blackhole_share else "cut"
        self.proxy.cut_on(rng.choice(self.markers), rng.choice(("before", "after")),
                          fault=fault)  # type: ignore[arg-type]

    def maybe_restart(self, kills: int, report: Report) -> None:
        if self.restart_at and kills >= self.restart_at[0]:
            self.restart_at.pop(0)
            self.server.restart()
            report.server_restarts += 1

    def close(self, report: Report) -> None:
        report.cuts, report.blackholes = self.proxy.cuts - self.proxy.blackholes, \
            self.proxy.blackholes
        self.proxy.close()


def run_crash_test(*, kills: int, sessions: int, seed: int, workdir: Path,
                   max_restarts: int | None = None, backend: str = "sqlite", address: str = "",
                   processes: int = 1, server: Any = None, faults: bool = False,
                   restarts: int = 0, blackhole_share: float = 0.0,
                   pattern: str = "once") -> Report:
    """``processes`` children share the backend and all run every session (the revision fence
    and the receipts sort them out); the parent SIGKILLs one of them at seeded random moments
    and starts a replacement, until every session of the trial is finished. With ``faults``
    (Postgres, Redis) the children go through a fault proxy that the parent arms between kills
    (a ``blackhole_share`` of the faults silence the connection instead of cutting it), and
    ``server`` (when the harness started it) is restarted ``restarts`` times."""
    rng = random.Random(seed)
    report = Report()
    started = time.perf_counter()
    limit = max_restarts if max_restarts is not None else 20 * kills + 100
    base = Target(backend, address, f"crash{seed}_{os.getpid()}", pattern)
    fx = (Faults(backend, address, server, restarts=restarts, blackhole_share=blackhole_share,
                 kills=kills) if faults and backend in ("postgres", "redis") else None)
    try:
        _run_trials(report, rng, base, workdir, kills, sessions, processes, limit, fx)
    finally:
        if fx is not None:
            fx.close(report)
    report.seconds = time.perf_counter() - started
    return report


def _run_trials(report: Report, rng: random.Random, base: Target, workdir: Path, kills: int,
                sessions: int, processes: int, limit: int, fx: Faults | None) -> None:
    from harness.fixtures.scripted_server import ScriptedProviderServer

    backend = base.kind
    with ScriptedProviderServer() as server:
        server.set_responder("openai", responder())
        base_url = server.base_url("openai")
        # The uncrashed run: the reference transcripts, and how long a whole run takes.
        ref = base.for_run(workdir, "reference")
        _run_async(_prepare, ref)
        proc = _spawn(ref, base_url, sessions)
        _wait_ready(proc)
        t0 = time.perf_counter()
        _, err = proc.communicate(timeout=300)
        duration = time.perf_counter() - t0
        if proc.returncode != 0:
            raise RuntimeError(f"reference run failed: {err[-3000:]}")
        reference, _, _ = _run_async(_outcome, ref, sessions)
        report.notes.append(f"backend: {backend}, {processes} process(es) sharing it; "
                            f"uncrashed run: {duration:.2f} s after start-up")
        while report.kills < kills and report.restarts < limit:
            report.trials += 1
            target = base.for_run(workdir, f"trial{report.trials}")
            _run_async(_prepare, target)
            # The children reach the server through the proxy; the parent's checks do not.
            via = target if fx is None else Target(target.kind, fx.address, target.namespace)
            procs = [_spawn(via, base_url, sessions) for _ in range(processes)]
            report.restarts += processes
            for p in procs:
                _wait_ready(p)
            while True:
                for p in procs:
                    if p.poll() is not None:
                        _finish(p)
                alive = [p for p in procs if p.returncode is None]
                if not alive:
                    break
                if fx is not None:
                    fx.arm(rng)
                time.sleep(rng.uniform(0.0, duration))
                alive = [p for p in alive if p.poll() is None]
                if not alive or report.kills >= kills or report.restarts >= limit:
                    continue
                victim = rng.choice(alive)
                victim.send_signal(signal.SIGKILL)
                victim.wait()
                report.kills += 1
                if fx is not None:
                    fx.maybe_restart(report.kills, report)
                procs[procs.index(victim)] = replacement = _spawn(via, base_url, sessions)
                report.restarts += 1
                _wait_ready(replacement)
            finals, ledger, reclaimed = _run_async(_outcome, target, sessions)
            report.reclaimed += reclaimed
            report.sessions += sessions
            for ident, final in finals.items():
                if final is not None and final[0] == "finished":
                    report.sessions_finished += 1
                if final != reference[ident]:
                    report.mismatched_transcripts += 1
                for step in range(STEPS):
                    count = ledger.get((ident, step), 0)
                    report.duplicates += max(0, count - 1)
                    report.lost += count == 0


def _servers(backend: str, address: str) -> tuple[str, Any]:
    """The backend's address: the one given, or a server started here (stopped by the caller)."""
    if backend == "sqlite" or address:
        return address, None
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from harness.fixtures.store_servers import PostgresServer, RedisServer

    server: Any = PostgresServer() if backend == "postgres" else RedisServer()
    server.start()
    return (server.dsn if backend == "postgres" else server.url), server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", nargs="?", default="parent", choices=("parent", "child"))
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--backend", default="sqlite",
                        choices=("sqlite", "postgres", "redis", "temporal"))
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--restarts", type=int, default=3,
                        help="server restarts over the run (Postgres, Redis started here; the "
                             "Temporal dev server)")
    parser.add_argument("--blackholes", type=float, default=0.1,
                        help="the share of connection faults that blackhole instead of cut")
    parser.add_argument("--no-faults", action="store_true",
                        help="no fault proxy and no restarts (Postgres, Redis)")
    parser.add_argument("--target", default="", help="a Postgres DSN / Redis URL to use instead "
                                                     "of starting a server (parent); the store "
                                                     "address (child)")
    parser.add_argument("--namespace", default="")
    parser.add_argument("--base-url")
    parser.add_argument("--pattern", default="once", choices=("once", "claim"),
                        help="how charge records its effect: complete_once (the default), or "
                             "a claim then complete_with")
    args = parser.parse_args()
    if args.mode == "child":
        import anyio
        anyio.run(run_child, args.backend, args.target, args.namespace, args.base_url,
                  args.sessions, args.pattern)
        return
    if args.backend == "temporal":
        import anyio

        from crash_temporal import run_temporal_crash_test

        report = Report()
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="bindloop-crash-") as tmp:
            anyio.run(lambda: run_temporal_crash_test(
                kills=args.kills, sessions=args.sessions, seed=args.seed, workdir=Path(tmp),
                processes=args.processes, report=report, restarts=args.restarts,
                blackhole_share=args.blackholes))
        report.seconds = time.perf_counter() - t0
        _print_and_exit(report, args.kills)
    address, server = _servers(args.backend, args.target)
    try:
        with tempfile.TemporaryDirectory(prefix="bindloop-crash-") as tmp:
            report = run_crash_test(kills=args.kills, sessions=args.sessions, seed=args.seed,
                                    workdir=Path(tmp), backend=args.backend, address=address,
                                    processes=args.processes, server=server,
                                    faults=not args.no_faults, restarts=args.restarts,
                                    blackhole_share=args.blackholes, pattern=args.pattern)
            report.notes.append(f"effect pattern: {args.pattern}")
    finally:
        if server is not None:
            server.close()
    _print_and_exit(report, args.kills)


def _print_and_exit(report: Report, kills: int) -> None:
    for line in report.notes + report.lines():
        print(line)
    ok = (report.kills >= kills and report.sessions_finished == report.sessions
          and report.duplicates == 0 and report.lost == 0 and report.mismatched_transcripts == 0)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
