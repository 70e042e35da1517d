"""Serve a Cloudflare Python Worker directory in the pinned npm workerd, offline: ``dev`` for
local development, ``conformance`` for ``make conformance-workerd``; the tests and benchmarks
import :func:`stage` and :class:`Workerd` from here.

    python worker/tools/workerd_harness.py dev DIR [--port N] [--var K=V]... [--persist DIR]
                                           [--wheels DIR]... [--snapshot]
    python worker/tools/workerd_harness.py conformance OUT_REPORT

What serving a Worker directory does:

1. builds the "dev" Pyodide bundle once into ``worker/.cache/pyodide-bundle`` (build_dev_bundle.py);
2. reads the directory's ``wrangler.jsonc`` (or ``wrangler.json``): ``main``, the compatibility
   date and flags, ``vars``, the Durable Object bindings and the migrations that declare their
   classes (:func:`read_worker`); a binding kind this command cannot serve is refused, never ignored;
3. stages a directory (:func:`stage_worker`): every ``.py`` under ``main``'s directory as the
   Worker's modules (``main`` first), every wheel of the wheel directories (``harness/wasm/wheels-pyc`` by
   default) unpacked under ``python_modules/`` and the directory's own ``python_modules/`` (what
   ``pywrangler sync`` vendors) over them -- ``.py`` files as ``pythonModule``, everything else
   (msgspec's ``.so``) as ``data`` -- after checking that each of ``pyproject.toml``'s
   dependencies is among them;
4. writes a workerd config: the Worker with its compatibility date and its flags turned to the dev
   bundle's (:func:`dev_compatibility_flags`) plus the ones production implies
   (:func:`production_implied_flags`: the dedicated memory snapshot), ``vars`` as text (or JSON) bindings, the Durable
   Object classes on local-disk storage, and a ``globalOutbound`` network service that allows
   127.0.0.1;
5. starts ``workerd serve`` in its own process group on 127.0.0.1 (port 0 reported on
   ``--control-fd``, or a socket the harness holds and passes with ``--socket-fd``), with a
   watchdog process (``workerd_watchdog.py``) that stops it when the harness dies, SIGKILL
   included;
6. stops it by PID (SIGTERM, then SIGKILL: workerd does not always exit on SIGTERM).

``dev`` does 1-5 for any Worker directory, restarts workerd when a file it staged changes (on the
same socket, so requests made meanwhile wait instead of failing) and stops it on exit, SIGINT and
SIGTERM included.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import time
import tomllib
import urllib.request
import zipfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

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
WATCHDOG = TOOLS_DIR / "workerd_watchdog.py"
# The .pyc wheel set (make wasm-wheels-pyc: compiled inside Pyodide 3.14) is the default: it
# started workerd to the first streamed token 2-12 % sooner than the plain set in three of four
# runs of bench/worker_turn.py (docs/workers.md). The plain set is harness/wasm/wheels.
WHEELS_DIR = REPO_ROOT / "harness" / "wasm" / "wheels-pyc"

SNAPSHOT_NAME = "snapshot.bin"  # what --python-save-snapshot writes into --python-snapshot-dir
DEV_STATE = ".workerd-dev"  # dev's staging, snapshot and (by default) storage, in the Worker's dir

# The flags that pick a released Pyodide (workerd downloads it, sha256-pinned): python_workers_20250116
# (Pyodide 0.28.2, Python 3.13; implied from 2025-09-29), python_workers_20260610 (314.0.4) and
# python_workers_314 (314.0.6; implied from 2026-09-08). The dev bundle replaces them: the
# released ones are switched off, python_workers_development (experimental) reads
# pyodide_dev.capnp.bin from --pyodide-bundle-disk-cache-dir.
RELEASE_FLAGS = ("python_workers_20250116", "python_workers_20260610", "python_workers_314")
DEV_FLAGS = ("python_workers_development", *(f"no_{f}" for f in RELEASE_FLAGS))

# What a deployed Python Worker gets by implication that switching python_workers_20250116 off
# (above) would lose: workerd's compatibility-date.capnp declares pythonDedicatedSnapshot
# ("python_dedicated_snapshot") $impliedByAfterDate(pythonWorkers20250116, 2025-10-16), and
# pythonWorkers20250116 $impliedByAfterDate(pythonWorkers, 2025-09-29). With it, the snapshot
# taken when a Worker is uploaded is a *dedicated* one, collected after the Worker's top-level
# code ran (src/pyodide/internal/snapshot.ts, maybeCollectDedicatedSnapshot), instead of the
# *baseline* one collected before the Worker's files are mounted.
DEDICATED_SNAPSHOT_FLAG = "python_dedicated_snapshot"
DEDICATED_SNAPSHOT_FROM = "2025-10-16"
PYTHON_WORKERS_20250116_FROM = "2025-09-29"

# wrangler.jsonc keys that declare bindings this command does not serve: refused, so a Worker
# never runs here without a binding it expects.
UNSUPPORTED_KEYS = ("kv_namespaces", "r2_buckets", "d1_databases", "services", "queues", "ai",
                    "vectorize", "hyperdrive", "analytics_engine_datasets", "browser", "workflows",
                    "send_email", "dispatch_namespaces", "mtls_certificates", "assets", "images",
                    "secrets_store_secrets", "unsafe", "version_metadata", "tail_consumers")

sys.path.insert(0, str(TOOLS_DIR))
from build_dev_bundle import build as build_bundle  # noqa: E402


class HarnessError(Exception):
    pass


def _capnp_str(value: str) -> str:
    return json.dumps(value)  # a JSON string literal is a valid Cap'n Proto text literal


# --- wrangler.jsonc ---------------------------------------------------------------------------

def parse_jsonc(text: str) -> Any:
    """JSON with ``//`` and ``/* */`` comments and trailing commas (what wrangler accepts)."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise HarnessError("an unterminated /* comment")
            i = j + 2
        else:
            out.append(c)
            i += 1
    stripped = "".join(out)
    # A comma followed only by whitespace and a closing bracket (outside strings, which the
    # pass above kept whole: split on them to leave them alone).
    parts = re.split(r'("(?:[^"\\]|\\.)*")', stripped)
    for k in range(0, len(parts), 2):
        parts[k] = re.sub(r",(\s*[}\]])", r"\1", parts[k])
    try:
        return json.loads("".join(parts))
    except json.JSONDecodeError as exc:
        raise HarnessError(f"not JSON(C): {exc}") from None


