"""The hooks a handler calls: the draft (``equip_*``, ``expect_validator``, ``on_stream``), memory,
memo, resources and scope."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

import msgspec

from ..checkpoints import LoopCheckpoint
from ..contracts import Message
from ..errors import UsageError
from ..tools import Tool
from ..signal import AbortSignal
from ._context import Frame, current_frame, draft_generation, optional_frame
from ._middleware import ToolCallLoopMiddleware, ToolMiddleware
from ._stream import AgentStreamEvent, ConsumerFn, StreamConsumer
from ._tools import AgentTool, as_agent_tool, check_dynamic

__all__ = (
    "equip_budget",
    "equip_history",
    "equip_instruction",
    "equip_memo",
    "equip_memory",
    "equip_resource",
    "equip_scope",
    "equip_system",
    "equip_tool",
    "equip_tool_call_loop_middleware",
    "expect_resource",
    "expect_scope",
    "expect_validator",
    "on_event",
    "on_stream",
)

T = TypeVar("T")

# The message classes, from the Message union itself (isinstance takes the union too).
_MESSAGE_KINDS: Final = frozenset(Message.__args__)


def _text(hook: str, text: object) -> str:
    if not isinstance(text, str) or not text:
        raise UsageError(f"{hook}() takes a non-empty string, got {text!r}")
    return text


def equip_system(text: str) -> None:
    """Add ``text`` to this generation's system prompt (several calls join with a blank line)."""
    _, gen = draft_generation("equip_system")
    gen.system.append(_text("equip_system", text))


def equip_instruction(text: str) -> None:
    """Add ``text`` to this generation's user instruction (several calls join with a blank line)."""
    _, gen = draft_generation("equip_instruction")
    gen.instructions.append(_text("equip_instruction", text))


def equip_history(messages: Sequence[Message], *, source: LoopCheckpoint | None = None) -> None:
    """Put earlier conversation ``messages`` between the system prompt and the instruction (a
    chat's stored history; a previous :class:`ChatResult`'s ``delta`` appends to it). An entry
    that is not a message is a :class:`~bindloop.errors.UsageError` naming it, and then none of
    ``messages`` is added.

    ``source`` is the stored checkpoint ``messages`` were read from (``equip_history(
    stored.messages, source=stored)``, a session loaded from a store). The messages of a
    checkpoint bindloop read or made were validated then, so the prompt's saves
    (``prompt_chat(on_checkpoint=...)``) do not check them again: the first save costs what the
    prompt added, not the whole history. Messages that are not its own objects, or those of a
    checkpoint bindloop did not validate, are checked as usual; what is stored is the same either
    way."""
    _, gen = draft_generation("equip_history")
    if source is not None and not isinstance(source, LoopCheckpoint):
        raise UsageError(f"equip_history(source=...) takes the LoopCheckpoint the messages were "
                         f"read from, got {type(source).__name__}")
    if type(messages) is not list and type(messages) is not tuple:
        messages = list(messages)  # an iterator is read once
    # The message types by exact type, in one pass in C: a chat host hands its whole stored
    # history to every prompt. A subclass, or an entry that is no message, takes the loop.
    if not _MESSAGE_KINDS.issuperset(map(type, messages)):
        for m in messages:
            if not isinstance(m, Message):
                raise UsageError(f"equip_history(): {m!r} is not a bindloop.contracts message")
    gen.history.extend(messages)
    if source is not None and gen.history_source is None:
        gen.history_source = source


