"""``run_from_checkpoint``: run the existing loop from a checkpoint, committing every settled one."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, Literal, TypeAlias

import msgspec

from .._awaitable import resolve as _resolve
from ..contracts import (
    ModelTurnResult,
    RunStats,
    StopReason,
    ToolMessage,
    accumulate_run,
    empty_run_stats,
)
from ..errors import PortContractError
from ..loop import (
    BoundaryDecision,
    LoopBoundary,
    LoopControl,
    MaybeAwaitable,
    ToolLoopParams,
    ToolLoopPorts,
    ToolLoopState,
    run_tool_loop,
)
from ._codec import copy_bindings, require_checkpoint
from ._errors import CheckpointFormatError
from ._schema import LoopBindings, LoopCheckpoint, status_of_stop, stop_of_status

__all__ = (
    "CheckpointRunResult",
    "CommitFn",
    "RestoreFn",
    "RestoredLoop",
    "loop_state_from_checkpoint",
    "run_from_checkpoint",
)

_TIME_FIELD: Final = re.compile(r"stats\.(?:model_ms|tool_ms|tools\..*\.ms)$")
_USAGE_FIELD: Final = re.compile(r"(?:stats\.(?:input|output|cached_input)_tokens|counters\.)")
_MESSAGE_FIELD: Final = re.compile(r"messages\[(?P<k>\d+)\]")


class RestoredLoop(ToolLoopPorts, frozen=True, kw_only=True):
    """What ``restore`` hands back: the executable side of an execution, re-created by the host.

    The loop's ports (:class:`~bindloop.loop.ToolLoopPorts`: the ``model`` and the ``runner``
    required, ``hooks``, ``signal``, ``request`` and ``now`` optional) plus the required
    ``capture_bindings``; ``state`` and ``max_iterations`` come from the checkpoint.
    ``capture_bindings()`` is called at every commit and its answer is stored as the new
    checkpoint's bindings — report what the execution is pinned to *now* (a tool may have changed
    the environment).

    A resumed run enters the loop at a boundary, so the signal is polled and the ``compact`` hook
    is offered the checkpoint's transcript again before its first model call: a compaction hook
    must leave an already-compacted transcript alone (threshold policies do), or a resume compacts
    twice.
    """

    capture_bindings: Callable[[], MaybeAwaitable[LoopBindings]]


RestoreFn: TypeAlias = Callable[[LoopCheckpoint], MaybeAwaitable[RestoredLoop]]
"""Re-create the executable ports for a checkpoint (verify or provision its bindings first)."""

CommitFn: TypeAlias = Callable[[LoopCheckpoint], MaybeAwaitable[BoundaryDecision]]
"""Persist one settled checkpoint, then answer ``"continue"`` or ``"checkpoint"`` (stop here)."""


class CheckpointRunResult(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`run_from_checkpoint` returns.

    ``checkpoint`` is the latest one (the last committed, or the input when nothing ran);
    ``stop_reason`` is ``checkpointed`` when ``commit`` asked to stop. ``stats`` and ``iterations``
    are this invocation's; ``cumulative_stats`` is the execution's (``checkpoint.stats``).
    ``final_turn`` is the model turn that ended a ``done`` run (``ToolLoopResult.final_turn``),
    ``None`` otherwise.
    """

    checkpoint: LoopCheckpoint
    stop_reason: StopReason | Literal["checkpointed"]
    stats: RunStats
    cumulative_stats: RunStats
    iterations: int
    final_turn: ModelTurnResult | None = None


def _params(restored: RestoredLoop, state: ToolLoopState, budget: int) -> ToolLoopParams:
    r = restored
    ports = {name: getattr(r, name) for name in ToolLoopPorts.__struct_fields__}
    return ToolLoopParams(state=state, max_iterations=budget, **ports)


def _state_of(cp: LoopCheckpoint) -> ToolLoopState:
    return ToolLoopState(messages=list(cp.messages), totals=cp.stats, counters=cp.counters,
                         open_suspends=list(cp.open_suspends))


def loop_state_from_checkpoint(checkpoint: LoopCheckpoint) -> ToolLoopState:
    """The :class:`~bindloop.loop.ToolLoopState` a run from ``checkpoint`` starts with: its
    transcript and open suspends (as fresh lists), its cumulative spend, and the counters the loop
    keeps. For hosts that drive ``run_tool_loop`` themselves, and for reading a checkpoint's
    position as loop state. Raises :class:`CheckpointFormatError` for a checkpoint that does not
    validate."""
    return _state_of(require_checkpoint(checkpoint))


def _culprit(cp: LoopCheckpoint, field: str) -> str:
    # The loop checks each port value's shape; what is left for a checkpoint to refuse is a
    # relation between values, so name the ports that feed the offending field.
    if _TIME_FIELD.match(field):
        return "now (the clock went backwards: a duration came out negative)"
    if _USAGE_FIELD.match(field):
        return "the compact hook or the model (the usage they reported drove a total below zero)"
    at = _MESSAGE_FIELD.match(field)
    if at and int(at["k"]) < len(cp.messages) and isinstance(cp.messages[int(at["k"])], ToolMessage):
        return "the runner's run_tool_call (or on_step_settled, which delivers tool messages)"
    if field.startswith(("messages", "open_suspends")):
        return ("the hooks compact, on_turn_would_end or on_step_settled (the ports that add or "
                "replace messages)")
    return "a loop port"


