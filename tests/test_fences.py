"""The fences (docs/architecture.md): the core does no I/O, reads no environment or wall clock
outside clock.py, starts no threads, holds no module-level mutable state, and depends on msgspec
and anyio only."""

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
EXTRA_ALLOWED = {"testing/strategies.py": {"hypothesis"},
                 # the store conformance kit is a pytest suite (a store author runs it with pytest)
                 "testing/store_kit.py": {"pytest"}}
# The one module that makes log records (a failed tool call's WARNING): it may get a logger and
# emit; configuring logging (handlers, levels, filters, basicConfig) stays the host's everywhere.
LOGGING_MODULE = "agent/_log.py"
LOGGING_ALLOWED = {"logging.getLogger", "logging.WARNING", "logging.Logger"}
# Called on anything (a logger, a handler, the module); the module's other functions
# (logging.disable, logging.config.listen, ...) are caught as uses outside LOGGING_ALLOWED.
LOGGING_CONFIG_METHODS = {
    "basicConfig", "addHandler", "removeHandler", "setLevel", "addFilter", "removeFilter",
    "setFormatter", "dictConfig", "fileConfig", "captureWarnings", "setLoggerClass",
    "setLogRecordFactory", "addLevelName",
}
LOGGING_CONFIG_ATTRS = {"propagate", "disabled", "handlers", "level", "filters"}
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
        if name == "logging" and _rel(path) == LOGGING_MODULE:
            continue  # what it may do with it: test_logging_is_emitted_never_configured
        assert name not in FORBIDDEN_MODULES and top not in FORBIDDEN_MODULES, (
            f"{_rel(path)} imports {name}: I/O, threads and randomness belong to hosts")
        if top == "bindloop":
            assert not name.startswith("bindloop.hosts"), f"{_rel(path)} imports a host binding"
            continue
        assert top in STDLIB or top in ALLOWED_THIRD_PARTY or top in extra or top == "__future__", (
            f"{_rel(path)} imports {name}: runtime dependencies are msgspec and anyio only")


FORBIDDEN_DOTTED = {
    "os.environ", "os.getenv", "os.putenv", "os.system", "os.popen", "os.listdir", "os.remove",
    "os.path", "os.getcwd", "os.scandir", "os.walk", "sys.stdout", "sys.stderr", "sys.stdin",
    "sys.exit", "sys.argv", "time.time", "time.monotonic", "time.perf_counter", "time.sleep",
    "time.time_ns", "time.monotonic_ns", "time.perf_counter_ns", "time.process_time",
    "datetime.datetime.now", "datetime.datetime.utcnow", "datetime.datetime.today",
    "datetime.date.today", "anyio.run", "anyio.to_thread", "anyio.from_thread", "anyio.to_process",
    "anyio.open_file", "anyio.Path", "anyio.open_process", "anyio.run_process", "anyio.connect_tcp",
    "anyio.connect_unix", "anyio.create_tcp_listener", "asyncio.run", "asyncio.to_thread",
    "asyncio.open_connection", "asyncio.create_subprocess_exec", "asyncio.create_subprocess_shell",
}
CLOCK_ALLOWED = {d for d in FORBIDDEN_DOTTED if d.startswith("time.")}


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> the dotted thing it stands for (``import time as t`` -> ``t: time``)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    out[top] = top
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in aliases:
        return None
    return ".".join([aliases[node.id], *reversed(parts)])


def _violations(source: str, rel: str) -> list[str]:
    tree = ast.parse(source)
    aliases = _aliases(tree)
    allowed = CLOCK_ALLOWED if rel == CLOCK_MODULE else set()
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in FORBIDDEN_CALLS and node.func.id not in aliases:
            found.append(f"{rel}:{node.lineno} calls {node.func.id}()")
        if isinstance(node, (ast.Attribute, ast.Name)):
            dotted = _dotted(node, aliases)
            if dotted is None:
                continue
            for bad in FORBIDDEN_DOTTED - allowed:
                if dotted == bad or dotted.startswith(bad + "."):
                    found.append(f"{rel}:{node.lineno} uses {dotted}")
    return sorted(set(found))


@pytest.mark.parametrize("path", CORE, ids=_rel)
def test_no_io_environment_threads_or_wall_clock(path: Path) -> None:
    assert _violations(path.read_text(), _rel(path)) == []


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.environ['A']",
        "import os\nos.getenv('A')",
        "import time as t\nt.time()",
        "from time import monotonic\nmonotonic()",
        "import datetime\ndatetime.datetime.now()",
        "from datetime import datetime\ndatetime.now()",
        "import anyio\nanyio.to_thread.run_sync(f)",
        "from anyio import to_thread\nto_thread.run_sync(f)",
        "open('f')",
        "print('x')",
        "import sys\nsys.stdout.write('x')",
    ],
)
def test_fence_scanner_catches_violations(source: str) -> None:
    """The scanner above must be able to fail, including through aliases and dotted chains."""
    assert _violations(source, "sample.py"), source


def test_fence_scanner_allows_harmless_uses() -> None:
    ok = "from datetime import datetime, timezone\nx = datetime(2020, 1, 1, tzinfo=timezone.utc)\n"
    assert _violations(ok, "sample.py") == []
    assert _violations("import time\ntime.monotonic()", CLOCK_MODULE) == []


