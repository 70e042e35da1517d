"""bindloop's store conformance kit against the Worker's Durable Object stores, in real workerd.

The kit's cases run inside a test-only Worker (kit_worker/stores_kit_route.py; pytest cannot run in
workerd): the checkpoint cases against ``DurableCheckpointStore`` (the ``Session`` objects), the
receipt cases against ``DurableReceiptStore`` (``Receipts``), the limit cases against ``DurableLimitStore`` (``RateLimiter``), the token cases against
``DurableTokenStore`` (``McpTokens``), plus the objects' own checks (the run lease's claim race,
a lease-free save fencing a run, corrupt stored tokens, checkpoints past the 2 MB value limit, and
the kit's races failing a store that checks the revision, or compares the tokens, outside the
object). The several-process races run as concurrent requests to two more
Workers -- two more isolates, each its own Python -- whose bindings reach the same objects.
Every case must pass; none may be skipped but the one that cannot apply (NOT_APPLICABLE).
"""

from __future__ import annotations

import json
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bindloop.testing.store_kit import CHECKPOINT_CASES, LIMIT_CASES, RECEIPT_CASES, TOKEN_CASES

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "worker" / "tools"))
from workerd_harness import Workerd, stage  # noqa: E402

KIT_WORKER = Path(__file__).resolve().parent / "kit_worker"
"""The test-only Worker: the library's routes plus the kit's (never in the template)."""


@pytest.fixture(scope="module")
def kit_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workerd]:
    tmp = tmp_path_factory.mktemp("store-kit")
    config = stage(tmp / "stage", bindings={"STORE_KIT": "1"}, storage_dir=tmp / "storage",
                   with_conformance=False, src_dir=KIT_WORKER, extra_objects={"MCP_TOKENS": "McpTokens", "RECEIPTS": "Receipts"},
                   racers=2)
    with Workerd(config) as wd:
        yield wd


def _post(wd: Workerd, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(wd.base_url + path, data=json.dumps(body).encode(),
                                 method="POST", headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=300) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


# The case that cannot apply to a Durable Object store, and must say so (skipped, with why): its
# slots are per isolate.
NOT_APPLICABLE = {"limit_slot_of_a_killed_holder_is_reclaimed_after_the_lease": "per isolate"}


def _assert_all_passed(wd: Workerd, path: str, names: list[str]) -> None:
    status, report = _post(wd, path, {"ns": path.strip("/").replace("/", "-")})
    assert status == 200, (report, wd.log_text())
    results = report["results"]
    assert [r["name"] for r in results] == names
    for r in results:
        if r["name"] in NOT_APPLICABLE:
            assert r["outcome"] == "skipped" and NOT_APPLICABLE[r["name"]] in r["detail"], r
    bad = [r for r in results if r["outcome"] != "passed" and r["name"] not in NOT_APPLICABLE]
    assert not bad, "\n\n".join(f"{r['name']}: {r['outcome']}\n{r['detail']}" for r in bad)


@pytest.mark.parametrize("suite, cases", [("checkpoint", CHECKPOINT_CASES),
                                          ("receipt", RECEIPT_CASES), ("limit", LIMIT_CASES),
                                          ("token", TOKEN_CASES)])
def test_every_kit_case_passes_on_the_durable_object_store(
        kit_worker: Workerd, suite: str, cases: Any) -> None:
    _assert_all_passed(kit_worker, f"/_kit/{suite}", list(cases))


def test_the_durable_objects_own_checks_pass(kit_worker: Workerd) -> None:
    _assert_all_passed(kit_worker, "/_kit/checks", [
        "claims_race_one_winner", "lease_free_save_fences_the_run",
        "stored_tokens_that_do_not_decode", "large_checkpoints",
        "a_fence_outside_the_object_fails_the_kit", "a_swap_outside_the_object_fails_the_kit",
        "outbox_lands_with_its_receipt_once"])


def test_the_kit_routes_are_off_without_the_binding(tmp_path: Path) -> None:
    """A Worker without ``STORE_KIT = "1"`` (a deployed one) does not serve them."""
    config = stage(tmp_path / "stage", bindings={}, storage_dir=tmp_path / "storage",
                   with_conformance=False, src_dir=KIT_WORKER, extra_objects={"MCP_TOKENS": "McpTokens"})
    with Workerd(config) as wd:
        status, body = _post(wd, "/_kit/checkpoint", {"ns": "x"})
    assert (status, body["error"]) == (404, "not_found"), body
