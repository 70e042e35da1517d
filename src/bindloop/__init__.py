"""bindloop: the runtime-agnostic core of a production LLM agent loop.

The root is the first tier: the names a host writing an agent needs, chosen by hand. Every
subpackage (``bindloop.wire``, ``bindloop.routing``, ...) keeps its full public API, and
``bindloop.lowlevel`` holds the loop machine for custom drivers. ``bindloop.testing`` and
``bindloop.hosts`` are never re-exported.

Importing the root only defines things: no I/O, no environment reads, no work. A subpackage loads on
first use of one of its names (PEP 562), so ``import bindloop`` costs next to nothing and ``from
bindloop import run_tool_loop`` loads only what the loop needs — that matters in Pyodide and in a
Worker's start-up CPU budget.
"""

from __future__ import annotations

from importlib import import_module
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# The one declaration of the root: each subpackage and the names the root re-exports from it. The
# lazy map and __all__ derive from it; the TYPE_CHECKING block below repeats it for type checkers
# only, and tests/test_public_api.py checks the two agree.
_EXPORTS: MappingProxyType[str, tuple[str, ...]] = MappingProxyType({
    # the agent API: agents, their hooks, structured output and chat, the model protocol
    "agent": ("create_agent", "prompt_agent", "prompt_chat", "resume_chat", "ChatResult",
              "reborn", "run_with", "equip_system", "equip_instruction", "equip_tool",
              "equip_memory", "expect_validator", "on_stream", "augment_model",),
    # the one model protocol and the request a call carries
    "model": ("Model", "ModelRequest",),
    # the error roots a host catches
    "errors": ("BindloopError", "UsageError", "ProviderError", "PromptTooLongError",
               "RunStoppedError", "RunTimeoutError", "RunCancelledError", "ToolFailure",
               "is_prompt_too_long"),
    # the canonical transcript and tool types
    "contracts": ("Message", "SystemMessage", "UserMessage", "AssistantMessage", "ToolMessage",
                  "Content", "ContentPart", "TextPart", "ImagePart", "FilePart", "ReasoningPart",
                  "ToolCall", "ToolDefinition", "ToolOutcome", "ToolResult", "ToolError",
                  "ToolSuspend", "ModelTurnResult", "TurnUsage", "RunStats", "StopReason",
                  "STOP_REASONS", "encode_messages", "decode_messages",),
    # cancellation
    "signal": ("AbortController", "AbortSignal",),
    # the loop entry point, its ports, state and result
    "loop": ("run_tool_loop", "ToolLoopParams", "ToolLoopPorts", "ToolLoopState", "ToolLoopResult",
             "StepSettlement", "LoopControl", "LoopBoundary", "BoundaryDecision",
             "ControlledToolLoopResult",),
    # defining tools
    "tools": ("Tool", "define_tool", "ToolRegistry", "create_tool_registry",),
    # fallback across providers
    "routing": ("RoutePlan", "build_route_plan", "create_circuit_breaker", "AttemptError",),
    # the run's wall-clock budget
    "run": ("create_run_deadline",),
    # long contexts
    "compaction": ("compaction_port",),
    # checkpoints
    "checkpoints": ("LoopCheckpoint", "create_loop_checkpoint", "parse_loop_checkpoint",
                "serialize_loop_checkpoint", "run_from_checkpoint", "CheckpointFormatError",),
    # model adapters, wires and the host's transport
    "wire": ("ModelAdapter", "RoutedModel", "WireOptions", "create_wire_adapter",
             "OpenAIChatAdapter", "OpenAIResponsesAdapter", "AnthropicAdapter", "GeminiAdapter",
             "Transport", "HttpRequest", "TransportResponse", "TransportError", "ProviderHttpError",),
})

