"""The store conformance kit against PostgresStore on a real server."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from bindloop.hosts.stores.postgres import PostgresStore
from bindloop.hosts.stores.processes import run_in_processes
from bindloop.testing.store_kit import CheckpointStoreSuite, LimitStoreSuite, ReceiptStoreSuite


class TestPostgresStore(CheckpointStoreSuite, ReceiptStoreSuite, LimitStoreSuite):
    @pytest.fixture
    def store_factory(self, postgres_dsn: str, namespace: str) -> Any:
        return functools.partial(PostgresStore, postgres_dsn, schema=namespace)

    @pytest.fixture
    def process_runner(self) -> Any:
        return run_in_processes
