"""The agent API's errors, on the tree's branches (see :mod:`bindloop.errors`).

Misuse of a hook is a :class:`~bindloop.errors.UsageError` that names the hook and the fix; a limit
the host set stops the run (:class:`~bindloop.errors.RunStoppedError`); and :class:`AgentError` is
the agent giving up on what it was asked: a structured answer it could not get, re-asks, turns or
reborns used up.
"""

from __future__ import annotations

from ..errors import BindloopError, RunStoppedError, UsageError
from ..checkpoints import LoopCheckpoint

__all__ = (
    "ApprovalAlreadyDecidedError",
    "ApprovalError",
    "ApprovalTokenError",
    "AfterPromptAgentError",
    "AgentError",
    "BudgetExceededError",
    "LoopMissingToolOutputError",
    "NoAgentContextError",
    "PromptSuspendedError",
    "RateLimitExceededError",
    "RebornLimitExceededError",
    "SnapshotDisabledError",
    "SnapshotDivergenceError",
    "StructuredOutputError",
    "ToolCallFailedError",
    "ToolLoopExceededError",
    "TurnBudgetExceededError",
)

# --- misuse: a bug in the handler or the host ----------------------------------------------


class NoAgentContextError(UsageError):
    """A hook (``equip_*``, ``expect_*``, ``prompt_*``, ``on_stream``, ``reborn``, ``dump_snapshot``)
    was called outside an agent handler (or, for ``dump_snapshot``, outside ``run_with``)."""


class AfterPromptAgentError(UsageError):
    """A draft hook was called after this generation's prompt crossed the draft barrier."""




class LoopMissingToolOutputError(UsageError):
    """A tool-call-loop middleware chain did not return exactly one output per tool call of the
    batch (N in, N out). ``missing`` / ``unexpected`` / ``duplicated`` name the call ids."""

    def __init__(self, message: str, *, missing: tuple[str, ...] = (),
                 unexpected: tuple[str, ...] = (), duplicated: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.missing = missing
        self.unexpected = unexpected
        self.duplicated = duplicated


class SnapshotDisabledError(UsageError):
    """``dump_snapshot()`` in a run started without ``run_with(enable_snapshot=True)``."""


class SnapshotFormatError(UsageError):
    """A snapshot could not be read: wrong version or shape. ``field`` names the offending field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"snapshot field {field or '<root>'!r}: {problem}")
        self.field = field



class SnapshotDivergenceError(UsageError):
    """A replayed run asked for something other than what the journal recorded at that point."""


# --- a limit the host set stopped the run ---------------------------------------------------


class BudgetExceededError(RunStoppedError):
    """``equip_budget``: the agent's spend (in the unit of the model's price) reached its limit;
    raised before the next model call."""

    def __init__(self, message: str, *, spent: int, limit: int) -> None:
        super().__init__(message)
        self.spent = spent
        self.limit = limit


class RateLimitExceededError(RunStoppedError):
    """A rate-limit rule refused a model call (a rule that raises instead of waiting, or a wait
    longer than the rule's ``max_wait_ms``). ``rule`` names the rule, ``retry_after_ms`` the wait."""

    def __init__(self, message: str, *, rule: str, retry_after_ms: float | None) -> None:
        super().__init__(message)
        self.rule = rule
        self.retry_after_ms = retry_after_ms


class PromptSuspendedError(RunStoppedError):
    """A tool suspended inside ``prompt_agent`` (structured output cannot wait for a reply).
    ``checkpoint`` is the settled position: continue it with ``resume_chat``."""

    def __init__(self, message: str, checkpoint: LoopCheckpoint) -> None:
        super().__init__(message)
        self.checkpoint = checkpoint


# --- the agent gave up -----------------------------------------------------------------------

class AgentError(BindloopError):
    """The agent gave up on what it was asked: every structured-output attempt failed, the re-ask
    or turn budget ran out, the reborn limit was reached, or a tool it called for the handler came
    back with an error. Not a bug (:class:`~bindloop.errors.UsageError`), not a stop the host
    ordered (:class:`~bindloop.errors.RunStoppedError`), not a provider failure: routing never
    retries it, and a host may retry with a different prompt or larger limits."""


class StructuredOutputError(AgentError):
    """Every structured-output attempt failed (invalid JSON, schema mismatch or a validator's
    refusal). ``attempts`` holds each attempt's ``(raw_text, reason)`` in order."""

    def __init__(self, message: str, attempts: tuple[tuple[str, str], ...]) -> None:
        super().__init__(message)
        self.attempts = attempts


class RebornLimitExceededError(AgentError):
    """A handler returned ``reborn()`` more than ``max_reborns`` times."""


class TurnBudgetExceededError(AgentError):
    """The prompt's total model-turn budget (tool steps plus validation re-asks) ran out."""

    def __init__(self, message: str, *, max_total_turns: int) -> None:
        super().__init__(message)
        self.max_total_turns = max_total_turns


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


class ToolCallFailedError(AgentError):
    """``call_tool``: the tool came back with an error (or suspended); ``outcome`` is what it gave."""

    def __init__(self, message: str, outcome: object) -> None:
        super().__init__(message)
        self.outcome = outcome


class ApprovalError(UsageError):
    """A decision that cannot be applied to the checkpoint it was given for."""


class ApprovalAlreadyDecidedError(ApprovalError):
    """``call_id`` was decided already (on this checkpoint, by another process, or earlier in the
    execution): the decision is refused and the call does not run again."""

    def __init__(self, message: str, call_ids: tuple[str, ...]) -> None:
        super().__init__(message)
        self.call_ids = call_ids


class ApprovalTokenError(ApprovalError):
    """A decision's token is missing or does not match the pending call it names (wrong secret,
    another checkpoint revision, forged)."""
