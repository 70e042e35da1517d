"""The loop machine for custom drivers: :class:`LoopMachine`, the effects it emits and the answers it
accepts.

:func:`bindloop.run_tool_loop` is the driver almost every host wants. Drive the machine yourself
only to run the loop's decisions under another scheduler or to step it in a test; docs/loop.md has
the table of which answer each request accepts.
"""

from ._public import publish as _publish
from .loop._machine import (
    AcceptToolMessage as AcceptToolMessage,
    Activate as Activate,
    AskNudge as AskNudge,
    Boundary as Boundary,
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

__all__ = (
    "AcceptToolMessage",
    "Activate",
    "AskNudge",
    "Boundary",
    "CallModel",
    "CheckBoundary",
    "Compact",
    "Effect",
    "Finish",
    "LoopMachine",
    "NotifyAssistant",
    "NotifyProgress",
    "Reject",
    "RunPooled",
    "RunSerial",
    "Settle",
    "ToolFinished",
)

_publish(__name__, globals(), __all__)
