"""harness/wasm/pyc_wheel.py (the .pyc wheel builder that runs inside Pyodide), exercised on CPython with the
platform check stood in for: the wheel keeps its sources, gains unchecked pycs the import system
uses without looking at the source, and its RECORD matches its files."""

from __future__ import annotations

import base64
import hashlib
import importlib
import io
import sys
import zipfile
from pathlib import Path

import pytest

from .test_demo_server import ROOT, _load

pyc_wheel = _load("bindloop_pyc_wheel", ROOT / "harness" / "wasm" / "pyc_wheel.py")
NAME = "blpycprobe-1.0-py3-none-any.whl"


def _wheel(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for member, text in files.items():
            zf.writestr(member, text)
        zf.writestr("blpycprobe-1.0.dist-info/RECORD", "")
    return buf.getvalue()


SOURCE = {
    "blpycprobe/__init__.py": "VALUE = 'from the wheel'\n",
    "blpycprobe/sub/mod.py": "def where():\n    return __file__\n",
    "blpycprobe/data.json": "{}",
    "blpycprobe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: blpycprobe\nVersion: 1.0\n",
    "blpycprobe-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    "blpycprobe-1.0.dist-info/extra.py": "# dist-info files are not modules\n",
}


def test_refuses_to_run_outside_pyodide() -> None:
    with pytest.raises(RuntimeError, match="inside Pyodide"):
        pyc_wheel.compile_wheel(NAME, _wheel(SOURCE))


def test_compiled_wheel_imports_from_its_bytecode(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "emscripten")
    name, data, compiled = pyc_wheel.compile_wheel(NAME, _wheel(SOURCE))
    monkeypatch.undo()
    assert name == NAME and compiled == 2
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
        zf.extractall(tmp_path)
    tag = sys.implementation.cache_tag
    assert set(members) == {*SOURCE, "blpycprobe-1.0.dist-info/RECORD",
                            f"blpycprobe/__pycache__/__init__.{tag}.pyc",
                            f"blpycprobe/sub/__pycache__/mod.{tag}.pyc"}
    # Every file but RECORD itself is listed with its sha256 and size.
    record = members["blpycprobe-1.0.dist-info/RECORD"].decode().splitlines()
    assert "blpycprobe-1.0.dist-info/RECORD,," in record
    for line in record:
        member, digest, size = line.rsplit(",", 2)
        if member.endswith("RECORD"):
            continue
        want = base64.urlsafe_b64encode(hashlib.sha256(members[member]).digest()).rstrip(b"=")
        assert digest == "sha256=" + want.decode() and int(size) == len(members[member])
    assert len(record) == len(members)

    # Unchecked: the bytecode is used even when the source beside it says something else.
    (tmp_path / "blpycprobe" / "__init__.py").write_text("VALUE = 'from an edited source'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    try:
        probe = importlib.import_module("blpycprobe")
        mod = importlib.import_module("blpycprobe.sub.mod")
        assert probe.VALUE == "from the wheel"
        assert mod.where() == str(tmp_path / "blpycprobe" / "sub" / "mod.py")
    finally:
        for key in [k for k in sys.modules if k.split(".")[0] == "blpycprobe"]:
            del sys.modules[key]
