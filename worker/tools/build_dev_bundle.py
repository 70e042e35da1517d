"""Build workerd's test-only "dev" Pyodide bundle from npm ``pyodide@314.0.6``, offline.

    python worker/tools/build_dev_bundle.py PYODIDE_DIR CACHE_DIR

``workerd serve --experimental --pyodide-bundle-disk-cache-dir CACHE_DIR`` with the
``python_workers_development`` flag reads ``CACHE_DIR/pyodide_dev.capnp.bin`` and never downloads
it.  That file is a Cap'n Proto ``Bundle`` (schema: ``jsg_bundle.capnp`` next to this script) of
three internal modules, named as the pinned workerd binary imports them:

- ``pyodideRuntime-internal:pyodide.asm`` -- ``pyodide.asm.mjs`` patched so that the Emscripten glue
  gets wasm compilation, randomness, a monotonic ``Date.now`` and dynamic-library loading from
  workerd's ``pyodide-internal:builtin_wrappers`` instead of the (forbidden) globals;
- ``pyodideRuntime-internal:pyodide.asm.wasm`` -- the interpreter, as a wasm module;
- ``pyodideRuntime-internal:python_stdlib.zip`` -- the standard library, as data.

Only these names and the patch points are workerd's; other workerd versions lay the bundle out
differently, which is why ``worker/package.json`` pins both packages.  Every patch must match the
number of times it is expected to: a Pyodide release that moved code fails the build here, loudly,
instead of failing at workerd start-up with an opaque error.

The bundle is rebuilt only when an input or this script changes (a digest is kept beside it).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

PYODIDE_VERSION = "314.0.6"
BUNDLE_NAME = "pyodide_dev.capnp.bin"
RUNTIME = "pyodideRuntime-internal:"
WRAPPERS = "pyodide-internal:builtin_wrappers"

_THROW_ON_EVAL = "(() => {throw new Error('bindloop dev bundle: Emscripten code tried to eval')})()"

# (old, new, expected occurrences in pyodide.asm.mjs 314.0.6)
PATCHES: tuple[tuple[str, str, int], ...] = (
    ("new WebAssembly.Module", "newWasmModule", 4),
    ("WebAssembly.instantiate", "wasmInstantiate", 3),
    ("Date.now", "monotonicDateNow", 22),
    ("crypto.getRandomValues(", "getRandomValues(Module, ", 1),
    ("eval(func)", _THROW_ON_EVAL, 2),
    ("eval(data)", _THROW_ON_EVAL, 1),
    ("eval(UTF8ToString(ptr))", _THROW_ON_EVAL, 3),
    # Shared libraries (msgspec's .so) are read from workerd's read-only file system.
    (
        "function loadLibData(){",
        "function loadLibData(){var libData=patchedLoadLibData(Module,libName,flags.rpath);"
        "return flags.loadAsync?Promise.resolve(libData):libData;}function _unusedLoadLibData(){",
        1,
    ),
    # Keeps a library's memory base stable across memory snapshots.
    ("getMemory(", "Module.getMemoryPatched(Module, libName, ", 1),
    # workerd's emscriptenSetup imports the factory by name.
    (
        "export default _createPyodideModule;",
        "export default _createPyodideModule; export { _createPyodideModule };",
        1,
    ),
)

PRELUDE = (
    "import { addEventListener, getRandomValues, location, monotonicDateNow, newWasmModule, "
    f'patchedLoadLibData, wasmInstantiate }} from "{WRAPPERS}";\n'
)


class BundleError(Exception):
    """The Pyodide package is not the one this build step knows how to patch."""


def patch_asm(text: str) -> str:
    for old, new, expected in PATCHES:
        found = text.count(old)
        if found != expected:
            raise BundleError(
                f"pyodide.asm.mjs: expected {expected} occurrence(s) of {old!r}, found {found}; "
                f"is this npm pyodide@{PYODIDE_VERSION}?"
            )
        text = text.replace(old, new)
    return PRELUDE + text


def _inputs(pyodide_dir: Path) -> dict[str, Path]:
    files = {
        "asm": pyodide_dir / "pyodide.asm.mjs",
        "wasm": pyodide_dir / "pyodide.asm.wasm",
        "stdlib": pyodide_dir / "python_stdlib.zip",
        "package": pyodide_dir / "package.json",
    }
    missing = [str(p) for p in files.values() if not p.is_file()]
    if missing:
        raise BundleError(f"missing {', '.join(missing)}: run `cd worker && npm ci` first")
    version = json.loads(files["package"].read_text())["version"]
    if version != PYODIDE_VERSION:
        raise BundleError(
            f"{pyodide_dir} is pyodide {version}; the pinned workerd accepts exactly {PYODIDE_VERSION}"
        )
    return files


def _digest(files: dict[str, Path]) -> str:
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for path in [*files.values(), here / "build_dev_bundle.py", here / "jsg_bundle.capnp"]:
        h.update(path.name.encode())
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def encode_bundle(asm_src: bytes, wasm: bytes, stdlib_zip: bytes) -> bytes:
    import capnp  # pycapnp; imported only when encoding (installed by worker/worker.mk)

    schema = capnp.load(str(Path(__file__).resolve().parent / "jsg_bundle.capnp"))
    bundle = schema.Bundle.new_message()
    modules = bundle.init("modules", 3)
    for mod, name, kind, payload in (
        (modules[0], "pyodide.asm", "src", asm_src),
        (modules[1], "pyodide.asm.wasm", "wasm", wasm),
        (modules[2], "python_stdlib.zip", "data", stdlib_zip),
    ):
        mod.name = RUNTIME + name
        mod.type = "internal"
        setattr(mod, kind, payload)
    return bytes(bundle.to_bytes())


def build(pyodide_dir: Path, cache_dir: Path) -> Path:
    """Write ``cache_dir/pyodide_dev.capnp.bin`` unless an identical build is already there."""
    files = _inputs(pyodide_dir)
    out = cache_dir / BUNDLE_NAME
    stamp = cache_dir / (BUNDLE_NAME + ".sha256")
    digest = _digest(files)
    if out.is_file() and stamp.is_file() and stamp.read_text().strip() == digest:
        return out
    asm = patch_asm(files["asm"].read_text(encoding="utf-8"))
    data = encode_bundle(asm.encode("utf-8"), files["wasm"].read_bytes(), files["stdlib"].read_bytes())
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    stamp.write_text(digest + "\n")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    try:
        out = build(Path(argv[0]), Path(argv[1]))
    except BundleError as exc:
        print(f"build_dev_bundle: {exc}", file=sys.stderr)
        return 1
    print(f"build_dev_bundle: {out} ({out.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
