"""State both protocol encoders keep: the tool calls a turn is streaming and the run's tokens."""

from __future__ import annotations

from ..completion import ToolCallChunk
from ..contracts import TurnUsage

__all__ = ("CallSlot", "UsageLedger")


class CallSlot:
    """One streamed tool call of a turn, keyed by the provider's index: the id may arrive late and
    the name in fragments, so it is announced once both are known; argument text seen before that
    waits in ``args`` and goes out with the announcement."""

    __slots__ = ("args", "id", "name", "started")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name = ""
        self.args: list[str] = []
        self.started = False

    def take(self, chunk: ToolCallChunk) -> bool:
        """Merge ``chunk``; ``True`` when the call can be announced now (for the first time)."""
        if chunk.id:
            self.id = chunk.id
        if chunk.name:
            self.name += chunk.name
        if chunk.arguments:
            self.args.append(chunk.arguments)
        if not self.started and self.id is not None and self.name:
            self.started = True
            return True
        return False

    def pending_args(self) -> str | None:
        """Argument text to send now (once announced), or ``None``."""
        if not self.started or not self.args:
            return None
        text = "".join(self.args)
        self.args = []
        return text


class UsageLedger:
    """Each turn's usage snapshots folded as ``collect_turn`` folds them (field-wise maximum, or
    the last one for a ``snapshot``), summed over the run's turns."""

    __slots__ = ("_turns",)

    def __init__(self) -> None:
        self._turns: dict[int, TurnUsage] = {}

    def record(self, turn: int, usage: TurnUsage, snapshot: bool = False) -> None:
        prev = self._turns.get(turn)
        if prev is None or snapshot:
            self._turns[turn] = usage
            return
        self._turns[turn] = TurnUsage(
            input_tokens=max(prev.input_tokens, usage.input_tokens),
            output_tokens=max(prev.output_tokens, usage.output_tokens),
            cached_input_tokens=max(prev.cached_input_tokens, usage.cached_input_tokens))

    def total(self) -> TurnUsage:
        turns = self._turns.values()
        return TurnUsage(input_tokens=sum(u.input_tokens for u in turns),
                         output_tokens=sum(u.output_tokens for u in turns),
                         cached_input_tokens=sum(u.cached_input_tokens for u in turns))
