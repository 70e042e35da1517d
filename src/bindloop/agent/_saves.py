"""Where a prompt stands in its execution, and the checkpoints it hands out
(``prompt_chat(on_checkpoint=...)``, suspends, running out of turns).

A chat's checkpoints form one execution: the same ``execution_id``, revisions one apart in the
order they are produced (saves first, then the suspend or out-of-turns checkpoint), iterations and
stats counted from the start of the chat (the loop state's own totals). The re-ask position the
loop state cannot hold rides in the checkpoint's typed ``reask`` field
(:class:`~bindloop.checkpoints.ReaskRecord`), so a save taken during a re-ask resumes with the same
re-asks and turns left.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from .._awaitable import resolve
from ..errors import UsageError
from ..loop import BoundaryDecision, LoopBoundary, LoopControl, ToolLoopState
from ..checkpoints import (
    ApprovalRecord,
    CheckpointStatus,
    DecidedCall,
    LoopBindings,
    LoopCheckpoint,
    ReaskRecord,
    loop_state_from_checkpoint,
    validate_loop_checkpoint,
)

__all__ = ("Position", "SaveFn", "refuse_saves", "resumed")

SaveFn = Callable[[LoopCheckpoint], object]


def refuse_saves(on_checkpoint: object, hook: str) -> SaveFn | None:
    """``on_checkpoint`` checked: ``None`` or a callable, else :class:`UsageError`."""
    if on_checkpoint is None or callable(on_checkpoint):
        return on_checkpoint
    raise UsageError(f"{hook}(on_checkpoint=...) must be a function taking a LoopCheckpoint "
                     f"(sync or async), got {type(on_checkpoint).__name__}")


class Position:
    """A prompt's place in its execution: the live loop ``state`` (its totals are the
    execution's), the refused ``attempts``, where the current attempt began (``attempt_start``,
    in iterations), the turns each attempt may use (``steps``) and where all of them end
    (``total_end``). ``revision`` is the last one handed out."""

    __slots__ = ("approvals_decided", "approvals_pending", "approvals_signed", "attempt_start",
                 "attempts", "bindings", "execution_id", "last", "revision", "state", "steps",
                 "total_end")

    def __init__(self, state: ToolLoopState, *, execution_id: str, steps: int, total_end: int,
                 attempts: tuple[tuple[str, str], ...] = (), attempt_start: int = 0,
                 revision: int = -1, bindings: LoopBindings | None = None) -> None:
        self.state = state
        self.execution_id = execution_id
        self.steps = steps
        self.total_end = total_end
        self.attempts = list(attempts)
        self.attempt_start = attempt_start
        self.revision = revision
        self.bindings = bindings if bindings is not None else LoopBindings()
        # The approval suspends among the open ones (written to the checkpoint's record).
        self.approvals_pending: tuple[str, ...] = ()
        self.approvals_decided: tuple[DecidedCall, ...] = ()
        self.approvals_signed = False
        # The last checkpoint handed out (or resumed from), validated: the next one checks only
        # the messages added since.
        self.last: LoopCheckpoint | None = None

    @property
    def iterations(self) -> int:
        return self.state.totals.turns

    def attempt_spent(self) -> bool:
        return self.iterations - self.attempt_start >= self.steps

    def checkpoint(self, status: CheckpointStatus) -> LoopCheckpoint:
        st = self.state
        used = self.iterations
        self.revision += 1
        cp = LoopCheckpoint(
            execution_id=self.execution_id, revision=self.revision, status=status,
            max_iterations=used if status == "iteration_limit" else max(self.total_end, used),
            iterations=used, messages=tuple(st.messages), open_suspends=tuple(st.open_suspends),
            stats=st.totals, counters=st.counters,
            bindings=LoopBindings(config=dict(self.bindings.config),
                                  environment=dict(self.bindings.environment)),
            reask=ReaskRecord(attempts=tuple(self.attempts),
                              attempt_turns=used - self.attempt_start, max_turn_steps=self.steps,
                              turns_left=max(self.total_end - used, 0)),
            approvals=ApprovalRecord(pending=self.approvals_pending,
                                     decided=self.approvals_decided,
                                     signed=self.approvals_signed)
            if self.approvals_pending or self.approvals_decided else msgspec.UNSET)
        # Refuses what parse_loop_checkpoint would refuse; the messages of the last one handed out
        # are not checked again (a store's save of the result checks only its dicts).
        cp = self.last = validate_loop_checkpoint(cp, previous=self.last)
        return cp

    def control(self, fn: SaveFn) -> LoopControl:
        """The loop control that hands ``fn`` the ``ready`` checkpoint of every non-final
        boundary (awaited; a raise ends the prompt, what it returns is ignored)."""

        async def on_boundary(b: LoopBoundary) -> BoundaryDecision:
            if not b.final:  # the prompt's outcome (a ChatResult, an error) says how it ended
                await resolve(fn(self.checkpoint("ready")))
            return "continue"

        return LoopControl(on_boundary=on_boundary)


def resumed(cp: LoopCheckpoint, *, steps: int | None, retries: int) -> Position:
    """The position a resumed chat continues from ``cp``: its re-ask record when it has one (and
    ``steps`` is not given), else a fresh attempt of ``steps`` turns (default: what ``cp`` has
    left, or 10 once it ran out) with the agent's ``retries`` re-asks after it."""
    state = loop_state_from_checkpoint(cp)
    record = cp.reask if isinstance(cp.reask, ReaskRecord) else None
    attempts = record.attempts if record is not None else ()
    if record is not None and steps is None and cp.status != "iteration_limit":
        steps, total_end, start = (record.max_turn_steps, cp.iterations + record.turns_left,
                                   cp.iterations - record.attempt_turns)
    else:
        if steps is None:
            left = cp.max_iterations - cp.iterations
            steps = left if left > 0 and record is None else 10
        total_end = cp.iterations + steps * (max(retries - len(attempts), 0) + 1)
        start = cp.iterations
    pos = Position(state, execution_id=cp.execution_id, revision=cp.revision,
                   bindings=cp.bindings, attempts=attempts, steps=steps, total_end=total_end,
                   attempt_start=start)
    if isinstance(cp.approvals, ApprovalRecord):
        pos.approvals_pending = cp.approvals.pending
        pos.approvals_decided = cp.approvals.decided
        pos.approvals_signed = cp.approvals.signed
    pos.last = cp
    return pos
