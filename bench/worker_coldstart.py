"""Cold start of the Worker template in real workerd, with and without a memory snapshot, and the
CPU of a warm request -- the figures docs/workers.md quotes.

A snapshot is written once (``--python-save-snapshot``: Python booted, the Worker's top-level
imports done); then fresh workerd processes start alternately without it (Python boots and imports
``entry.py``, bindloop and msgspec) and from it (``--python-load-snapshot``), the order flipped
every round. For each: process start -> socket listening, -> the first chat's stream done; then
warm chats; workerd's CPU for the first chat (what a cold start's first request costs beyond
the start) and per warm request (its threads' CPU from /proc, in nanoseconds,
``coldstart.cpu_s``: the Python turn, the outbound fetch, the SSE stream and the Session object's
calls).
Also prints the bundle: the vendored ``python_modules`` as files, and compressed (deflate, what an
upload compresses it to).

Needs ``make worker-node wasm-wheels-pyc`` (and pycapnp, see worker/worker.mk).

    python bench/worker_coldstart.py [--colds 4] [--turns 10]
"""

from __future__ import annotations

import argparse
import http.client
import io
import json
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import msgspec

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "worker" / "tools"))
sys.path.insert(0, str(REPO))  # harness.fixtures
from coldstart import cpu_s  # noqa: E402
from workerd_harness import WHEELS_DIR, Workerd, stage, tree_bytes  # noqa: E402

from harness.fixtures.scripted_server import (  # noqa: E402
    RecordedRequest,
    ScriptedProviderServer,
    ScriptedReply,
    turn_reply,
)
from bindloop.testing import final_answer  # noqa: E402


def respond(request: RecordedRequest) -> ScriptedReply:
    body = msgspec.json.decode(request.body)
    return turn_reply("openai_chat", final_answer("A short answer."), stream=True, model=body["model"])


def chat(port: int) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.request("POST", "/v1/chat", body=json.dumps({"message": "hi"}),
                 headers={"content-type": "application/json"})
    raw = conn.getresponse().read()
    conn.close()
    if b"event: done" not in raw:
        raise RuntimeError(raw.decode(errors="replace")[-2000:])


def one_start(config: Path, snapshot: tuple[str, Path] | None, turns: int,
              out: dict[str, list[float]]) -> None:
    t0 = time.perf_counter()
    with Workerd(config, snapshot=snapshot) as wd:
        assert wd.proc is not None
        c0 = cpu_s(wd.proc.pid)
        chat(wd.port)
        out["listen"].append(wd.listen_s)
        out["first_done"].append(time.perf_counter() - t0)
        out["first_cpu"].append(cpu_s(wd.proc.pid) - c0)
        for _ in range(turns):
            c0 = cpu_s(wd.proc.pid)
            chat(wd.port)
            out["cpu"].append(cpu_s(wd.proc.pid) - c0)


def compressed(root: Path) -> int:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zf:
        for path in sorted(p for p in root.rglob("*") if p.is_file()):
            zf.write(path, path.relative_to(root).as_posix())
    return len(buf.getvalue())


