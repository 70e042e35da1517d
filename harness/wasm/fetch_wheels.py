"""Fill ``harness/wasm/wheels/`` with every wheel bindloop needs under Pyodide 314.

Run with the project venv's interpreter (``.venv/bin/python harness/wasm/fetch_wheels.py``).

What it does
------------
1. Builds the bindloop wheel from the repository (always; any older bindloop
   wheel in ``harness/wasm/wheels/`` is replaced).
2. Reads that wheel's ``Requires-Dist`` (``msgspec``, ``anyio``) and resolves the
   runtime closure for Pyodide: markers are evaluated for CPython 3.14 on
   Emscripten/wasm32, each distribution is pinned to the version installed in
   this venv when it is installed there (so CPython and Pyodide run the same
   code), and the dependencies of every downloaded wheel are followed the same
   way (read from the wheel's own METADATA).
3. Downloads each wheel from PyPI with ``pip download --no-deps
   --only-binary=:all: --platform pyemscripten_2026_0_wasm32 --python-version
   3.14 --implementation cp`` -- which yields the wasm wheel for compiled
   projects (msgspec) and the ``py3-none-any`` wheel for pure ones.  A wheel
   already present is not downloaded again; wheels of other versions, or of
   distributions no longer needed, are removed.

Nothing here uses the Pyodide CDN: the Node runner installs exactly the files in
``harness/wasm/wheels/`` and nothing else.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

PLATFORM = "pyemscripten_2026_0_wasm32"
PYTHON_VERSION = "3.14"
IMPLEMENTATION = "cp"

WASM_DIR = Path(__file__).resolve().parent
REPO_ROOT = WASM_DIR.parent.parent
WHEELS_DIR = WASM_DIR / "wheels"

# PEP 508 marker environment of Pyodide 314 (CPython 3.14 on Emscripten).
PYODIDE_ENV = dict(default_environment())
PYODIDE_ENV.update(
    {
        "implementation_name": "cpython",
        "implementation_version": "3.14.2",
        "os_name": "posix",
        "platform_machine": "wasm32",
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": "Emscripten",
        "platform_version": "",
        "python_full_version": "3.14.2",
        "python_version": PYTHON_VERSION,
        "sys_platform": "emscripten",
        "extra": "",
    }
)


def log(msg: str) -> None:
    print(f"[fetch_wheels] {msg}", flush=True)


def wheel_metadata(path: Path) -> list[Requirement]:
    """Runtime requirements (no extras) of a wheel that apply on Pyodide."""
    with zipfile.ZipFile(path) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        msg = Parser().parsestr(zf.read(name).decode("utf-8"))
    reqs = []
    for line in msg.get_all("Requires-Dist") or []:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate(PYODIDE_ENV):
            reqs.append(req)
    return reqs


def existing_wheels() -> dict[str, list[Path]]:
    found: dict[str, list[Path]] = {}
    for p in sorted(WHEELS_DIR.glob("*.whl")):
        name, _version, _build, _tags = parse_wheel_filename(p.name)
        found.setdefault(name, []).append(p)
    return found


def build_bindloop() -> Path:
    for old in WHEELS_DIR.glob("bindloop-*.whl"):
        old.unlink()
    with tempfile.TemporaryDirectory(prefix="bindloop-wheel-") as tmp:
        cmd = [sys.executable, "-m", "build", "--wheel", "--outdir", tmp]
        if importlib.util.find_spec("hatchling") is not None:
            # The backend is already in the venv: no isolated env, no download.
            cmd.append("--no-isolation")
        cmd.append(str(REPO_ROOT))
        log("building bindloop: " + " ".join(cmd))
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        (built,) = Path(tmp).glob("bindloop-*.whl")
        dest = WHEELS_DIR / built.name
        shutil.move(str(built), dest)
    return dest


def pin(req: Requirement) -> str:
    """``name==<venv version>`` when the venv has a matching install, else the requirement."""
    try:
        installed = importlib.metadata.version(req.name)
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed is not None and req.specifier.contains(Version(installed), prereleases=True):
        return f"{canonicalize_name(req.name)}=={installed}"
    return f"{canonicalize_name(req.name)}{req.specifier}"


def already_have(req_str: str, have: dict[str, list[Path]]) -> Path | None:
    req = Requirement(req_str)
    for p in have.get(canonicalize_name(req.name), []):
        _n, version, _b, tags = parse_wheel_filename(p.name)
        usable = any(t.platform in ("any", PLATFORM) for t in tags)
        if usable and req.specifier.contains(version, prereleases=True):
            return p
    return None


def download(req_str: str) -> Path:
    with tempfile.TemporaryDirectory(prefix="bindloop-dl-") as tmp:
        cmd = [
            sys.executable, "-m", "pip", "download",
            "--no-deps", "--only-binary=:all:",
            "--platform", PLATFORM,
            "--python-version", PYTHON_VERSION,
            "--implementation", IMPLEMENTATION,
            "--dest", tmp,
            "--quiet",
            req_str,
        ]
        log("downloading: " + " ".join(cmd[3:]))
        subprocess.run(cmd, check=True)
        (got,) = Path(tmp).glob("*.whl")
        dest = WHEELS_DIR / got.name
        shutil.move(str(got), dest)
    return dest


def main() -> int:
    WHEELS_DIR.mkdir(parents=True, exist_ok=True)
    bindloop_whl = build_bindloop()
    log(f"built    {bindloop_whl.name}")

    wanted: dict[str, Path] = {"bindloop": bindloop_whl}
    queue = list(wheel_metadata(bindloop_whl))
    while queue:
        req = queue.pop(0)
        name = canonicalize_name(req.name)
        if name in wanted:
            continue
        req_str = pin(req)
        have = existing_wheels()
        path = already_have(req_str, have)
        if path is not None:
            log(f"present  {path.name}")
        else:
            path = download(req_str)
            log(f"fetched  {path.name}")
        wanted[name] = path
        queue.extend(wheel_metadata(path))

    keep = {p.name for p in wanted.values()}
    for p in WHEELS_DIR.glob("*.whl"):
        if p.name not in keep:
            log(f"removed  stale {p.name}")
            p.unlink()

    log(f"{len(wanted)} wheels in {WHEELS_DIR.relative_to(REPO_ROOT)}/:")
    for p in sorted(wanted.values()):
        log(f"  {p.name}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as exc:
        log(f"error: command failed with exit status {exc.returncode}: {' '.join(map(str, exc.cmd))}")
        sys.exit(1)
