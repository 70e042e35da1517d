"""The ASGI chat host (``bindloop.hosts.asgi.ChatApp``) as a web host: how much it holds, how fast
it answers, and whether it keeps answering under abuse. Prints figures; not a test.

    python bench/web_host.py [--chats 4000] [--ceiling-mib 512] [--seconds 10] [--flood 3000]
                             [--slow 1000] [--big 300] [--only capacity,rps,abuse]
                             [--server auto|h11|httptools]

The host runs in a child process under uvicorn on 127.0.0.1 (one worker; with ``httptools`` and
``uvloop`` where installed, else h11 and asyncio -- ``--server`` picks, the first line says), serving
``agent_runner`` over the demo's scripted model (``examples.demos.ui_demo.DemoModel``, paced per
event) with an ``authorize`` hook: a bearer token is the caller's identity, any other caller is
``anon:<address>`` -- the anonymous clients of the abuse run all come from 127.0.0.1, so they
share one identity and its bounds.

1. **capacity**: chats held at once, the app's bounds on runs and logs lifted. Clients open ``POST /api/chat`` streams (raw sockets, one
   connection each, read up to the first frame and then held) for a model that answers slowly
   (5 s per event, so every chat is mid-answer all along); the host's RSS (``/proc``) is read at
   steps. Figures: RSS per held chat (the slope) and the chats the process holds under
   ``--ceiling-mib`` (measured up to ``--chats``, extrapolated beyond on that slope).
2. **rps**: requests per second on each protocol -- a tool round then the answer, no pacing, 8
   clients each sending requests one after another over keep-alive for ``--seconds``; median
   latency and the host's CPU per request. Twice: the defaults (``plain``: logs in memory), and
   ``durable`` -- run logs, tool receipts and pending approvals in one SQLite file (what
   continues a run whose process died: docs/serve.md). ``--rps-modes`` adds ``sqlite`` (run logs
   only), ``postgres`` and ``redis`` (``durable`` on a Postgres or Redis server: the one
   ``BINDLOOP_TEST_POSTGRES_DSN`` / ``BINDLOOP_TEST_REDIS_URL`` names, else one started here from
   the Debian binaries as the tests do -- Postgres with ``fsync=off``, Redis with
   ``appendfsync everysec``); on a Postgres server started here, the statements it ran per
   request too (``pg_stat_statements``).
3. **abuse**: a legitimate client (its own token, its own process) sends the same chat one
   request after another -- before, during and after a time when, at once: ``--flood``
   anonymous POSTs sent and disconnected at once (100 in flight), ``--slow`` connections that
   send a body's first bytes and stall, and ``--big`` AG-UI requests carrying a ~1 MiB
   ``state`` (20 in flight) -- the slow and big ones each with a token of its own (strangers
   with accounts: no per-identity bound stops them, the app-wide ones do). Figures: the
   legitimate client's latency (median and p99) before, during and after the abuse, every
   status the attackers got, the host's peak RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec

ROOT = Path(__file__).resolve().parents[1]


# -- the host (child process) -----------------------------------------------------------------

def server_setup(choice: str) -> tuple[str, str]:
    """uvicorn's HTTP parser and event loop for ``--server``: ``auto`` takes ``httptools`` and
    ``uvloop`` where installed (``pip install 'uvicorn[standard]'``, the documented deployment)
    and uvicorn's pure-Python ``h11`` and asyncio otherwise; ``h11`` and ``httptools`` name
    the parser (with the loop that goes with it: asyncio, uvloop where installed)."""
    import importlib.util

    def have(module: str) -> bool:
        return importlib.util.find_spec(module) is not None

    if choice == "h11":
        return "h11", "asyncio"
    if choice == "httptools" and not have("httptools"):
        raise SystemExit("--server httptools: httptools is not installed "
                         "(pip install 'uvicorn[standard]')")
    if choice not in ("auto", "httptools"):
        raise SystemExit(f"--server: auto, h11 or httptools, not {choice!r}")
    http = "httptools" if have("httptools") else "h11"
    return http, ("uvloop" if http == "httptools" and have("uvloop") else "asyncio")


def serve(port: int, delay_s: float, mode: str, http: str = "h11", loop: str = "asyncio") -> None:
    import tempfile

    import uvicorn

    from bindloop.hosts.chat.agent import PacedModel, agent_runner
    from bindloop.hosts.asgi.chat import ChatApp
    from bindloop.hosts.chat.access import ChatRequest
    from bindloop.stores import MemoryRunLogs
    from examples.demos.ui_demo import DemoModel, demo_tools

    async def authorize(request: ChatRequest) -> str:
        token = request.header("authorization") or ""
        if token.startswith("Bearer ") and len(token) > 7:
            return token[7:]
        return f"anon:{request.client[0] if request.client else '?'}"

    durable: dict[str, Any] = {}
    bounds: dict[str, Any] = {}
    if mode == "durable":  # runs that outlive the process: docs/serve.md's setup
        from bindloop.hosts.asgi.approvals import SqlitePendingApprovals
        from bindloop.hosts.asgi.run_logs import SqliteRunLogs
        from bindloop.hosts.stores.sqlite import SqliteStore

        db = Path(tempfile.mkdtemp()) / "chats.db"
        durable = {"receipts": SqliteStore(db), "approvals": SqlitePendingApprovals(db)}
        bounds = {"logs": SqliteRunLogs(db)}
    if mode == "postgres":  # durable, on a Postgres server
        from bindloop.hosts.stores.postgres import PostgresStore
        from bindloop.hosts.stores.postgres_chat import PostgresPendingApprovals, PostgresRunLogs

        dsn = os.environ["BENCH_STORE_URL"]
        durable = {"receipts": PostgresStore(dsn), "approvals": PostgresPendingApprovals(dsn)}
        bounds = {"logs": PostgresRunLogs(dsn)}
    if mode == "redis":  # durable, on a Redis server
        from bindloop.hosts.stores.redis import RedisStore
        from bindloop.hosts.stores.redis_chat import RedisPendingApprovals, RedisRunLogs

        url = os.environ["BENCH_STORE_URL"]
        durable = {"receipts": RedisStore(url), "approvals": RedisPendingApprovals(url)}
        bounds = {"logs": RedisRunLogs(url)}
    if mode == "sqlite":  # run logs in SQLite only
        from bindloop.hosts.asgi.run_logs import SqliteRunLogs

        bounds = {"logs": SqliteRunLogs(Path(tempfile.mkdtemp()) / "runs.db")}
    if mode == "capacity":  # the bounds lifted (by default 256 runs at once, 8 per identity,
        # 1,000 logs)
        bounds = {"max_runs": 1_000_000, "max_runs_per_identity": 1_000_000,
                  "logs": MemoryRunLogs(keep=1_000_000)}
    runner = agent_runner(PacedModel(DemoModel(), delay_s), tools=demo_tools(),
                          needs_approval=["delete_note"], **durable)
    app = ChatApp(runner, authorize=authorize, **bounds)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="critical", backlog=4096,
                timeout_keep_alive=30, http=http, loop=loop)


SERVER = ("h11", "asyncio")  # set by main() from --server


class Host:
    def __init__(self, *, delay_s: float = 0.0, mode: str = "plain", store_url: str = "") -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.base = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}", "BENCH_STORE_URL": store_url}
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(self.port), str(delay_s),
             mode, *SERVER], env=env)
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{self.base}/", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("the host did not start") from None
                time.sleep(0.05)

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    def hwm_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmHWM")

    def cpu_s(self) -> float:
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# -- requests ---------------------------------------------------------------------------------

def ui_body(chat_id: str, text: str) -> bytes:
    return msgspec.json.encode({"id": chat_id, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]})


def ag_ui_body(thread: str, run: str, text: str, state: Any = None) -> bytes:
    return msgspec.json.encode({"threadId": thread, "runId": run, "messages": [
        {"id": "u1", "role": "user", "content": text}], "tools": [], "context": [],
        "state": {} if state is None else state, "forwardedProps": {}})


def raw_post(path: str, body: bytes, token: str | None = None) -> bytes:
    auth = f"authorization: Bearer {token}\r\n" if token else ""
    return (f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"{auth}content-length: {len(body)}\r\n\r\n").encode() + body


# -- 1. capacity ------------------------------------------------------------------------------

async def capacity(chats: int, ceiling_mib: float) -> None:
    host = Host(delay_s=5.0, mode="capacity")
    held: list[asyncio.StreamWriter] = []
    points: list[tuple[int, float]] = []
    try:
        await asyncio.sleep(1)
        points.append((0, host.rss_mib()))
        steps = sorted({s for s in (chats // 8, chats // 4, chats // 2, chats) if s > 0})
        sem = asyncio.Semaphore(200)

        async def one(n: int) -> None:
            async with sem:
                reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
                writer.write(raw_post("/api/chat", ui_body(f"chat-{n}", "hello there"),
                                      token=f"user-{n}"))
                await writer.drain()
                got = b""
                while b"data: " not in got:
                    chunk = await reader.read(4096)
                    if not chunk:
                        raise RuntimeError(f"chat {n}: the host closed the stream: {got[:200]!r}")
                    got += chunk
                held.append(writer)

        done = 0
        for step in steps:
            await asyncio.gather(*(one(n) for n in range(done, step)))
            done = step
            await asyncio.sleep(2)  # every chat streams on (one event per 5 s)
            points.append((done, host.rss_mib()))
            print(f"  {done:>6} chats held: host RSS {points[-1][1]:.1f} MiB", flush=True)
        (n0, r0), (n1, r1) = points[0], points[-1]
        per_chat_kib = (r1 - r0) * 1024 / max(1, n1 - n0)
        at_ceiling = int((ceiling_mib - r0) * 1024 / per_chat_kib) if per_chat_kib > 0 else 0
        print(f"capacity: {n1} chats mid-answer held by one process at {r1:.1f} MiB RSS "
              f"({r0:.1f} MiB idle): {per_chat_kib:.1f} KiB per chat -> about {at_ceiling:,} "
              f"chats under {ceiling_mib:.0f} MiB"
              + (" (measured up to the ceiling)" if r1 >= ceiling_mib else
                 f" (extrapolated past {n1:,})"), flush=True)
    finally:
        for writer in held:
            writer.close()
        host.stop()


# -- 2. requests per second -------------------------------------------------------------------

def _store_server(mode: str) -> tuple[str, Any]:
    """The server a ``postgres`` or ``redis`` host uses (its URL, and the server started here to
    close afterwards, or ``None``)."""
    given = os.environ.get({"postgres": "BINDLOOP_TEST_POSTGRES_DSN",
                            "redis": "BINDLOOP_TEST_REDIS_URL"}.get(mode, ""), "")
    if mode not in ("postgres", "redis") or given:
        return given, None
    if str(ROOT) not in sys.path:  # harness/ is beside bench/, not a package of src/
        sys.path.insert(0, str(ROOT))
    from harness.fixtures.store_servers import PostgresServer, RedisServer

    class EverySecond(RedisServer):
        """Its append-only file synced once a second (Redis's recommended setting), not at
        every write as the tests' server does."""

        def _spawn(self, *extra: str) -> None:
            super()._spawn("--appendfsync", "everysec", *extra)

    # Postgres counts the statements it runs (pg_stat_statements): the rps run prints them.
    server: Any = (PostgresServer({"shared_preload_libraries": "pg_stat_statements"})
                   if mode == "postgres" else EverySecond())
    server.start()
    return (server.dsn if mode == "postgres" else server.url), server


def _statements(dsn: str) -> int | None:
    """The statements the Postgres server at ``dsn`` has run (pg_stat_statements), or ``None``
    when it does not count them (a server given by ``BINDLOOP_TEST_POSTGRES_DSN`` without the
    library preloaded)."""
    import psycopg

    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            row = conn.execute("SELECT COALESCE(SUM(calls), 0) FROM pg_stat_statements").fetchone()
    except psycopg.Error:
        return None
    return None if row is None else int(row[0])


async def rps(seconds: float, mode: str, clients: int = 8) -> None:
    store_url, server = _store_server(mode)
    host = Host(delay_s=0.0, mode=mode, store_url=store_url)
    try:
        for protocol in ("ui", "ag-ui"):
            latencies: list[float] = []
            stop_at = time.monotonic() + seconds
            statements0 = _statements(store_url) if mode == "postgres" else None
            cpu0, wall0 = host.cpu_s(), time.monotonic()

            async def client(c: int, protocol: str = protocol,
                             latencies: list[float] = latencies, stop_at: float = stop_at) -> None:
                async with httpx.AsyncClient(base_url=host.base, timeout=30,
                                             headers={"authorization": f"Bearer c{c}"}) as http:
                    n = 0
                    while time.monotonic() < stop_at:
                        n += 1
                        start = time.monotonic()
                        if protocol == "ui":
                            r = await http.post("/api/chat", content=ui_body(
                                f"rps-{c}-{n}", "count one two three"))
                        else:
                            r = await http.post("/ag-ui", content=ag_ui_body(
                                f"rps-{c}-{n}", f"run-{c}-{n}", "count one two three"))
                        if r.status_code != 200 or b"tool" not in r.content:
                            raise RuntimeError(f"{protocol}: {r.status_code} {r.text[:200]}")
                        latencies.append(time.monotonic() - start)

            await asyncio.gather(*(client(c) for c in range(clients)))
            wall, cpu = time.monotonic() - wall0, host.cpu_s() - cpu0
            count = len(latencies)
            path = "POST /api/chat" if protocol == "ui" else "POST /ag-ui"
            statements1 = _statements(store_url) if statements0 is not None else None
            # Less the two statements each reading takes (the count and the extension's check).
            per = ("" if statements0 is None or statements1 is None else
                   f", {(statements1 - statements0 - 2) / count:.1f} Postgres statements per "
                   "request")
            print(f"rps ({mode}): {path}: {count / wall:.0f} requests/s ({count} in {wall:.1f} s, "
                  f"{clients} clients; a tool round, then the answer), median "
                  f"{statistics.median(latencies) * 1000:.1f} ms, host CPU "
                  f"{cpu / count * 1000:.2f} ms per request{per}", flush=True)
    finally:
        host.stop()
        if server is not None:
            server.close()


# -- 3. abuse ---------------------------------------------------------------------------------

def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def abuse(flood: int, slow: int, big: int) -> None:
    host = Host(delay_s=0.0)
    statuses: dict[str, dict[str, int]] = {"flood": {}, "slow": {}, "big": {}}
    slow_writers: list[asyncio.StreamWriter] = []

    def count(kind: str, head: bytes) -> None:
        status = head.split(b" ", 2)[1].decode() if head.startswith(b"HTTP/") else "closed"
        statuses[kind][status] = statuses[kind].get(status, 0) + 1

    async def flood_one(n: int, sem: asyncio.Semaphore) -> None:
        async with sem:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
                writer.write(raw_post("/api/chat", ui_body(f"flood-{n}", "hello there")))
                await writer.drain()
                head = await asyncio.wait_for(reader.read(64), 30)
                count("flood", head)
                writer.close()  # and gone: the run (if any) goes on without a reader
            except (OSError, asyncio.TimeoutError):
                count("flood", b"")

    async def slow_one(n: int) -> None:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
            body = ui_body(f"slow-{n}", "x" * 2000)
            request = raw_post("/api/chat", body, token=f"slow-{n}")
            writer.write(request[:-len(body) + 10])  # ten bytes, then nothing
            await writer.drain()
            slow_writers.append(writer)
            head = await asyncio.wait_for(reader.read(64), 60)
            count("slow", head)
        except (OSError, asyncio.TimeoutError):
            count("slow", b"")

    async def big_one(n: int, sem: asyncio.Semaphore) -> None:
        async with sem:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", host.port)
                state = {"blob": "x" * (1024 * 1024 - 400)}
                writer.write(raw_post("/ag-ui", ag_ui_body(f"big-{n}", f"big-{n}", "hi", state),
                                      token=f"big-{n}"))
                await writer.drain()
                head = await asyncio.wait_for(reader.read(64), 60)
                count("big", head)
                writer.close()
            except (OSError, asyncio.TimeoutError):
                count("big", b"")

    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    client = subprocess.Popen([sys.executable, __file__, "--legit", str(host.port)], env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        await asyncio.sleep(5)  # the client's requests before the abuse
        attack_started = time.time()
        sem_flood, sem_big = asyncio.Semaphore(100), asyncio.Semaphore(20)
        await asyncio.gather(*(flood_one(n, sem_flood) for n in range(flood)),
                             *(slow_one(n) for n in range(slow)),
                             *(big_one(n, sem_big) for n in range(big)))
        attack_ended = time.time()
        attack_s = attack_ended - attack_started
        await asyncio.sleep(3)  # and after
        out, _ = client.communicate("", timeout=60)
        timed: list[list[float]] = msgspec.json.decode(out)
        before = [lat for t, lat in timed if t + lat < attack_started]
        during = [lat for t, lat in timed if t < attack_ended and t + lat > attack_started]
        after = [lat for t, lat in timed if t > attack_ended]
        # the stalled bodies time out from 11.25 s on (body_timeout_s 15 s, staggered)
        at_timeouts = [lat for t, lat in timed if attack_started + 11 < t < attack_ended]
        worst_at = max((lat, t) for t, lat in timed if t < attack_ended and t + lat > attack_started)[1]
        print(f"abuse: {flood} anonymous POST-and-disconnect, {slow} stalled bodies and {big} "
              f"~1 MiB AG-UI states (one token each), over {attack_s:.1f} s", flush=True)
        for kind, got in statuses.items():
            print(f"  {kind}: " + ", ".join(f"{k} x{v}" for k, v in sorted(got.items())),
                  flush=True)
        print(f"  legitimate client: {len(before)} requests before, median "
              f"{_pct(before, 0.5):.1f} ms, p90 {_pct(before, 0.9):.1f} ms, p99 "
              f"{_pct(before, 0.99):.1f} ms; {len(during)} during, median "
              f"{_pct(during, 0.5):.1f} ms, p90 {_pct(during, 0.9):.1f} ms, p99 "
              f"{_pct(during, 0.99):.1f} ms, max {max(during) * 1000:.1f} ms (sent at +{worst_at - attack_started:.1f} s), "
              f"max from +11 s (the stalled bodies' timeouts) "
              f"{max(at_timeouts, default=0) * 1000:.1f} ms; {len(after)} after, median "
              f"{_pct(after, 0.5):.1f} ms; every one answered whole", flush=True)
        print(f"  host peak RSS {host.hwm_mib():.1f} MiB", flush=True)
    finally:
        if client.poll() is None:
            client.kill()
        for writer in slow_writers:
            writer.close()
        host.stop()


def legit_client(port: int) -> None:
    """The legitimate client (a process of its own): one chat request after another until its
    stdin closes; prints ``[[start, latency], ...]`` (wall-clock seconds)."""
    import threading

    done = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    timed: list[tuple[float, float]] = []
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60,
                      headers={"authorization": "Bearer alice"}) as http:
        n = 0
        while not done.is_set():
            n += 1
            start, t0 = time.time(), time.monotonic()
            r = http.post("/api/chat", content=ui_body(f"legit-{n}", "count one two three"))
            if r.status_code != 200 or b'"finish"' not in r.content:
                raise RuntimeError(f"the legitimate client got {r.status_code}: {r.text[:200]}")
            timed.append((start, time.monotonic() - t0))
    print(msgspec.json.encode(timed).decode())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", nargs=5, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--legit", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--chats", type=int, default=4000)
    parser.add_argument("--ceiling-mib", type=float, default=512)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--flood", type=int, default=3000)
    parser.add_argument("--slow", type=int, default=1000)
    parser.add_argument("--big", type=int, default=300)
    parser.add_argument("--only", default="capacity,rps,abuse")
    parser.add_argument("--server", default="auto",
                        help="uvicorn's HTTP parser: auto (httptools and uvloop where installed, "
                        "else h11), h11 or httptools")
    parser.add_argument("--rps-modes", default="plain,durable",
                        help="rps hosts: plain, sqlite (run logs in SQLite), durable, postgres, "
                        "redis")
    args = parser.parse_args()
    if args.serve is not None:
        serve(int(args.serve[0]), float(args.serve[1]), args.serve[2], args.serve[3],
              args.serve[4])
        return
    if args.legit is not None:
        legit_client(args.legit)
        return
    global SERVER
    SERVER = server_setup(args.server)
    load = os.getloadavg()[0]
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs, "
          f"load average {load:.2f} at start; uvicorn with http={SERVER[0]}, "
          f"loop={SERVER[1]}", flush=True)
    parts = set(args.only.split(","))
    if "capacity" in parts:
        asyncio.run(capacity(args.chats, args.ceiling_mib))
    if "rps" in parts:
        for mode in args.rps_modes.split(","):
            asyncio.run(rps(args.seconds, mode))
    if "abuse" in parts:
        asyncio.run(abuse(args.flood, args.slow, args.big))


if __name__ == "__main__":
    main()
