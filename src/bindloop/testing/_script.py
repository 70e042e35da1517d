"""Scripted models and the small builders that make scripts readable."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ..contracts import (
    Message,
    ModelTurnResult,
    ReasoningPart,
    ToolCall,
    ToolDefinition,
    TurnUsage,
    UserMessage,
)
from ..errors import UsageError
from ..loop import ToolLoopState
from ._errors import ScriptExhaustedError

__all__ = (
    "ScriptedModel",
    "final_answer",
    "fresh_state",
    "scripted_model",
    "tool_call",
    "tool_call_turn",
)

_JSON = msgspec.json.Encoder()


def tool_call(name: str, args: Mapping[str, Any] | None = None, *, id: str = "") -> ToolCall:
    """A tool call for a script. Without ``id`` the scripted model mints ``call_<turn>_<index>``."""
    return ToolCall(id=id, name=name, arguments=_JSON.encode(dict(args or {})).decode())


def tool_call_turn(calls: Sequence[ToolCall], *, text: str | None = None,
                   usage: TurnUsage | None = None, cost: int = 0,
                   reasoning: Sequence[ReasoningPart] = ()) -> ModelTurnResult:
    """A turn that asks for ``calls`` (optionally with narration ``text``)."""
    return ModelTurnResult(text=text, tool_calls=tuple(calls), usage=usage or TurnUsage(), cost=cost,
                           reasoning=tuple(reasoning), finish_reason="tool_calls")


def final_answer(text: str, *, usage: TurnUsage | None = None, cost: int = 0) -> ModelTurnResult:
    """A turn that answers without calling tools."""
    return ModelTurnResult(text=text, usage=usage or TurnUsage(), cost=cost, finish_reason="stop")


def fresh_state(messages: Sequence[Message] | None = None, *, prompt: str = "Go.") -> ToolLoopState:
    """A zeroed state holding ``messages`` (default: one user message with ``prompt``)."""
    return ToolLoopState(messages=list(messages) if messages is not None
                         else [UserMessage(content=prompt)])


class ScriptedModel:
    """A ``call_model`` that replays prepared turns in order.

    ``calls`` records, per model call, how many messages it was shown and the tool names offered.
    Tool calls without an id get ``call_<turn>_<index>`` (1-based turn); any id used twice in the
    script raises :class:`UsageError` at construction.
    """

    def __init__(self, turns: Sequence[ModelTurnResult]) -> None:
        minted: list[ModelTurnResult] = []
        seen: set[str] = set()
        for t, turn in enumerate(turns, start=1):
            if not isinstance(turn, ModelTurnResult):
                raise UsageError(f"script turn {t} is {type(turn).__name__}, not ModelTurnResult")
            calls = []
            for i, call in enumerate(turn.tool_calls):
                call_id = call.id or f"call_{t}_{i}"
                if call_id in seen:
                    raise UsageError(f"tool-call id {call_id!r} appears twice in the script "
                                     f"(turn {t}); a provider would reject the transcript")
                seen.add(call_id)
                calls.append(call if call.id else msgspec.structs.replace(call, id=call_id))
            minted.append(msgspec.structs.replace(turn, tool_calls=tuple(calls)) if calls else turn)
        self.turns: tuple[ModelTurnResult, ...] = tuple(minted)
        self.position = 0
        self.calls: list[tuple[int, tuple[str, ...]]] = []

    @property
    def remaining(self) -> int:
        return len(self.turns) - self.position

    async def __call__(self, messages: list[Message],
                       tools: list[ToolDefinition]) -> ModelTurnResult:
        self.calls.append((len(messages), tuple(t.name for t in tools)))
        if self.position >= len(self.turns):
            raise ScriptExhaustedError(
                f"the scripted model was called {self.position + 1} times but the script has "
                f"{len(self.turns)} turns"
            )
        turn = self.turns[self.position]
        self.position += 1
        return turn


def scripted_model(turns: Sequence[ModelTurnResult]) -> ScriptedModel:
    """A :class:`ScriptedModel` over ``turns``."""
    return ScriptedModel(turns)
