"""The public API in tiers: a curated root, subpackages with their full ``__all__``, and
``bindloop.lowlevel``. Every public object reports its public home as ``__module__``, nothing is
exported from two public modules, and importing the package does no work."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import bindloop

ROOT_FILE = Path(bindloop.__file__)


def _public_modules() -> list[str]:
    """Every public module except the root and the host bindings (which are not a library API)."""
    out = []
    for info in pkgutil.walk_packages(bindloop.__path__, "bindloop."):
        parts = info.name.split(".")
        if any(p.startswith("_") for p in parts) or parts[1] == "hosts" or parts[-1] == "strategies":
            continue
        out.append(info.name)
    return out


def _module_names() -> list[str]:
    return ["bindloop", *_public_modules()]


def test_every_public_module_has_a_tuple_all_of_real_names() -> None:
    for name in _module_names():
        module = importlib.import_module(name)
        exported = getattr(module, "__all__", None)
        assert isinstance(exported, tuple), f"{name}.__all__ must be a tuple"
        assert len(set(exported)) == len(exported), f"{name}.__all__ has duplicates"
        for item in exported:
            assert hasattr(module, item), f"{name}.__all__ names missing {item!r}"


# ---- tier 1: the curated root -------------------------------------------------------------------

def test_the_root_is_curated_and_small() -> None:
    # About 60-90 names (h11 23, trio 65, anyio 96): what a host writing an agent needs. A new
    # subpackage (the agent API) extends bindloop._EXPORTS; it does not need to be listed here.
    assert 60 <= len(bindloop.__all__) <= 90, len(bindloop.__all__)


def test_docs_api_states_the_true_number_of_root_names() -> None:
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "api.md").read_text()
    root = text.split("- **`bindloop`**", 1)[1].split("\n- ", 1)[0]
    (stated,) = re.findall(r"(\d+) names", root)
    assert int(stated) == len(bindloop.__all__), "docs/api.md's root bullet states the count"


def test_the_root_derives_from_one_declaration() -> None:
    declared = [(module, name) for module, names in bindloop._EXPORTS.items() for name in names]
    assert tuple(name for _, name in declared) == bindloop.__all__
    for module, name in declared:
        home = importlib.import_module(f"bindloop.{module}")
        assert name in home.__all__, f"the root takes {name!r} from {module}, which does not export it"
        assert getattr(bindloop, name) is getattr(home, name)


def test_the_type_checking_block_mirrors_the_declaration() -> None:
    """Type checkers cannot read the lazy map, so the root repeats it under TYPE_CHECKING; the two
    must name the same things from the same subpackages."""
    tree = ast.parse(ROOT_FILE.read_text())
    guarded = [node for node in tree.body if isinstance(node, ast.If)
               and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"]
    assert len(guarded) == 1
    seen: dict[str, list[str]] = {}
    for node in guarded[0].body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
        for alias in node.names:
            assert alias.asname == alias.name, f"{alias.name} must be imported as itself"
            seen.setdefault(node.module, []).append(alias.name)
    assert seen == {module: list(names) for module, names in bindloop._EXPORTS.items()}


def test_unknown_root_names_raise_attribute_error() -> None:
    try:
        bindloop.LoopMachine  # noqa: B018 - lives in bindloop.lowlevel, not the root
    except AttributeError as exc:
        assert "LoopMachine" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("bindloop.LoopMachine should not be a root name")
    assert set(bindloop.__all__) <= set(dir(bindloop))


def test_testing_and_hosts_are_not_reexported() -> None:
    import bindloop.testing as kit

    assert not set(kit.__all__) & set(bindloop.__all__)
    assert not {m for m in bindloop._EXPORTS if m in ("testing", "hosts")}


def test_the_loop_contract_names_have_a_public_home() -> None:
    homes = {
        "bindloop": ("run_tool_loop", "ToolLoopState", "ToolLoopParams", "ToolLoopResult", "RunStats",
                     "StepSettlement", "ModelTurnResult", "TurnUsage"),
        "bindloop.contracts": ("empty_run_stats", "accumulate_turn", "accumulate_tool_call",
                               "accumulate_auxiliary_spend", "accumulate_run", "TurnTimings",
                               "add_usage"),
        "bindloop.loop": ("LoopCounters", "DiscardedTurnWithToolCallsError",
                          "InputBlockedBySuspendError", "MissingActivationPortError"),
        "bindloop.lowlevel": ("LoopMachine",),
    }
    for module, names in homes.items():
        exported = importlib.import_module(module).__all__
        for name in names:
            assert name in exported, f"{name} is not exported by {module}"


# ---- every namespace: small enough to read ------------------------------------------------------

# A package root whose specialist areas are sub-namespaces keeps what a reader reaches for first.
_ROOT_CAP = {"bindloop.agent": 40, "bindloop.mcp": 40}
_NAMESPACE_CAP = 60


def test_no_public_namespace_is_wider_than_a_reader_can_scan() -> None:
    """Every public module below the curated root (walked, not listed, so a new one is counted)
    exports at most 60 names; the agent and MCP roots at most 40, their specialist areas being
    sub-namespaces (``bindloop.agent.approvals``, ``bindloop.mcp.auth``, ...)."""
    widths = {name: len(importlib.import_module(name).__all__) for name in _public_modules()}
    assert set(_ROOT_CAP) <= set(widths)
    too_wide = {name: width for name, width in widths.items()
                if width > _ROOT_CAP.get(name, _NAMESPACE_CAP)}
    assert not too_wide, f"split these into sub-namespaces: {too_wide}"


def test_each_sub_namespace_is_reachable_from_its_package() -> None:
    """A sub-namespace loads with its package (``import bindloop.agent`` then
    ``bindloop.agent.approvals``), so its objects report their public home from the first import."""
    for name in _public_modules():
        parent, _, leaf = name.rpartition(".")
        if parent in ("bindloop", "bindloop.testing"):
            continue
        module = importlib.import_module(name)
        assert getattr(importlib.import_module(parent), leaf) is module, name


# ---- every tier: one home per object ------------------------------------------------------------

def _defined_objects(module_name: str) -> list[tuple[str, object]]:
    module = importlib.import_module(module_name)
    return [(name, getattr(module, name)) for name in module.__all__
            if inspect.isclass(getattr(module, name)) or inspect.isfunction(getattr(module, name))]


def test_every_public_object_reports_its_public_home() -> None:
    """``__module__`` names a public module that exports the object (trio's approach), so a
    traceback or a repr never shows a private ``_x`` module."""
    for module_name in _module_names():
        for name, obj in _defined_objects(module_name):
            home = obj.__module__  # type: ignore[attr-defined]
            assert not any(p.startswith("_") for p in home.split(".")), (
                f"{module_name}.{name} reports the private module {home}")
            if home.startswith("bindloop"):
                exported = importlib.import_module(home).__all__
                assert name in exported, f"{module_name}.{name} claims {home}, which does not export it"


# The one deliberate exception: the tool choice and JSON-schema format moved down with the model
# protocol (a ModelRequest carries them); WireOptions' fields are typed with them, so bindloop.wire
# exports them too, from their home.
_ALSO_EXPORTED = {"bindloop.wire.ForcedTool", "bindloop.wire.JsonSchemaFormat",
                  "bindloop.wire.ToolChoice"}


def test_nothing_is_exported_from_two_public_modules() -> None:
    """The root re-exports on purpose (it is a tier over the subpackages); below it, each object
    has exactly one public module."""
    first: dict[int, str] = {}
    for module_name in _public_modules():
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if isinstance(obj, (str, int, float, bool, tuple, frozenset)) or obj is None:
                continue  # plain values compare by value; identity says nothing about their home
            where = f"{module_name}.{name}"
            if where in _ALSO_EXPORTED:
                assert getattr(importlib.import_module("bindloop.model"), name) is obj, where
                continue
            other = first.setdefault(id(obj), where)
            assert other == where, f"{where} is also exported as {other}"


def test_a_new_subpackage_needs_no_root_entry() -> None:
    """Subpackages that arrive later (agent, mcp) are checked for a tuple ``__all__`` above; only
    the names the root declares must reach it."""
    root = set(bindloop.__all__)
    for sub in {m.split(".")[1] for m in _public_modules()}:
        module = importlib.import_module(f"bindloop.{sub}")
        assert isinstance(module.__all__, tuple)
        for name in set(module.__all__) & root:
            assert getattr(bindloop, name) is getattr(module, name)


# ---- import cost and hygiene --------------------------------------------------------------------

def test_import_does_no_work_and_pulls_no_host_code() -> None:
    code = (
        "import sys, bindloop\n"
        "bad = [m for m in sys.modules if m.startswith('bindloop.') or m in ('httpx', 'hypothesis')]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_every_reexport_in_a_package_init_is_listed_in_all() -> None:
    """An ``X as X`` import in a public module is a public re-export: it must be in ``__all__``,
    or the docs name a function users cannot import."""
    src = ROOT_FILE.parent
    files = [*sorted(src.rglob("__init__.py")), src / "lowlevel.py"]
    for init in files:
        if init == ROOT_FILE:
            continue  # the root imports under TYPE_CHECKING for the lazy loader (checked above)
        tree = ast.parse(init.read_text())
        reexported = {a.name for node in tree.body if isinstance(node, ast.ImportFrom)
                      for a in node.names if a.asname == a.name}
        declared: set[str] = set()
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__"
                                                    for t in node.targets):
                assert isinstance(node.value, ast.Tuple)
                declared = {e.value for e in node.value.elts if isinstance(e, ast.Constant)}
        assert reexported <= declared, f"{init}: {sorted(reexported - declared)} missing from __all__"


def test_annotations_still_resolve_after_rehoming() -> None:
    """Postponed annotations resolve in the namespace of ``__module__``; once that is the public
    package they are pinned to the defining module. Every public class's annotations must still
    resolve (msgspec needs them to encode and decode a Struct; Hypothesis and hosts read them)."""
    import typing

    checked = 0
    for module_name in _module_names():
        for name, obj in _defined_objects(module_name):
            if isinstance(obj, type) and obj.__dict__.get("__annotations__"):
                typing.get_type_hints(obj)
                checked += 1
    assert checked > 100


def test_one_verb_per_act() -> None:
    """docs/api.md's verb rule: ``equip_*`` hooks live with the agent, a public function never
    starts with ``with_`` (a ``with_*`` is a method returning a derived value), and ``augment_*``
    takes what it wraps and the middlewares to put around it."""
    for module_name in _module_names():
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if not inspect.isfunction(obj):
                continue
            assert not name.startswith("with_"), f"{module_name}.{name}: make it create_*"
            if name.startswith("equip_"):
                assert obj.__module__ == "bindloop.agent", f"{module_name}.{name} is not a hook"
            if name.startswith("augment_"):
                assert list(inspect.signature(obj).parameters)[1] == "middlewares", name