@dataclass(frozen=True)
class DurableObject:
    binding: str
    class_name: str
    sql: bool  # new_sqlite_classes (SQL API) rather than new_classes (key-value only)
    storage_key: str  # workerd's uniqueKey: where its objects live in the storage directory


@dataclass(frozen=True)
class WorkerSpec:
    """What serving a Worker directory needs, read from its ``wrangler.jsonc``."""

    directory: Path
    name: str
    main: Path
    compatibility_date: str
    compatibility_flags: tuple[str, ...]
    vars: Mapping[str, object]
    durable_objects: tuple[DurableObject, ...]
    dependencies: tuple[str, ...]  # pyproject.toml's [project].dependencies, by name

    @property
    def modules_dir(self) -> Path:
        return self.main.parent


def config_path(directory: Path) -> Path:
    for name in ("wrangler.jsonc", "wrangler.json"):
        if (directory / name).is_file():
            return directory / name
    if (directory / "wrangler.toml").is_file():
        raise HarnessError(f"{directory}/wrangler.toml: only wrangler.jsonc / wrangler.json are read")
    raise HarnessError(f"no wrangler.jsonc in {directory}")


def _classes(migrations: object, where: str) -> dict[str, tuple[bool, str]]:
    """Class name -> (SQLite-backed, the name it was first declared under), after every migration
    in order (a renamed class keeps its storage, as on Cloudflare)."""
    if not isinstance(migrations, list):
        raise HarnessError(f"{where}: migrations must be a list")
    live: dict[str, tuple[bool, str]] = {}
    for m in migrations:
        if not isinstance(m, dict) or not isinstance(m.get("tag"), str):
            raise HarnessError(f"{where}: every migration needs a tag")
        for key in m:
            if key not in ("tag", "new_classes", "new_sqlite_classes", "renamed_classes",
                           "deleted_classes"):
                raise HarnessError(f"{where}: migration {m['tag']}: {key} is not served here")
        for cls in m.get("new_classes", []):
            live[cls] = (False, cls)
        for cls in m.get("new_sqlite_classes", []):
            live[cls] = (True, cls)
        for ren in m.get("renamed_classes", []):
            if ren["from"] not in live:
                raise HarnessError(f"{where}: migration {m['tag']} renames unknown {ren['from']}")
            live[ren["to"]] = live.pop(ren["from"])
        for cls in m.get("deleted_classes", []):
            live.pop(cls, None)
    return live


