"""Compile a wheel's modules to ``.pyc`` with the running interpreter -- meant to run INSIDE Pyodide.

``harness/wasm/build_pyc_wheels.mjs`` loads this into Pyodide 314 (offline, in Node) and calls
:func:`compile_wheel` on each wheel's bytes. The bytecode must come from Pyodide's own CPython 3.14:
``.pyc`` files are specific to the interpreter's magic number, so compiling with the host's CPython
(what ``pyodide py-compile`` does) gives files Pyodide ignores or rejects.

Each ``pkg/mod.py`` keeps its source and gains ``pkg/__pycache__/mod.cpython-314.pyc``, an
*unchecked hash-based* pyc (PEP 552): the import system loads it without reading or hashing the
source, so nothing is compiled at import time, and tracebacks still show source lines. The source
has to stay: anyio builds its lazy-import table from ``inspect.getsource`` of its own
``__init__``, and without source it falls back to importing every submodule, one of which needs
``_interpreters``, absent from Pyodide. The wheel keeps its name, tags and dist-info (``RECORD``
gains the new files with their hashes and sizes), so it installs exactly like the plain one; other
interpreters ignore a ``cpython-314`` cache. Unchecked means an edited ``.py`` is NOT picked up
while its pyc is there: these wheels are build outputs, never edited in place.
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

__all__ = ("compile_wheel",)

# The date stamp every entry gets, so two builds of the same wheel give the same bytes.
_EPOCH = (1980, 1, 1, 0, 0, 0)


_UNCHECKED_HASH = 0b01  # PEP 552 flags: hash-based, check_source off


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


def compile_wheel(filename: str, data: object) -> tuple[str, bytes, int]:
    """``(file name, new wheel bytes, modules compiled)`` for the wheel ``filename``; ``data``
    is its bytes (or a JS ``Uint8Array``)."""
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
            entries.append((member, payload))
            if member.endswith(".py") and not in_dist_info:
                entries.append((_cache_path(member), _pyc(payload, f"{site}/{member}")))
                compiled += 1
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
    return filename, buf.getvalue(), compiled
