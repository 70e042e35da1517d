"""stdlib ``logging`` for hosts: the core's one record, on a logger and at a level you choose.

A prompt already reports every failed tool call as a WARNING on the ``bindloop.agent.tools``
logger (``bindloop.agent.log_tool_error``, the default ``run_with(on_tool_error=)``).
:func:`log_tool_errors` is a hook making the same record with your logger, your level, and the
traceback written into the message instead of ``exc_info`` if you ask (for a formatter that drops
``exc_info``); installed, it replaces the default, so each failure is logged once. Every text that
goes into a record passes the wire path's shape rule (``Bearer`` / ``Basic`` tokens, secret query
parameters and URL user info are blanked), so a credential a tool's exception carries does not
reach a log. The record's ``bindloop`` extra holds the structured fields (call id, tool, agent,
session, trace, error type) for a JSON formatter.
"""

from __future__ import annotations

import logging

from bindloop.agent import TOOL_LOGGER, ToolErrorHook, ToolErrorReport, log_tool_error

__all__ = ("LOGGER_NAME", "log_tool_errors")

LOGGER_NAME = TOOL_LOGGER


def log_tool_errors(logger: logging.Logger | None = None, *, level: int = logging.WARNING,
                    include_traceback: bool = False) -> ToolErrorHook:
    """A ``run_with(on_tool_error=)`` hook logging each failed tool call at ``level`` on
    ``logger`` (``bindloop.agent.tools`` by default), in place of the default WARNING record —
    the same record otherwise (``bindloop.agent.log_tool_error``).

    The message names the tool, the call, the agent and the error (type and message, redacted);
    ``exc_info`` carries the traceback with a redacted stand-in value. ``include_traceback`` writes
    the formatted traceback, redacted the same way, into the message instead (and no
    ``exc_info``)."""
    log = logger if logger is not None else logging.getLogger(LOGGER_NAME)

    def report(failure: ToolErrorReport) -> None:
        log_tool_error(failure, logger=log, level=level, include_traceback=include_traceback)

    return report
