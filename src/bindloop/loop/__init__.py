"""The tool loop: :func:`run_tool_loop`, its ports, state and result. The decision machine it drives
is public in :mod:`bindloop.lowlevel`. Also the per-turn thinking-budget schedules
(:func:`thinking_budget`)."""

from ._driver import run_tool_loop as run_tool_loop
from ._errors import (
    DiscardedTurnWithToolCallsError as DiscardedTurnWithToolCallsError,
    InputBlockedBySuspendError as InputBlockedBySuspendError,
    InvalidModelTurnError as InvalidModelTurnError,
    MissingActivationPortError as MissingActivationPortError,
)
from ._types import (
    BoundaryDecision as BoundaryDecision,
    CallModelFn as CallModelFn,
    ControlledStopReason as ControlledStopReason,
    ControlledToolLoopResult as ControlledToolLoopResult,
    LoopBoundary as LoopBoundary,
    LoopControl as LoopControl,
    LoopCounters as LoopCounters,
    MaybeAwaitable as MaybeAwaitable,
    OpenSuspend as OpenSuspend,
    RunToolCallFn as RunToolCallFn,
    StepSettlement as StepSettlement,
    ToolLoopParams as ToolLoopParams,
    ToolLoopPorts as ToolLoopPorts,
    ToolLoopResult as ToolLoopResult,
    ToolLoopState as ToolLoopState,
)

from ._thinking import (
    GeometricThinkingDecay as GeometricThinkingDecay,
    StepThinkingDecay as StepThinkingDecay,
    ThinkingDecay as ThinkingDecay,
    thinking_budget as thinking_budget,
)

__all__ = (
    "BoundaryDecision",
    "CallModelFn",
    "ControlledStopReason",
    "ControlledToolLoopResult",
    "GeometricThinkingDecay",
    "LoopBoundary",
    "LoopControl",
    "LoopCounters",
    "MaybeAwaitable",
    "OpenSuspend",
    "RunToolCallFn",
    "StepSettlement",
    "StepThinkingDecay",
    "ThinkingDecay",
    "ToolLoopParams",
    "ToolLoopPorts",
    "ToolLoopResult",
    "ToolLoopState",
    "run_tool_loop",
    "thinking_budget",
    "DiscardedTurnWithToolCallsError",
    "InputBlockedBySuspendError",
    "InvalidModelTurnError",
    "MissingActivationPortError",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
