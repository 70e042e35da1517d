"""bindloop's MCP client in real workerd, through JS fetch, against the official SDK's server on
127.0.0.1: list the tools, call one, a raising tool comes back as a tool error, the server's GET
stream opens (fetch refuses a GET with a body) and the session closes with a DELETE.

Run by ``make test-worker`` (part of ``make test``), which installs workerd and the wheels and sets
``BINDLOOP_WORKERD_TESTS=1``; a plain pytest run skips it.
"""

from __future__ import annotations

import json
import os
import sys
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "worker" / "tools"))

pytestmark = pytest.mark.skipif(os.environ.get("BINDLOOP_WORKERD_TESTS") != "1",
                                reason="run by `make test-worker` (workerd + wheels installed)")


def test_the_client_runs_in_workerd_against_the_sdk_server(reference_url: str,
                                                          tmp_path: Path) -> None:
    from workerd_harness import Workerd, stage

    config = stage(tmp_path / "stage", bindings={"MCP_URL": reference_url},
                   storage_dir=tmp_path / "storage", with_conformance=False,
                   src_dir=ROOT / "tests" / "mcp" / "workerd_mcp", durable_objects=False)
    with Workerd(config) as wd:
        with urllib.request.urlopen(wd.base_url + "/", timeout=120) as resp:
            report = json.loads(resp.read())
    assert report["protocol_version"] == "2025-11-25"
    assert {"ref__add", "ref__explode", "ref__render_square", "ref__slow"} <= set(report["tools"])
    assert report["add"] == {"type": "result", "text": "42"}
    explode = report["explode"]
    assert explode["type"] == "error" and "explode" in explode["error"], explode
    # The GET stream was accepted and still open when the client stopped listening.
    assert report["listen"] == "open", report["listen"]
