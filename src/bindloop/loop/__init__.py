"""The tool loop: a pure decision machine (:class:`LoopMachine`) and its anyio driver
(:func:`run_tool_loop`)."""

from ._driver import run_tool_loop as run_tool_loop
from ._machine import (
    AcceptToolMessage as AcceptToolMessage,
    Activate as Activate,
    AskNudge as AskNudge,
    CallModel as CallModel,
    CheckBoundary as CheckBoundary,
    Compact as Compact,
    Effect as Effect,
    Finish as Finish,
    LoopMachine as LoopMachine,
    NotifyAssistant as NotifyAssistant,
    NotifyProgress as NotifyProgress,
    Reject as Reject,
    RunPooled as RunPooled,
    RunSerial as RunSerial,
    Settle as Settle,
    ToolFinished as ToolFinished,
)
from ..contracts import CompactionApplied as CompactionApplied
from ._types import (
    MaybeAwaitable as MaybeAwaitable,
    OpenSuspend as OpenSuspend,
    StepSettlement as StepSettlement,
    ToolLoopParams as ToolLoopParams,
    ToolLoopResult as ToolLoopResult,
    ToolLoopState as ToolLoopState,
)

__all__ = (
    "AcceptToolMessage",
    "Activate",
    "AskNudge",
    "CallModel",
    "CheckBoundary",
    "Compact",
    "CompactionApplied",
    "Effect",
    "Finish",
    "LoopMachine",
    "MaybeAwaitable",
    "NotifyAssistant",
    "NotifyProgress",
    "OpenSuspend",
    "Reject",
    "RunPooled",
    "RunSerial",
    "Settle",
    "StepSettlement",
    "ToolFinished",
    "ToolLoopParams",
    "ToolLoopResult",
    "ToolLoopState",
    "run_tool_loop",
)
