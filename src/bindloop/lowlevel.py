"""The loop machine for custom drivers: :class:`LoopMachine`, the requests it makes, the notices it
gives, its phases and the answers each accepts (:class:`Phase`, :data:`SUCCESSORS`, which replaced
the request-keyed ``TRANSITIONS``), and why it rejects a call (:data:`RejectReason`).

:func:`bindloop.run_tool_loop` is the driver almost every host wants. Drive the machine yourself
only to run the loop's decisions under another scheduler or to step it in a test; docs/loop.md has
the table of which answer each request accepts and the state diagram drawn from :data:`SUCCESSORS`.
"""

from ._public import publish as _publish
from .loop._effects import (
    AcceptToolMessage as AcceptToolMessage,
    Activate as Activate,
    ActivationPortMissing as ActivationPortMissing,
    Answer as Answer,
    AskNudge as AskNudge,
    BatchFinished as BatchFinished,
    BatchWrapped as BatchWrapped,
    BlockedBySuspend as BlockedBySuspend,
    Boundary as Boundary,
    BoundaryChecked as BoundaryChecked,
    BoundaryDecided as BoundaryDecided,
    CallModel as CallModel,
    CheckBoundary as CheckBoundary,
    Compact as Compact,
    Compacted as Compacted,
    DiscardedTurn as DiscardedTurn,
    Effect as Effect,
    Finish as Finish,
    ModelReplied as ModelReplied,
    NotRun as NotRun,
    Notice as Notice,
    NotifyAssistant as NotifyAssistant,
    NotifyProgress as NotifyProgress,
    Nudged as Nudged,
    RaisedByTool as RaisedByTool,
    RanCall as RanCall,
    Reject as Reject,
    RejectReason as RejectReason,
    Request as Request,
    RunTool as RunTool,
    RunToolBatch as RunToolBatch,
    Settle as Settle,
    Settled as Settled,
    ToolAnswer as ToolAnswer,
    ToolMessageAccepted as ToolMessageAccepted,
    ToolNotRun as ToolNotRun,
    ToolRaised as ToolRaised,
    ToolReturned as ToolReturned,
    WrapToolBatch as WrapToolBatch,
    reason_exception as reason_exception,
)
from .loop._machine import LoopMachine as LoopMachine
from .loop._types import WIRABLE as WIRABLE
from .loop._phases import (
    Phase as Phase,
    REQUEST_PHASES as REQUEST_PHASES,
    START_SUCCESSORS as START_SUCCESSORS,
    SUCCESSORS as SUCCESSORS,
)
from .loop._tool_errors import (
    default_tool_exception_error as default_tool_exception_error,
    tool_exception_error as tool_exception_error,
)

__all__ = (
    "AcceptToolMessage",
    "Activate",
    "ActivationPortMissing",
    "Answer",
    "AskNudge",
    "BatchFinished",
    "BatchWrapped",
    "BlockedBySuspend",
    "Boundary",
    "BoundaryChecked",
    "BoundaryDecided",
    "CallModel",
    "CheckBoundary",
    "Compact",
    "Compacted",
    "DiscardedTurn",
    "Effect",
    "Finish",
    "LoopMachine",
    "ModelReplied",
    "NotRun",
    "Notice",
    "NotifyAssistant",
    "NotifyProgress",
    "Nudged",
    "Phase",
    "REQUEST_PHASES",
    "RaisedByTool",
    "RanCall",
    "Reject",
    "RejectReason",
    "Request",
    "RunTool",
    "RunToolBatch",
    "START_SUCCESSORS",
    "SUCCESSORS",
    "Settle",
    "Settled",
    "ToolAnswer",
    "ToolMessageAccepted",
    "ToolNotRun",
    "ToolRaised",
    "ToolReturned",
    "WIRABLE",
    "WrapToolBatch",
    "default_tool_exception_error",
    "reason_exception",
    "tool_exception_error",
)

_publish(__name__, globals(), __all__)
