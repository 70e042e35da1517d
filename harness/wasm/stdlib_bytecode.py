"""Precompiled bytecode for the standard-library modules a page imports -- meant to run INSIDE Pyodide.

Pyodide 314 ships its standard library as source (``python_stdlib.zip`` holds ``.py`` files only),
so every standard-library module a page imports after the runtime's boot is compiled when first
imported (``ipaddress``, through anyio's asyncio backend, alone 20-100 ms). A *table* ships the
bytecode of just those modules beside the page's wheels, leaving the runtime's own files untouched:

- :func:`build_table` (at build time, ``harness/wasm/build_stdlib_bytecode.mjs``, in Pyodide in Node)
  compiles each named module from the runtime's own standard-library zip with the runtime's own
  CPython and returns the table file: the interpreter's magic number, then the marshalled dict
  ``{"install": <this module's code>, "modules": {name: pyc}}``. Each pyc is a *checked hash-based*
  one (PEP 552): magic number, flags, the SipHash of the exact source it was compiled from, code.
- :func:`install` (in the page, right after the boot; ``loader.js`` runs it from the table's own
  ``install`` code once the file's magic number matched) puts a finder first on ``sys.meta_path``.
  For a module in the table it asks the stock path finder for the module's spec and keeps every
  field of it (origin, ``__file__``, a package's ``__path__``, source lines for tracebacks) but
  runs the table's code instead of compiling the source -- only when the spec comes from the
  runtime's standard-library zip, the pyc's magic number is this interpreter's, and its source
  hash is the hash of the source the stock loader would compile. Otherwise it steps aside (returns
  ``None``): the module is found and compiled from source exactly as without the table.

Each entry is used at most once (a reload compiles from source).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import marshal
import sys
import zipimport
from collections.abc import Sequence
from types import CodeType, ModuleType
from typing import Any

__all__ = ("build_table", "install")

_FLAGS = (0b11).to_bytes(4, "little")  # PEP 552: hash-based, check_source
_HEADER = 16  # magic (4) + flags (4) + source hash (8)


def _stdlib_zip() -> str:
    """The runtime's standard-library zip on ``sys.path`` (``/lib/python314.zip``)."""
    for entry in sys.path:
        if entry.endswith(f"python{sys.version_info.major}{sys.version_info.minor}.zip"):
            return entry
    raise RuntimeError(f"no standard-library zip on sys.path: {sys.path}")


def _stock_source(spec: importlib.machinery.ModuleSpec, stdlib: str) -> bytes | None:
    """The source the stock loader would compile for ``spec``, or ``None`` when the spec is not a
    module of the runtime's standard-library zip."""
    loader, origin = spec.loader, spec.origin
    if not isinstance(loader, zipimport.zipimporter) or origin is None:
        return None
    if not origin.startswith(stdlib + "/") or not origin.endswith(".py"):
        return None
    data: bytes = loader.get_data(origin)
    return data


def build_table(names: Sequence[str], installer_source: str) -> bytes:
    """The table file for the standard-library modules ``names`` (a submodule's package is
    imported here to find it), its installer compiled from ``installer_source`` (this file's
    text); a name that is not a module of the runtime's standard-library zip raises
    ``ValueError``."""
    if sys.platform != "emscripten":
        raise RuntimeError("build_table must run inside Pyodide: bytecode is interpreter-specific")
    stdlib = _stdlib_zip()
    modules: dict[str, bytes] = {}
    for name in sorted(set(names)):
        spec = importlib.util.find_spec(name)
        source = None if spec is None else _stock_source(spec, stdlib)
        if spec is None or source is None:
            raise ValueError(f"{name} is not a module of {stdlib}")
        code = compile(source, str(spec.origin), "exec", dont_inherit=True, optimize=0)
        modules[name] = (
            importlib.util.MAGIC_NUMBER
            + _FLAGS
            + importlib.util.source_hash(source)
            + marshal.dumps(code)
        )
    installer = compile(
        installer_source, "stdlib_bytecode.py", "exec", dont_inherit=True, optimize=0
    )
    return importlib.util.MAGIC_NUMBER + marshal.dumps({"install": installer, "modules": modules})


class _Loader(importlib.abc.Loader):
    """The stock loader of a standard-library module, with the table's code in place of compiling
    the source; everything else (source lines, resources, ``is_package``) is the stock loader's."""

    def __init__(self, stock: Any, code: CodeType) -> None:
        self._stock = stock
        self._code = code

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return None

    def exec_module(self, module: ModuleType) -> None:
        exec(self._code, module.__dict__)

    def get_code(self, fullname: str) -> CodeType:
        return self._code

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stock, name)


class _Finder:
    """First on ``sys.meta_path``: the table's modules, each checked against the stock source."""

    def __init__(self, modules: dict[str, bytes], stdlib: str) -> None:
        self._modules = modules
        self._stdlib = stdlib
        self.used: list[str] = []
        self.refused: list[str] = []

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        pyc = self._modules.pop(fullname, None)
        if pyc is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        source = None if spec is None else _stock_source(spec, self._stdlib)
        if (
            spec is None
            or source is None
            or pyc[:4] != importlib.util.MAGIC_NUMBER
            or pyc[4:8] != _FLAGS
            or pyc[8:_HEADER] != importlib.util.source_hash(source)
        ):
            # The import system's own finders, in their order, as if the table were not there.
            self.refused.append(fullname)
            return None
        spec.loader = _Loader(spec.loader, marshal.loads(memoryview(pyc)[_HEADER:]))
        self.used.append(fullname)
        return spec


def install(modules: dict[str, bytes]) -> _Finder:
    """Put a finder for ``modules`` (name -> checked hash-based pyc) first on ``sys.meta_path``;
    returns it (its ``used`` and ``refused`` list the names imported from the table and those
    that fell back to the source)."""
    finder = _Finder(dict(modules), _stdlib_zip())
    sys.meta_path.insert(0, finder)
    return finder