def _storable(cp: LoopCheckpoint, previous: LoopCheckpoint) -> LoopCheckpoint:
    """``cp`` as :func:`serialize_loop_checkpoint` would store it, or :class:`PortContractError`:
    a run must never hand ``commit`` a checkpoint that cannot be stored and read back. The messages
    it shares (by identity, at the same position) with ``previous``, the run's last validated
    checkpoint, are not checked again, nor are its bindings, copied from ``capture_bindings()``
    just before; the returned checkpoint is marked validated, so ``commit``'s
    store checks only its dicts (bindings, per-tool stats) again."""
    try:
        return require_checkpoint(cp, known=previous.messages, bindings_copied=True)
    except CheckpointFormatError as exc:
        raise PortContractError(
            f"the run produced a checkpoint that cannot be stored ({exc}); likely culprit: "
            f"{_culprit(cp, exc.field)}") from exc


class _Commits:
    """A run's boundaries, each committed as a checkpoint one revision after the latest: one
    object rather than a closure and its cells, since it lives across every await of the run."""

    __slots__ = ("commit", "latest", "restored", "start")

    def __init__(self, start: LoopCheckpoint, restored: RestoredLoop, commit: CommitFn) -> None:
        self.start = self.latest = start
        self.restored = restored
        self.commit = commit

    async def on_boundary(self, b: LoopBoundary) -> BoundaryDecision:
        if b.final and b.stop_reason == "checkpointed":
            return "checkpoint"  # committed at the boundary that asked to stop; nothing changed since
        captured = await _resolve(self.restored.capture_bindings())
        if not isinstance(captured, LoopBindings):
            raise PortContractError(
                f"capture_bindings returned {type(captured).__name__}; expected LoopBindings")
        st, start, latest = b.state, self.start, self.latest
        cp = LoopCheckpoint(
            execution_id=start.execution_id,
            revision=latest.revision + 1,
            status="ready" if not b.final else status_of_stop(str(b.stop_reason)),
            max_iterations=start.max_iterations,
            iterations=start.iterations + b.iterations,
            messages=tuple(st.messages),
            open_suspends=tuple(st.open_suspends),
            stats=accumulate_run(start.stats, b.stats),
            counters=st.counters,
            bindings=copy_bindings(captured, "capture_bindings()"),
            lineage=start.lineage,
        )
        cp = _storable(cp, latest)
        decision = await _resolve(self.commit(cp))
        if decision not in ("continue", "checkpoint"):
            raise PortContractError(f"commit returned {decision!r}; expected 'continue' or 'checkpoint'")
        self.latest = cp
        return "checkpoint" if decision == "checkpoint" else "continue"


async def run_from_checkpoint(*, checkpoint: LoopCheckpoint, restore: RestoreFn,
                              commit: CommitFn) -> CheckpointRunResult:
    """Run the loop from ``checkpoint`` and commit every settled checkpoint it passes.

    Only a ``ready`` checkpoint runs. Any other status returns at once with that status's stop
    reason — no ``restore``, no inference, no commit: apply input first
    (:func:`apply_checkpoint_input`). Otherwise ``restore(checkpoint)`` supplies the ports, the loop
    runs with the budget the checkpoint has left, and at each settled boundary (before every model
    call after the first, and once at the end) a new checkpoint — one revision later, its bindings
    from ``capture_bindings()`` — is passed to ``commit``. ``commit`` must persist it before it
    returns: ``"checkpoint"`` ends this invocation there (``stop_reason="checkpointed"``), and the
    answer at the final commit is ignored.

    A raise from any port (a crash) propagates; the last committed checkpoint is then where the
    execution resumes, and the work since it is done again — make tool effects idempotent with
    receipts (``bindloop.run``) if repeating them matters. Raises :class:`CheckpointFormatError` for
    a checkpoint (or captured bindings) that does not validate, and
    :class:`~bindloop.errors.PortContractError` when ``restore``, ``capture_bindings`` or ``commit``
    answer with the wrong type, or when the run reaches a boundary whose checkpoint
    :func:`parse_loop_checkpoint` would refuse (a clock that went backwards, a transcript left with
    an unanswered tool call) — raised before ``commit`` sees it, naming the likely port.
    """
    start = require_checkpoint(checkpoint)
    if start.status != "ready":
        return CheckpointRunResult(
            checkpoint=start, stop_reason=stop_of_status(start.status), stats=empty_run_stats(),
            cumulative_stats=start.stats, iterations=0)
    restored = await _resolve(restore(start))
    if not isinstance(restored, RestoredLoop):
        raise PortContractError(f"restore returned {type(restored).__name__}; expected RestoredLoop")
    state = _state_of(start)
    commits = _Commits(start, restored, commit)
    result = await run_tool_loop(_params(restored, state, start.max_iterations - start.iterations),
                                 LoopControl(on_boundary=commits.on_boundary))
    latest = commits.latest
    return CheckpointRunResult(
        checkpoint=latest, stop_reason=result.stop_reason, stats=result.stats,
        cumulative_stats=latest.stats, iterations=result.iterations, final_turn=result.final_turn)
