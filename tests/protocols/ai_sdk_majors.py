"""The AI SDK majors the real-client tests run (tests/protocols, tests/worker): each one's module
root (its ``ai`` and ``@ai-sdk/react``, see harness/clients/sdk.mjs) and the Node that runs its scripts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

CLIENTS = Path(__file__).resolve().parents[2] / "harness" / "clients"
MAJORS = (6, 7)


def module_root(major: int) -> Path:
    """harness/clients/ for ai@6 (with the packages every major shares), harness/clients/v<major> otherwise."""
    return CLIENTS if major == 6 else CLIENTS / f"v{major}"


def node_for(major: int) -> str | None:
    """The Node that runs a major's scripts: ai@7 needs Node 22 (npm ``node@22`` in its root)."""
    if major == 6:
        return shutil.which("node")
    node = module_root(major) / "node_modules" / "node" / "bin" / "node"
    return str(node) if node.is_file() else None


def installed(major: int) -> bool:
    """The shared clients and the major's own packages and Node are installed."""
    shared = all((CLIENTS / "node_modules" / name).is_dir()
                 for name in ("ai", "@ag-ui/client", "@ai-sdk/react", "esbuild",
                              "playwright-core"))
    own = all((module_root(major) / "node_modules" / name).is_dir()
              for name in ("ai", "@ai-sdk/react", "react", "react-dom"))
    return shared and own and shutil.which("node") is not None and node_for(major) is not None


def ran_major(out: str, key: str = "ai") -> int:
    """The major of the package a script reports it ran (its last line is a JSON object)."""
    version = json.loads(out.strip().splitlines()[-1])[key]
    return int(version.split(".")[0])
