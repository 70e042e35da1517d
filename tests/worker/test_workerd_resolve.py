"""The template deploys: its dependencies resolve offline from the repository's own wheel (D7),
and pywrangler would vendor wheels for the Python the runtime runs.

``make test-worker`` installs uv (PyPI), builds the wheel into ``dist/`` (``make worker-wheel``)
and downloads two workers-py releases into ``worker/.cache/pywrangler`` (their flag tables only
are read). pywrangler resolves with ``uv pip compile pyproject.toml``; so does this test, with no
package index at all: ``--no-index`` and the wheels the workerd tests vendor as ``--find-links``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
import zipfile
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WORKER = REPO / "worker"
UV = Path(sys.executable).with_name("uv")


def _wrangler() -> dict:  # type: ignore[type-arg]
    text = (WORKER / "wrangler.jsonc").read_text()
    return json.loads(re.sub(r"^\s*//.*$", "", text, flags=re.M))


def test_the_template_s_dependencies_resolve_offline_from_the_repository_s_wheel() -> None:
    meta = tomllib.loads((WORKER / "pyproject.toml").read_text())
    source = meta["tool"]["uv"]["sources"]["bindloop"]
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert source["path"] == f"../dist/bindloop-{version}-py3-none-any.whl"
    assert (WORKER / source["path"]).is_file(), "run `make worker-wheel`"
    out = subprocess.run(
        [str(UV), "pip", "compile", "pyproject.toml", "--no-index", "--offline", "--no-cache",
         "--find-links", str(REPO / "harness" / "wasm" / "wheels"), "--python-version", "3.14", "--universal",
         "--no-build", "--no-header", "--quiet"],
        cwd=WORKER, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    pins = {line.split(";")[0].strip() for line in out.stdout.splitlines()
            if line.strip() and not line.lstrip().startswith("#")}
    assert source["path"] in pins  # bindloop from the path source, not an index
    vendored = {w.name.split("-")[0].lower().replace("_", "-") + "==" + w.name.split("-")[1]
                for w in (REPO / "harness" / "wasm" / "wheels").glob("*.whl") if not w.name.startswith("bindloop-")}
    assert pins - {source["path"]} == vendored  # exactly what the workerd tests vendor


def test_a_dependency_on_bindloop_by_name_alone_does_not_resolve_offline(tmp_path: Path) -> None:
    """What D7 was: the same compile without the path source finds no bindloop to vendor."""
    meta = (WORKER / "pyproject.toml").read_text()
    bare = meta.split("\n[tool.uv.sources]")[0]
    assert "dependencies = [\"bindloop\"]" in bare
    (tmp_path / "pyproject.toml").write_text(bare)
    out = subprocess.run(
        [str(UV), "pip", "compile", "pyproject.toml", "--no-index", "--offline", "--no-cache",
         "--python-version", "3.14", "--universal", "--no-build", "--quiet"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode != 0 and "bindloop" in out.stderr


def _flag_table(wheel: Path) -> list[tuple[str, str, datetime | None]]:
    """pywrangler's own table of (Python version, compatibility flag, date the flag defaults on)."""
    with zipfile.ZipFile(wheel) as zf:
        source = zf.read("pywrangler/metadata.py").decode()
    namespace: dict[str, object] = {}
    exec(compile(source, f"{wheel.name}/pywrangler/metadata.py", "exec"), namespace)  # noqa: S102
    return [(v.version, v.compat_flag, v.compat_date)  # type: ignore[attr-defined]
            for v in namespace["PYTHON_COMPAT_VERSIONS"]]  # type: ignore[attr-defined]


def _picked(table: list[tuple[str, str, datetime | None]], flags: list[str], date: str) -> str:
    # pywrangler's rule (utils.get_python_version): the newest version whose flag is set or whose
    # date the compatibility date reaches.
    when = datetime.strptime(date, "%Y-%m-%d")
    for version, flag, since in sorted(table, key=lambda row: row[0], reverse=True):
        if flag in flags or (since is not None and when >= since):
            return version
    raise AssertionError("no Python version picked")


def test_every_pywrangler_release_checked_vendors_for_python_3_14() -> None:
    cfg = _wrangler()
    wheels = sorted((WORKER / ".cache" / "pywrangler").glob("workers_py-*.whl"))
    assert len(wheels) == 2, wheels
    for wheel in wheels:
        table = _flag_table(wheel)
        assert _picked(table, cfg["compatibility_flags"], cfg["compatibility_date"]) == "3.14", wheel
        # Without the two flags the older release would vendor for another Python.
        bare = [f for f in cfg["compatibility_flags"] if f not in ("python_workers_20260610",
                                                                   "python_workers_314")]
        if wheel.name.startswith("workers_py-1.16."):
            assert _picked(table, bare, cfg["compatibility_date"]) != "3.14"
    assert cfg.get("$schema") is None or (WORKER / cfg["$schema"]).is_file()
