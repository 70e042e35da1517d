"""Run control: pooled tool batches (deadlines, receipts and heartbeats build on this)."""

from ._pool import (
    ToolBatchOptions as ToolBatchOptions,
    run_tool_calls_pooled_by_tool as run_tool_calls_pooled_by_tool,
)

__all__ = ("ToolBatchOptions", "run_tool_calls_pooled_by_tool")
