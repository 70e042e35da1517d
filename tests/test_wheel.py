"""The built wheel ships production code only: every module of ``src/bindloop`` and nothing else —
no demo (they live in ``examples/demos/``) and no test fixture or test server (``harness/``).

The wheel is built for real (``python -m build --wheel``, without an isolated environment when the
venv has hatchling, as ``make`` installs it) and its file list read."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

# Module names that mark a demo or a test fixture: any module whose name holds "demo", and the
# fixtures that once shipped in bindloop.hosts.
NOT_SHIPPED = re.compile(
    r"(^|/)[^/]*demo[^/]*\.py$|(^|/)(scripted_server|provider_replies|mcp_reference_server"
    r"|mcp_conformance_client|store_servers|servers)\.py$|(^|/)(harness|examples|conformance)/")


def not_shipped(names: list[str]) -> list[str]:
    """The entries of a wheel's file list that are demos or test fixtures."""
    return [n for n in names if NOT_SHIPPED.search(n)]


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    out = tmp_path_factory.mktemp("wheel")
    cmd = [sys.executable, "-m", "build", "--wheel", "--outdir", str(out)]
    if importlib.util.find_spec("hatchling") is not None:
        cmd.append("--no-isolation")
    done = subprocess.run([*cmd, str(ROOT)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (wheel,) = out.glob("bindloop-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        return zf.namelist()


def test_the_wheel_holds_no_demo_and_no_fixture(wheel_names: list[str]) -> None:
    assert not_shipped(wheel_names) == []


def test_the_wheel_holds_exactly_the_package_modules(wheel_names: list[str]) -> None:
    shipped = {n for n in wheel_names if not n.split("/", 1)[0].endswith(".dist-info")}
    package = {p.relative_to(SRC).as_posix() for p in (SRC / "bindloop").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert shipped == package
    assert "bindloop/hosts/transports/httpx.py" in shipped and "bindloop/py.typed" in shipped


@pytest.mark.parametrize("name", [
    "bindloop/hosts/demo.py", "bindloop/hosts/ui_demo.py", "bindloop/hosts/scripted_server.py",
    "bindloop/hosts/provider_replies.py", "bindloop/hosts/mcp_reference_server.py",
    "bindloop/hosts/mcp_conformance_client.py", "harness/fixtures/store_servers.py",
    "examples/demos/demo.py", "conformance/runner.py",
])
def test_a_demo_or_a_fixture_is_caught(name: str) -> None:
    assert not_shipped(["bindloop/__init__.py", name]) == [name]


@pytest.mark.parametrize("name", [
    "bindloop/hosts/asgi/chat.py", "bindloop/hosts/mcp/server.py", "bindloop/testing/store_kit.py",
    "bindloop/hosts/stores/processes.py", "bindloop/mcp/_conformance_probe.py",
])
def test_production_modules_pass(name: str) -> None:
    assert not_shipped([name]) == []
