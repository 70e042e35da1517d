"""Task-augmented tool calls (the tasks utility of the 2025-11-25 revision): :func:`call_tool_as_task`
starts a ``tools/call`` the server runs as an :class:`McpTask`; :func:`get_task`,
:func:`list_tasks`, :func:`cancel_task` and :func:`task_result` follow it, and :func:`run_tool_task`
does all of it, polling through the client's injected ``sleep`` until a status in
:data:`TERMINAL_TASK_STATUSES`. See docs/mcp.md.
"""

from ._tasks import (
    TERMINAL_TASK_STATUSES as TERMINAL_TASK_STATUSES,
    McpTask as McpTask,
    call_tool_as_task as call_tool_as_task,
    cancel_task as cancel_task,
    get_task as get_task,
    list_tasks as list_tasks,
    run_tool_task as run_tool_task,
    task_result as task_result,
)

__all__ = (
    "TERMINAL_TASK_STATUSES",
    "McpTask",
    "call_tool_as_task",
    "cancel_task",
    "get_task",
    "list_tasks",
    "run_tool_task",
    "task_result",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
