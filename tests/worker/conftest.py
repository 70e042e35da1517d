"""Fixtures for the Worker template in real workerd (``make test-worker``).

These tests start npm workerd and need ``worker/node_modules`` and ``harness/wasm/wheels-pyc``; the `test_workerd_*` files run only
when ``BINDLOOP_WORKERD_TESTS=1`` (the Makefile target sets it after installing both), so a plain
``pytest`` does not pay for a workerd start twice or fail on a clone without them.
"""

from __future__ import annotations

import os

if os.environ.get("BINDLOOP_WORKERD_TESTS") != "1":
    collect_ignore_glob = ["test_workerd_*.py"]
