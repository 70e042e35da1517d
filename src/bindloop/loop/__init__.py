"""The tool loop: :func:`run_tool_loop`, its ports (:class:`ToolLoopPorts`: a model, a
:class:`ToolRunner`, :class:`LoopHooks`, one stop signal), state and result, and the pool its batches run in
(:func:`run_tool_calls_pooled_by_tool`). The decision machine it drives is public in
:mod:`bindloop.lowlevel`. Also the per-turn thinking-budget schedules (:func:`thinking_budget`)."""

from ._driver import run_tool_loop as run_tool_loop
from ._errors import (
    DiscardedTurnWithToolCallsError as DiscardedTurnWithToolCallsError,
    InputBlockedBySuspendError as InputBlockedBySuspendError,
    InvalidModelTurnError as InvalidModelTurnError,
    MissingActivationPortError as MissingActivationPortError,
)
from ._types import (
    ActivationKind as ActivationKind,
    BatchRunner as BatchRunner,
    BoundaryDecision as BoundaryDecision,
    ControlledStopReason as ControlledStopReason,
    ControlledToolLoopResult as ControlledToolLoopResult,
    LoopBoundary as LoopBoundary,
    LoopControl as LoopControl,
    LoopCounters as LoopCounters,
    MaybeAwaitable as MaybeAwaitable,
    OpenSuspend as OpenSuspend,
    StepSettlement as StepSettlement,
    ToolLoopResult as ToolLoopResult,
    ToolLoopState as ToolLoopState,
)

from ._ports import (
    LoopHooks as LoopHooks,
    ToolLoopParams as ToolLoopParams,
    ToolLoopPorts as ToolLoopPorts,
    ToolRunner as ToolRunner,
)
from ._thinking import (
    GeometricThinkingDecay as GeometricThinkingDecay,
    StepThinkingDecay as StepThinkingDecay,
    ThinkingDecay as ThinkingDecay,
    thinking_budget as thinking_budget,
)
from ._pool import (
    ToolBatchOptions as ToolBatchOptions,
    run_tool_calls_pooled_by_tool as run_tool_calls_pooled_by_tool,
)

__all__ = (
    "ActivationKind",
    "BatchRunner",
    "BoundaryDecision",
    "ControlledStopReason",
    "ControlledToolLoopResult",
    "GeometricThinkingDecay",
    "LoopBoundary",
    "LoopControl",
    "LoopCounters",
    "LoopHooks",
    "MaybeAwaitable",
    "OpenSuspend",
    "StepSettlement",
    "StepThinkingDecay",
    "ThinkingDecay",
    "ToolLoopParams",
    "ToolLoopPorts",
    "ToolLoopResult",
    "ToolLoopState",
    "ToolRunner",
    "run_tool_loop",
    "thinking_budget",
    "DiscardedTurnWithToolCallsError",
    "InputBlockedBySuspendError",
    "InvalidModelTurnError",
    "MissingActivationPortError",
    # Pooled tool batches: per-tool bounds, claims stop once the signal fires (_pool).
    "ToolBatchOptions",
    "run_tool_calls_pooled_by_tool",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