def _hashable(value: object) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def equip_tool(tool: Tool[Any, Any] | AgentTool | Callable[..., Any], *,
               middleware: Sequence[ToolMiddleware] = (), serial: bool = False,
               needs_approval: bool | Callable[[Any], bool] = False) -> None:
    """Offer ``tool`` (from ``define_tool`` or ``augment_tool``, or a plain typed function, which
    is made a tool by :func:`~bindloop.tools.define_tool` once per agent) to this generation's
    prompt, with dynamic ``middleware`` around its static layers (dynamic -> static -> tool).
    Equipping the same name twice replaces the first. A function the schema cannot describe is a
    :class:`~bindloop.errors.UsageError` here, before the model is called.

    ``serial=True``: when the model asks for several calls in one turn, this tool's calls run
    first, alone and in the model's order, each finished before the next starts; the turn's other
    calls then run concurrently. For a tool that writes, or that changes what the others see.
    Results reach the transcript in the model's order either way.

    ``needs_approval=True`` (or a predicate given the call's decoded JSON arguments, returning a
    bool): such a call does not run; the chat suspends (``waiting_for_reply``) with it in
    ``ChatResult.approvals``, and ``resume_chat(..., decisions=[approve(...) | deny(...) |
    edit_arguments(...)])`` decides it — the approved call then runs once, inside the resumed
    run. See :mod:`bindloop.agent` approvals in docs/agent.md."""
    frame, gen = draft_generation("equip_tool")
    if not isinstance(serial, bool):
        raise UsageError(f"equip_tool(serial=) takes a bool, got {serial!r}")
    if not isinstance(needs_approval, bool) and not callable(needs_approval):
        raise UsageError("equip_tool(needs_approval=) takes a bool or a predicate of the call's "
                         f"arguments, got {needs_approval!r}")
    if isinstance(tool, Tool) or (not isinstance(tool, AgentTool) and _hashable(tool)):
        # A bare Tool is wrapped (its wire definition built), and a plain function defined, once
        # per agent, not per call: the agent's cache holds the object itself as the key, so the
        # key cannot be recycled.
        key = ("tool", tool)
        agent_tool = frame.specs.get(key)
        if agent_tool is None:
            agent_tool = frame.specs[key] = as_agent_tool("equip_tool", tool)
    else:
        agent_tool = as_agent_tool("equip_tool", tool)
    layers = check_dynamic(middleware) if middleware else ()
    tools = gen.tools
    if tools:
        gen.tools = tools = [t for t in tools if t[0].name != agent_tool.name]
    tools.append((agent_tool, layers))
    if serial:
        gen.serial.add(agent_tool.name)
    else:
        gen.serial.discard(agent_tool.name)
    if needs_approval is False:
        gen.approvals.pop(agent_tool.name, None)
    else:
        gen.approvals[agent_tool.name] = needs_approval


def equip_tool_call_loop_middleware(middleware: ToolCallLoopMiddleware) -> None:
    """Add a batch-level layer before each batch of tool calls runs (earlier = outer)."""
    _, gen = draft_generation("equip_tool_call_loop_middleware")
    if not isinstance(middleware, ToolCallLoopMiddleware):
        raise UsageError("equip_tool_call_loop_middleware() takes a "
                         f"ToolCallLoopMiddleware(name=, handler=), got {middleware!r}")
    gen.loop_middleware.append(middleware)


def equip_budget(limit: int) -> None:
    """Cap this agent's spend at ``limit``, in the unit of the model's ``price`` (what each turn's
    ``cost`` and ``RunStats.cost`` count), charged after every turn — its sub-agents' turns
    included. Once the spend reaches the limit, the next model call raises
    :class:`~bindloop.errors.BudgetExceededError` before it is sent. Spend counts across reborns
    (one agent invocation, one bill); equipping again replaces the limit."""
    _, gen = draft_generation("equip_budget")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise UsageError(f"equip_budget() takes a non-negative int (the cost limit, in the unit "
                         f"of the model's price), got {limit!r}")
    gen.budget = limit


def expect_validator(validator: Callable[[Any], object]) -> None:
    """Check each decoded answer: ``validator(value)`` returns ``True`` to accept, or an error string
    sent back to the model in a re-ask. A raise counts as a failed attempt (its message is the
    reason); any other return value is a usage error naming the validator."""
    _, gen = draft_generation("expect_validator")
    if not callable(validator):
        raise UsageError(f"expect_validator() takes a callable, got {validator!r}")
    gen.validators.append(validator)


def on_stream(consumer: ConsumerFn, signal: AbortSignal | None = None,
              await_on_end: bool = True) -> None:
    """Receive this generation's agent stream events: ``consumer(events)`` is started when the
    prompt crosses the draft barrier and iterates ``events`` (an async iterator). The stream always
    ends — also when the model fails at once — and does not survive reborn. ``signal`` ends this
    consumer's stream early. The consumer is hosted by the run's root (``run_with``, or the
    outermost agent call) and the prompt never waits for it. With ``await_on_end=True`` (the
    default) the generation waits for it when it closes (the handler returned, raised or chose
    reborn), so its cleanup may wait for handler code after the prompt; what it raised is then
    re-raised as itself. With ``await_on_end=False`` it is fire and forget: it keeps running its
    own cleanup after its stream ended; the run's root waits for it before returning, and re-raises
    what it raised once the root function is done (a failing fire-and-forget consumer never cancels
    the run midway)."""
    _, gen = draft_generation("on_stream")
    if not callable(consumer):
        raise UsageError(f"on_stream() takes a callable consumer(events), got {consumer!r}")
    gen.streams.append(StreamConsumer(consumer, signal, await_on_end))


def on_event(observer: Callable[[AgentStreamEvent], None]) -> None:
    """Observe this generation's run events synchronously: ``observer(event)`` is called with each
    :class:`AgentStreamEvent` the moment it is emitted, before the prompt goes on (keep it cheap;
    a raise fails the prompt). What it has seen when ``on_checkpoint`` is called is exactly what
    came before that save -- the ASGI host feeds its protocol encoder this way. For work that
    awaits, use :func:`on_stream`."""
    _, gen = draft_generation("on_event")
    if not callable(observer):
        raise UsageError(f"on_event() takes a callable observer(event), got {observer!r}")
    gen.watchers.append(observer)


