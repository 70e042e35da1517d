"""The store conformance kit against the in-memory references and SqliteStore."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from bindloop.hosts.stores.sqlite import SqliteStore
from bindloop.hosts.stores.processes import run_in_processes
from bindloop.testing.store_kit import CheckpointStoreSuite, LimitStoreSuite, ReceiptStoreSuite

from .factories import MemoryBackend


class TestMemoryStores(CheckpointStoreSuite, ReceiptStoreSuite, LimitStoreSuite):
    @pytest.fixture
    def store_factory(self) -> Any:
        return MemoryBackend()


class TestSqliteStore(CheckpointStoreSuite, ReceiptStoreSuite, LimitStoreSuite):
    @pytest.fixture
    def store_factory(self, tmp_path: Path) -> Any:
        return functools.partial(SqliteStore, str(tmp_path / "kit.db"))

    @pytest.fixture
    def process_runner(self) -> Any:
        return run_in_processes