def _dependency_names(directory: Path) -> tuple[str, ...]:
    pyproject = directory / "pyproject.toml"
    if not pyproject.is_file():
        return ()
    deps = tomllib.loads(pyproject.read_text()).get("project", {}).get("dependencies", [])
    return tuple(_normalize(re.split(r"[\s\[<>=!~;@(]", d, maxsplit=1)[0]) for d in deps)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_worker(directory: Path) -> WorkerSpec:
    """Read ``directory``'s wrangler config. Raises :class:`HarnessError` naming what it cannot
    serve: a binding kind other than ``vars`` and ``durable_objects``, a Durable Object class no
    migration declares (Cloudflare refuses that deploy too) or that lives in another Worker."""
    directory = directory.resolve()
    path = config_path(directory)
    where = str(path)
    cfg = parse_jsonc(path.read_text())
    if not isinstance(cfg, dict):
        raise HarnessError(f"{where}: not an object")
    refused = sorted(k for k in cfg if k in UNSUPPORTED_KEYS)
    if refused:
        raise HarnessError(f"{where}: {', '.join(refused)} not served by this command (it serves "
                           "vars and durable_objects); remove them or use `pywrangler dev`")
    main = cfg.get("main")
    if not isinstance(main, str) or not main.endswith(".py"):
        raise HarnessError(f"{where}: main must name the Worker's Python entry module, got {main!r}")
    main_path = (directory / main).resolve()
    if not main_path.is_file():
        raise HarnessError(f"{where}: main {main} does not exist")
    date = cfg.get("compatibility_date")
    if not isinstance(date, str) or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", date):
        raise HarnessError(f"{where}: compatibility_date must be YYYY-MM-DD, got {date!r}")
    flags = cfg.get("compatibility_flags", [])
    if "python_workers" not in flags:
        raise HarnessError(f"{where}: compatibility_flags must include python_workers")
    variables = cfg.get("vars", {})
    if not isinstance(variables, dict):
        raise HarnessError(f"{where}: vars must be an object")
    classes = _classes(cfg.get("migrations", []), where)
    name = str(cfg.get("name", directory.name))
    objects = []
    for b in cfg.get("durable_objects", {}).get("bindings", []):
        if b.get("script_name"):
            raise HarnessError(f"{where}: {b['name']} binds a class of another Worker "
                               f"({b['script_name']}); only this Worker's classes are served")
        if b["class_name"] not in classes:
            raise HarnessError(f"{where}: no migration declares {b['class_name']} (bound as "
                               f"{b['name']}): add one with new_sqlite_classes")
        sql, first_name = classes[b["class_name"]]
        objects.append(DurableObject(b["name"], b["class_name"], sql, f"{name}-{first_name}"))
    return WorkerSpec(directory=directory, name=name, main=main_path, compatibility_date=date,
                      compatibility_flags=tuple(flags), vars=dict(variables),
                      durable_objects=tuple(objects), dependencies=_dependency_names(directory))


def dev_compatibility_flags(flags: Sequence[str]) -> tuple[str, ...]:
    """The Worker's flags with the released-Pyodide ones replaced by the dev bundle's."""
    kept = [f for f in flags if f not in RELEASE_FLAGS and f not in DEV_FLAGS]
    return (*kept, *DEV_FLAGS)


def production_implied_flags(date: str, flags: Sequence[str]) -> tuple[str, ...]:
    """The flags Cloudflare's runtime turns on for a Worker of this compatibility ``date`` and
    ``flags`` by implication, which :func:`dev_compatibility_flags` would switch off with
    ``python_workers_20250116``: ``python_dedicated_snapshot`` when ``python_workers_20250116``
    is on (named, or implied by ``python_workers`` from 2025-09-29) and the date is 2025-10-16 or
    later, unless ``disable_python_dedicated_snapshot`` is named. The staged config names them,
    so a snapshot written here is the kind production deploys get."""
    on = set(flags)
    v20250116 = "no_python_workers_20250116" not in on and (
        "python_workers_20250116" in on
        or ("python_workers" in on and date >= PYTHON_WORKERS_20250116_FROM))
    dedicated = DEDICATED_SNAPSHOT_FLAG in on or (
        v20250116 and date >= DEDICATED_SNAPSHOT_FROM
        and f"disable_{DEDICATED_SNAPSHOT_FLAG}" not in on)
    return (DEDICATED_SNAPSHOT_FLAG,) if dedicated and DEDICATED_SNAPSHOT_FLAG not in on else ()


def read_dev_vars(path: Path) -> dict[str, str]:
    """``.dev.vars`` (wrangler's file of local secrets): ``NAME=value`` lines, ``#`` comments,
    values optionally in double or single quotes."""
    out: dict[str, str] = {}
    if not path.is_file():
        return out
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise HarnessError(f"{path}: not NAME=value: {line!r}")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[key.strip()] = value
    return out


TEMPLATE = read_worker(WORKER_DIR)
COMPATIBILITY_DATE = TEMPLATE.compatibility_date
COMPATIBILITY_FLAGS = dev_compatibility_flags(TEMPLATE.compatibility_flags)


