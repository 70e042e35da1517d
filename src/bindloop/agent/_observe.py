"""What the host observes without a trace bus: a prompt's stats (:func:`prompt_stats`) and its
tool failures (``ChatResult.tool_failures``, ``run_with(on_tool_error=)``).

The model's side is the loop's: a raise becomes the tool error the model reads (only the
exception's type and a fixed text, unless it is a :class:`~bindloop.errors.ToolFailure`). The
host's side is the :class:`ToolErrorReport`, built from the loop's ``on_tool_call_rejected`` port
with the exception itself (:func:`reporter`, the one place a prompt reports a failed call): handed
to the run's hook at once — by default ``bindloop.agent.log_tool_error``, a redacted WARNING
record — and kept for the prompt's ``ChatResult.tool_failures``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from ..contracts import AssistantMessage, Message, RunStats, ToolMessage, content_text
from ..errors import UsageError
from ._context import current_frame

__all__ = ("ToolErrorHook", "ToolErrorReport", "prompt_stats", "reporter", "settled_failures")


class ToolErrorReport(msgspec.Struct, frozen=True, kw_only=True):
    """One tool call that failed: the exception a tool raised (``error``, as raised) or the loop's
    own for a call it did not run (an :class:`~bindloop.errors.AbortedToolCallError` once the
    run's signal fired), with the ``call_id``, the ``tool_name`` the model asked for, the agent's
    id and the run's ``session_id`` / ``trace_id``. The model read the tool error as usual; this
    report is for the host alone (the exception lives in this process: it is not encoded). A tool
    that *returns* a ``ToolError`` did not fail here.

    ``model_read`` is the text of the tool message the model got for the call (the redacted error,
    or what a tool-call-loop middleware answered instead): filled on ``ChatResult.tool_failures``,
    ``None`` when the hook is called (the result is not in the transcript yet) or when the
    transcript holds no result for the call."""

    call_id: str
    tool_name: str | None
    agent_id: str | None
    error: BaseException
    session_id: str | None = None
    trace_id: str | None = None
    model_read: str | None = None

    @property
    def error_type(self) -> str:
        """The exception's type name (what the model is told, unless it raised a ToolFailure)."""
        return type(self.error).__name__


ToolErrorHook = Callable[[ToolErrorReport], None]
"""``run_with(on_tool_error=)``: called synchronously, the moment the call failed (log, count,
queue; keep it cheap), in place of the default ``log_tool_error``. A raise from the hook fails
the prompt."""


def _tool_name(messages: Sequence[Message], call_id: str) -> str | None:
    for message in reversed(messages):  # the call is in the latest assistant turn, usually
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                if call.id == call_id:
                    return call.name
    return None


def reporter(hook: ToolErrorHook, messages: Callable[[], Sequence[Message]], agent_id: str | None,
             session_id: str | None, trace_id: str | None, failures: list[ToolErrorReport],
             ) -> Callable[[str, BaseException], None]:
    """The loop's ``on_tool_call_rejected`` port: each failed call's report appended to
    ``failures`` (the prompt's ``ChatResult.tool_failures``) and handed to ``hook`` (``messages()``
    gives the live transcript the failing call came from, read when a call fails)."""

    def rejected(call_id: str, error: BaseException) -> None:
        report = ToolErrorReport(call_id=call_id, tool_name=_tool_name(messages(), call_id),
                                 agent_id=agent_id, error=error, session_id=session_id,
                                 trace_id=trace_id)
        failures.append(report)
        hook(report)

    return rejected


def settled_failures(failures: Sequence[ToolErrorReport], messages: Sequence[Message]
                     ) -> tuple[ToolErrorReport, ...]:
    """``failures`` with ``model_read`` filled from ``messages``, the prompt's final transcript (the
    latest tool message answering each call)."""
    if not failures:
        return ()
    read = {m.tool_call_id: content_text(m.content) for m in messages if isinstance(m, ToolMessage)}
    return tuple(msgspec.structs.replace(f, model_read=read.get(f.call_id)) for f in failures)


def prompt_stats() -> RunStats:
    """The :class:`~bindloop.contracts.RunStats` of this generation's prompt — model turns (re-asks
    included), tool calls, tokens and ``cost`` (the model's ``price``, summed once per turn) — for
    :func:`prompt_agent`, which returns the value alone, as for :func:`prompt_chat` /
    :func:`resume_chat` (the same value as their ``ChatResult.stats``). Readable in the handler
    once the prompt returned or raised :class:`~bindloop.errors.PromptSuspendedError`; before,
    :class:`~bindloop.errors.UsageError`. No trace bus needed."""
    frame = current_frame("prompt_stats")
    assert frame.generation is not None  # current_frame checked it
    stats = frame.generation.stats
    if stats is None:
        raise UsageError(f"prompt_stats() in agent {frame.agent_id!r}: this generation's prompt "
                         "has not returned yet; call it after `await prompt_agent(...)` / "
                         "`await prompt_chat()`")
    return stats
