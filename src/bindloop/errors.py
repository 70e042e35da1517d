"""One exception tree for bindloop, and the rule for where each exception lives.

Everything bindloop raises on purpose derives from :class:`BindloopError`, through one of its
branches:

* :class:`UsageError` — the caller or one of its ports broke a contract: a bug to fix, never retried;
* :class:`ProviderError` — something outside the process failed: routing decides what to do;
* :class:`RunStoppedError` — the run, or a call in it, was stopped on purpose (a deadline, a cancel,
  a fired abort signal, a limit the host set);
* :class:`ToolFailure` — raised by a tool on purpose; the model reads its message;
* ``bindloop.agent.errors.AgentError`` — the agent gave up on what it was asked (structured output,
  re-ask, turn and reborn limits).

The rule: this module holds the root, the four general branches and the few leaves every layer
shares (a port's or a state machine's contract broken, an unreadable transcript, a prompt too long,
an infrastructure failure, a timeout, a cancel, an aborted call); every other exception lives in
the ``_errors.py`` of the one package that raises it and is exported by that package or one of its
sub-namespaces. This module imports nothing of bindloop.
tests/errors/test_error_tree.py renders the real tree and compares it with this drawing:

.. code-block:: text

    BindloopError
      AgentError (bindloop.agent.errors)
        RebornLimitExceededError (bindloop.agent.errors)
        StructuredOutputError (bindloop.agent.errors)
        ToolCallFailedError (bindloop.agent.errors)
        ToolLoopExceededError (bindloop.agent.errors)
        TurnBudgetExceededError (bindloop.agent.errors)
      CompactError (bindloop.compaction)
        CompactEmptySummaryError (bindloop.compaction), also ProviderError
        CompactInvalidInputError (bindloop.compaction), also UsageError
        CompactPromptTooLongError (bindloop.compaction), also ProviderError
      ProviderError
        A2aRpcError (bindloop.protocols.a2a)
        AttemptError (bindloop.routing)
        InfrastructureError
          StoreError (bindloop.stores)
        InvalidOutputError (bindloop.schema)
        McpError (bindloop.mcp)
          McpAuthorizationError (bindloop.mcp.auth)
          McpConnectionError (bindloop.mcp)
          McpHttpError (bindloop.mcp)
            McpSessionExpiredError (bindloop.mcp)
          McpInputPending (bindloop.mcp.server_requests)
          McpProtocolError (bindloop.mcp)
            McpVersionError (bindloop.mcp)
          McpRpcError (bindloop.mcp)
            McpUrlElicitationRequired (bindloop.mcp.server_requests)
          McpTimeoutError (bindloop.mcp)
        ModelStreamError (bindloop.completion)
        PromptTooLongError
        ProviderHttpError (bindloop.wire)
          ProviderPromptTooLongError (bindloop.wire), also PromptTooLongError
        RouteUnavailableError (bindloop.routing)
        SseError (bindloop.wire)
          SseLimitError (bindloop.wire)
        StreamStalledError (bindloop.wire)
        ToolCallDeltaError (bindloop.completion)
        TransportError (bindloop.wire)
        WireDecodeError (bindloop.wire)
          IncompleteStreamError (bindloop.wire)
      RunStoppedError
        AbortedToolCallError
        BudgetExceededError (bindloop.agent.errors)
        PromptSuspendedError (bindloop.agent.errors)
        RateLimitExceededError (bindloop.agent.limits)
        RunCancelledError
        RunTimeoutError
        RunsFullError (bindloop.stores)
      ToolFailure
        McpRequestRefused (bindloop.mcp.server)
      UsageError
        AfterPromptAgentError (bindloop.agent.errors)
        ApprovalError (bindloop.agent.approvals)
          ApprovalAlreadyDecidedError (bindloop.agent.approvals)
          ApprovalTokenError (bindloop.agent.approvals)
        CanonicalJsonError (bindloop.run)
        CheckpointConflictError (bindloop.stores)
        CheckpointFormatError (bindloop.checkpoints)
          UnsupportedCheckpointVersionError (bindloop.checkpoints)
        CheckpointInputError (bindloop.checkpoints)
        DiscardedTurnWithToolCallsError (bindloop.loop)
        ElicitationContentError (bindloop.mcp.server_requests)
        ElicitationNotPendingError (bindloop.mcp.server_requests)
        InputBlockedBySuspendError (bindloop.loop)
        InvalidIdError (bindloop.routing)
        InvalidModelTurnError (bindloop.loop)
        JsonBoundsError (bindloop.contracts)
        LoopMissingToolOutputError (bindloop.agent.errors)
        MissingActivationPortError (bindloop.loop)
        NoAgentContextError (bindloop.agent.errors)
        PortContractError
        ProtocolError
        ProtocolRequestError (bindloop.protocols)
        RoutePlanError (bindloop.routing)
        RunBusyError (bindloop.stores)
        SchemaSanitizeError (bindloop.schema)
        ScriptExhaustedError (bindloop.testing)
        SkillFormatError (bindloop.skills)
        SnapshotDisabledError (bindloop.agent.snapshots)
        SnapshotDivergenceError (bindloop.agent.snapshots)
        TranscriptFormatError
          ToolPairingError (bindloop.transcript)
        UnsupportedSchemaError (bindloop.schema)
        WireRequestError (bindloop.wire)

Errors that are *reported* rather than raised (through ``on_tool_call_rejected``) are still exceptions
so a host can log them uniformly, but the loop never raises them itself.
"""

from __future__ import annotations

__all__ = (
    "AbortedToolCallError",
    "BindloopError",
    "InfrastructureError",
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
    "is_infrastructure_error",
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


class InfrastructureError(ProviderError):
    """The durable state a run stands on failed: a store of checkpoints, receipts or limits
    (:class:`bindloop.stores.StoreError`; a host's own store may raise a subclass too). Whether the
    failed write landed is unknown, so inside a tool it is fatal by default
    (:func:`is_infrastructure_error`): the run stops and resumes from its last checkpoint, where the
    receipts decide what runs again, instead of the model reading it as the tool's error and the
    effect being lost."""


def is_infrastructure_error(exc: BaseException) -> bool:
    """Whether a tool's raise is an infrastructure failure: an :class:`InfrastructureError`, an
    exception group holding one (a tool's own task group), or an exception raised *from* one
    (``__cause__``, followed to the end and cycle-safe) — unless that exception is a
    :class:`ToolFailure`, the tool's deliberate word to the model.

    The loop's default for ``is_fatal_tool_error``; a host's own predicate replaces it (compose
    with ``lambda e: is_infrastructure_error(e) or mine(e)`` to add to it)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ToolFailure):
            return False
        if isinstance(current, InfrastructureError):
            return True
        if isinstance(current, BaseExceptionGroup) and any(
                is_infrastructure_error(inner) for inner in current.exceptions):
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








class AbortedToolCallError(RunStoppedError):
    """A queued tool call was never started because the batch's signal fired. The model sees it as a
    ``not_run`` tool error; ``stats.tool_calls`` does not count it."""

    def __init__(self, tool_call_id: str, reason: str | None = None) -> None:
        super().__init__(f"tool call {tool_call_id!r} was not run: the batch was aborted"
                         + (f" ({reason})" if reason else ""))
        self.tool_call_id = tool_call_id
        self.reason = reason
