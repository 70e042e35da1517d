"""Serve the Worker template in the pinned npm workerd, offline, for tests and ``make
conformance-workerd``.

    python worker/tools/workerd_harness.py conformance OUT_REPORT

What a run does:

1. builds the "dev" Pyodide bundle once into ``worker/.cache/pyodide-bundle`` (build_dev_bundle.py);
2. stages a directory: ``worker/src/*.py`` as the Worker's modules, every wheel in ``wasm/wheels-pyc/``
   unpacked under ``python_modules/`` and, optionally, ``conformance/`` beside them -- ``.py`` files
   as ``pythonModule``, everything else (msgspec's ``.so``, scenario JSON) as ``data``;
3. writes a workerd config: the Worker with its compatibility flags, text bindings for its vars and
   secrets, the ``Session`` and ``RateLimiter`` Durable Objects on local-disk storage, and a ``globalOutbound`` network
   service that allows 127.0.0.1 (where the scripted provider server listens);
4. starts ``workerd serve`` on 127.0.0.1 port 0 and learns the port from ``--control-fd``;
5. stops it by PID (SIGTERM, then SIGKILL: workerd does not always exit on SIGTERM).
"""

from __future__ import annotations

import json
import os
import platform
import select
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import zipfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

TOOLS_DIR = Path(__file__).resolve().parent
WORKER_DIR = TOOLS_DIR.parent
REPO_ROOT = WORKER_DIR.parent
NODE_MODULES = WORKER_DIR / "node_modules"
# The platform package's binary itself, not npm's `bin/workerd` shim: the PID we stop must be
# workerd's own.
_PLATFORM = {("linux", "x86_64"): "linux-64", ("linux", "aarch64"): "linux-arm64",
             ("darwin", "x86_64"): "darwin-64", ("darwin", "arm64"): "darwin-arm64"}
WORKERD_BIN = (NODE_MODULES / "@cloudflare"
               / f"workerd-{_PLATFORM.get((sys.platform, platform.machine()), 'linux-64')}"
               / "bin" / "workerd")
PYODIDE_DIR = NODE_MODULES / "pyodide"
BUNDLE_DIR = WORKER_DIR / ".cache" / "pyodide-bundle"
# The .pyc wheel set (make wasm-wheels-pyc: compiled inside Pyodide 3.14) is the default: it
# started workerd to the first streamed token 2-12 % sooner than the plain set in three of four
# runs of bench/worker_turn.py (docs/workers.md). The plain set is wasm/wheels.
WHEELS_DIR = REPO_ROOT / "wasm" / "wheels-pyc"

SNAPSHOT_NAME = "snapshot.bin"  # what --python-save-snapshot writes into --python-snapshot-dir

COMPATIBILITY_DATE = "2026-11-01"
# The dev Pyodide release (314.0.6 built locally) instead of a downloaded one, and the `workers` SDK
# from the runtime rather than a vendored workers-runtime-sdk.
COMPATIBILITY_FLAGS = (
    "python_workers",
    "python_workers_development",
    "no_python_workers_20250116",
    "no_python_workers_20260610",
    "no_python_workers_314",
    "disable_python_external_sdk",
)

sys.path.insert(0, str(TOOLS_DIR))
from build_dev_bundle import build as build_bundle  # noqa: E402


class HarnessError(Exception):
    pass


def _capnp_str(value: str) -> str:
    return json.dumps(value)  # a JSON string literal is a valid Cap'n Proto text literal


def _unpack_wheels(wheels_dir: Path, dest: Path) -> list[str]:
    wheels = sorted(wheels_dir.glob("*.whl"))
    if not wheels:
        raise HarnessError(f"no wheels in {wheels_dir}: run `make wasm-wheels wasm-wheels-pyc`")
    for whl in wheels:
        with zipfile.ZipFile(whl) as zf:
            for name in zf.namelist():
                # Metadata is not imported; leaving it out keeps the module list short.
                if ".dist-info/" in name or name.endswith("/"):
                    continue
                target = dest / name
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(zf.read(name))
    return [w.name for w in wheels]


