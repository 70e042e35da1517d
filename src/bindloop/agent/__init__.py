"""The agent API: hooks-style agents that run prompts on the tool loop (built on the wire models, the
turn text stream and session checkpoints; partial JSON reads a structured answer as it streams).
See docs/agent.md.

``create_agent`` makes an awaitable agent; inside its handler the ``equip_*`` / ``expect_*`` /
``on_stream`` hooks shape one generation's prompt, ``prompt_agent(schema)`` / ``prompt_chat()``
run it, ``reborn()`` starts another generation. ``run_with`` is the explicit root of a run (models,
providers, trace bus, snapshots).
"""

from ._agent import (
    Agent as Agent,
    Reborn as Reborn,
    augment_agent as augment_agent,
    create_agent as create_agent,
    reborn as reborn,
)
from ._errors import (
    AfterPromptAgentError as AfterPromptAgentError,
    ApprovalAlreadyDecidedError as ApprovalAlreadyDecidedError,
    ApprovalError as ApprovalError,
    ApprovalTokenError as ApprovalTokenError,
    AgentError as AgentError,
    BudgetExceededError as BudgetExceededError,
    LoopMissingToolOutputError as LoopMissingToolOutputError,
    MissingDependencyError as MissingDependencyError,
    ModelRegistryNotFoundError as ModelRegistryNotFoundError,
    NoAgentContextError as NoAgentContextError,
    PromptAgentAlreadyCalledError as PromptAgentAlreadyCalledError,
    PromptSuspendedError as PromptSuspendedError,
    RateLimitExceededError as RateLimitExceededError,
    RebornLimitExceededError as RebornLimitExceededError,
    SnapshotDisabledError as SnapshotDisabledError,
    SnapshotDivergenceError as SnapshotDivergenceError,
    StructuredOutputError as StructuredOutputError,
    ToolCallFailedError as ToolCallFailedError,
    ToolLoopExceededError as ToolLoopExceededError,
    TurnBudgetExceededError as TurnBudgetExceededError,
)
from ._approvals import (
    ApprovalDecision as ApprovalDecision,
    ApproveCall as ApproveCall,
    DenyCall as DenyCall,
    EditCall as EditCall,
    PendingApproval as PendingApproval,
    approval_token as approval_token,
    approve as approve,
    deny as deny,
    edit_arguments as edit_arguments,
    pending_approvals as pending_approvals,
)
from ._hooks import (
    equip_budget as equip_budget,
    equip_history as equip_history,
    equip_instruction as equip_instruction,
    equip_memo as equip_memo,
    equip_memory as equip_memory,
    equip_resource as equip_resource,
    equip_scope as equip_scope,
    equip_system as equip_system,
    equip_tool as equip_tool,
    equip_tool_call_loop_middleware as equip_tool_call_loop_middleware,
    expect_resource as expect_resource,
    expect_scope as expect_scope,
    expect_validator as expect_validator,
    on_stream as on_stream,
)
from ._middleware import (
    AgentMiddleware as AgentMiddleware,
    AgentMiddlewareContext as AgentMiddlewareContext,
    ModelMiddleware as ModelMiddleware,
    ToolCallLoopContext as ToolCallLoopContext,
    ToolCallLoopMiddleware as ToolCallLoopMiddleware,
    ToolMiddleware as ToolMiddleware,
    ToolOutput as ToolOutput,
    ToolTurn as ToolTurn,
    WrappedModel as WrappedModel,
    augment_model as augment_model,
)
from ._limits import (
    ConcurrencyRule as ConcurrencyRule,
    InMemoryLimitStore as InMemoryLimitStore,
    LimitRule as LimitRule,
    LimitStore as LimitStore,
    RateRule as RateRule,
    create_limit_middleware as create_limit_middleware,
    create_simple_limit_middleware as create_simple_limit_middleware,
)
from ._model import (
    AgentModel as AgentModel,
    ModelStreamOptions as ModelStreamOptions,
    StructuredOutputMode as StructuredOutputMode,
    as_agent_model as as_agent_model,
    turn_events as turn_events,
)
from ._log import TOOL_LOGGER as TOOL_LOGGER, log_tool_error as log_tool_error
from ._observe import (
    ToolErrorHook as ToolErrorHook,
    ToolErrorReport as ToolErrorReport,
    prompt_stats as prompt_stats,
)
from ._prompt import (
    ChatResult as ChatResult,
    prompt_agent as prompt_agent,
    prompt_chat as prompt_chat,
)
from ._resume import resume_chat as resume_chat
from ._retry import create_retry_middleware as create_retry_middleware
from ._run import (
    dump_snapshot as dump_snapshot,
    restore_snapshot as restore_snapshot,
    run_with as run_with,
)
from ._turns import ToolChoiceContext as ToolChoiceContext, ToolChoicePolicy as ToolChoicePolicy
from ._snapshot import (
    SNAPSHOT_VERSION as SNAPSHOT_VERSION,
    AgentSnapshot as AgentSnapshot,
    FrameSnapshot as FrameSnapshot,
    JournalTurn as JournalTurn,
    encode_snapshot as encode_snapshot,
    parse_snapshot as parse_snapshot,
)
from ._stream import (
    AgentEvent as AgentEvent,
    AgentStreamEvent as AgentStreamEvent,
    StructuredDataEvent as StructuredDataEvent,
    ToolCallDoneEvent as ToolCallDoneEvent,
    TurnDoneEvent as TurnDoneEvent,
    TurnFailedEvent as TurnFailedEvent,
    TurnStartEvent as TurnStartEvent,
)
from ._tools import AgentTool as AgentTool, augment_tool as augment_tool, call_tool as call_tool
from ._trace import (
    TraceEmitter as TraceEmitter,
    TraceEvent as TraceEvent,
    TraceOptions as TraceOptions,
)
from ._partial_json import (
    PartialJson as PartialJson,
    PartialJsonParser as PartialJsonParser,
    PartialJsonState as PartialJsonState,
    parse_partial_json as parse_partial_json,
)
from ._mcp import equip_mcp as equip_mcp