def _logging_violations(source: str, rel: str) -> list[str]:
    """Configuring logging anywhere in the core: a configuration method called on anything (a
    logger, a handler, the module), a logger's configuration attribute assigned, or — in the
    logging module — a use of ``logging`` other than getting a logger and naming its level."""
    tree = ast.parse(source)
    aliases = _aliases(tree)
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in LOGGING_CONFIG_METHODS:
            found.append(f"{rel}:{node.lineno} calls .{node.func.attr}()")
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [f"{rel}:{node.lineno} sets .{t.attr}" for t in targets
                      if isinstance(t, ast.Attribute) and t.attr in LOGGING_CONFIG_ATTRS]
        if isinstance(node, (ast.Attribute, ast.Name)):
            dotted = _dotted(node, aliases)
            if dotted is not None and dotted.split(".")[0] == "logging" and dotted != "logging" \
                    and not any(dotted == ok or dotted.startswith(ok + ".")
                                for ok in LOGGING_ALLOWED):
                found.append(f"{rel}:{node.lineno} uses {dotted}")
    return sorted(set(found))


@pytest.mark.parametrize("path", CORE, ids=_rel)
def test_logging_is_emitted_never_configured(path: Path) -> None:
    assert _logging_violations(path.read_text(), _rel(path)) == []


@pytest.mark.parametrize(
    "source",
    [
        "import logging\nlogging.basicConfig(level=logging.INFO)",
        "import logging\nlogging.getLogger('bindloop').addHandler(h)",
        "import logging\nlogging.getLogger('bindloop').setLevel(10)",
        "import logging\nlog = logging.getLogger('x')\nlog.setLevel(10)",
        "import logging\nlogging.getLogger('x').propagate = False",
        "import logging\nlogging.StreamHandler()",
        "import logging.config\nlogging.config.dictConfig({})",
        "from logging import basicConfig\nbasicConfig()",
        "import logging as lg\nlg.root.handlers",
        "import logging\nlogging.disable(logging.CRITICAL)",
        "from logging.config import listen\nlisten(9030)",
    ],
)
def test_logging_fence_catches_configuration(source: str) -> None:
    assert _logging_violations(source, LOGGING_MODULE), source


def test_logging_fence_allows_getting_a_logger_and_emitting() -> None:
    ok = ("import logging\nlog = logging.getLogger('bindloop.agent.tools')\n"
          "if log.isEnabledFor(logging.WARNING):\n    log.warning('x %s', 1, exc_info=e)\n")
    assert _logging_violations(ok, LOGGING_MODULE) == []
    assert (SRC / LOGGING_MODULE).exists()
    # and only that module may import logging at all
    other = [p for p in CORE if _rel(p) != LOGGING_MODULE
             and "logging" in [n.split(".")[0] for n in _imports(ast.parse(p.read_text()))]]
    assert other == []


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


def test_mutable_value_detector_can_fail() -> None:
    bad = ast.parse("X = []\nY = dict()\nZ = {1: 2}\n")
    assert all(_is_mutable_value(n.value) for n in bad.body if isinstance(n, ast.Assign))


def _core_modules() -> list[str]:
    import pkgutil

    import bindloop

    return [info.name for info in pkgutil.walk_packages(bindloop.__path__, "bindloop.")
            if ".hosts" not in info.name and not info.name.endswith(".strategies")]


def _mutable_runtime_value(value: object) -> bool:
    import collections
    import enum
    import re
    import types
    import typing

    import msgspec

    if isinstance(value, msgspec.Struct):
        return not value.__struct_config__.frozen
    safe = (str, bytes, int, float, bool, type(None), tuple, frozenset, types.MappingProxyType,
            re.Pattern, msgspec.json.Encoder, msgspec.json.Decoder, typing.TypeVar,
            types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, enum.Enum)
    if isinstance(value, safe) or type(value) is object:  # bare sentinels hold no state
        return False
    if type(value).__module__ in ("typing", "types", "typing_extensions", "collections.abc",
                                  "__future__"):
        return False
    return isinstance(value, (list, dict, set, bytearray, collections.deque)) or hasattr(
        value, "__dict__")


@pytest.mark.parametrize("module_name", _core_modules())
def test_no_mutable_module_or_class_state_at_runtime(module_name: str) -> None:
    """Imports the module and inspects what it actually holds: module globals and class
    attributes must be immutable (frozen Structs, tuples, frozensets, read-only mappings...)."""
    import importlib

    module = importlib.import_module(module_name)
    for name, value in vars(module).items():
        if name.startswith("__"):
            continue
        assert not _mutable_runtime_value(value), f"{module_name}.{name} is mutable module state"
        if isinstance(value, type) and value.__module__ == module_name:
            for attr, member in vars(value).items():
                # NamedTuple / Enum bookkeeping is the language's, not ours.
                if attr.startswith("__") or attr in _LANGUAGE_MACHINERY:
                    continue
                assert not isinstance(member, (list, dict, set, bytearray)), (
                    f"{module_name}.{name}.{attr} is mutable class-level state")


# _unhashable_values_map_: Enum bookkeeping added in CPython 3.13 (found by make test-matrix).
_LANGUAGE_MACHINERY = frozenset({"_field_defaults", "_fields", "_member_names_", "_member_map_",
                                 "_value2member_map_", "_unhashable_values_", "_member_type_",
                                 "_unhashable_values_map_"})


def test_runtime_state_detector_can_fail() -> None:
    class Holder:
        pass

    assert _mutable_runtime_value([]) and _mutable_runtime_value({}) and _mutable_runtime_value(Holder())
    assert not _mutable_runtime_value((1, 2)) and not _mutable_runtime_value(frozenset())


def test_runtime_dependencies_are_exactly_msgspec_and_anyio() -> None:
    import tomllib

    pyproject = tomllib.loads((SRC.parents[1] / "pyproject.toml").read_text())
    deps = {d.split(">")[0].split("=")[0].split("<")[0].strip() for d in pyproject["project"]["dependencies"]}
    assert deps == {"msgspec", "anyio"}
