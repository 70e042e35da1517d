"""The agent API's errors (their place in the tree: :mod:`bindloop.errors`).

:class:`AgentError` is the agent giving up on what it was asked: a structured answer it could not
get, tool loops, turns or reborns used up, a tool that failed. A limit the host set stops the run
(:class:`BudgetExceededError`, :class:`PromptSuspendedError` are
:class:`~bindloop.errors.RunStoppedError`); misuse of a hook is a
:class:`~bindloop.errors.UsageError` that names the hook and the fix. Approval, snapshot and rate
limit errors live with their features (:mod:`bindloop.agent.approvals`,
:mod:`bindloop.agent.snapshots`, :mod:`bindloop.agent.limits`).
"""

from ._errors import (
    AfterPromptAgentError as AfterPromptAgentError,
    AgentError as AgentError,
    BudgetExceededError as BudgetExceededError,
    LoopMissingToolOutputError as LoopMissingToolOutputError,
    NoAgentContextError as NoAgentContextError,
    PromptSuspendedError as PromptSuspendedError,
    RebornLimitExceededError as RebornLimitExceededError,
    StructuredOutputError as StructuredOutputError,
    ToolCallFailedError as ToolCallFailedError,
    ToolLoopExceededError as ToolLoopExceededError,
    TurnBudgetExceededError as TurnBudgetExceededError,
)

__all__ = (
    "AfterPromptAgentError",
    "AgentError",
    "BudgetExceededError",
    "LoopMissingToolOutputError",
    "NoAgentContextError",
    "PromptSuspendedError",
    "RebornLimitExceededError",
    "StructuredOutputError",
    "ToolCallFailedError",
    "ToolLoopExceededError",
    "TurnBudgetExceededError",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
