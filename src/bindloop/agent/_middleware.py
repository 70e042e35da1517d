"""Middleware onions: model, tool, agent and the batch-level tool-call loop.

Every list is an onion read left to right: the first middleware is the outermost layer, the request
passes through the list in order and the response comes back in reverse.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Generic, TypeAlias, TypeVar

import msgspec

from ..completion import StreamEvent
from ..contracts import (
    Message,
    ModelTurnResult,
    ToolCall,
    ToolDefinition,
    ToolOutcome,
    TurnUsage,
)
from ..errors import PortContractError, UsageError
from ..tools import ToolContext as ToolContext  # defined with the tools; the middlewares see it too
from ..model import Model, ModelRequest, StructuredOutputMode, fold_events
from ._errors import LoopMissingToolOutputError
from ._model import checked_model

__all__ = (
    "AgentMiddleware",
    "AgentMiddlewareContext",
    "ModelMiddleware",
    "ToolCallLoopContext",
    "ToolCallLoopMiddleware",
    "ToolMiddleware",
    "ToolOutput",
    "ToolTurn",
    "WrappedModel",
    "augment_model",
    "check_outputs",
    "run_loop_chain",
    "run_tool_chain",
)

P = TypeVar("P")


class WrappedModel:
    """A base for a model that wraps another: ``id``, ``provider``, ``structured_output`` and
    :meth:`price` are the inner model's, any other attribute the inner model has is read through
    from it, and :meth:`stream` and :meth:`complete` call it. A subclass overrides what it
    changes (and declares its own slots).

    A subclass that overrides only :meth:`stream` changes every turn: its :meth:`complete` folds
    that stream with :meth:`price` (the inner model's own fold is hidden). One that overrides
    :meth:`complete` too wraps the inner fold as well (a route's retractable live stream, an
    adapter's streamed fold), which is what the built-in limit and retry middlewares do."""

    __slots__ = ("_folds", "_inner", "id", "provider", "structured_output")

    def __init__(self, inner: Model) -> None:
        self._inner = inner
        self.id: str = inner.id
        self.provider: str | None = inner.provider
        self.structured_output: StructuredOutputMode = inner.structured_output
        cls = type(self)
        # Decided once: whether complete() folds this wrapper's own stream.
        self._folds = cls.stream is not WrappedModel.stream and \
            cls.complete is WrappedModel.complete

    def price(self, usage: TurnUsage, /) -> int:
        return self._inner.price(usage)

    def stream(self, messages: Sequence[Message],
               request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        return self._inner.stream(messages, request)

    def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                 on_event: Callable[[StreamEvent], None] | None = None,
                 on_reset: Callable[[], None] | None = None) -> Awaitable[ModelTurnResult]:
        if self._folds:
            return fold_events(self.stream(messages, request), self.price, on_event)
        return self._inner.complete(messages, request, on_event, on_reset)

    def __getattr__(self, name: str) -> Any:
        # Only reached for a name the wrapper does not have itself: the inner model's extras
        # (a host's own metadata) read the same through any number of wrappers.
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._inner, name)


class ModelMiddleware(msgspec.Struct, frozen=True):
    """``wrap(inner) -> model``: returns a :class:`~bindloop.model.Model` that calls ``inner``
    (a :class:`WrappedModel` subclass forwards what it does not change)."""

    name: str
    wrap: Callable[[Model], Model]


def augment_model(model: Model, middlewares: Sequence[ModelMiddleware]) -> Model:
    """``model`` wrapped in ``middlewares``: the request goes through the list left to right (the
    first is outermost), so ``[limit, log]`` gives ``limit -> log -> model``.

    Raises :class:`~bindloop.errors.UsageError` for a model that is not a
    :class:`~bindloop.model.Model` or a middleware that is not a :class:`ModelMiddleware`, and
    :class:`~bindloop.errors.PortContractError` naming the middleware whose ``wrap`` returned
    something that is not a model.
    """
    wrapped = checked_model(model, "augment_model(model=)")
    for mw in reversed(tuple(middlewares)):
        if not isinstance(mw, ModelMiddleware):
            raise UsageError(f"augment_model: {mw!r} is not a ModelMiddleware(name=, wrap=)")
        out = mw.wrap(wrapped)
        try:
            wrapped = checked_model(out, f"model middleware {mw.name!r}")
        except UsageError as exc:
            raise PortContractError(f"model middleware {mw.name!r}: wrap() returned "
                                    f"{type(out).__name__}, not a model: {exc}") from None
    return wrapped


ToolNext: TypeAlias = Callable[[], Awaitable[ToolOutcome]]


class ToolMiddleware(msgspec.Struct, frozen=True):
    """``handler(ctx, next) -> outcome``: run code around one tool call; ``await next()`` runs the
    inner layers and the tool. ``config`` is a display-only snapshot."""

    name: str
    handler: Callable[[ToolContext, ToolNext], Awaitable[ToolOutcome]]
    config: dict[str, Any] = msgspec.field(default_factory=dict)


async def run_tool_chain(layers: Sequence[ToolMiddleware], ctx: ToolContext,
                         inner: ToolNext) -> ToolOutcome:
    """Run ``inner`` inside ``layers`` (first = outermost), checking each layer's answer."""
    from ..contracts import ToolError, ToolResult, ToolSuspend

    async def step(i: int) -> ToolOutcome:
        if i == len(layers):
            return await inner()
        mw = layers[i]
        out = await mw.handler(ctx, lambda: step(i + 1))
        if not isinstance(out, (ToolResult, ToolError, ToolSuspend)):
            raise PortContractError(
                f"tool middleware {mw.name!r} returned {type(out).__name__}; it must return what "
                "`await next()` gave (a ToolResult, ToolError or ToolSuspend) or one of those")
        return out

    return await step(0)


class ToolOutput(msgspec.Struct, frozen=True, kw_only=True):
    """One call's answer in a tool-call-loop middleware: ``call_id`` and its ``outcome``."""

    call_id: str
    outcome: ToolOutcome


class ToolTurn(msgspec.Struct, frozen=True, kw_only=True):
    """One completed tool round: its loop ``step``, the model's ``calls`` and the ``outputs`` the
    round's chain answered them with (one per call, in the calls' order)."""

    step: int
    calls: tuple[ToolCall, ...]
    outputs: tuple[ToolOutput, ...]


class ToolCallLoopContext(msgspec.Struct, frozen=True):
    """A read-only view for a tool-call-loop middleware: the loop ``step`` (1-based model turn),
    the prompt's ``system`` and ``instruction`` text, the ``tools`` offered,
    ``original_calls``, the model's own calls for this batch (what the outermost layer receives),
    and ``tool_turns``, the rounds this prompt (or this ``resume_chat``) completed before it, in
    order: the structured history of the tool loop."""

    step: int
    system: str
    instruction: str
    tools: tuple[ToolDefinition, ...]
    original_calls: tuple[ToolCall, ...]
    agent_id: str | None
    tool_turns: tuple[ToolTurn, ...] = ()


LoopNext: TypeAlias = Callable[[Sequence[ToolCall]], Awaitable[list[ToolOutput]]]


class ToolCallLoopMiddleware(msgspec.Struct, frozen=True):
    """``handler(ctx, current_calls, next) -> outputs`` around one batch of tool calls.

    ``await next(calls)`` executes ``calls`` (each through its tool middleware) and returns their
    outputs. Whatever a layer filters out it must answer itself: after the chain, every call of the
    batch needs exactly one output (N in = N out), else
    :class:`~bindloop.agent.errors.LoopMissingToolOutputError`."""

    name: str
    handler: Callable[[ToolCallLoopContext, list[ToolCall], LoopNext], Awaitable[list[ToolOutput]]]


def check_outputs(where: str, calls: Sequence[ToolCall],
                  outputs: object) -> dict[str, ToolOutcome]:
    """``outputs`` as one outcome per call id of ``calls``, or the error naming what is off."""
    from ..contracts import ToolError, ToolResult, ToolSuspend

    if not isinstance(outputs, list):
        raise PortContractError(f"{where} returned {type(outputs).__name__}, not a list of "
                                "ToolOutput")
    wanted = {c.id for c in calls}
    got: dict[str, ToolOutcome] = {}
    duplicated: list[str] = []
    unexpected: list[str] = []
    for out in outputs:
        if not isinstance(out, ToolOutput) or not isinstance(
                out.outcome, (ToolResult, ToolError, ToolSuspend)):
            raise PortContractError(f"{where} returned {out!r} in its list; each item must be a "
                                    "ToolOutput(call_id=, outcome=ToolResult|ToolError|ToolSuspend)")
        if out.call_id not in wanted:
            unexpected.append(out.call_id)
        elif out.call_id in got:
            duplicated.append(out.call_id)
        else:
            got[out.call_id] = out.outcome
    missing = [c.id for c in calls if c.id not in got]
    if missing or unexpected or duplicated:
        parts = []
        if missing:
            parts.append(f"no output for {missing}")
        if unexpected:
            parts.append(f"outputs for ids not in the batch {unexpected}")
        if duplicated:
            parts.append(f"several outputs for {duplicated}")
        raise LoopMissingToolOutputError(
            f"{where}: {'; '.join(parts)}. Every tool call of the batch needs exactly one output: "
            "answer the calls you filter out with a synthetic ToolOutput and merge them with what "
            "next() returned", missing=tuple(missing), unexpected=tuple(unexpected),
            duplicated=tuple(duplicated))
    return got


async def run_loop_chain(layers: Sequence[ToolCallLoopMiddleware], ctx: ToolCallLoopContext,
                         execute: LoopNext) -> dict[str, ToolOutcome]:
    """The batch through ``layers`` (first = outermost) down to ``execute``; each layer's answer is
    checked against the calls it was given, and the whole against ``ctx.original_calls``."""

    async def step(i: int, calls: Sequence[ToolCall]) -> list[ToolOutput]:
        if i == len(layers):
            return await execute(calls)
        mw = layers[i]
        out = await mw.handler(ctx, list(calls), lambda inner: step(i + 1, inner))
        check_outputs(f"tool-call-loop middleware {mw.name!r}", calls, out)
        return out

    return check_outputs("the tool-call-loop middleware chain", ctx.original_calls,
                         await step(0, ctx.original_calls))


AgentNext: TypeAlias = Callable[[], Awaitable[Any]]


class AgentMiddlewareContext(msgspec.Struct, Generic[P], frozen=True):
    """What an agent middleware sees: the agent's id, the call's props and the generation index
    (it runs once per generation, so a reborn runs it again)."""

    agent_id: str
    props: P
    generation: int


class AgentMiddleware(msgspec.Struct, frozen=True):
    """``handler(ctx, next) -> result`` around each generation of an agent's handler."""

    name: str
    handler: Callable[[AgentMiddlewareContext[Any], AgentNext], Awaitable[Any]]


def check_agent_middlewares(middlewares: Sequence[object]) -> tuple[AgentMiddleware, ...]:
    out = tuple(middlewares)
    for mw in out:
        if not isinstance(mw, AgentMiddleware):
            raise UsageError(f"augment_agent: {mw!r} is not an AgentMiddleware(name=, handler=)")
    return out  # type: ignore[return-value]
