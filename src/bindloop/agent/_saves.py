"""Per-boundary saves of a chat (``prompt_chat(on_checkpoint=...)`` / ``resume_chat``): the
checkpoints a chat hands its host after every finished tool round, and the re-ask record a
resumed chat reads back from them.

A chat's checkpoints form one execution: the same ``execution_id``, revisions one apart in the
order they are produced (saves first, then the suspend or out-of-turns checkpoint), iterations and
stats counted from the start of the chat. The re-ask state that the loop's own state cannot hold
(the refused answers so far and the prompt's turn budgets) travels in
``bindings.config["bindloop.chat"]``, so a save taken during a re-ask resumes with the same number
of re-asks left.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

import msgspec

from .._awaitable import resolve
from ..contracts import RunStats, accumulate_run
from ..errors import UsageError
from ..loop import BoundaryDecision, LoopBoundary, LoopControl, ToolLoopState
from ..session import CheckpointStatus, LoopBindings, LoopCheckpoint, serialize_loop_checkpoint

__all__ = ("CHAT_RECORD", "ChatRecord", "Origin", "Saves", "read_record", "refuse_saves")

CHAT_RECORD: Final = "bindloop.chat"
"""The key of :class:`ChatRecord` in a chat checkpoint's ``bindings.config``."""


class ChatRecord(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What a resumed chat needs to re-ask as the original would have: the refused answers so far
    (``[text, problem]`` pairs), the prompt's ``max_turn_steps`` and its ``max_total_turns``
    (counted in the checkpoint's ``iterations``). ``cut``: the checkpoint's turn budget ends where
    ``max_total_turns`` does, so running out of it is the prompt's
    :class:`~bindloop.agent.TurnBudgetExceededError`, not a tool loop's
    :class:`~bindloop.agent.ToolLoopExceededError`."""

    attempts: tuple[tuple[str, str], ...] = ()
    max_turn_steps: int
    max_total_turns: int
    cut: bool = False


_RECORD_DECODER: Final = msgspec.json.Decoder(ChatRecord)


def read_record(cp: LoopCheckpoint) -> ChatRecord | None:
    """The checkpoint's :class:`ChatRecord`, ``None`` when it has none (a checkpoint made by
    another driver), or :class:`UsageError` when the entry is not one."""
    raw = cp.bindings.config.get(CHAT_RECORD)
    if raw is None:
        return None
    try:
        return _RECORD_DECODER.decode(msgspec.json.encode(raw))
    except msgspec.ValidationError as exc:
        raise UsageError(f"resume_chat: the checkpoint's bindings.config[{CHAT_RECORD!r}] is not "
                         f"a chat record ({exc}); leave that key to bindloop") from exc


class Origin(msgspec.Struct, frozen=True, kw_only=True):
    """Where a prompt's tool loops start in their execution: its id, the last revision already
    produced, the turns and spend before it, and the bindings its checkpoints carry."""

    execution_id: str
    revision: int = -1
    iterations: int = 0
    stats: RunStats | None = None
    bindings: LoopBindings = msgspec.field(default_factory=LoopBindings)


SaveFn = Callable[[LoopCheckpoint], object]


def refuse_saves(on_checkpoint: object, hook: str) -> SaveFn | None:
    """``on_checkpoint`` checked: ``None`` or a callable, else :class:`UsageError`."""
    if on_checkpoint is None or callable(on_checkpoint):
        return on_checkpoint
    raise UsageError(f"{hook}(on_checkpoint=...) must be a function taking a LoopCheckpoint "
                     f"(sync or async), got {type(on_checkpoint).__name__}")


class Saves:
    """The checkpoints one prompt produces: ``revision`` is the last one handed out, so saves and
    the final checkpoint of the prompt come out strictly increasing. ``fn`` is the host's
    ``on_checkpoint`` (``None``: no saves, and no loop control at all)."""

    __slots__ = ("fn", "origin", "revision")

    def __init__(self, fn: SaveFn | None, origin: Origin) -> None:
        self.fn = fn
        self.origin = origin
        self.revision = origin.revision

    def checkpoint(self, state: ToolLoopState, stats: RunStats, *, status: CheckpointStatus, used: int,
                   budget: int, record: ChatRecord) -> LoopCheckpoint:
        """The next checkpoint: ``used`` turns of this prompt so far, ``budget`` the turns this
        prompt may use in all (both counted from the prompt's start), ``stats`` the prompt's."""
        o = self.origin
        self.revision += 1
        config = dict(o.bindings.config)
        config[CHAT_RECORD] = msgspec.to_builtins(record)
        cp = LoopCheckpoint(
            execution_id=o.execution_id, revision=self.revision, status=status,
            max_iterations=o.iterations + max(budget, used), iterations=o.iterations + used,
            messages=tuple(state.messages), open_suspends=tuple(state.open_suspends),
            stats=stats if o.stats is None else accumulate_run(o.stats, stats),
            counters=state.counters,
            bindings=LoopBindings(config=config, environment=dict(o.bindings.environment)))
        serialize_loop_checkpoint(cp)  # refuses a checkpoint parse_loop_checkpoint would refuse
        return cp

    def control(self, *, used: int, budget: int, stats: RunStats,
                attempts: Sequence[tuple[str, str]], max_turn_steps: int,
                max_total_turns: int) -> LoopControl:
        """The loop control of one tool loop of the prompt: at each non-final boundary, the
        checkpoint of that position goes to ``fn`` (awaited; a raise ends the prompt).
        ``used`` / ``stats``: the prompt's turns and spend before this loop; ``budget``: the
        prompt's turns when this loop's own budget is spent."""
        fn = self.fn
        assert fn is not None
        record = ChatRecord(attempts=tuple(attempts), max_turn_steps=max_turn_steps,
                            max_total_turns=self.origin.iterations + max_total_turns,
                            cut=budget - used < max_turn_steps)

        async def on_boundary(b: LoopBoundary) -> BoundaryDecision:
            if b.final:  # the prompt's outcome (a ChatResult, an error) says how it ended
                return "continue"
            cp = self.checkpoint(b.state, accumulate_run(stats, b.stats), status="ready",
                                 used=used + b.iterations, budget=budget, record=record)
            await resolve(fn(cp))  # what it returns is ignored: a save cannot stop the chat
            return "continue"

        return LoopControl(on_boundary=on_boundary)
