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


class _Seen:
    # What this isolate's calls saw (the dev workerd runs one isolate): read by ``seen``.
    cancelled: list[float] = []


async def _steps(args: Hold, ctx: Any) -> ToolResult:
    report = getattr(ctx, "report_progress", None)
    if report is not None:
        report(1, 2, "started")
    try:
        await asyncio.sleep(args.seconds)
    except asyncio.CancelledError:
        _Seen.cancelled.append(args.seconds)
        raise
    if report is not None:
        report(2, 2, "done")
    return ToolResult(content=f"held {args.seconds} s")


class NoArgs(msgspec.Struct):
    pass


async def _seen(args: NoArgs, ctx: Any) -> ToolResult:
    return ToolResult(content=f"cancelled: {_Seen.cancelled}")


STEPS = define_tool(name="steps", description="Reports progress, holds, reports, answers.",
                    args=Hold, execute=_steps)
SEEN = define_tool(name="seen", description="The holds cancelled so far.", args=NoArgs,
                   execute=_seen)


class Default(app.ChatWorker):
    tools = (STEPS, SEEN)