__all__ = (
    "SNAPSHOT_VERSION",
    "TOOL_LOGGER",
    "Agent",
    "AgentMiddleware",
    "AgentEvent",
    "AgentMiddlewareContext",
    "AgentModel",
    "AgentSnapshot",
    "AgentStreamEvent",
    "AgentTool",
    "ChatResult",
    "ConcurrencyRule",
    "FrameSnapshot",
    "InMemoryLimitStore",
    "JournalTurn",
    "LimitRule",
    "LimitStore",
    "ModelMiddleware",
    "ModelStreamOptions",
    "RateRule",
    "Reborn",
    "StructuredDataEvent",
    "StructuredOutputMode",
    "ToolCallDoneEvent",
    "ToolCallLoopContext",
    "ToolCallLoopMiddleware",
    "ToolChoiceContext",
    "ToolChoicePolicy",
    "ToolErrorHook",
    "ToolErrorReport",
    "ToolMiddleware",
    "ToolOutput",
    "ToolTurn",
    "TraceEmitter",
    "TraceEvent",
    "TraceOptions",
    "TurnDoneEvent",
    "TurnFailedEvent",
    "TurnStartEvent",
    "WrappedModel",
    "as_agent_model",
    "augment_agent",
    "augment_model",
    "augment_tool",
    "call_tool",
    "create_agent",
    "dump_snapshot",
    "encode_snapshot",
    "equip_budget",
    "equip_history",
    "equip_instruction",
    "equip_memo",
    "equip_memory",
    "equip_resource",
    "equip_scope",
    "equip_system",
    "equip_tool",
    "equip_tool_call_loop_middleware",
    "expect_resource",
    "expect_scope",
    "expect_validator",
    "on_stream",
    "parse_snapshot",
    "prompt_agent",
    "prompt_chat",
    "log_tool_error",
    "prompt_stats",
    "reborn",
    "restore_snapshot",
    "resume_chat",
    "run_with",
    "turn_events",
    "create_limit_middleware",
    "create_retry_middleware",
    "create_simple_limit_middleware",
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
    "StructuredOutputError",
    "ToolCallFailedError",
    "ToolLoopExceededError",
    "TurnBudgetExceededError",
    "ApprovalAlreadyDecidedError",
    "ApprovalDecision",
    "ApprovalError",
    "ApprovalTokenError",
    "ApproveCall",
    "DenyCall",
    "EditCall",
    "PendingApproval",
    "approval_token",
    "approve",
    "deny",
    "edit_arguments",
    "pending_approvals",
    # Partial JSON, read as the structured answer streams (_partial_json).
    "PartialJson",
    "PartialJsonParser",
    "PartialJsonState",
    "parse_partial_json",
    # An MCP server's tools equipped in this generation (_mcp).
    "equip_mcp",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
