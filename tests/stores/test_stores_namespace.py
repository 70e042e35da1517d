"""bindloop.stores is the one home of the store ports: each port has its in-memory version named
``Memory`` + the port's name with every method of the port, no other public namespace defines a
store port or an in-memory store, and docs/stores.md's table and example match the namespace."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import textwrap
from pathlib import Path
from typing import Protocol

import bindloop
import bindloop.stores as stores

ROOT = Path(__file__).resolve().parents[2]


def _ports() -> dict[str, type]:
    return {name: obj for name in stores.__all__
            if inspect.isclass(obj := getattr(stores, name)) and Protocol in obj.__mro__[1:]
            and getattr(obj, "_is_protocol", False)}


def _methods(port: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(port, inspect.isfunction)
            if not name.startswith("_")}


def test_every_port_has_its_memory_version_with_every_method() -> None:
    ports = _ports()
    assert {"CheckpointStore", "ToolCallReceiptStore", "LimitStore", "TokenStore", "RunLogs",
            "PendingApprovals"} <= set(ports)
    for name, port in ports.items():
        if name == "SwapTokenStore":  # a refinement of TokenStore; MemoryTokenStore is both
            assert _methods(port) <= _methods(stores.MemoryTokenStore)
            continue
        memory = getattr(stores, f"Memory{name}", None)
        assert memory is not None, f"{name} has no Memory{name}"
        missing = _methods(port) - _methods(memory)
        assert not missing, f"Memory{name} lacks {sorted(missing)}"


def _public_classes() -> dict[str, str]:
    found: dict[str, str] = {}
    for info in pkgutil.walk_packages(bindloop.__path__, "bindloop."):
        if any(p.startswith("_") for p in info.name.split(".")):
            continue
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError as exc:  # a Worker module: only importable inside workerd
            if exc.name in {"js", "workers", "pyodide"}:
                continue
            raise
        for name in getattr(module, "__all__", ()):
            if inspect.isclass(getattr(module, name)):
                found.setdefault(name, info.name)
    return found


def test_no_other_namespace_defines_a_store_port_or_an_in_memory_store() -> None:
    classes = _public_classes()
    assert [n for n in classes if n.startswith("InMemory")] == []
    elsewhere = {name: home for name, home in classes.items()
                 if home != "bindloop.stores" and getattr(getattr(importlib.import_module(home),
                                                                  name), "__module__", "")
                 != "bindloop.stores"
                 and (name.endswith("Store") and name.startswith("Memory") or name in _ports())}
    assert elsewhere == {}


def test_the_docs_page_lists_every_port_and_its_example_runs() -> None:
    text = (ROOT / "docs" / "stores.md").read_text()
    rows = re.findall(r"^\| `(\w+)`(?:, `(\w+)`)? \| `(\w+)` \|", text, re.M)
    listed = {n for row in rows for n in row[:2] if n}
    assert listed == set(_ports())
    assert {row[2] for row in rows} == {n for n in stores.__all__ if n.startswith("Memory")}
    (block,) = re.findall(r"```python\n(.*?)```", text, re.S)
    exec(compile(textwrap.dedent(block), "stores.md", "exec"), {})
