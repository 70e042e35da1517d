"""Every public module has a tuple ``__all__`` naming things that exist, the root re-exports the
public API of the core modules, and importing the package does no work."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import bindloop

CORE_SUBPACKAGES = [
    name for name in (m.name for m in pkgutil.iter_modules(bindloop.__path__))
    if not name.startswith("_") and name not in ("testing", "hosts", "mcp")
]


def _public_modules() -> list[str]:
    out = ["bindloop"]
    for info in pkgutil.walk_packages(bindloop.__path__, "bindloop."):
        leaf = info.name.rsplit(".", 1)[-1]
        if leaf.startswith("_") or ".hosts" in info.name or info.name.endswith("strategies"):
            continue
        out.append(info.name)
    return out


def test_every_public_module_has_a_tuple_all_of_real_names() -> None:
    for name in _public_modules():
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        assert isinstance(exported, tuple), f"{name}.__all__ must be a tuple"
        assert len(set(exported)) == len(exported), f"{name}.__all__ has duplicates"
        for item in exported:
            assert hasattr(module, item), f"{name}.__all__ names missing {item!r}"


def test_root_reexports_every_core_module_api() -> None:
    root = set(bindloop.__all__)
    for sub in CORE_SUBPACKAGES:
        module = importlib.import_module(f"bindloop.{sub}")
        missing = set(module.__all__) - root
        assert not missing, f"bindloop root does not re-export {sorted(missing)} from {sub}"
        for item in module.__all__:
            assert getattr(bindloop, item) is getattr(module, item)


def test_testing_kit_is_not_reexported() -> None:
    import bindloop.testing as kit

    assert not set(kit.__all__) & set(bindloop.__all__)


def test_seed_names_are_present() -> None:
    for name in ("run_tool_loop", "ToolLoopState", "ToolLoopParams", "ToolLoopResult", "RunStats",
                 "empty_run_stats", "accumulate_turn", "accumulate_tool_call",
                 "accumulate_auxiliary_spend", "accumulate_run", "StepSettlement",
                 "DiscardedTurnWithToolCallsError", "InputBlockedBySuspendError",
                 "MissingActivationPortError", "ModelTurnResult", "TurnUsage", "TurnTimings"):
        assert name in bindloop.__all__


def test_import_does_no_work_and_pulls_no_host_code() -> None:
    code = (
        "import sys, bindloop\n"
        "bad = [m for m in sys.modules if m.startswith('bindloop.hosts') or m.startswith('bindloop.testing')"
        " or m in ('httpx', 'hypothesis', 'threading_probe')]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_every_reexport_in_a_package_init_is_listed_in_all() -> None:
    """An ``X as X`` import in a package ``__init__`` is a public re-export: it must be in
    ``__all__`` (and so reach the root), or the docs name a function users cannot import."""
    import ast
    from pathlib import Path

    src = Path(bindloop.__file__).parent
    for init in sorted(src.rglob("__init__.py")):
        tree = ast.parse(init.read_text())
        reexported = {a.name for node in tree.body if isinstance(node, ast.ImportFrom)
                      for a in node.names if a.asname == a.name}
        declared: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__"
                                                    for t in node.targets):
                assert isinstance(node.value, ast.Tuple)
                declared = {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
        if init.parent == src:
            continue  # the root imports under TYPE_CHECKING for the lazy loader
        assert reexported <= declared, f"{init}: {sorted(reexported - declared)} missing from __all__"