def _copy_tree(src: Path, dest: Path) -> None:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def stage(stage_dir: Path, *, bindings: Mapping[str, str], storage_dir: Path,
          with_conformance: bool = True, wheels_dir: Path = WHEELS_DIR,
          src_dir: Path = WORKER_DIR / "src", durable_objects: bool = True,
          extra_objects: Mapping[str, str] | None = None, racers: int = 0) -> Path:
    """Write the Worker (the ``*.py`` of ``src_dir``, ``entry.py`` first), its vendored modules and
    ``config.capnp`` into ``stage_dir``. ``durable_objects`` declares the template's ``Session``
    and ``RateLimiter`` classes (bound as ``SESSION`` and ``LIMITS``) on local-disk storage, and
    ``extra_objects`` more (binding name -> class name, e.g. ``{"MCP_TOKENS": "McpTokens"}``).
    ``racers`` adds that many more Workers of the same modules and bindings (each its own
    isolate and Python), whose Durable Object bindings reach the main Worker's objects, bound
    in the main Worker as services ``KIT_RACER_0``... and each told its name in ``KIT_ISOLATE``
    (the store kit's several-isolate races)."""
    if stage_dir.exists():
        shutil.rmtree(stage_dir)
    vendor = stage_dir / "python_modules"
    vendor.mkdir(parents=True)
    _unpack_wheels(wheels_dir, vendor)
    if with_conformance:
        _copy_tree(REPO_ROOT / "conformance", vendor / "conformance")
    entry_modules = []
    for src in sorted(src_dir.glob("*.py")):
        shutil.copy2(src, stage_dir / src.name)
        entry_modules.append(src.name)
    entry_modules.sort(key=lambda n: n != "entry.py")  # the first module is the entry point
    lines = [f'    (name = {_capnp_str(n)}, pythonModule = embed {_capnp_str(n)}),' for n in entry_modules]
    for path in sorted(p for p in vendor.rglob("*") if p.is_file()):
        rel = path.relative_to(stage_dir).as_posix()
        kind = "pythonModule" if path.suffix == ".py" else "data"
        lines.append(f"    (name = {_capnp_str(rel)}, {kind} = embed {_capnp_str(rel)}),")
    binding_lines = [f"    (name = {_capnp_str(k)}, text = {_capnp_str(v)})," for k, v in bindings.items()]
    namespaces = ""
    objects = dict(extra_objects or {})
    if durable_objects:
        objects = {"SESSION": "Session", "LIMITS": "RateLimiter", **objects}
    keys = {"Session": "bindloop-worker-session", "RateLimiter": "bindloop-worker-limits"}
    racer_lines = list(binding_lines)
    for name, cls in objects.items():
        binding_lines.append(f'    (name = {_capnp_str(name)}, durableObjectNamespace = {_capnp_str(cls)}),')
        racer_lines.append(f'    (name = {_capnp_str(name)}, durableObjectNamespace = '
                           f'(className = {_capnp_str(cls)}, serviceName = "main")),')
    if objects:
        declared = "".join(
            f'    (className = {_capnp_str(cls)}, uniqueKey = '
            f'{_capnp_str(keys.get(cls, "bindloop-worker-" + cls.lower()))}, enableSql = true),\n'
            for cls in objects.values())
        namespaces = ('  durableObjectNamespaces = [\n' + declared + '  ],\n'
                      '  durableObjectStorage = (localDisk = "do-disk"),\n')
    binding_lines += [f'    (name = "KIT_RACER_{i}", service = "racer{i}"),' for i in range(racers)]
    storage_dir.mkdir(parents=True, exist_ok=True)
    flags = ", ".join(_capnp_str(f) for f in COMPATIBILITY_FLAGS)
    racer_services = "".join(f'    (name = "racer{i}", worker = .racer{i}),\n' for i in range(racers))
    config = f"""using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .worker),
{racer_services}    (name = "net", network = (allow = ["public", "private", "local"])),
    (name = "do-disk", disk = (path = {_capnp_str(str(storage_dir.resolve()))}, writable = true)),
  ],
  sockets = [(name = "http", address = "127.0.0.1:0", http = (), service = "main")],
);

const worker :Workerd.Worker = (
  modules = [
{chr(10).join(lines)}
  ],
  compatibilityDate = "{COMPATIBILITY_DATE}",
  compatibilityFlags = [{flags}],
  bindings = [
{chr(10).join(binding_lines)}
  ],
{namespaces}  globalOutbound = "net",
);
"""
    module_list = chr(10).join(lines)
    for i in range(racers):
        racer_bindings = chr(10).join([*racer_lines, f'    (name = "KIT_ISOLATE", text = "racer{i}"),'])
        config += f"""
const racer{i} :Workerd.Worker = (
  modules = [
{module_list}
  ],
  compatibilityDate = "{COMPATIBILITY_DATE}",
  compatibilityFlags = [{flags}],
  bindings = [
{racer_bindings}
  ],
  globalOutbound = "net",
);
"""
    (stage_dir / "config.capnp").write_text(config)
    return stage_dir / "config.capnp"