def equip_memory(key: str, initial: T) -> tuple[T, Callable[[T], None]]:
    """``(value, set_value)`` for ``key`` in this agent's memory: ``initial`` the first time, then
    whatever was set — across reborns; it dies when the agent returns. Not a draft hook: call it
    any time in the handler."""
    frame = current_frame("equip_memory")
    if not isinstance(key, str) or not key:
        raise UsageError(f"equip_memory() key must be a non-empty string, got {key!r}")
    memory = frame.memory
    if key not in memory:
        memory[key] = initial
        if frame.run.tracer.enabled:
            _trace_memory(frame, key, initial)

    def set_value(value: T) -> None:
        memory[key] = value
        if frame.run.tracer.enabled:
            _trace_memory(frame, key, value)

    return memory[key], set_value


_ENCODE = msgspec.json.Encoder().encode


def _trace_memory(frame: Frame, key: str, value: object) -> None:
    # Trace events are JSON: a value that has no JSON form (an object that belongs in
    # equip_resource) is traced by its type name alone, never by its repr (it may hold secrets),
    # and restore_snapshot leaves that key out of the rebuilt memory.
    attributes: dict[str, Any] = {"bindloop.memory.key": key}
    try:
        builtins = msgspec.to_builtins(value)
        _ENCODE(builtins)
        attributes["bindloop.memory.value"] = builtins
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        attributes["bindloop.memory.unencodable"] = type(value).__qualname__
    frame.run.tracer.event(frame.span, "bindloop.memory.set", attributes)


def equip_memo(key: str, factory: Callable[[], T], deps: Sequence[Any]) -> T:
    """``factory()`` cached under ``key`` for this agent invocation, recomputed when ``deps``
    changes (deep comparison: ``==``)."""
    frame = current_frame("equip_memo")
    deps = tuple(deps)
    cached = frame.memo.get(key)
    if cached is not None and cached[0] == deps:
        return cached[1]  # type: ignore[no-any-return]
    value = factory()
    frame.memo[key] = (deps, value)
    return value


def _same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    # Shallow, React-style: identity per element (equal plain scalars count as the same).
    return len(a) == len(b) and all(
        x is y or (type(x) is type(y) and isinstance(x, (str, int, float, bytes, bool))
                   and x == y) for x, y in zip(a, b, strict=True))


def equip_resource(key: str, factory: Callable[[], T], deps: Sequence[Any]) -> T:
    """``factory()`` cached under ``key`` for this agent invocation, recomputed when an element of
    ``deps`` is not the same object (shallow comparison; non-serializable values welcome). Sub-agents
    can read it with :func:`expect_resource`."""
    frame = current_frame("equip_resource")
    deps = tuple(deps)
    cached = frame.resources.get(key)
    if cached is not None and _same(cached[0], deps):
        return cached[1]  # type: ignore[no-any-return]
    value = factory()
    frame.resources[key] = (deps, value)
    return value


def equip_scope(key: str, value: Any) -> None:
    """Offer ``value`` under ``key`` to the sub-agents this agent calls (read with
    :func:`expect_scope`). Call it before calling the sub-agent."""
    frame = current_frame("equip_scope")
    frame.scope[key] = value


_MISSING = object()


def expect_scope(key: str, default: Any = _MISSING) -> Any:
    """The nearest ancestor agent's ``equip_scope(key, ...)`` value (or ``default``); raises
    :class:`~bindloop.errors.UsageError` naming the key otherwise."""
    frame = current_frame("expect_scope")
    node = frame.parent
    while node is not None:
        if key in node.scope:
            return node.scope[key]
        node = node.parent
    if default is not _MISSING:
        return default
    raise UsageError(
        f"expect_scope({key!r}): no ancestor agent offered {key!r}; call equip_scope({key!r}, "
        "value) in a parent agent before it calls this one")


def expect_resource(key: str, default: Any = _MISSING) -> Any:
    """A resource: the nearest ancestor agent's ``equip_resource(key, ...)``, else what
    ``run_with(providers=)`` injected under ``key`` (or ``default``); raises
    :class:`~bindloop.errors.UsageError` naming the key otherwise."""
    frame = optional_frame()
    if frame is None:
        raise UsageError(
            f"expect_resource({key!r}) was called outside run_with and outside any agent")
    node = frame.parent
    while node is not None:
        if key in node.resources:
            return node.resources[key][1]
        node = node.parent
    if key in frame.run.providers:
        return frame.run.providers[key]
    if default is not _MISSING:
        return default
    raise UsageError(
        f"expect_resource({key!r}): nothing provides {key!r}; pass run_with(providers={{{key!r}: "
        "...}}) or equip_resource it in a parent agent")