if TYPE_CHECKING:
    from .agent import (
        create_agent as create_agent,
        prompt_agent as prompt_agent,
        prompt_chat as prompt_chat,
        resume_chat as resume_chat,
        ChatResult as ChatResult,
        reborn as reborn,
        run_with as run_with,
        equip_system as equip_system,
        equip_instruction as equip_instruction,
        equip_tool as equip_tool,
        equip_memory as equip_memory,
        expect_validator as expect_validator,
        on_stream as on_stream,
        augment_model as augment_model,
    )
    from .model import (
        Model as Model,
        ModelRequest as ModelRequest,
    )
    from .errors import (
        BindloopError as BindloopError,
        UsageError as UsageError,
        ProviderError as ProviderError,
        PromptTooLongError as PromptTooLongError,
        RunStoppedError as RunStoppedError,
        RunTimeoutError as RunTimeoutError,
        RunCancelledError as RunCancelledError,
        ToolFailure as ToolFailure,
        is_prompt_too_long as is_prompt_too_long,
    )
    from .contracts import (
        Message as Message,
        SystemMessage as SystemMessage,
        UserMessage as UserMessage,
        AssistantMessage as AssistantMessage,
        ToolMessage as ToolMessage,
        Content as Content,
        ContentPart as ContentPart,
        TextPart as TextPart,
        ImagePart as ImagePart,
        FilePart as FilePart,
        ReasoningPart as ReasoningPart,
        ToolCall as ToolCall,
        ToolDefinition as ToolDefinition,
        ToolOutcome as ToolOutcome,
        ToolResult as ToolResult,
        ToolError as ToolError,
        ToolSuspend as ToolSuspend,
        ModelTurnResult as ModelTurnResult,
        TurnUsage as TurnUsage,
        RunStats as RunStats,
        StopReason as StopReason,
        STOP_REASONS as STOP_REASONS,
        encode_messages as encode_messages,
        decode_messages as decode_messages,
    )
    from .signal import (
        AbortController as AbortController,
        AbortSignal as AbortSignal,
    )
    from .loop import (
        run_tool_loop as run_tool_loop,
        ToolLoopParams as ToolLoopParams,
        ToolLoopPorts as ToolLoopPorts,
        ToolLoopState as ToolLoopState,
        ToolLoopResult as ToolLoopResult,
        StepSettlement as StepSettlement,
        LoopControl as LoopControl,
        LoopBoundary as LoopBoundary,
        BoundaryDecision as BoundaryDecision,
        ControlledToolLoopResult as ControlledToolLoopResult,
    )
    from .tools import (
        Tool as Tool,
        define_tool as define_tool,
        ToolRegistry as ToolRegistry,
        create_tool_registry as create_tool_registry,
    )
    from .routing import (
        RoutePlan as RoutePlan,
        build_route_plan as build_route_plan,
        create_circuit_breaker as create_circuit_breaker,
        AttemptError as AttemptError,
    )
    from .run import (
        create_run_deadline as create_run_deadline,
    )
    from .compaction import (
        compaction_port as compaction_port,
    )
    from .checkpoints import (
        LoopCheckpoint as LoopCheckpoint,
        create_loop_checkpoint as create_loop_checkpoint,
        parse_loop_checkpoint as parse_loop_checkpoint,
        serialize_loop_checkpoint as serialize_loop_checkpoint,
        run_from_checkpoint as run_from_checkpoint,
        CheckpointFormatError as CheckpointFormatError,
    )
    from .wire import (
        ModelAdapter as ModelAdapter,
        RoutedModel as RoutedModel,
        WireOptions as WireOptions,
        create_wire_adapter as create_wire_adapter,
        OpenAIChatAdapter as OpenAIChatAdapter,
        OpenAIResponsesAdapter as OpenAIResponsesAdapter,
        AnthropicAdapter as AnthropicAdapter,
        GeminiAdapter as GeminiAdapter,
        Transport as Transport,
        HttpRequest as HttpRequest,
        TransportResponse as TransportResponse,
        TransportError as TransportError,
        ProviderHttpError as ProviderHttpError,
    )

# name -> the subpackage that is its home
_WHERE: MappingProxyType[str, str] = MappingProxyType(
    {name: module for module, names in _EXPORTS.items() for name in names})

__all__ = (*_WHERE,)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