def tree_bytes(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


class Workerd:
    """A running ``workerd serve`` of a staged config; use as a context manager."""

    def __init__(self, config: Path, *, log_path: Path | None = None,
                 snapshot: tuple[str, Path] | None = None) -> None:
        """``snapshot``: ``("save", dir)`` boots Python, writes a memory snapshot of the isolate
        after the Worker's top-level imports to ``dir/snapshot.bin`` and then serves;
        ``("load", dir)`` starts the isolate from that snapshot instead of importing again (what
        Cloudflare does for every deployed Python Worker)."""
        if not WORKERD_BIN.is_file():
            raise HarnessError(f"{WORKERD_BIN} not found: run `cd worker && npm ci`")
        self.config = config
        self.extra_args: list[str] = []
        if snapshot is not None:
            mode, directory = snapshot
            directory.mkdir(parents=True, exist_ok=True)
            self.extra_args = (["--python-save-snapshot"] if mode == "save"
                               else ["--python-load-snapshot", SNAPSHOT_NAME])
            self.extra_args += ["--python-snapshot-dir", str(directory.resolve())]
        self.log_path = log_path or config.with_name("workerd.log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.listen_s = 0.0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60.0) -> Workerd:
        build_bundle(PYODIDE_DIR, BUNDLE_DIR)
        read_fd, write_fd = os.pipe()
        log = open(self.log_path, "wb")  # noqa: SIM115 - lives as long as the process
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [str(WORKERD_BIN), "serve", self.config.name, "--experimental",
             "--pyodide-bundle-disk-cache-dir", str(BUNDLE_DIR), "--control-fd", str(write_fd),
             *self.extra_args],
            cwd=self.config.parent, stdout=log, stderr=subprocess.STDOUT, pass_fds=(write_fd,))
        os.close(write_fd)
        buf = b""
        try:
            while b"\n" not in buf:
                left = timeout_s - (time.perf_counter() - t0)
                ready, _, _ = select.select([read_fd], [], [], max(left, 0))
                chunk = os.read(read_fd, 4096) if ready else b""
                if not chunk:
                    self.stop()
                    raise HarnessError(f"workerd did not report a port; log:\n{self.log_text()}")
                buf += chunk
        finally:
            os.close(read_fd)
        event = json.loads(buf.split(b"\n", 1)[0])
        self.port = int(event["port"])
        self.listen_s = time.perf_counter() - t0
        return self

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def kill(self) -> None:
        """SIGKILL, as a crash or an evicted machine would: no shutdown, in-flight work lost."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def __enter__(self) -> Workerd:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def conformance(out: Path) -> int:
    work = WORKER_DIR / ".cache" / "conformance-stage"
    config = stage(work / "stage", bindings={}, storage_dir=work / "do-storage")
    n_files, n_bytes = tree_bytes(work / "stage" / "python_modules")
    with Workerd(config) as wd:
        t0 = time.perf_counter()
        with urllib.request.urlopen(wd.base_url + "/conformance", timeout=300) as resp:
            report = resp.read()
        first_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        with urllib.request.urlopen(wd.base_url + "/conformance", timeout=300) as resp:
            again = resp.read()
        second_s = time.perf_counter() - t1
    if again != report:
        print("[conformance-workerd] two runs in one isolate gave different reports", file=sys.stderr)
        return 1
    # Every scenario file (the agent ones, 100-103, included) ran in the isolate and passed.
    expected = sorted(p.stem for p in (REPO_ROOT / "conformance" / "scenarios").glob("*.json"))
    parsed = json.loads(report)
    ran = sorted(e["name"] for e in parsed["scenarios"])
    agent = [n for n in ran if "_agent_" in n]
    if ran != expected or parsed["failed"] or not agent:
        print(f"[conformance-workerd] scenarios missing from the workerd run: "
              f"{sorted(set(expected) - set(ran))}; failed: {parsed['failed']}", file=sys.stderr)
        return 1
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(report)
    print(f"[conformance-workerd] workerd listening after {wd.listen_s * 1000:.0f} ms; "
          f"first /conformance {first_s * 1000:.0f} ms (Python boot + suite), warm {second_s * 1000:.0f} ms; "
          f"vendored python_modules: {n_files} files, {n_bytes / 1024:.0f} KiB; wrote {len(report)} bytes "
          f"to {out} ({len(ran)} scenarios, all passed; agent API: {', '.join(agent)})",
          file=sys.stderr)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "conformance":
        try:
            return conformance(Path(argv[1]))
        except HarnessError as exc:
            print(f"[conformance-workerd] {exc}", file=sys.stderr)
            return 1
    print("usage: workerd_harness.py conformance OUT_REPORT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
