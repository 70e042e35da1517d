"""``worker/tools/workerd_harness.py`` reads a Worker directory's ``wrangler.jsonc`` and stages it
for workerd (plain pytest, no workerd): what ``dev``, ``conformance`` and the workerd tests serve."""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

import pytest

WORKER = Path(__file__).resolve().parents[2] / "worker"
sys.path.insert(0, str(WORKER / "tools"))
import workerd_harness as harness  # noqa: E402
from workerd_harness import HarnessError, parse_jsonc, read_worker, stage_worker  # noqa: E402

ENTRY = "from workers import WorkerEntrypoint\n"


def _wheel(directory: Path, dist: str, files: dict[str, str]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{dist}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
        zf.writestr(f"{dist}-1.0.dist-info/METADATA", f"Name: {dist}\n")
    return path


def _worker(root: Path, config: str, *, files: dict[str, str] | None = None,
            pyproject: str | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "wrangler.jsonc").write_text(config)
    for name, text in (files or {"src/entry.py": ENTRY}).items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    if pyproject is not None:
        (root / "pyproject.toml").write_text(pyproject)
    return root


BASIC = """{
  // a comment, with "quotes" and a trailing comma after it,
  "name": "demo", /* block
  comment */ "main": "src/entry.py",
  "compatibility_date": "2026-11-01",
  "compatibility_flags": ["python_workers", "python_workers_314", "disable_python_external_sdk",],
  "vars": {"URL": "http://x//y, ]", "LIMIT": 3, "OPTS": {"a": [1, 2,],},},
  "durable_objects": {"bindings": [{"name": "SESSION", "class_name": "Session"},
                                   {"name": "CACHE", "class_name": "Cache"}]},
  "migrations": [{"tag": "v1", "new_sqlite_classes": ["Sessions"]},
                 {"tag": "v2", "renamed_classes": [{"from": "Sessions", "to": "Session"}]},
                 {"tag": "v3", "new_classes": ["Cache", "Gone"]},
                 {"tag": "v4", "deleted_classes": ["Gone"]}],
}
"""


def test_jsonc_comments_and_trailing_commas_outside_strings() -> None:
    assert parse_jsonc('{"a": "x // not a comment /* nor this */", // gone\n "b": [1, 2,],}') == {
        "a": "x // not a comment /* nor this */", "b": [1, 2]}
    assert parse_jsonc('{"a": "q\\"/*", "b": ",]"}') == {"a": 'q"/*', "b": ",]"}
    with pytest.raises(HarnessError, match="unterminated"):
        parse_jsonc('{"a": 1 /* open')


def test_read_worker_follows_the_migrations(tmp_path: Path) -> None:
    spec = read_worker(_worker(tmp_path / "w", BASIC))
    assert (spec.name, spec.compatibility_date) == ("demo", "2026-11-01")
    assert spec.main == (tmp_path / "w" / "src" / "entry.py").resolve()
    assert spec.vars == {"URL": "http://x//y, ]", "LIMIT": 3, "OPTS": {"a": [1, 2]}}
    # A renamed class keeps the storage it was created with (as a rename does on Cloudflare);
    # new_classes is key-value storage, new_sqlite_classes SQLite.
    assert [(o.binding, o.class_name, o.sql, o.storage_key) for o in spec.durable_objects] == [
        ("SESSION", "Session", True, "demo-Sessions"), ("CACHE", "Cache", False, "demo-Cache")]


@pytest.mark.parametrize(("change", "message"), [
    ({"kv_namespaces": [{"binding": "KV", "id": "x"}]}, "kv_namespaces not served"),
    ({"main": "src/entry.js"}, "Python entry module"),
    ({"main": "src/missing.py"}, "does not exist"),
    ({"compatibility_date": "2026-11"}, "YYYY-MM-DD"),
    ({"compatibility_flags": ["nodejs_compat"]}, "python_workers"),
    ({"durable_objects": {"bindings": [{"name": "X", "class_name": "Nope"}]}},
     "no migration declares Nope"),
    ({"durable_objects": {"bindings": [{"name": "X", "class_name": "Session",
                                        "script_name": "other"}]}}, "another Worker"),
    ({"migrations": [{"tag": "v1", "transferred_classes": []}]}, "transferred_classes is not served"),
    ({"migrations": [{"tag": "v1", "new_sqlite_classes": ["Session"]},
                     {"tag": "v2", "deleted_classes": ["Session"]}]}, "no migration declares Session"),
])
def test_read_worker_refuses_what_it_cannot_serve(tmp_path: Path, change: dict[str, object],
                                                  message: str) -> None:
    cfg = {"name": "w", "main": "src/entry.py", "compatibility_date": "2026-11-01",
           "compatibility_flags": ["python_workers"],
           "durable_objects": {"bindings": [{"name": "SESSION", "class_name": "Session"}]},
           "migrations": [{"tag": "v1", "new_sqlite_classes": ["Session"]}], **change}
    with pytest.raises(HarnessError, match=message):
        read_worker(_worker(tmp_path / "w", json.dumps(cfg)))


def test_read_worker_needs_a_wrangler_json_config(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="no wrangler.jsonc"):
        read_worker(tmp_path)
    (tmp_path / "wrangler.toml").write_text("")
    with pytest.raises(HarnessError, match="only wrangler.jsonc"):
        read_worker(tmp_path)


def test_the_staged_flags_keep_what_production_implies() -> None:
    """python_dedicated_snapshot: implied in production by python_workers_20250116 from
    2025-10-16, itself implied by python_workers from 2025-09-29 -- which the dev flags switch
    off, so the harness names it."""
    implied = harness.production_implied_flags
    assert implied("2026-11-01", ["python_workers"]) == ("python_dedicated_snapshot",)
    assert implied("2025-10-16", ["python_workers"]) == ("python_dedicated_snapshot",)
    assert implied("2025-10-15", ["python_workers"]) == ()
    assert implied("2025-09-01", ["python_workers", "python_workers_20250116"]) == ()
    assert implied("2025-10-20", ["python_workers", "no_python_workers_20250116"]) == ()
    assert implied("2025-10-20", ["python_workers", "disable_python_dedicated_snapshot"]) == ()
    assert implied("2024-01-01", ["python_workers", "python_dedicated_snapshot"]) == ()
    assert implied("2024-01-01", ["python_workers", "python_workers_20250116"]) == ()
    assert implied("2025-11-01", ["python_workers", "python_workers_20250116"]) == (
        "python_dedicated_snapshot",)


def test_dev_flags_replace_the_released_pyodide_flags() -> None:
    assert harness.dev_compatibility_flags(
        ["python_workers", "python_workers_20260610", "python_workers_314", "nodejs_compat"]) == (
        "python_workers", "nodejs_compat", "python_workers_development",
        "no_python_workers_20250116", "no_python_workers_20260610", "no_python_workers_314")
    template = read_worker(WORKER)
    assert harness.COMPATIBILITY_FLAGS == harness.dev_compatibility_flags(template.compatibility_flags)
    assert harness.COMPATIBILITY_DATE == template.compatibility_date


def test_dev_vars(tmp_path: Path) -> None:
    path = tmp_path / ".dev.vars"
    assert harness.read_dev_vars(path) == {}
    path.write_text('# secrets\nA=1\n B = "two = 2" \nC=\'3\'\n\nD=\n')
    assert harness.read_dev_vars(path) == {"A": "1", "B": "two = 2", "C": "3", "D": ""}
    path.write_text("no equals sign\n")
    with pytest.raises(HarnessError, match="NAME=value"):
        harness.read_dev_vars(path)


def test_stage_worker_writes_modules_vendored_packages_and_bindings(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    _wheel(wheels, "bindloop", {"bindloop/__init__.py": "", "bindloop/data.json": "{}"})
    root = _worker(tmp_path / "w", BASIC, files={
        "src/entry.py": ENTRY, "src/tools/calc.py": "X = 1\n", "src/a.py": "",
        "src/__pycache__/a.cpython-311.pyc": "", "src/.hidden/b.py": "", "src/notes.txt": "",
        "python_modules/extra/__init__.py": "", "python_modules/extra-1.0.dist-info/METADATA": ""},
        pyproject='[project]\nname = "w"\ndependencies = ["bindloop", "Extra>=1"]\n')
    config = stage_worker(read_worker(root), tmp_path / "stage", storage_dir=tmp_path / "do",
                          bindings={"LIMIT": "4", "SECRET": "s"}, wheels_dirs=(wheels,),
                          vendored_trees={"suite": root / "src" / "tools"})
    text = config.read_text()
    modules = [line.split('"')[1] for line in text.splitlines() if "= embed" in line]
    assert modules == ["entry.py", "a.py", "tools/calc.py", "python_modules/bindloop/__init__.py",
                       "python_modules/bindloop/data.json", "python_modules/extra/__init__.py",
                       "python_modules/suite/calc.py"]
    assert 'python_modules/bindloop/data.json", data = embed' in text
    assert (tmp_path / "stage" / "tools" / "calc.py").read_text() == "X = 1\n"
    assert '(name = "LIMIT", text = "4")' in text  # a binding over the var
    assert '(name = "OPTS", json = "{\\"a\\": [1, 2]}")' in text
    assert '(name = "SECRET", text = "s")' in text
    assert '(name = "SESSION", durableObjectNamespace = "Session")' in text
    assert '(className = "Session", uniqueKey = "demo-Sessions", enableSql = true)' in text
    assert '(className = "Cache", uniqueKey = "demo-Cache")' in text
    assert 'compatibilityDate = "2026-11-01"' in text
    flags = ", ".join(json.dumps(f) for f in (*harness.dev_compatibility_flags(
        ["python_workers", "python_workers_314", "disable_python_external_sdk"]),
        "python_dedicated_snapshot"))
    assert f"compatibilityFlags = [{flags}]" in text
    assert str((tmp_path / "do").resolve()) in text


def test_stage_worker_refuses_a_dependency_nothing_provides(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    _wheel(wheels, "bindloop", {"bindloop/__init__.py": ""})
    root = _worker(tmp_path / "w", BASIC,
                   pyproject='[project]\nname = "w"\ndependencies = ["bindloop", "requests[socks]>=2"]\n')
    with pytest.raises(HarnessError, match="depends on requests"):
        stage_worker(read_worker(root), tmp_path / "stage", storage_dir=tmp_path / "do",
                     wheels_dirs=(wheels,))


def test_the_template_stages_as_its_wrangler_jsonc_declares(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    _wheel(wheels, "bindloop", {"bindloop/__init__.py": ""})
    config = harness.stage(tmp_path / "stage", bindings={"PROVIDER_MODEL": "m"},
                           storage_dir=tmp_path / "do", with_conformance=False, wheels_dir=wheels,
                           extra_objects={"RECEIPTS": "Receipts"}, racers=1)
    text = config.read_text()
    template = read_worker(WORKER)
    assert [line.split('"')[1] for line in text.splitlines() if "pythonModule" in line][0] == "entry.py"
    assert '(name = "PROVIDER_MODEL", text = "m")' in text
    assert f'(name = "MAX_ITERATIONS", text = "{template.vars["MAX_ITERATIONS"]}")' in text
    for obj in template.durable_objects:
        assert f'(name = "{obj.binding}", durableObjectNamespace = "{obj.class_name}")' in text
    assert '(className = "Receipts", uniqueKey = "bindloop-agent-Receipts", enableSql = true)' in text
    assert '(name = "KIT_RACER_0", service = "racer0")' in text and "const racer0" in text


def test_watched_files_see_a_change_under_main_s_directory(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    _wheel(wheels, "bindloop", {"bindloop/__init__.py": ""})
    root = _worker(tmp_path / "w", BASIC, files={"src/entry.py": ENTRY, "src/lib/x.py": ""})
    spec = read_worker(root)
    before = harness.watched_files(spec, (wheels,))
    assert {p.name for p in before} == {"wrangler.jsonc", "entry.py", "x.py",
                                        "bindloop-1.0-py3-none-any.whl"}
    (root / "src" / "lib" / "x.py").write_text("X = 2\n")
    (root / ".workerd-dev").mkdir()
    (root / ".workerd-dev" / "state.py").write_text("")  # dev's own state is not watched
    after = harness.watched_files(spec, (wheels,))
    assert after.keys() == before.keys() and after != before
    (root / ".dev.vars").write_text("A=1\n")
    assert (root / ".dev.vars") in harness.watched_files(spec, (wheels,))
