"""The Worker's Durable Object stores per call, in real workerd on this machine: mean ms per
round of each store's per-turn calls (a checkpoint save of 4 kB, a load, a receipt's read +
claim + complete, a receipt's ``complete_once`` with an outbox entry, the limiter's enter + admit
+ leave, a token save + load), over the
``/_kit/bench`` route (tests/worker/kit_worker/stores_kit_route.py). One workerd process, its objects on
local disk: no network between the Worker and its objects, unlike Cloudflare, where an object
lives in one location and a call from another location crosses the network.

    python bench/do_stores.py --rounds 200
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "worker" / "tools"))
from workerd_harness import Workerd, stage  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = stage(Path(tmp) / "stage", bindings={"STORE_KIT": "1"},
                       storage_dir=Path(tmp) / "storage", with_conformance=False,
                       src_dir=ROOT / "tests" / "worker" / "kit_worker", extra_objects={"MCP_TOKENS": "McpTokens", "RECEIPTS": "Receipts"})
        with Workerd(config) as wd:
            runs = []
            for label, rounds in (("warm-up", 20), ("measured", args.rounds)):
                req = urllib.request.Request(
                    wd.base_url + "/_kit/bench", method="POST",
                    data=json.dumps({"ns": label, "n": rounds}).encode())
                with urllib.request.urlopen(req, timeout=600) as resp:
                    runs.append(json.loads(resp.read())["ms_per_round"])
    print(f"Durable Object stores in workerd, {args.rounds} rounds each (mean ms per round)")
    print("| calls | ms per round |")
    print("|---|---|")
    for name, ms in runs[1].items():
        print(f"| {name} | {ms:.2f} |")


if __name__ == "__main__":
    main()
