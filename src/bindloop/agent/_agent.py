"""``create_agent`` / :class:`Agent` / ``reborn`` / ``augment_agent``: an agent is an awaitable
function; each call runs its handler in a fresh frame, one generation per reborn."""

from __future__ import annotations

import inspect
import itertools
from types import CoroutineType
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Generic, TypeVar

import anyio

from ..errors import PortContractError, UsageError
from ._chat_handler import chat_handler
from ._errors import RebornLimitExceededError
from ._context import Frame, Generation, RunState, current_frame, enter, leave, optional_frame
from ._host import hosting
from ._middleware import (
    AgentMiddleware,
    AgentMiddlewareContext,
    check_agent_middlewares,
)
from ..model import Model
from ._model import checked_model
from ._stream import close_consumers
from ._trace import Tracer

__all__ = ("Agent", "Reborn", "augment_agent", "create_agent", "reborn")

P = TypeVar("P")
R = TypeVar("R")


class Reborn:
    """What ``reborn()`` returns: a handler that returns it is run again as a new generation."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "reborn()"


_REBORN = Reborn()


def reborn() -> Reborn:
    """``return reborn()`` from a handler: run it again as a new generation (draft reset, memory
    kept). More than the agent's ``max_reborns`` raises
    :class:`~bindloop.agent.errors.RebornLimitExceededError`."""
    current_frame("reborn")
    return _REBORN


def _implicit_run() -> RunState:
    return RunState(providers={}, model=None, registry={}, enable_snapshot=False, signal=None,
                    tracer=Tracer(None, None), replay=None)


class Agent(Generic[P, R]):
    """An agent made by :func:`create_agent`: ``await agent(props)`` runs its handler.

    Called inside another agent's handler it is a sub-agent: a frame of its own (memory,
    generations), the parent's signal, scope and resources, and its parent's model when it has
    none. Outside any run it starts an implicit one (no snapshot, no trace).
    """

    __slots__ = ("_model", "_specs", "execution_ids", "handler", "id", "max_reborns",
                 "max_retries", "middleware")

    def __init__(self, *, id: str, handler: Callable[[P], Awaitable[R | Reborn]],
                 model: Model | str | None, max_retries: int, max_reborns: int,
                 middleware: tuple[AgentMiddleware, ...] = (),
                 execution_ids: Callable[[], str] | None = None) -> None:
        self.id = id
        self.handler = handler
        self._model = model
        self.max_retries = max_retries
        self.max_reborns = max_reborns
        self.middleware = middleware
        self._specs: dict[Any, Any] = {}  # prompt_agent's converted schemas, per agent
        if execution_ids is None:
            # The deterministic default: a counter per agent object, so two conversations of
            # one agent in one process never share an id (inject one for several processes).
            counter = itertools.count()
            execution_ids = lambda: f"{id}-{next(counter)}"  # noqa: E731
        self.execution_ids: Callable[[], str] = execution_ids

    def __repr__(self) -> str:
        return f"Agent(id={self.id!r})"

    def _resolve_model(self, run: RunState) -> Model | None:
        model = self._model
        if isinstance(model, str):
            found = run.registry.get(model)
            if found is None:
                raise UsageError(
                    f"agent {self.id!r} names model {model!r}, which run_with(model_registry=) "
                    f"does not hold (it has {sorted(run.registry)}); register it or pass a model "
                    "object")
            return found
        return model

    def __call__(self, props: P = None) -> Coroutine[Any, Any, R]:  # type: ignore[assignment]
        """``await agent(props)``: inside a run (or another agent) a sub-agent of the current
        frame, else the root of an implicit run. Which one is decided here, when it is called."""
        parent = optional_frame()
        if parent is None:
            return self._implicit(props)
        return self._call(parent, props)

    async def _implicit(self, props: P) -> R:
        # An implicit run: this call is its root and hosts its background consumers.
        run = _implicit_run()
        token = enter(run.root)
        try:
            return await hosting(run, lambda: self._call(run.root, props))
        finally:
            leave(token)

    async def _call(self, parent: Frame, props: P) -> R:
        """One invocation: a fresh frame, then one generation per ``reborn()``. One coroutine
        for all of it, the handler called inline (each layer of ``await`` is paid on every run)."""
        run = parent.run
        index = parent.child_count
        parent.child_count += 1
        cursor = None
        if parent.cursor is not None:
            cursor = parent.cursor.child(index, self.id)
        frame = Frame(run=run, agent_id=self.id, parent=parent, path=(*parent.path, index),
                      model=self._resolve_model(run), signal=parent.signal or run.signal,
                      max_retries=self.max_retries, cursor=cursor, specs=self._specs,
                      new_execution_id=self.execution_ids)
        if run.enable_snapshot:
            parent.children.append(frame)
        tracer = run.tracer
        traced = tracer.enabled
        if traced:
            frame.span = tracer.start(f"invoke_agent {self.id}", parent.span, {
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": self.id,
                "gen_ai.agent.id": self.id, "bindloop.frame.path": list(frame.path)})
        agent_span = frame.span
        token = enter(frame)
        try:
            generation = 0
            while True:
                if generation > self.max_reborns:
                    raise RebornLimitExceededError(
                        f"agent {self.id!r} returned reborn() {generation} times (max_reborns="
                        f"{self.max_reborns}); if a counter decides when to stop, keep it in "
                        "equip_memory (handler locals reset every generation), or raise "
                        "max_reborns")
                frame.generation = gen = Generation(generation)
                span = None
                if traced:
                    span = frame.span = tracer.start(
                        "bindloop.generation", agent_span,
                        {"bindloop.generation.index": generation, "gen_ai.agent.name": self.id})
                try:
                    try:
                        if self.middleware:
                            result = await self._through_middleware(props, generation)
                        else:
                            result = self._finished(await self._started(self.handler(props)))
                    except anyio.get_cancelled_exc_class():
                        raise
                    except BaseException as exc:
                        if gen.consumers:  # the generation closes: its awaited consumers end too
                            await close_consumers(gen.consumers, exc)
                        raise
                    if gen.consumers:
                        await close_consumers(gen.consumers, None)
                except BaseException as exc:
                    if span is not None:
                        tracer.end(span, "bindloop.generation", error=exc)
                    raise
                finally:
                    frame.span = agent_span
                if span is not None:
                    tracer.end(span, "bindloop.generation",
                               {"bindloop.reborn": isinstance(result, Reborn)})
                if isinstance(result, Reborn):
                    generation += 1
                    continue
                break
        except BaseException as exc:
            if traced and agent_span is not None:
                tracer.end(agent_span, f"invoke_agent {self.id}", error=exc)
            raise
        finally:
            frame.generation = None
            leave(token)
        if traced and agent_span is not None:
            tracer.end(agent_span, f"invoke_agent {self.id}")
        return result  # type: ignore[no-any-return]  # not a Reborn: the loop went on

    def _started(self, out: object) -> Awaitable[Any]:
        """What the handler returned, checked: it must be awaitable."""
        if type(out) is not CoroutineType and not inspect.isawaitable(out):
            raise PortContractError(
                f"agent {self.id!r}: the handler returned {type(out).__name__}, not an "
                "awaitable; define it with `async def handler(props): ...`")
        return out

    def _finished(self, result: Any) -> Any:
        """What the awaited handler gave, checked: a coroutine means an ``await`` is missing."""
        if isinstance(result, CoroutineType):
            result.close()  # never run: no "was never awaited" warning at exit
            raise UsageError(
                f"agent {self.id!r}: the handler returned a coroutine "
                f"({getattr(result, '__qualname__', 'coroutine')}) instead of a result: an "
                "`await` is missing, e.g. `return prompt_chat()` must be "
                "`return await prompt_chat()`")
        return result

    async def _through_middleware(self, props: P, index: int) -> Any:
        ctx = AgentMiddlewareContext(agent_id=self.id, props=props, generation=index)
        layers = self.middleware
        handler = self.handler

        async def step(i: int) -> Any:
            if i == len(layers):
                return self._finished(await self._started(handler(props)))
            return await layers[i].handler(ctx, lambda: step(i + 1))

        return await step(0)


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise UsageError(f"create_agent({name}=...) must be an int >= {minimum}, got {value!r}")
    return value


def create_agent(*, id: str | None = None,
                 handler: Callable[[P], Awaitable[R | Reborn]] | None = None,
                 model: Model | str | None = None, max_retries: int = 3,
                 max_reborns: int = 100,
                 execution_ids: Callable[[], str] | None = None,
                 tools: Sequence[Any] = (), instructions: str | None = None) -> Agent[P, R]:
    """An :class:`Agent` running ``handler(props)``.

    Without a ``handler`` it is a chat: called with the user's message (a ``str``), it equips
    ``instructions`` (the system message) and ``tools`` (plain functions or ``Tool`` s) and returns
    :func:`~bindloop.agent.prompt_chat`'s :class:`~bindloop.agent.ChatResult`. ``tools`` and
    ``instructions`` belong to that chat only: with a handler of your own, equip them in it
    (:class:`~bindloop.errors.UsageError` otherwise). ``id`` names the agent in traces, logs and
    execution ids (default: the handler's ``__name__``, ``"chat"`` without one).

    ``model`` is a :class:`~bindloop.model.Model` (a wire ``ModelAdapter`` or ``RoutedModel``, a
    wrapped or scripted model), a ``run_with(model_registry=)`` id resolved at call time, or
    ``None`` to inherit the parent's / the root's. ``max_retries`` bounds structured-output re-asks per prompt;
    ``max_reborns`` the reborns per call (N reborns = N + 1 generations).

    ``execution_ids()`` is the id port: every conversation (each ``prompt_chat`` /
    ``prompt_agent``; ``resume_chat`` keeps its checkpoint's) gets a fresh ``execution_id`` from
    it, the one its checkpoints carry. The default counts per agent object (``"<id>-0"``,
    ``"<id>-1"``, ...), unique within one process; agents in several processes that share a store
    need ids unique across them (``lambda: uuid.uuid4().hex``, from the host).
    """
    if handler is None:
        handler = chat_handler(tools, instructions)  # type: ignore[assignment]
        id = "chat" if id is None else id
    elif tools or instructions is not None:
        raise UsageError("create_agent(tools=, instructions=) make the chat of an agent without a "
                         "handler; with handler=, equip them in the handler (equip_tool, "
                         "equip_system)")
    if id is None:
        id = getattr(handler, "__name__", None) or "agent"
    if not isinstance(id, str) or not id:
        raise UsageError(f"create_agent(id=...) must be a non-empty string, got {id!r}")
    if not callable(handler):
        raise UsageError(f"create_agent(handler=...) must be an async function, got {handler!r}")
    if execution_ids is not None and not callable(execution_ids):
        raise UsageError("create_agent(execution_ids=...) must be a function returning a new id "
                         f"string, got {execution_ids!r}")
    resolved: Model | str | None
    if model is None or isinstance(model, str):
        resolved = model
    else:
        resolved = checked_model(model, "create_agent(model=)")
    return Agent(id=id, handler=handler, model=resolved,
                 max_retries=_check_int("max_retries", max_retries, 0),
                 max_reborns=_check_int("max_reborns", max_reborns, 0),
                 execution_ids=execution_ids)


def augment_agent(agent: Agent[P, R], middlewares: Sequence[AgentMiddleware]) -> Agent[P, R]:
    """``agent`` with ``middlewares`` around each generation of its handler (first = outermost,
    placed outside any it already has). They run once per generation, so a reborn runs them again:
    keep them idempotent."""
    if not isinstance(agent, Agent):
        raise UsageError(f"augment_agent() takes an Agent from create_agent, got {agent!r}")
    layers = check_agent_middlewares(middlewares)
    return Agent(id=agent.id, handler=agent.handler, model=agent._model,
                 max_retries=agent.max_retries, max_reborns=agent.max_reborns,
                 middleware=(*layers, *agent.middleware), execution_ids=agent.execution_ids)
