"""The machine's phases and its successor table, as data.

A :class:`Phase` is what the machine waits for: the request it has pending (one phase per request
type, :data:`REQUEST_PHASES`), ``IDLE`` before :meth:`~bindloop.lowlevel.LoopMachine.start`,
``DONE`` after :class:`~bindloop.lowlevel.Finish`, and ``ERROR`` after anything raised inside
``send()``. :data:`SUCCESSORS` says, for each phase and each answer type it accepts, which phases
the machine may be in once the answer is handled (the answer's content and the wired ports pick
one); a pair missing from it is refused. The machine checks every transition it takes against
this table, and docs/loop.md draws its state diagram from it (a test compares the two).

Two phases wait for a host *decision* rather than an effect: ``PLAN_BATCH`` (which calls run
alone) and ``CHECK_FINAL`` (which call ends the run). The driver asks the host's predicate and
answers with its values; the machine never calls a host callable.

``ERROR`` is absorbing and not in the table: any raise inside ``send()`` — a refused answer, a
port's bad value, a decision that is not a bool — leads there from every phase, and from there every
``next_effect()``, ``send()`` and ``start()`` raises :class:`~bindloop.errors.ProtocolError`
naming the first failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType
from typing import Final

from ._effects import (
    AcceptToolMessage,
    AskNudge,
    BatchFinished,
    BatchPlanned,
    BatchWrapped,
    Boundary,
    BoundaryChecked,
    BoundaryDecided,
    CallModel,
    CheckBoundary,
    CheckFinal,
    Compact,
    Compacted,
    FinalChecked,
    ModelReplied,
    Nudged,
    PlanBatch,
    RunTool,
    RunToolBatch,
    Settle,
    Settled,
    ToolMessageAccepted,
    ToolNotRun,
    ToolRaised,
    ToolReturned,
    WrapToolBatch,
)

__all__ = ("Phase", "REQUEST_PHASES", "START_SUCCESSORS", "SUCCESSORS")


class Phase(str, Enum):
    """What the loop machine waits for. The value is the wire-style name (``"call_model"``)."""

    IDLE = "idle"
    CHECK_BOUNDARY = "check_boundary"
    COMPACT = "compact"
    BOUNDARY = "boundary"
    CALL_MODEL = "call_model"
    PLAN_BATCH = "plan_batch"
    RUN_TOOL = "run_tool"
    RUN_TOOL_BATCH = "run_tool_batch"
    WRAP_TOOL_BATCH = "wrap_tool_batch"
    CHECK_FINAL = "check_final"
    ACCEPT_TOOL_MESSAGE = "accept_tool_message"
    SETTLE = "settle"
    ASK_NUDGE = "ask_nudge"
    DONE = "done"
    ERROR = "error"

    def __str__(self) -> str:
        return self.value


REQUEST_PHASES: Final[Mapping[type, Phase]] = MappingProxyType({
    CheckBoundary: Phase.CHECK_BOUNDARY,
    Compact: Phase.COMPACT,
    Boundary: Phase.BOUNDARY,
    CallModel: Phase.CALL_MODEL,
    PlanBatch: Phase.PLAN_BATCH,
    RunTool: Phase.RUN_TOOL,
    RunToolBatch: Phase.RUN_TOOL_BATCH,
    WrapToolBatch: Phase.WRAP_TOOL_BATCH,
    CheckFinal: Phase.CHECK_FINAL,
    AcceptToolMessage: Phase.ACCEPT_TOOL_MESSAGE,
    Settle: Phase.SETTLE,
    AskNudge: Phase.ASK_NUDGE,
})
"""The phase in which the machine waits for an answer to each request type."""

_P = Phase
# Where a batch's results lead once it is complete and its final-call verdict is in: the next
# owed message offered, or the batch settled — ended (aborted, suspended, or a final call with
# nothing to continue it), settled by the host, asked for a nudge (a final call), or on to the
# next iteration.
_RESULTS: Final = frozenset({_P.ACCEPT_TOOL_MESSAGE, _P.SETTLE, _P.ASK_NUDGE,
                             _P.CHECK_BOUNDARY, _P.DONE})
# Where a batch's last answer can lead: the final-call question, or wherever its results lead.
_AFTER_BATCH: Final = _RESULTS | {_P.CHECK_FINAL}
# Where an answer that lets the next tool step start can lead: another lone call, the pool, or
# (the batch complete) wherever a batch leads.
_TOOL_STEP: Final = frozenset({_P.RUN_TOOL, _P.RUN_TOOL_BATCH})
_AFTER_TOOL: Final = _AFTER_BATCH | _TOOL_STEP

START_SUCCESSORS: Final = frozenset({_P.CHECK_BOUNDARY, _P.DONE, _P.PLAN_BATCH, _P.RUN_TOOL,
                                     _P.RUN_TOOL_BATCH, _P.WRAP_TOOL_BATCH})
"""Where :meth:`~bindloop.lowlevel.LoopMachine.start` leads from ``IDLE``: the first boundary,
``DONE`` at once for a state with open suspends, or the batch of the resumed calls."""

SUCCESSORS: Final[Mapping[tuple[Phase, type], frozenset[Phase]]] = MappingProxyType({
    # Stop or out of iterations -> DONE; else compaction, a checkpoint boundary, or the model.
    (_P.CHECK_BOUNDARY, BoundaryChecked): frozenset({_P.DONE, _P.COMPACT, _P.BOUNDARY,
                                                     _P.CALL_MODEL}),
    (_P.COMPACT, Compacted): frozenset({_P.BOUNDARY, _P.CALL_MODEL}),
    (_P.BOUNDARY, BoundaryDecided): frozenset({_P.DONE, _P.CALL_MODEL}),
    # A turn without calls would end (settle, nudge or done); one with calls starts its batch,
    # asking first which calls run alone when runs_serially is wired.
    (_P.CALL_MODEL, ModelReplied): frozenset({_P.SETTLE, _P.ASK_NUDGE, _P.DONE, _P.PLAN_BATCH,
                                              _P.RUN_TOOL, _P.RUN_TOOL_BATCH,
                                              _P.WRAP_TOOL_BATCH}),
    # A plan holds at least one call: its first step is a lone call or the pool.
    (_P.PLAN_BATCH, BatchPlanned): _TOOL_STEP,
    (_P.RUN_TOOL, ToolReturned): _AFTER_TOOL,
    (_P.RUN_TOOL, ToolRaised): _AFTER_TOOL,
    (_P.RUN_TOOL, ToolNotRun): _AFTER_TOOL,
    (_P.RUN_TOOL_BATCH, BatchFinished): _AFTER_BATCH,
    (_P.WRAP_TOOL_BATCH, BatchWrapped): _AFTER_BATCH,
    (_P.CHECK_FINAL, FinalChecked): _RESULTS,
    (_P.ACCEPT_TOOL_MESSAGE, ToolMessageAccepted): _RESULTS,
    # stop -> DONE; delivered input or a batch -> the next boundary; a turn that would end ->
    # the nudge or DONE; open suspends -> DONE.
    (_P.SETTLE, Settled): frozenset({_P.DONE, _P.CHECK_BOUNDARY, _P.ASK_NUDGE}),
    (_P.ASK_NUDGE, Nudged): frozenset({_P.CHECK_BOUNDARY, _P.DONE}),
})
"""The protocol as data: ``(phase, answer type) -> the phases that answer may lead to``."""
