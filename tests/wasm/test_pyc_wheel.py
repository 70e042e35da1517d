"""harness/wasm/pyc_wheel.py (the .pyc wheel builder that runs inside Pyodide), exercised on CPython with the
platform check stood in for: the wheel keeps its sources, gains unchecked pycs the import system
uses without looking at the source, and its RECORD matches its files; bytecode only, the sources
are replaced by their pycs (but those read at run time), and the wheel names its interpreter."""

from __future__ import annotations

import base64
import hashlib
import importlib
import io
import sys
import traceback
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


def _bytecode_only(files: dict[str, str], name: str,
                   monkeypatch: pytest.MonkeyPatch) -> tuple[str, dict[str, bytes]]:
    monkeypatch.setattr(sys, "platform", "emscripten")
    out_name, data, _ = pyc_wheel.compile_wheel(name, _wheel(files), bytecode_only=True)
    monkeypatch.undo()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return out_name, {i.filename: zf.read(i) for i in zf.infolist()}


def test_bytecode_only_wheel_replaces_sources_by_their_bytecode(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    source = {**SOURCE, "blpycprobe/sub/boom.py": "def boom():\n    raise ValueError('boom')\n"}
    monkeypatch.setattr(sys, "platform", "emscripten")
    name, data, compiled = pyc_wheel.compile_wheel(NAME, _wheel(source), bytecode_only=True)
    monkeypatch.undo()
    here = f"cp{sys.version_info.major}{sys.version_info.minor}"
    # Retagged for the interpreter that compiled it, as pyodide py-compile names its wheels.
    assert name == f"blpycprobe-1.0-{here}-none-any.whl" and compiled == 3
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
        zf.extractall(tmp_path)
    assert set(members) == {"blpycprobe/__init__.pyc", "blpycprobe/sub/mod.pyc", "blpycprobe/sub/boom.pyc",
                            "blpycprobe/data.json", "blpycprobe-1.0.dist-info/METADATA",
                            "blpycprobe-1.0.dist-info/WHEEL", "blpycprobe-1.0.dist-info/extra.py",
                            "blpycprobe-1.0.dist-info/RECORD"}
    assert members["blpycprobe-1.0.dist-info/WHEEL"].decode().splitlines() == [
        "Wheel-Version: 1.0", "Root-Is-Purelib: true", f"Tag: {here}-none-any"]
    record = members["blpycprobe-1.0.dist-info/RECORD"].decode().splitlines()
    assert sorted(line.rsplit(",", 2)[0] for line in record) == sorted(members)
    for line in record:
        member, digest, size = line.rsplit(",", 2)
        if not member.endswith("RECORD"):
            want = base64.urlsafe_b64encode(hashlib.sha256(members[member]).digest()).rstrip(b"=")
            assert digest == "sha256=" + want.decode() and int(size) == len(members[member])

    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    try:
        probe = importlib.import_module("blpycprobe")
        mod = importlib.import_module("blpycprobe.sub.mod")
        assert probe.VALUE == "from the wheel"
        assert mod.where() == str(tmp_path / "blpycprobe" / "sub" / "mod.pyc")
        # A traceback names the file the module was compiled from and the line, without its text.
        with pytest.raises(ValueError) as raised:
            importlib.import_module("blpycprobe.sub.boom").boom()
        shown = "".join(traceback.format_exception(raised.value))
        assert 'blpycprobe/sub/boom.py", line 2, in boom' in shown
        assert "raise ValueError" not in shown
    finally:
        for key in [k for k in sys.modules if k.split(".")[0] == "blpycprobe"]:
            del sys.modules[key]


def test_bytecode_only_wheel_keeps_the_sources_read_at_run_time(monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"anyio/__init__.py": "X = 1\n", "anyio/_core.py": "Y = 2\n",
             "anyio-4.0.dist-info/WHEEL": "Wheel-Version: 1.0\nTag: py3-none-any\n"}
    assert "anyio/__init__.py" in pyc_wheel.KEEP_SOURCE
    name, members = _bytecode_only(files, "anyio-4.0-py3-none-any.whl", monkeypatch)
    tag = sys.implementation.cache_tag
    assert {m for m in members if m.startswith("anyio/")} == {
        "anyio/__init__.py", f"anyio/__pycache__/__init__.{tag}.pyc", "anyio/_core.pyc"}


@pytest.mark.parametrize(("tag", "want"), [
    ("py3-none-any", "{here}-none-any"),
    ("py2.py3-none-any", "{here}-none-any"),
    ("cp314-cp314-pyemscripten_2026_0_wasm32", "cp314-cp314-pyemscripten_2026_0_wasm32"),
])
def test_bytecode_only_wheel_names_its_interpreter(tag: str, want: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    here = f"cp{sys.version_info.major}{sys.version_info.minor}"
    files = {"p/__init__.py": "", "p-1.dist-info/WHEEL": f"Wheel-Version: 1.0\nTag: {tag}\n"}
    name, members = _bytecode_only(files, f"p-1-{tag}.whl", monkeypatch)
    assert name == f"p-1-{want.format(here=here)}.whl"
    assert members["p-1.dist-info/WHEEL"].decode().splitlines()[-1] == f"Tag: {want.format(here=here)}"
