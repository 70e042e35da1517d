"""The token store cases of the store kit against the in-memory MCP token store (the Durable
Object one runs them in workerd: tests/worker/test_workerd_store_kit.py)."""

from __future__ import annotations

from typing import Any

import pytest

from bindloop.stores import MemoryTokenStore
from bindloop.testing.store_kit import TokenStoreSuite


class TestMemoryTokenStore(TokenStoreSuite):
    @pytest.fixture
    def store_factory(self) -> Any:
        store = MemoryTokenStore()  # one object is the whole backend: every handle is it
        return lambda: store
