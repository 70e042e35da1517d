"""Task-augmented tool calls (the experimental tasks utility of the 2025-11-25 revision): a
``tools/call`` the server runs as a task, answered at once with the task; the client polls
``tasks/get`` and fetches the outcome with ``tasks/result``. Functions over an
:class:`~bindloop.mcp.McpHttpClient`; waiting goes through the client's injected ``sleep``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from ._errors import McpProtocolError
from ._http import McpHttpClient
from ._protocol import CallToolResult

__all__ = (
    "McpTask",
    "TERMINAL_TASK_STATUSES",
    "call_tool_as_task",
    "cancel_task",
    "get_task",
    "list_tasks",
    "run_tool_task",
    "task_result",
)

TERMINAL_TASK_STATUSES = frozenset({"completed", "failed", "cancelled"})


class McpTask(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A task as the server reports it: ``status`` is ``working``, ``input_required``,
    ``completed``, ``failed`` or ``cancelled``; ``poll_interval`` (ms) is the server's advice."""

    task_id: str
    status: str
    status_message: str | None = None
    created_at: str | None = None
    last_updated_at: str | None = None
    ttl: int | None = None
    poll_interval: int | None = None


def _task(client: McpHttpClient, value: Any, method: str) -> McpTask:
    try:
        return msgspec.convert(value, McpTask)
    except msgspec.ValidationError as exc:
        raise McpProtocolError(client.server, f"answered {method} without a valid task: "
                                              f"{exc}") from exc


async def call_tool_as_task(client: McpHttpClient, name: str, arguments: Mapping[str, Any], *,
                            ttl_ms: int | None = None) -> McpTask:
    """``tools/call`` with a ``task`` (kept ``ttl_ms`` after it finishes, when given): the
    server's answer is the task, not the tool's result. Only for servers whose capabilities list
    ``tasks.requests.tools.call``.

    Raises
    ------
    McpProtocolError
        The server answered with something that is not a task (it ran the call directly).
    """
    task: dict[str, Any] = {} if ttl_ms is None else {"ttl": ttl_ms}
    answer = await client.request("tools/call", {"name": name, "arguments": dict(arguments),
                                                 "task": task})
    inner = answer.get("task") if isinstance(answer, dict) else None
    return _task(client, inner, "tools/call")


async def get_task(client: McpHttpClient, task_id: str) -> McpTask:
    return _task(client, await client.request("tasks/get", {"taskId": task_id}), "tasks/get")


async def cancel_task(client: McpHttpClient, task_id: str) -> McpTask:
    return _task(client, await client.request("tasks/cancel", {"taskId": task_id}),
                 "tasks/cancel")


async def list_tasks(client: McpHttpClient, *, max_pages: int = 100) -> list[McpTask]:
    from ._features import _pages

    return await _pages(client, "tasks/list", "tasks", McpTask, max_pages)


async def task_result(client: McpHttpClient, task_id: str, *,
                      timeout_ms: float | None | bool = True) -> CallToolResult:
    """``tasks/result``: the tool's result once the task is done (the server may hold the
    request open until then, and deliver its own requests — an elicitation — on its stream)."""
    answer = await client.request("tasks/result", {"taskId": task_id}, timeout_ms=timeout_ms)
    try:
        return msgspec.convert(answer, CallToolResult)
    except msgspec.ValidationError as exc:
        raise McpProtocolError(client.server, f"answered tasks/result with a malformed tool "
                                              f"result: {exc}") from exc


async def run_tool_task(client: McpHttpClient, name: str, arguments: Mapping[str, Any], *,
                        ttl_ms: int | None = None, poll_ms: float = 1_000.0,
                        on_status: Callable[[McpTask], None] | None = None) -> CallToolResult:
    """Start ``name`` as a task, poll it (the server's ``pollInterval``, else ``poll_ms``) while
    it works, reporting each status to ``on_status``, then fetch its result. A task that needs
    input (``input_required``) goes straight to ``tasks/result``, whose stream carries the
    server's request to the client's handlers."""
    task = await call_tool_as_task(client, name, arguments, ttl_ms=ttl_ms)
    while True:
        if on_status is not None:
            on_status(task)
        if task.status in TERMINAL_TASK_STATUSES or task.status == "input_required":
            break
        await client._sleep((task.poll_interval or poll_ms) / 1000.0)
        task = await get_task(client, task.task_id)
    return await task_result(client, task.task_id)
