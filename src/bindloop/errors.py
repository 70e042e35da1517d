"""One exception tree for bindloop.

Everything bindloop raises on purpose derives from :class:`BindloopError`, through one of four
branches:

* :class:`UsageError` — the caller or one of its ports broke a contract: a bug to fix, never retried;
* :class:`ProviderError` — something outside the process failed: routing decides what to do;
* :class:`RunStoppedError` — the run, or a call in it, was stopped on purpose (a deadline, a cancel,
  a fired abort signal);
* :class:`ToolFailure` — raised by a tool on purpose; the model reads its message.

Errors that are *reported* rather than raised (through ``on_tool_call_rejected``) are still exceptions
so a host can log them uniformly, but the loop never raises them itself.
"""

from __future__ import annotations

__all__ = (
    "AbortedToolCallError",
    "BindloopError",
    "DiscardedTurnWithToolCallsError",
    "InputBlockedBySuspendError",
    "InvalidModelTurnError",
    "MissingActivationPortError",
    "PortContractError",
    "PromptTooLongError",
    "ProtocolError",
    "ProviderError",
    "RunCancelledError",
    "RunStoppedError",
    "RunTimeoutError",
    "ToolFailure",
    "TranscriptFormatError",
    "UsageError",
    "is_prompt_too_long",
)


class BindloopError(Exception):
    """Root of every exception bindloop raises or reports."""


class UsageError(BindloopError, ValueError):
    """The caller broke a documented contract (bad argument, malformed value, misuse of an API)."""


class ProtocolError(UsageError):
    """A state machine was driven out of order (an event it cannot accept in its current phase)."""


class TranscriptFormatError(UsageError):
    """A message or transcript could not be read: wrong shape, unknown role, bad JSON."""


class InvalidModelTurnError(UsageError):
    """``call_model`` returned a turn the loop cannot act on (a tool call without an id, arguments that
    are not a JSON string, a duplicate id within the turn, ...)."""


class PortContractError(UsageError, TypeError):
    """A port (an injected callable) returned a value of the wrong type."""


class ProviderError(BindloopError):
    """A failure outside the process: a provider or transport error. Routing classifies these."""


class PromptTooLongError(ProviderError):
    """A provider refused a request because the prompt exceeds the context window.

    Wire adapters classify it; compaction's prompt-too-long retry recognises it.
    """


def is_prompt_too_long(exc: BaseException) -> bool:
    """Whether ``exc`` says the prompt exceeds the context window: it, or an exception it was raised
    from (``__cause__``, followed to the end and cycle-safe), is a :class:`PromptTooLongError`.

    The one test for the condition: a routed model raises an attempt error *caused by* the wire's
    prompt-too-long error, so an ``isinstance`` check on the outer error misses it.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, PromptTooLongError):
            return True
        seen.add(id(current))
        current = current.__cause__
    return False


class RunStoppedError(BindloopError):
    """The run, or one call in it, was stopped on purpose: never retried, never a tool error."""


class ToolFailure(BindloopError):
    """Raised by a tool on purpose: the model reads ``message`` verbatim as a tool error of
    ``kind``, exactly as if the tool had returned ``ToolError(error=message, kind=kind)``. Any other
    exception from a tool reaches the model only through ``format_tool_exception`` (by default its
    type name and a fixed text), since its message may hold what the provider must not see."""

    def __init__(self, message: str, *, kind: str = "error") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind


class RunTimeoutError(RunStoppedError):
    """The run's wall-clock budget expired. The loop never returns ``deadline``; it raises this."""

    def __init__(self, message: str = "run timed out", *, label: str | None = None) -> None:
        super().__init__(message)
        self.label = label


class RunCancelledError(RunStoppedError):
    """The run was cancelled by its caller. Always fatal inside a tool: it must abort, not be answered."""


class MissingActivationPortError(UsageError):
    """A tool asked the loop to activate plugins or skills while the matching port is unwired.

    Reported through ``on_tool_call_rejected``; the run continues.
    """

    def __init__(self, kind: str, names: tuple[str, ...]) -> None:
        super().__init__(
            f"a tool requested {kind} activation of {list(names)!r} but activate_{kind} is not wired"
        )
        self.kind = kind
        self.names = names


class DiscardedTurnWithToolCallsError(UsageError):
    """``accept_message=False`` was returned for a turn that requested tools; the discard was refused
    (the results would have no request to pair with) and the turn was kept. Reported, not raised."""


class InputBlockedBySuspendError(UsageError):
    """Input other than the answering tool message was delivered while a suspend is open; it was not
    appended. Reported through ``on_tool_call_rejected`` with the open suspend's tool-call id."""


class AbortedToolCallError(RunStoppedError):
    """A queued tool call was never started because the batch's signal fired. The model sees it as a
    ``not_run`` tool error; ``stats.tool_calls`` does not count it."""

    def __init__(self, tool_call_id: str, reason: str | None = None) -> None:
        super().__init__(f"tool call {tool_call_id!r} was not run: the batch was aborted"
                         + (f" ({reason})" if reason else ""))
        self.tool_call_id = tool_call_id
        self.reason = reason
