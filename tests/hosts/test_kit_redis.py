"""The store conformance kit against RedisStore on a real server."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from bindloop.hosts.stores.redis import RedisStore
from bindloop.hosts.stores.processes import run_in_processes
from bindloop.testing.store_kit import CheckpointStoreSuite, LimitStoreSuite, ReceiptStoreSuite


class TestRedisStore(CheckpointStoreSuite, ReceiptStoreSuite, LimitStoreSuite):
    @pytest.fixture
    def store_factory(self, redis_url: str, namespace: str) -> Any:
        return functools.partial(RedisStore, redis_url, prefix=f"{namespace}:")

    @pytest.fixture
    def process_runner(self) -> Any:
        return run_in_processes
