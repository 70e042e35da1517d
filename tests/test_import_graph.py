"""No import circle in src/bindloop: neither between modules at run time nor between packages once
the imports made only for type checkers and those inside function bodies (they run later, but they
are a dependency all the same) are counted too; and every package imports only the packages above
it in the map (``LAYERS``; ``errors`` imports nothing of bindloop)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "bindloop"


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        out[".".join(parts)] = (path, is_package)
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(modules: Mapping[str, tuple[Path, bool]], *, typing_too: bool,
             bodies: bool = False) -> dict[str, set[str]]:
    """Module-level imports of each module; with ``bodies``, also those inside functions and
    classes (a function-body import is a dependency that runs later: no circle at import time,
    but a circle between packages all the same)."""
    graph: dict[str, set[str]] = {}
    for name, (path, is_package) in modules.items():
        edges: set[str] = set()

        def visit(body: Iterable[ast.stmt], module: str = name, pkg: bool = is_package,
                  found: set[str] = edges) -> None:
            for node in body:
                if bodies and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                ast.ClassDef)):
                    visit(node.body)
                elif isinstance(node, (ast.With, ast.AsyncWith, ast.For, ast.AsyncFor,
                                       ast.While)) and bodies:
                    visit(node.body)
                elif isinstance(node, ast.If):
                    if typing_too or not _is_type_checking(node.test):
                        visit(node.body)
                    visit(node.orelse)
                elif isinstance(node, ast.Try):
                    visit(node.body)
                    if bodies:
                        for handler in node.handlers:
                            visit(handler.body)
                        visit(node.orelse)
                        visit(node.finalbody)
                elif isinstance(node, ast.Import):
                    found.update(a.name for a in node.names if a.name in modules)
                elif isinstance(node, ast.ImportFrom):
                    if node.level:
                        base = module.split(".") if pkg else module.split(".")[:-1]
                        base = base[:len(base) - node.level + 1]
                        target = ".".join(base + ([node.module] if node.module else []))
                    else:
                        target = node.module or ""
                    for alias in node.names:
                        sub = f"{target}.{alias.name}"
                        found.add(sub if sub in modules else target)

        visit(ast.parse(path.read_text()).body)
        graph[name] = {e for e in edges if e in modules and e != name}
    return graph


def _cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_no_module_import_circle_at_run_time() -> None:
    assert _cycles(_imports(_modules(), typing_too=False)) == []


def _package_graph() -> dict[str, set[str]]:
    """Package -> the packages it imports, counting type-checking and function-body imports."""
    graph = _imports(_modules(), typing_too=True, bodies=True)
    packages: dict[str, set[str]] = {}
    for module, targets in graph.items():
        packages.setdefault(_package(module), set()).update(
            _package(t) for t in targets if _package(t) != _package(module))
    return packages


def test_no_package_import_circle_counting_type_checking_and_function_body_imports() -> None:
    assert _cycles(_package_graph()) == []


# The map of src/bindloop/, lowest first: a package imports only those before it (drawn in
# docs/architecture.md, which the test below compares with this order). The root
# (``bindloop``, whose names load lazily) and the root-level ``bindloop._x`` helpers shared by
# every layer are outside the order.
LAYERS = (
    "errors", "clock", "signal",
    "contracts",
    "schema",
    "completion", "model", "textstream",
    "transcript", "compaction",
    "tools",
    "skills", "routing", "run",
    "loop", "lowlevel",
    "checkpoints",
    "stores",
    "wire",
    "mcp",
    "agent",
    "protocols",
    "testing",
    "hosts",
)


def _drawn_layers() -> tuple[str, ...]:
    """The layer order docs/architecture.md draws: the first column of its ``## Layers`` block."""
    doc = (Path(__file__).resolve().parents[1] / "docs" / "architecture.md").read_text()
    block = doc.split("## Layers", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    return tuple(name.strip() for line in block.splitlines() if line.strip()
                 for name in line.split("  ", 1)[0].split(","))


def test_the_architecture_page_draws_the_layers_in_this_order() -> None:
    assert _drawn_layers() == LAYERS


def test_every_package_imports_only_the_packages_above_it() -> None:
    rank = {f"bindloop.{name}": i for i, name in enumerate(LAYERS)}
    graph = _package_graph()
    placed = {p for p in graph if p != "bindloop" and not p.startswith("bindloop._")}
    assert placed == set(rank), "every package has a place in LAYERS"
    upward = sorted((p, t) for p in placed for t in graph[p] if t in rank and rank[t] > rank[p])
    assert upward == []


def test_the_checker_sees_a_circle() -> None:
    # The check itself: a package pair that imports each other is found.
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_the_checker_reads_function_bodies(tmp_path: Path) -> None:
    # An import inside a function (in a nested block too) is an edge for the package check,
    # never for the run-time one.
    (tmp_path / "a.py").write_text(
        "def f():\n    try:\n        from . import b\n    except ImportError:\n        pass\n")
    (tmp_path / "b.py").write_text("from . import a\n")
    modules = {"pkg.a": (tmp_path / "a.py", False), "pkg.b": (tmp_path / "b.py", False)}
    assert _imports(modules, typing_too=True, bodies=True) == {"pkg.a": {"pkg.b"},
                                                               "pkg.b": {"pkg.a"}}
    assert _imports(modules, typing_too=True) == {"pkg.a": set(), "pkg.b": {"pkg.a"}}


# A package's private modules are its own: another package imports its public names.
_PRIVATE_IMPORTS_LEFT: set[tuple[str, str]] = set()


def _private_imports() -> set[tuple[str, str]]:
    found = set()
    for name, (path, is_package) in _modules().items():
        package = name if is_package else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            parts = target.split(".")
            # bindloop.<pkg>._<module> from outside bindloop.<pkg> (root-level bindloop._x modules
            # are the package's shared infrastructure, not a subpackage's private room)
            if len(parts) >= 3 and parts[0] == "bindloop" and parts[2].startswith("_") \
                    and not name.startswith(f"bindloop.{parts[1]}.") and name != f"bindloop.{parts[1]}":
                if name == "bindloop.lowlevel" and parts[1] == "loop":
                    continue  # the loop's own low-level tier: the machine, published
                found.add((name, ".".join(parts[:3])))
    return found


def test_no_package_imports_another_packages_private_module() -> None:
    assert _private_imports() == _PRIVATE_IMPORTS_LEFT


def test_every_place_the_architecture_page_names_exists() -> None:
    """Each folder and module in docs/architecture.md's "Where each kind of thing lives" table is
    there: a folder (``harness/fixtures/``) in the repository, a module (``bindloop.hosts``) under
    ``src/`` -- so the table cannot point at a place that moved."""
    root = Path(__file__).resolve().parents[1]
    doc = (root / "docs" / "architecture.md").read_text()
    section = doc.split("## Where each kind of thing lives", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]
    places = [name for row in rows[1:] for name in re.findall(r"`([^`]+)`", row.split("|")[2])]
    folders = [p for p in places if p.endswith("/")]
    modules = [p for p in places if p.startswith("bindloop.")]
    assert "harness/fixtures/" in folders and "bindloop.hosts" in modules
    assert [f for f in folders if not (root / f).is_dir()] == []
    assert [m for m in modules
            if not (root / "src" / m.replace(".", "/")).is_dir()
            and not (root / "src" / (m.replace(".", "/") + ".py")).is_file()] == []
