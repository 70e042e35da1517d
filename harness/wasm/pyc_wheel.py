"""Compile a wheel's modules to ``.pyc`` with the running interpreter -- meant to run INSIDE Pyodide.

``harness/wasm/build_pyc_wheels.mjs`` loads this into Pyodide 314 (offline, in Node) and calls
:func:`compile_wheel` on each wheel's bytes. The bytecode must come from Pyodide's own CPython 3.14:
``.pyc`` files are specific to the interpreter's magic number, so compiling with the host's CPython
(what ``pyodide py-compile`` does) gives files Pyodide ignores or rejects.

Every pyc is an *unchecked hash-based* one (PEP 552): the import system loads it without reading or
hashing any source, so nothing is compiled at import time. Unchecked means an edited ``.py`` is NOT
picked up while its pyc is there: these wheels are build outputs, never edited in place. Two layouts:

- **with sources** (the default, the ``.pyc`` set): each ``pkg/mod.py`` keeps its source and gains
  ``pkg/__pycache__/mod.cpython-314.pyc``. Tracebacks show source lines; the wheel keeps its name and
  tags, and other interpreters ignore a ``cpython-314`` cache.
- **bytecode only** (``bytecode_only=True``, the bytecode set; the layout ``pyodide py-compile`` gives
  Pyodide's own packages): each ``pkg/mod.py`` is replaced by ``pkg/mod.pyc`` beside it, which the
  import system loads as a sourceless module (``__file__`` is the ``.pyc``). Half the files and
  about two thirds of the bytes of the layout with sources to unpack, but tracebacks show file
  names and line numbers without the lines. The
  wheel is renamed and retagged for this interpreter (``py3-none-any`` becomes ``cp314-none-any``):
  it runs nowhere else. The modules in :data:`KEEP_SOURCE` keep their source (and a cached pyc), as
  they read it at run time.

Either way the wheel's dist-info stays (``RECORD`` lists the new files with their hashes and sizes),
so it installs exactly like the plain one.
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import io
import marshal
import sys
import sysconfig
import zipfile

__all__ = ("KEEP_SOURCE", "compile_wheel")

# The date stamp every entry gets, so two builds of the same wheel give the same bytes.
_EPOCH = (1980, 1, 1, 0, 0, 0)

_UNCHECKED_HASH = 0b01  # PEP 552 flags: hash-based, check_source off

# Modules that read their own source when imported, kept as source in a bytecode-only wheel:
# anyio builds its lazy-import table from ``inspect.getsource`` of its own ``__init__``, and without
# source it falls back to importing every submodule, one of which needs ``_interpreters``, absent
# from Pyodide.
KEEP_SOURCE = frozenset({"anyio/__init__.py"})


def _pyc(source: bytes, filename: str) -> bytes:
    code = compile(source, filename, "exec", dont_inherit=True, optimize=0)
    return (importlib.util.MAGIC_NUMBER + _UNCHECKED_HASH.to_bytes(4, "little")
            + importlib.util.source_hash(source) + marshal.dumps(code))


def _cache_path(member: str) -> str:
    head, _, leaf = member.rpartition("/")
    cached = f"__pycache__/{leaf[:-3]}.{sys.implementation.cache_tag}.pyc"
    return f"{head}/{cached}" if head else cached


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _interpreter_tag() -> str:
    return f"cp{sys.version_info.major}{sys.version_info.minor}"


def _retag(tag: str) -> str:
    """``py3-none-any`` -> ``cp314-none-any``: a pure wheel's python tags become this interpreter's;
    a tag that already names one (``cp314-cp314-pyemscripten_...``) is kept."""
    python, _, rest = tag.partition("-")
    if all(p.startswith("py") for p in python.split(".")):
        return f"{_interpreter_tag()}-{rest}"
    return tag


def _retagged_name(filename: str) -> str:
    parts = filename[: -len(".whl")].split("-")
    return "-".join([*parts[:-3], _retag("-".join(parts[-3:]))]) + ".whl"


def _retagged_wheel_file(payload: bytes) -> bytes:
    lines = payload.decode().splitlines()
    out = [f"Tag: {_retag(line[len('Tag: '):])}" if line.startswith("Tag: ") else line
           for line in lines]
    return ("\n".join(out) + "\n").encode()


def compile_wheel(filename: str, data: object, bytecode_only: bool = False) -> tuple[str, bytes, int]:
    """``(file name, new wheel bytes, modules compiled)`` for the wheel ``filename``; ``data``
    is its bytes (or a JS ``Uint8Array``). ``bytecode_only`` picks the layout (module docstring)."""
    if sys.platform != "emscripten":
        raise RuntimeError("compile_wheel must run inside Pyodide: .pyc files are interpreter-specific")
    if sys.flags.optimize or sys.pycache_prefix is not None:
        raise RuntimeError("compile_wheel needs optimize=0 and no pycache_prefix (the import "
                           "system would look for other files)")
    site = sysconfig.get_path("purelib").rstrip("/")
    entries: list[tuple[str, bytes]] = []
    compiled = 0
    raw = data if isinstance(data, bytes) else bytes(getattr(data, "to_bytes")())
    with zipfile.ZipFile(io.BytesIO(raw)) as src:
        for info in src.infolist():
            if info.is_dir():
                continue
            member, payload = info.filename, src.read(info)
            in_dist_info = member.split("/", 1)[0].endswith((".dist-info", ".data"))
            if not member.endswith(".py") or in_dist_info:
                if bytecode_only and in_dist_info and member.endswith(".dist-info/WHEEL"):
                    payload = _retagged_wheel_file(payload)
                entries.append((member, payload))
                continue
            pyc = _pyc(payload, f"{site}/{member}")
            compiled += 1
            if bytecode_only and member not in KEEP_SOURCE:
                entries.append((member + "c", pyc))
            else:
                entries += [(member, payload), (_cache_path(member), pyc)]
    record_name = next(m for m, _ in entries if m.endswith(".dist-info/RECORD"))
    record = "\n".join([*(_record_line(m, p) for m, p in entries if m != record_name),
                        f"{record_name},,"]) + "\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as dst:
        for member, payload in entries:
            if member == record_name:
                payload = record.encode()
            dst.writestr(zipfile.ZipInfo(member, date_time=_EPOCH), payload,
                         compress_type=zipfile.ZIP_DEFLATED)
    return (_retagged_name(filename) if bytecode_only else filename), buf.getvalue(), compiled
