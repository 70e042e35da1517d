"""Helpers the protocol tests share."""

from __future__ import annotations

from typing import Any


def agent_kind(cls: Any, turn_index: int, **fields: Any) -> Any:
    """An agent-only stream kind (turn start, assembled call, ...) built for whichever shape the
    agent has: today each kind carries ``turn_index``; inside the ``{turn_index, event}`` envelope
    it does not, and the encoders never read it (they take the turn from ``feed(turn_index=)``)."""
    if "turn_index" in cls.__struct_fields__:
        fields["turn_index"] = turn_index
    return cls(**fields)
