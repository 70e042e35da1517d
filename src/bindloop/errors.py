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

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for the annotation only: errors imports nothing of the package at run time
    from .session import LoopCheckpoint

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
    """A tool asked the loop to activate plugins or skills while its ``activate`` port is unwired.

    Reported through ``on_tool_call_rejected``; the run continues.
    """

    def __init__(self, kind: str, names: tuple[str, ...]) -> None:
        super().__init__(
            f"a tool requested {kind} activation of {list(names)!r} but the activate port is not wired"
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


# --- The agent API (bindloop.agent) --------------------------------------------------------------
# Every misuse of a hook names the hook and the fix; failures outside the process stay ProviderErrors.

__all__ += (  # type: ignore[assignment]  # extended here: this block stays one contiguous append
    "AfterPromptAgentError",
    "AgentError",
    "BudgetExceededError",
    "LoopMissingToolOutputError",
    "MissingDependencyError",
    "ModelRegistryNotFoundError",
    "NoAgentContextError",
    "PromptAgentAlreadyCalledError",
    "PromptSuspendedError",
    "RateLimitExceededError",
    "RebornLimitExceededError",
    "SnapshotDisabledError",
    "SnapshotDivergenceError",
    "SnapshotFormatError",
    "StructuredOutputError",
    "ToolCallFailedError",
    "ToolLoopExceededError",
    "TurnBudgetExceededError",
    "UnsupportedSchemaError",
)


class AgentError(RunStoppedError):
    """Root of the agent API's run-time failures that are not usage errors: a limit the host set
    (budget, reborns, turns, rate), retries used up, a replay that diverged. The agent run stopped on
    purpose, so these sit under :class:`RunStoppedError`: routing never retries them."""


class NoAgentContextError(UsageError):
    """A hook (``equip_*``, ``expect_*``, ``prompt_*``, ``on_stream``, ``reborn``, ``dump_snapshot``)
    was called outside an agent handler (or, for ``dump_snapshot``, outside ``run_with``)."""


class AfterPromptAgentError(UsageError):
    """A draft hook was called after this generation's prompt crossed the draft barrier."""


class PromptAgentAlreadyCalledError(UsageError):
    """A second ``prompt_agent`` / ``prompt_chat`` in one generation (use ``reborn()`` for another)."""


class RebornLimitExceededError(AgentError):
    """A handler returned ``reborn()`` more than ``max_reborns`` times."""


class ModelRegistryNotFoundError(UsageError):
    """An agent names a model id that ``run_with(model_registry=)`` does not hold, or has no model
    at all (none of its own, its parent's, or the root's)."""


class UnsupportedSchemaError(UsageError):
    """``prompt_agent(schema)``: the schema is not a type msgspec can describe, or a JSON Schema dict
    uses a keyword outside the supported subset (the message names it)."""


class StructuredOutputError(AgentError):
    """Every structured-output attempt failed (invalid JSON, schema mismatch or a validator's
    refusal). ``attempts`` holds each attempt's ``(raw_text, reason)`` in order."""

    def __init__(self, message: str, attempts: tuple[tuple[str, str], ...]) -> None:
        super().__init__(message)
        self.attempts = attempts


class ToolLoopExceededError(AgentError):
    """One tool loop used ``max_turn_steps`` model turns without a final answer.

    From ``prompt_chat`` / ``resume_chat``, ``checkpoint`` is the chat where it stopped (status
    ``iteration_limit``, every finished tool round in it): ``resume_chat(checkpoint,
    max_turn_steps=n)`` continues it with ``n`` more turns. ``None`` from ``prompt_agent``."""

    def __init__(self, message: str, *, max_turn_steps: int,
                 checkpoint: LoopCheckpoint | None = None) -> None:
        super().__init__(message)
        self.max_turn_steps = max_turn_steps
        self.checkpoint = checkpoint


class TurnBudgetExceededError(AgentError):
    """The prompt's total model-turn budget (tool steps plus validation re-asks) ran out."""

    def __init__(self, message: str, *, max_total_turns: int) -> None:
        super().__init__(message)
        self.max_total_turns = max_total_turns


class LoopMissingToolOutputError(UsageError):
    """A tool-call-loop middleware chain did not return exactly one output per tool call of the
    batch (N in, N out). ``missing`` / ``unexpected`` / ``duplicated`` name the call ids."""

    def __init__(self, message: str, *, missing: tuple[str, ...] = (),
                 unexpected: tuple[str, ...] = (), duplicated: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.missing = missing
        self.unexpected = unexpected
        self.duplicated = duplicated


class ToolCallFailedError(AgentError):
    """``call_tool``: the tool came back with an error (or suspended); ``outcome`` is what it gave."""

    def __init__(self, message: str, outcome: object) -> None:
        super().__init__(message)
        self.outcome = outcome


class BudgetExceededError(AgentError):
    """``equip_budget``: the agent's spend (in the unit of the model's price) reached its limit;
    raised before the next model call."""

    def __init__(self, message: str, *, spent: int, limit: int) -> None:
        super().__init__(message)
        self.spent = spent
        self.limit = limit


class RateLimitExceededError(ProviderError):
    """A rate-limit rule refused a model call (a rule that raises instead of waiting, or a wait
    longer than the rule's ``max_wait_ms``). ``rule`` names the rule, ``retry_after_ms`` the wait."""

    def __init__(self, message: str, *, rule: str, retry_after_ms: float | None) -> None:
        super().__init__(message)
        self.rule = rule
        self.retry_after_ms = retry_after_ms


class SnapshotDisabledError(UsageError):
    """``dump_snapshot()`` in a run started without ``run_with(enable_snapshot=True)``."""


class SnapshotDivergenceError(AgentError):
    """A replayed run asked for something other than what the journal recorded at that point."""


class SnapshotFormatError(UsageError):
    """A snapshot could not be read: wrong version or shape. ``field`` names the offending field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"snapshot field {field or '<root>'!r}: {problem}")
        self.field = field


class MissingDependencyError(UsageError):
    """``expect_scope`` / ``expect_resource``: no ancestor agent (nor ``run_with(providers=)``)
    offers the key."""


class PromptSuspendedError(AgentError):
    """A tool suspended inside ``prompt_agent`` (structured output cannot wait for a reply).
    ``checkpoint`` is the settled position: continue it with ``resume_chat``."""

    def __init__(self, message: str, checkpoint: object) -> None:
        super().__init__(message)
        self.checkpoint = checkpoint
