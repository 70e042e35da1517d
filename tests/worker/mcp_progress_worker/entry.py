"""The test-only Worker of tests/worker/test_workerd_mcp_progress.py: the library's routes, its
``/mcp`` serving one tool that reports progress, holds for a while, then reports again and
answers; served with the template's wrangler.jsonc; never deployed."""

import asyncio
from typing import Any

import msgspec

from bindloop.contracts import ToolResult
from bindloop.hosts.workers import app
from bindloop.hosts.workers.app import McpTokens, RateLimiter, Receipts, Session  # noqa: F401
from bindloop.tools import define_tool


class Hold(msgspec.Struct):
    seconds: float


async def _steps(args: Hold, ctx: Any) -> ToolResult:
    report = getattr(ctx, "report_progress", None)
    if report is not None:
        report(1, 2, "started")
    await asyncio.sleep(args.seconds)
    if report is not None:
        report(2, 2, "done")
    return ToolResult(content=f"held {args.seconds} s")


STEPS = define_tool(name="steps", description="Reports progress, holds, reports, answers.",
                    args=Hold, execute=_steps)


class Default(app.ChatWorker):
    tools = (STEPS,)
