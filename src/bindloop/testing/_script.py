"""Scripted models and the small builders that make scripts readable."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal

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
from ..completion import StreamEvent
from ..errors import UsageError
from ..loop import ToolLoopState
from ..model import ModelRequest, turn_events
from ._errors import ScriptExhaustedError

__all__ = (
    "FunctionModel",
    "ScriptedModel",
    "final_answer",
    "fresh_state",
    "function_model",
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
    """A turn that asks for ``calls`` (optionally with narration ``text``).

    ``calls`` is a sequence of :class:`ToolCall` (from :func:`tool_call`); anything else raises
    :class:`UsageError` here rather than deep inside the model later."""
    if isinstance(calls, ToolCall) or not all(isinstance(call, ToolCall) for call in calls):
        raise UsageError("tool_call_turn takes a list of tool calls, e.g. "
                         "tool_call_turn([tool_call('name', {...})]); got "
                         f"{type(calls).__name__}" + ("" if isinstance(calls, ToolCall) else
                                                      " holding something else"))
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
    """A :class:`~bindloop.model.Model` that replays prepared turns in order, whole (each turn's
    ``cost`` is the script's; :meth:`price` is 0).

    ``calls`` records, per model call, how many messages it was shown and the tool names offered.
    Tool calls without an id get ``call_<turn>_<index>`` (1-based turn); any id used twice in the
    script raises :class:`UsageError` at construction. More calls than turns raise
    :class:`~bindloop.testing.ScriptExhaustedError`.
    """

    id = "scripted"
    provider: str | None = "scripted"
    structured_output: Literal["json_schema", "tool"] = "json_schema"

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

    def price(self, usage: TurnUsage, /) -> int:
        return 0

    async def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                       on_event: Callable[[StreamEvent], None] | None = None,
                       on_reset: Callable[[], None] | None = None) -> ModelTurnResult:
        """The next turn; ``on_event`` gets it as the events a provider would have sent."""
        turn = self._next(len(messages), request.tools)
        if on_event is not None:
            for event in turn_events(turn):
                on_event(event)
        return turn

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        """The next turn as the events a provider would have sent."""
        for event in turn_events(self._next(len(messages), request.tools)):
            yield event

    def _next(self, shown: int, tools: Sequence[ToolDefinition]) -> ModelTurnResult:
        self.calls.append((shown, tuple(t.name for t in tools)))
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


class FunctionModel:
    """A :class:`~bindloop.model.Model` whose turns come from ``respond(messages, request)``, a
    coroutine function returning a :class:`~bindloop.contracts.ModelTurnResult` (or raising):
    a fake whose answer depends on what it is shown. ``on_event`` gets each turn as the events a
    provider would have sent; the turn's ``cost`` is the function's (:meth:`price` is 0)."""

    provider: str | None = "function"
    structured_output: Literal["json_schema", "tool"] = "json_schema"

    def __init__(self, respond: Callable[[Sequence[Message], ModelRequest],
                                         Awaitable[ModelTurnResult]], *,
                 id: str = "function",
                 structured_output: Literal["json_schema", "tool"] = "json_schema") -> None:
        if not callable(respond):
            raise UsageError(f"function_model() takes a coroutine function, got {respond!r}")
        self.respond = respond
        self.id = id
        self.structured_output = structured_output

    def price(self, usage: TurnUsage, /) -> int:
        return 0

    async def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                       on_event: Callable[[StreamEvent], None] | None = None,
                       on_reset: Callable[[], None] | None = None) -> ModelTurnResult:
        turn = await self.respond(messages, request)
        if not isinstance(turn, ModelTurnResult):
            raise UsageError(f"function model {self.id!r}: respond() returned "
                             f"{type(turn).__name__}, not a ModelTurnResult")
        if on_event is not None:
            for event in turn_events(turn):
                on_event(event)
        return turn

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        for event in turn_events(await self.complete(messages, request)):
            yield event


def function_model(respond: Callable[[Sequence[Message], ModelRequest],
                                     Awaitable[ModelTurnResult]], **options: Any) -> FunctionModel:
    """A :class:`FunctionModel` over ``respond(messages, request)``."""
    return FunctionModel(respond, **options)
