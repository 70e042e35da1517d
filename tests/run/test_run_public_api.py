from __future__ import annotations

import importlib
import types

import pytest


@pytest.mark.parametrize("name", ["bindloop.run", "bindloop.routing"])
def test_curated_all_is_sorted_complete_and_importable(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert isinstance(exported, tuple) and list(exported) == sorted(set(exported))
    for symbol in exported:
        assert hasattr(module, symbol), symbol
    # A sub-namespace (``bindloop.routing.failures``) is an attribute once imported: not an export.
    public = {n for n, v in vars(module).items()
              if not n.startswith("_") and not isinstance(v, types.ModuleType)}
    assert public == set(exported)


def test_pool_keeps_its_exports_for_the_loop() -> None:
    import bindloop.run as run
    from bindloop.loop import ToolBatchOptions, run_tool_calls_pooled_by_tool

    # The error a not-run call comes back as has one home, bindloop.errors.
    assert "AbortedToolCallError" not in run.__all__
    assert callable(run_tool_calls_pooled_by_tool)
    assert ToolBatchOptions().max_per_tool is None