# --- staging ----------------------------------------------------------------------------------

def _unpack_wheels(wheels_dirs: Sequence[Path], dest: Path) -> list[str]:
    """Unpack every wheel of ``wheels_dirs`` into ``dest``; no directories: none (a Worker that
    vendors nothing), directories without a wheel: an error naming the make target."""
    wheels = sorted(w for d in wheels_dirs for w in d.glob("*.whl"))
    if not wheels and wheels_dirs:
        raise HarnessError(f"no wheels in {', '.join(map(str, wheels_dirs))}: run "
                           "`make wasm-wheels wasm-wheels-pyc`")
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


_SKIP_DIRS = {"__pycache__", "node_modules", "python_modules"}


def _walk(root: Path) -> Iterator[Path]:
    """The files under ``root``, skipping hidden directories (``.venv``, ``.workerd-dev``,
    ``.wrangler``), ``__pycache__``, ``node_modules`` and ``python_modules``."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIP_DIRS)
        for f in sorted(filenames):
            yield Path(dirpath) / f


def worker_modules(spec: WorkerSpec) -> list[Path]:
    """The Worker's own modules: every ``.py`` under ``main``'s directory, ``main`` first."""
    found = [p for p in _walk(spec.modules_dir) if p.suffix == ".py"]
    return sorted(found, key=lambda p: (p != spec.main, p.relative_to(spec.modules_dir).as_posix()))


def _check_dependencies(spec: WorkerSpec, wheel_names: Sequence[str], vendor: Path) -> None:
    provided = {_normalize(w.split("-")[0]) for w in wheel_names}
    own = spec.directory / "python_modules"
    if own.is_dir():
        for p in own.iterdir():
            provided.add(_normalize(p.name.split("-")[0] if p.suffix == ".dist-info" else p.stem))
    missing = [d for d in spec.dependencies if d not in provided]
    if missing:
        raise HarnessError(
            f"{spec.directory}/pyproject.toml depends on {', '.join(missing)}, which no wheel "
            f"directory ({vendor}) and no python_modules/ provides: pass --wheels DIR with its "
            "Pyodide (pyemscripten / pure-Python) wheel")


def stage_worker(spec: WorkerSpec, stage_dir: Path, *, storage_dir: Path,
                 bindings: Mapping[str, str] | None = None,
                 wheels_dirs: Sequence[Path] = (WHEELS_DIR,),
                 vendored_trees: Mapping[str, Path] | None = None,
                 extra_objects: Mapping[str, str] | None = None, racers: int = 0,
                 entry: Path | None = None) -> Path:
    """Write ``spec``'s Worker into ``stage_dir`` (replaced): its modules (``entry``, if given,
    staged under ``main``'s name in place of it), the vendored modules
    (the wheels of ``wheels_dirs``, then the Worker's own ``python_modules/``, then each of
    ``vendored_trees`` as ``python_modules/<name>``) and ``config.capnp``, which it returns.
    ``bindings`` are text bindings over the ``vars`` (secrets, overrides). ``extra_objects`` binds
    more SQLite-backed Durable Object classes (binding name -> class name) than wrangler.jsonc
    does. ``racers`` adds that many more Workers of the same modules and bindings (each its own
    isolate and Python), whose Durable Object bindings reach the main Worker's objects, bound in
    the main Worker as services ``KIT_RACER_0``... and each told its name in ``KIT_ISOLATE`` (the
    store kit's several-isolate races)."""
    if stage_dir.exists():
        shutil.rmtree(stage_dir)
    vendor = stage_dir / "python_modules"
    vendor.mkdir(parents=True)
    wheel_names = _unpack_wheels(wheels_dirs, vendor)
    _check_dependencies(spec, wheel_names, vendor)
    own = spec.directory / "python_modules"
    if own.is_dir():
        shutil.copytree(own, vendor, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.dist-info", ".synced"))
    for name, tree in (vendored_trees or {}).items():
        shutil.copytree(tree, vendor / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    lines = []
    for src in worker_modules(spec):
        rel = src.relative_to(spec.modules_dir).as_posix()
        (stage_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(entry if entry is not None and src == spec.main else src, stage_dir / rel)
        lines.append(f'    (name = {_capnp_str(rel)}, pythonModule = embed {_capnp_str(rel)}),')
    for path in sorted(p for p in vendor.rglob("*") if p.is_file()):
        rel = path.relative_to(stage_dir).as_posix()
        kind = "pythonModule" if path.suffix == ".py" else "data"
        lines.append(f"    (name = {_capnp_str(rel)}, {kind} = embed {_capnp_str(rel)}),")
    binding_lines = []
    values: dict[str, object] = {**spec.vars, **(bindings or {})}
    for k, v in values.items():
        if isinstance(v, str):
            binding_lines.append(f"    (name = {_capnp_str(k)}, text = {_capnp_str(v)}),")
        else:
            binding_lines.append(f"    (name = {_capnp_str(k)}, json = {_capnp_str(json.dumps(v))}),")
    objects = list(spec.durable_objects) + [
        DurableObject(b, cls, True, f"{spec.name}-{cls}") for b, cls in (extra_objects or {}).items()]
    racer_lines = list(binding_lines)
    for obj in objects:
        binding_lines.append(f'    (name = {_capnp_str(obj.binding)}, '
                             f'durableObjectNamespace = {_capnp_str(obj.class_name)}),')
        racer_lines.append(f'    (name = {_capnp_str(obj.binding)}, durableObjectNamespace = '
                           f'(className = {_capnp_str(obj.class_name)}, serviceName = "main")),')
    namespaces = ""
    if objects:
        declared = "".join(
            f'    (className = {_capnp_str(o.class_name)}, uniqueKey = {_capnp_str(o.storage_key)}'
            f'{", enableSql = true" if o.sql else ""}),\n'
            for o in {o.class_name: o for o in objects}.values())
        namespaces = ('  durableObjectNamespaces = [\n' + declared + '  ],\n'
                      '  durableObjectStorage = (localDisk = "do-disk"),\n')
    binding_lines += [f'    (name = "KIT_RACER_{i}", service = "racer{i}"),' for i in range(racers)]
    storage_dir.mkdir(parents=True, exist_ok=True)
    flags = ", ".join(_capnp_str(f) for f in (
        *dev_compatibility_flags(spec.compatibility_flags),
        *production_implied_flags(spec.compatibility_date, spec.compatibility_flags)))
    date = _capnp_str(spec.compatibility_date)
    racer_services = "".join(f'    (name = "racer{i}", worker = .racer{i}),\n' for i in range(racers))
    module_list = "\n".join(lines)
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
{module_list}
  ],
  compatibilityDate = {date},
  compatibilityFlags = [{flags}],
  bindings = [
{chr(10).join(binding_lines)}
  ],
{namespaces}  globalOutbound = "net",
);
"""
    for i in range(racers):
        racer_bindings = "\n".join([*racer_lines, f'    (name = "KIT_ISOLATE", text = "racer{i}"),'])
        config += f"""
const racer{i} :Workerd.Worker = (
  modules = [
{module_list}
  ],
  compatibilityDate = {date},
  compatibilityFlags = [{flags}],
  bindings = [
{racer_bindings}
  ],
  globalOutbound = "net",
);
"""
    (stage_dir / "config.capnp").write_text(config)
    return stage_dir / "config.capnp"


def stage(stage_dir: Path, *, bindings: Mapping[str, str], storage_dir: Path,
          with_conformance: bool = True, wheels_dir: Path | None = None,
          src_dir: Path | None = None, durable_objects: bool = True,
          extra_objects: Mapping[str, str] | None = None, racers: int = 0,
          worker_dir: Path = WORKER_DIR, entry: Path | None = None) -> Path:
    """:func:`stage_worker` of ``worker_dir`` (the template by default) as its ``wrangler.jsonc``
    declares it, for the tests and benchmarks: ``bindings`` over its vars, ``conformance/``
    vendored unless ``with_conformance`` is false, the modules of ``src_dir`` (its ``entry.py``
    the entry point) instead of ``main``'s directory if given, ``entry`` in place of the entry
    module if given, and no Durable Objects if ``durable_objects`` is false. The wheels come from
    ``wheels_dir``, else from the directory ``BINDLOOP_WORKER_WHEELS`` names, else
    ``harness/wasm/wheels-pyc``."""
    if wheels_dir is None:
        wheels_dir = Path(os.environ.get("BINDLOOP_WORKER_WHEELS", str(WHEELS_DIR)))
    spec = read_worker(worker_dir)
    if src_dir is not None:
        spec = replace(spec, main=(src_dir / "entry.py").resolve())
    if not durable_objects:
        spec = replace(spec, durable_objects=())
    trees = {"conformance": REPO_ROOT / "harness" / "conformance"} if with_conformance else {}
    return stage_worker(spec, stage_dir, storage_dir=storage_dir, bindings=bindings,
                        wheels_dirs=(wheels_dir,), vendored_trees=trees,
                        extra_objects=extra_objects, racers=racers, entry=entry)


def binary_config(config: Path) -> Path:
    """``config`` encoded as workerd's binary Cap'n Proto config beside it (``config.bin``, by
    ``workerd compile --config-only``), every embedded file inside it; :class:`Workerd` serves a
    ``.bin`` config with ``--binary``. This is the form in which miniflare (``wrangler dev``) hands
    workerd a Worker. Served from the text config, workerd parses the schema language and reads
    each ``embed``ded file at every start, which costs CPU in proportion to the vendored bytes
    (about 3.5 ms per MB here) that neither a deploy nor ``wrangler dev`` spends."""
    out = config.with_suffix(".bin")
    with open(out, "wb") as f:
        done = subprocess.run([str(WORKERD_BIN), "compile", "--config-only", config.name],
                              cwd=config.parent, stdout=f, stderr=subprocess.PIPE, check=False)
    if done.returncode != 0:
        raise HarnessError(f"workerd compile {config}: {done.stderr.decode(errors='replace')}")
    return out


def tree_bytes(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


# --- workerd ----------------------------------------------------------------------------------

def listen_socket(port: int, host: str = "127.0.0.1") -> socket.socket:
    """A listening TCP socket for ``Workerd(listen=...)``: held by the harness across workerd
    restarts, so the port stays the same and connections made while no workerd runs wait in
    the backlog."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise HarnessError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    return sock


class Workerd:
    """A running ``workerd serve`` of a staged config; use as a context manager."""

    def __init__(self, config: Path, *, log_path: Path | None = None,
                 snapshot: tuple[str, Path] | None = None, listen: socket.socket | None = None,
                 output_to_terminal: bool = False) -> None:
        """``config``: a text config, or a binary one (``.bin``, :func:`binary_config`).
        ``snapshot``: ``("save", dir)`` boots Python, writes a memory snapshot of the isolate
        after the Worker's top-level imports to ``dir/snapshot.bin`` and then serves;
        ``("load", dir)`` starts the isolate from that snapshot instead of importing again (what
        Cloudflare does for every deployed Python Worker). ``listen``: serve on this socket
        (:func:`listen_socket`) instead of a new port. ``output_to_terminal``: workerd's output
        (the Worker's prints and errors) goes to this process's stdout instead of the log file."""
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
        self.listen = listen
        self.output_to_terminal = output_to_terminal
        self.proc: subprocess.Popen[bytes] | None = None
        self.watchdog: subprocess.Popen[bytes] | None = None
        self._lifeline = -1
        self.port = 0
        self.listen_s = 0.0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid if self.proc is not None else 0

    def start(self, timeout_s: float = 60.0) -> Workerd:
        build_bundle(PYODIDE_DIR, BUNDLE_DIR)
        read_fd, write_fd = os.pipe()
        pass_fds = [write_fd]
        args = [str(WORKERD_BIN), "serve", self.config.name, "--experimental",
                "--pyodide-bundle-disk-cache-dir", str(BUNDLE_DIR), "--control-fd", str(write_fd),
                *(["--binary"] if self.config.suffix == ".bin" else []), *self.extra_args]
        if self.listen is not None:
            pass_fds.append(self.listen.fileno())
            args += ["--socket-fd", f"http={self.listen.fileno()}"]
        out = None if self.output_to_terminal else open(self.log_path, "wb")  # noqa: SIM115
        t0 = time.perf_counter()
        try:
            # Its own process group: a terminal's ^C is the harness's to handle (it stops
            # workerd itself, in order), and the group is what a stop signals.
            self.proc = subprocess.Popen(
                args, cwd=self.config.parent, stdout=out,
                stderr=None if out is None else subprocess.STDOUT, pass_fds=pass_fds,
                start_new_session=True)
        finally:
            os.close(write_fd)
            if out is not None:
                out.close()
        self._start_watchdog(self.proc.pid)
        buf = b""
        try:
            while b"\n" not in buf:
                left = timeout_s - (time.perf_counter() - t0)
                ready, _, _ = select.select([read_fd], [], [], max(left, 0))
                chunk = os.read(read_fd, 4096) if ready else b""
                if not chunk:
                    self.stop()
                    where = ("its output is above" if self.output_to_terminal
                             else f"log:\n{self.log_text()}")
                    raise HarnessError(f"workerd did not start; {where}")
                buf += chunk
        finally:
            os.close(read_fd)
        event = json.loads(buf.split(b"\n", 1)[0])
        self.port = int(event["port"])
        self.listen_s = time.perf_counter() - t0
        return self

    def _start_watchdog(self, pid: int) -> None:
        """A process that outlives this one only to stop the workerd: it reads a pipe whose
        write end only this process holds (``_lifeline``), so the read ends when this process
        does, however it ends."""
        read_end, self._lifeline = os.pipe()
        pidfd = os.pidfd_open(pid) if hasattr(os, "pidfd_open") else -1
        try:
            self.watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", str(WATCHDOG), str(pid), str(pidfd)],
                stdin=read_end, pass_fds=(pidfd,) if pidfd >= 0 else (), start_new_session=True)
        finally:
            os.close(read_end)
            if pidfd >= 0:
                os.close(pidfd)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def _signal(self, proc: subprocess.Popen[bytes], signum: int) -> None:
        try:
            os.killpg(proc.pid, signum)  # its group: workerd and anything it started
        except ProcessLookupError:
            pass

    def _end_watchdog(self) -> None:
        watchdog, self.watchdog = self.watchdog, None
        if self._lifeline >= 0:
            os.close(self._lifeline)
            self._lifeline = -1
        if watchdog is not None:
            try:
                watchdog.wait(timeout=10)
            except subprocess.TimeoutExpired:
                watchdog.kill()
                watchdog.wait()

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            self._signal(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._signal(proc, signal.SIGKILL)
                proc.wait(timeout=10)
        self._end_watchdog()

    def kill(self) -> None:
        """SIGKILL, as a crash or an evicted machine would: no shutdown, in-flight work lost."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            self._signal(proc, signal.SIGKILL)
            proc.wait(timeout=10)
        self._end_watchdog()

    def __enter__(self) -> Workerd:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


# --- dev --------------------------------------------------------------------------------------

def watched_files(spec: WorkerSpec, wheels_dirs: Sequence[Path]) -> dict[Path, tuple[int, int]]:
    """What a change of restarts workerd, with each file's (mtime in ns, size): the wrangler
    config, ``.dev.vars``, ``pyproject.toml``, the files under ``main``'s directory, the Worker's
    ``python_modules/`` and the wheels."""
    paths: list[Path] = [spec.directory / n for n in
                         ("wrangler.jsonc", "wrangler.json", ".dev.vars", "pyproject.toml")]
    paths += _walk(spec.modules_dir)
    own = spec.directory / "python_modules"
    if own.is_dir():
        paths += [p for p in own.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    paths += [w for d in wheels_dirs for w in d.glob("*.whl")]
    seen: dict[Path, tuple[int, int]] = {}
    for p in paths:
        try:
            st = p.stat()
        except OSError:
            continue
        seen[p] = (st.st_mtime_ns, st.st_size)
    return seen


def _digest(stage_dir: Path) -> str:
    """A digest of everything a memory snapshot depends on: the staged files and config, the
    workerd binary and the Pyodide bundle."""
    h = hashlib.sha256()
    for p in sorted(p for p in stage_dir.rglob("*") if p.is_file() and p.name != "workerd.log"):
        h.update(p.relative_to(stage_dir).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(p.read_bytes()).digest())
    for p in (WORKERD_BIN, BUNDLE_DIR / "pyodide_dev.capnp.bin"):
        st = p.stat()
        h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


@dataclass
class DevOptions:
    directory: Path
    port: int = 8787
    variables: Mapping[str, str] | None = None
    persist: Path | None = None
    wheels_dirs: Sequence[Path] = (WHEELS_DIR,)
    snapshot: bool = False
    poll_s: float = 0.5


class DevServer:
    """``dev``: serve one Worker directory, restart on change, stop on exit."""

    def __init__(self, options: DevOptions) -> None:
        self.options = options
        self.directory = options.directory.resolve()
        self.state = self.directory / DEV_STATE
        self.storage = (options.persist or self.state / "storage").resolve()
        self.sock = listen_socket(options.port)
        self.port = int(self.sock.getsockname()[1])
        self.workerd: Workerd | None = None
        self.spec: WorkerSpec | None = None

    def _log(self, message: str) -> None:
        print(f"[workerd dev] {message}", file=sys.stderr, flush=True)

    def _stage(self) -> tuple[WorkerSpec, Path]:
        spec = read_worker(self.directory)
        bindings = {**read_dev_vars(self.directory / ".dev.vars"), **(self.options.variables or {})}
        stage_dir = self.state / "stage.next"
        config = stage_worker(spec, stage_dir, storage_dir=self.storage, bindings=bindings,
                              wheels_dirs=self.options.wheels_dirs)
        return spec, config

    def _start(self, spec: WorkerSpec) -> None:
        stage_dir = self.state / "stage"
        if stage_dir.exists():
            shutil.rmtree(stage_dir)
        (self.state / "stage.next").rename(stage_dir)
        snapshot: tuple[str, Path] | None = None
        if self.options.snapshot:
            snapshots = self.state / "snapshots" / _digest(stage_dir)
            # A snapshot of exactly these modules, flags and bundle is reused; otherwise this
            # start writes one (and boots Python before it listens).
            mode = "load" if (snapshots / SNAPSHOT_NAME).is_file() else "save"
            snapshot = (mode, snapshots)
            if mode == "save":  # ~30 MiB each: keep the two latest besides the one to write
                older = sorted((d for d in snapshots.parent.glob("*") if d != snapshots),
                               key=lambda d: d.stat().st_mtime, reverse=True)
                for stale in older[2:]:
                    shutil.rmtree(stale, ignore_errors=True)
        t0 = time.perf_counter()
        self.workerd = Workerd(stage_dir / "config.capnp", snapshot=snapshot, listen=self.sock,
                               output_to_terminal=True).start(timeout_s=300)
        how = "" if snapshot is None else (" from its memory snapshot" if snapshot[0] == "load"
                                           else ", memory snapshot written")
        self._log(f"{spec.name} ({self.directory}) at http://127.0.0.1:{self.port}/ "
                  f"(workerd pid {self.workerd.pid}, listening after "
                  f"{(time.perf_counter() - t0) * 1000:.0f} ms{how}; storage {self.storage})")

    def _try_start(self, spec: WorkerSpec) -> None:
        """Start workerd; one that does not start (the Worker raised at import, say) is reported
        and the next change is waited for (requests made meanwhile wait on the socket)."""
        self.spec = spec
        try:
            self._start(spec)
        except HarnessError as exc:
            self._log(f"{exc}; waiting for a change")

    def serve(self) -> None:
        spec, _ = self._stage()
        self._try_start(spec)
        seen = watched_files(spec, self.options.wheels_dirs)
        while True:
            time.sleep(self.options.poll_s)
            assert self.spec is not None
            now = watched_files(self.spec, self.options.wheels_dirs)
            if now == seen:
                continue
            time.sleep(self.options.poll_s)  # let an editor or a sync finish writing
            now = watched_files(self.spec, self.options.wheels_dirs)
            changed = sorted({p.name for p in set(now) ^ set(seen)}
                             | {p.name for p in now.keys() & seen.keys() if now[p] != seen[p]})
            seen = now
            try:
                spec, _ = self._stage()
            except (HarnessError, OSError, KeyError, TypeError, ValueError) as exc:
                self._log(f"not reloaded ({', '.join(changed)} changed): {exc}")
                continue
            self._log(f"{', '.join(changed)} changed: restarting workerd")
            if self.workerd is not None:
                self.workerd.stop()
                self.workerd = None
            # `seen` stays what was staged: a file saved during the restart is the next change.
            self._try_start(spec)

    def close(self) -> None:
        if self.workerd is not None:
            self.workerd.stop()
            self.workerd = None
        self.sock.close()


def _raise_exit(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)


def dev(options: DevOptions) -> int:
    server = DevServer(options)
    # SIGTERM unwinds like ^C does, through the finally that stops workerd; ^C is handled even
    # when the shell that started this in the background set it to be ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _raise_exit)
    signal.signal(signal.SIGHUP, _raise_exit)
    try:
        server.serve()
    except KeyboardInterrupt:
        return 130
    finally:
        server.close()
    return 0


# --- conformance ------------------------------------------------------------------------------

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
    expected = sorted(p.stem for p in (REPO_ROOT / "harness" / "conformance" / "scenarios").glob("*.json"))
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


def _var(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"not NAME=value: {text!r}")
    return key, value


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="workerd_harness.py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dev", help="serve a Worker directory in workerd, restarting on change")
    d.add_argument("directory", type=Path, help="the directory holding wrangler.jsonc")
    d.add_argument("--port", type=int, default=8787, help="on 127.0.0.1 (default 8787; 0: any)")
    d.add_argument("--var", type=_var, action="append", default=[], metavar="NAME=VALUE",
                   help="a text binding over wrangler.jsonc's vars and .dev.vars (repeatable)")
    d.add_argument("--persist", type=Path, metavar="DIR", help=f"Durable Object storage (default DIR/{DEV_STATE}/storage)")
    d.add_argument("--wheels", type=Path, action="append", metavar="DIR",
                   help="wheels to vendor into python_modules/ (repeatable; default harness/wasm/wheels-pyc)")
    d.add_argument("--snapshot", action="store_true",
                   help="start from a memory snapshot of these exact modules, writing one first")
    c = sub.add_parser("conformance", help="GET /conformance of the template into OUT_REPORT")
    c.add_argument("out", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "conformance":
            return conformance(args.out)
        return dev(DevOptions(directory=args.directory, port=args.port, variables=dict(args.var),
                              persist=args.persist, wheels_dirs=tuple(args.wheels or (WHEELS_DIR,)),
                              snapshot=args.snapshot))
    except HarnessError as exc:
        print(f"[workerd {args.command}] {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
