"""DESIGN.md §3: the core does no I/O, reads no environment or wall clock outside clock.py, starts no
threads, holds no module-level mutable state, and depends on msgspec and anyio only."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "bindloop"
CORE = sorted(p for p in SRC.rglob("*.py") if "hosts" not in p.relative_to(SRC).parts)
STDLIB = set(sys.stdlib_module_names)
ALLOWED_THIRD_PARTY = {"msgspec", "anyio"}
# testing/strategies.py is the one module allowed to import hypothesis (it is never imported by
# the kit itself; a user who wants strategies has hypothesis installed).
EXTRA_ALLOWED = {"testing/strategies.py": {"hypothesis"}}
FORBIDDEN_MODULES = {
    "socket", "subprocess", "threading", "multiprocessing", "asyncio.subprocess", "urllib",
    "http", "ssl", "select", "selectors", "shutil", "tempfile", "pathlib", "glob", "io",
    "logging", "random", "uuid", "secrets", "concurrent", "signal", "sqlite3", "pickle", "ctypes",
}
FORBIDDEN_CALLS = {"open", "print", "input", "exec", "eval", "breakpoint", "__import__"}
FORBIDDEN_ATTRS = {
    ("os", "environ"), ("os", "getenv"), ("os", "putenv"), ("os", "system"), ("os", "popen"),
    ("os", "listdir"), ("os", "remove"), ("os", "path"), ("os", "getcwd"), ("sys", "stdout"),
    ("sys", "stderr"), ("sys", "stdin"), ("sys", "exit"), ("sys", "argv"),
    ("time", "time"), ("time", "monotonic"), ("time", "perf_counter"), ("time", "sleep"),
    ("time", "time_ns"), ("time", "monotonic_ns"), ("datetime", "now"), ("datetime", "utcnow"),
    ("date", "today"), ("anyio", "run"),
}
CLOCK_MODULE = "clock.py"
MUTABLE_FACTORIES = {"list", "dict", "set", "defaultdict", "deque", "OrderedDict", "Counter",
                     "bytearray"}


def _rel(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def _imports(tree: ast.AST) -> list[str]:
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append(node.module)
    return out


@pytest.mark.parametrize("path", CORE, ids=_rel)
def test_imports_stay_inside_the_fence(path: Path) -> None:
    tree = ast.parse(path.read_text())
    extra = EXTRA_ALLOWED.get(_rel(path), set())
    for name in _imports(tree):
        top = name.split(".")[0]
        assert name not in FORBIDDEN_MODULES and top not in FORBIDDEN_MODULES, (
            f"{_rel(path)} imports {name}: I/O, threads and randomness belong to hosts")
        if top == "bindloop":
            assert not name.startswith("bindloop.hosts"), f"{_rel(path)} imports a host binding"
            continue
        assert top in STDLIB or top in ALLOWED_THIRD_PARTY or top in extra or top == "__future__", (
            f"{_rel(path)} imports {name}: runtime dependencies are msgspec and anyio only")


@pytest.mark.parametrize("path", CORE, ids=_rel)
def test_no_io_environment_or_wall_clock(path: Path) -> None:
    tree = ast.parse(path.read_text())
    rel = _rel(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in FORBIDDEN_CALLS, f"{rel}:{node.lineno} calls {node.func.id}()"
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            pair = (node.value.id, node.attr)
            if pair[0] == "time" and rel == CLOCK_MODULE:
                continue
            assert pair not in FORBIDDEN_ATTRS, f"{rel}:{node.lineno} uses {pair[0]}.{pair[1]}"
        if isinstance(node, ast.ImportFrom) and node.module in ("os", "time", "sys", "datetime"):
            for alias in node.names:
                pair = (node.module, alias.name)
                if node.module == "time" and rel == CLOCK_MODULE:
                    continue
                # Importing the datetime class is fine (parsing HTTP dates); reading the wall clock
                # through it (datetime.now / utcnow) is caught by the attribute check above.
                assert pair not in FORBIDDEN_ATTRS, (
                    f"{rel}:{node.lineno} imports {alias.name} from {node.module}")


def _is_mutable_value(node: ast.expr) -> bool:
    if isinstance(node, (ast.List, ast.Dict, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)):
        return True
    if isinstance(node, ast.Call):
        fn = node.func
        name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else ""
        return name in MUTABLE_FACTORIES
    return False


@pytest.mark.parametrize("path", CORE, ids=_rel)
def test_no_module_level_mutable_state(path: Path) -> None:
    tree = ast.parse(path.read_text())
    rel = _rel(path)
    for node in tree.body:
        targets: list[ast.expr] = []
        value: ast.expr | None = None
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        if value is None:
            continue
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if names == ["__all__"]:
            assert isinstance(value, ast.Tuple), f"{rel}: __all__ must be a tuple"
            continue
        assert not _is_mutable_value(value), (
            f"{rel}:{node.lineno} binds {names} to a mutable value at module level")
        if isinstance(node, ast.stmt):
            for sub in ast.walk(node):
                if isinstance(sub, ast.Global):  # pragma: no cover - caught below anyway
                    raise AssertionError(f"{rel}: global statement")
    for node in ast.walk(tree):
        assert not isinstance(node, ast.Global), f"{rel}:{node.lineno} uses `global`"


def test_fence_scanner_catches_violations(tmp_path: Path) -> None:
    """The scanners above must be able to fail."""
    bad = ast.parse("import os\nX = []\nos.environ['A']\nopen('f')\n")
    assert any(_is_mutable_value(n.value) for n in bad.body if isinstance(n, ast.Assign))
    attrs = [(n.value.id, n.attr) for n in ast.walk(bad)
             if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)]
    assert ("os", "environ") in attrs and ("os", "environ") in FORBIDDEN_ATTRS
    calls = [n.func.id for n in ast.walk(bad) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)]
    assert "open" in calls and "open" in FORBIDDEN_CALLS


def test_runtime_dependencies_are_exactly_msgspec_and_anyio() -> None:
    import tomllib

    pyproject = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())
    deps = {d.split(">")[0].split("=")[0].split("<")[0].strip() for d in pyproject["project"]["dependencies"]}
    assert deps == {"msgspec", "anyio"}