def vs_hello(rounds: int) -> int:
    """The issue-31 figure: worker/tools/coldstart.py's measurement, printed."""
    from coldstart import PYWRANGLER_WHEELS, measure

    for wheels in (PYWRANGLER_WHEELS, WHEELS_DIR):
        floor = wheels == PYWRANGLER_WHEELS
        result = measure(rounds, wheels_dir=wheels, floor=floor, say=print)
        kinds, sizes = result["kinds"], result["snapshot_mib"]
        assert isinstance(kinds, dict) and isinstance(sizes, dict)
        print(f"cold start from the dedicated snapshot, the template vendoring {wheels.name} "
              f"({result['vendored_files']} files), {rounds} fresh workerd per Worker "
              "(median CPU of its threads to the first response)")
        print(f"  template (GET /.well-known/agent-card.json)  "
              f"{result['template_s'] * 1000:6.0f} ms  snapshot {sizes['template']:.1f} MiB "
              f"({kinds['template']})")
        print(f"  hello world (GET /)                          {result['hello_s'] * 1000:6.0f} ms"
              f"  snapshot {sizes['hello']:.1f} MiB ({kinds['hello']})")
        quartiles = result["ratio_quartiles"]
        assert isinstance(quartiles, tuple)
        q1, q3 = quartiles
        print(f"  template / hello world                       {result['ratio']:6.2f}x"
              f"  (round by round: quartiles {q1:.2f}-{q3:.2f}x)")
        if floor:
            print(f"  dependency floor (GET /)                     {result['floor_s'] * 1000:6.0f} ms"
                  f"  snapshot {sizes['floor']:.1f} MiB: hello world vendoring the same wheels, "
                  "importing msgspec")
            print(f"  floor / hello world                          {result['floor_ratio']:6.2f}x")
            over = result["over_floor_quartiles"]
            assert isinstance(over, tuple)
            f1, f3 = over
            print(f"  template / floor                             {result['over_floor']:6.2f}x"
                  f"  (round by round: quartiles {f1:.2f}-{f3:.2f}x)")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--colds", type=int, default=4, help="fresh processes per mode")
    ap.add_argument("--turns", type=int, default=10, help="warm chats per process")
    ap.add_argument("--vs-hello", type=int, metavar="ROUNDS", default=0,
                    help="instead: CPU to the first response from the dedicated snapshot, the "
                    "template (vendoring the plain wheels as pywrangler does, then the .pyc set) "
                    "beside a hello-world Worker (and, with the plain wheels, the dependency "
                    "floor: hello world vendoring them and importing msgspec), ROUNDS cold "
                    "starts each")
    args = ap.parse_args()
    if args.vs_hello:
        return vs_hello(args.vs_hello)
    results: dict[str, dict[str, list[float]]] = {
        m: {"listen": [], "first_done": [], "first_cpu": [], "cpu": []}
        for m in ("plain", "snapshot")}
    with ScriptedProviderServer() as server, tempfile.TemporaryDirectory() as tmp:
        server.set_responder("p", respond)
        root = Path(tmp)
        config = stage(root / "stage", storage_dir=root / "do", with_conformance=False,
                       bindings={"OPENAI_BASE_URL": server.base_url("p"), "OPENAI_API_KEY": "k"})
        snapshots = root / "snapshots"
        t0 = time.perf_counter()
        with Workerd(config, snapshot=("save", snapshots)) as wd:
            chat(wd.port)
        save_s = time.perf_counter() - t0
        snap_bytes = (snapshots / "snapshot.bin").stat().st_size
        for i in range(args.colds):
            order = [("plain", None), ("snapshot", ("load", snapshots))]
            for mode, snap in (order if i % 2 == 0 else order[::-1]):
                one_start(config, snap, args.turns, results[mode])
        bundles = {}
        for wheels in (REPO / "harness" / "wasm" / "wheels", WHEELS_DIR):  # what pywrangler vendors; the tests'
            stage(root / wheels.name, storage_dir=root / "unused", with_conformance=False,
                  wheels_dir=wheels, bindings={})
            modules = root / wheels.name / "python_modules"
            bundles[wheels] = (*tree_bytes(modules), compressed(modules))

    def med(xs: list[float]) -> float:
        return statistics.median(xs) * 1000

    plain, snap = results["plain"], results["snapshot"]
    print(f"workerd, {args.colds} fresh processes per mode, {args.turns} warm chats each "
          f"(median ms){'plain':>12} {'snapshot':>9} {'snap/plain':>11}")
    for label, key in (("process start -> listening", "listen"),
                       ("process start -> first chat done", "first_done"),
                       ("first chat: workerd CPU", "first_cpu"),
                       ("warm chat: workerd CPU", "cpu")):
        a, b = med(plain[key]), med(snap[key])
        print(f"  {label:<44} {a:9.0f} {b:9.0f} {b / a if a else float('nan'):11.2f}")
    for mode in ("plain", "snapshot"):
        print(f"  {mode}: listening after", [round(x * 1000) for x in results[mode]["listen"]], "ms")
    print(f"snapshot: {snap_bytes / 2**20:.1f} MiB, written by a start that took {save_s * 1000:.0f} ms "
          f"to its first chat")
    for directory, (files, size, packed) in bundles.items():
        wheels = sorted(directory.glob("*.whl"))
        print(f"bundle ({directory.name}): {len(wheels)} wheels, "
              f"{sum(w.stat().st_size for w in wheels) / 1024:.0f} KiB; python_modules {files} files, "
              f"{size / 1024:.0f} KiB unpacked, {packed / 1024:.0f} KiB deflated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
