"""``run_with`` (the explicit root of a run), ``dump_snapshot`` and ``restore_snapshot``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from ..contracts import ModelTurnResult, ToolOutcome
from ..errors import UsageError
from ..checkpoints import CheckpointFormatError
from ._errors import NoAgentContextError, SnapshotDisabledError
from ..signal import AbortSignal
from ._context import Frame, RunState, enter, leave, optional_frame
from ._host import hosting
from ._observe import ToolErrorHook
from ..model import Model
from ._model import checked_model
from ._snapshot import (
    AgentSnapshot,
    FrameSnapshot,
    JournalTurn,
    ReplayCursor,
    memory_builtins,
    parse_snapshot,
)
from ._stream import AgentStreamEvent
from ._trace import TraceEmitter, TraceEvent, TraceOptions, Tracer

__all__ = ("dump_snapshot", "restore_snapshot", "run_with")

R = TypeVar("R")
_UNSET: Any = object()


async def run_with(fn: Callable[..., Awaitable[R]], *, initial_props: Any = _UNSET,
                   snapshot: AgentSnapshot | bytes | str | None = None,
                   event_bus: TraceEmitter | None = None,
                   providers: Mapping[str, Any] | None = None, model: Model | None = None,
                   model_registry: Mapping[str, Model] | None = None,
                   enable_snapshot: bool = False, trace: TraceOptions | None = None,
                   signal: AbortSignal | None = None, session_id: str | None = None,
                   on_tool_error: ToolErrorHook | None = None,
                   on_event: Callable[[AgentStreamEvent], None] | None = None) -> R:
    """Run ``fn()`` (or ``fn(initial_props)``) as the root of a run: everything is explicit, there
    is no environment default.

    ``providers`` are what :func:`~bindloop.agent.expect_resource` reads; ``model`` is the root
    model agents without one inherit; ``model_registry`` maps ids to models for
    ``create_agent(model="id")``; ``event_bus.emit(event)`` receives the trace events;
    ``enable_snapshot`` records the journal :func:`dump_snapshot` returns; ``signal`` cancels every
    model call and tool batch of the run; ``session_id`` (the host's conversation or user session)
    is what every tool's :class:`~bindloop.tools.ToolContext` reports, beside the run's trace id;
    ``on_tool_error(report)`` sees every tool call of the run that raised (a
    :class:`~bindloop.agent.ToolErrorReport` holding the exception; what the model reads is
    unchanged) *instead of* the default, :func:`~bindloop.agent.log_tool_error` (a redacted
    WARNING on the ``bindloop.agent.tools`` logger): a host that reports its own way gets no
    second record, and calls ``log_tool_error(report)`` from its hook to keep it;
    ``bindloop.hosts.telemetry.logs.log_tool_errors(logger, level=)`` is the same record on your logger.
    Either way the prompt's ``ChatResult.tool_failures`` lists the reports.
    ``on_event(event)`` is called synchronously with each run event
    (:class:`~bindloop.agent.events.AgentStreamEvent`) of the top-level agent's prompts the moment it is
    emitted, before the run goes on (keep it cheap; a raise fails the prompt): what it has seen
    when a checkpoint is saved is exactly what came before that save. A sub-agent's events are
    its caller's to forward (``on_stream`` inside it). :func:`~bindloop.agent.stream_text` is
    built on it.

    ``snapshot`` replays: each agent (matched by call order) is served its journaled model turns and
    tool outputs — zero model calls, zero tool executions — until its journal runs out, then it goes
    live. A request whose prompt hash differs from the journal's raises
    :class:`~bindloop.agent.snapshots.SnapshotDivergenceError`. A replayed run records its journal too when
    ``enable_snapshot`` is on, so its snapshot equals the original's.
    """
    if not callable(fn):
        raise UsageError(f"run_with() takes an async function, got {fn!r}")
    if on_tool_error is not None and not callable(on_tool_error):
        raise UsageError(f"run_with(on_tool_error=) must be a function of the report, got "
                         f"{on_tool_error!r}")
    if on_event is not None and not callable(on_event):
        raise UsageError(f"run_with(on_event=) must be a function of the event, got "
                         f"{on_event!r}")
    if session_id is not None and not isinstance(session_id, str):
        raise UsageError(f"run_with(session_id=) must be a string or None, got {session_id!r}")
    registry = {}
    for key, value in (model_registry.items() if model_registry else ()):
        if not isinstance(key, str):
            raise UsageError(f"run_with(model_registry=): key {key!r} is not a string")
        registry[key] = checked_model(value, f"run_with(model_registry=)[{key!r}]")
    snap = None
    if snapshot is not None:
        snap = snapshot if isinstance(snapshot, AgentSnapshot) else parse_snapshot(snapshot)
    tracer = Tracer(event_bus, trace)
    traced = tracer.enabled or trace is not None and trace.trace_id is not None
    run = RunState(providers={} if providers is None else dict(providers),
                   model=None if model is None else checked_model(model, "run_with(model=)"),
                   registry=registry,
                   enable_snapshot=bool(enable_snapshot), signal=signal, tracer=tracer,
                   replay=None if snap is None else ReplayCursor(snap.root),
                   session_id=session_id, trace_id=tracer.trace_id if traced else None,
                   on_tool_error=on_tool_error)
    run.watch = on_event
    run.root.cursor = run.replay
    run.root.signal = signal
    token = enter(run.root)
    try:
        out = fn() if initial_props is _UNSET else fn(initial_props)
        if not hasattr(out, "__await__"):
            raise UsageError(f"run_with(fn): fn returned {type(out).__name__}, not an awaitable; "
                             "pass an async function")

        return await hosting(run, lambda: out)  # the awaitable itself: no wrapping coroutine
    finally:
        leave(token)


def _freeze(frame: Frame) -> FrameSnapshot:
    return FrameSnapshot(agent_id=frame.agent_id,
                         memory=memory_builtins(frame.agent_id, frame.memory),
                         journal=frame.journal.freeze(),
                         children=tuple(_freeze(c) for c in frame.children))


def dump_snapshot() -> AgentSnapshot:
    """The run's snapshot so far: every frame's memory and journal, children included — from a
    handler (mid-run) or from the root function after the agents returned.

    Raises :class:`~bindloop.agent.snapshots.SnapshotDisabledError` unless the run was started with
    ``run_with(enable_snapshot=True)``, and :class:`~bindloop.agent.errors.NoAgentContextError` outside a
    run."""
    frame = optional_frame()
    if frame is None:
        raise NoAgentContextError("dump_snapshot() was called outside run_with(...) and outside "
                                  "any agent")
    if not frame.run.enable_snapshot:
        raise SnapshotDisabledError("dump_snapshot(): snapshots are off in this run; start it "
                                    "with run_with(fn, enable_snapshot=True)")
    return AgentSnapshot(root=_freeze(frame.run.root))


class _Building:
    __slots__ = ("agent_id", "children", "memory", "turns")

    def __init__(self, agent_id: str | None) -> None:
        self.agent_id = agent_id
        self.memory: dict[str, Any] = {}
        self.turns: list[tuple[str, ModelTurnResult, dict[str, ToolOutcome]]] = []
        self.children: dict[int, _Building] = {}

    def freeze(self) -> FrameSnapshot:
        return FrameSnapshot(
            agent_id=self.agent_id, memory=dict(self.memory),
            journal=tuple(JournalTurn(prompt_hash=h, turn=t, tools=dict(tools))
                          for h, t, tools in self.turns),
            children=tuple(self.children[i].freeze() for i in sorted(self.children)))


def restore_snapshot(trace: Sequence[TraceEvent | Mapping[str, Any]], *,
                     anchor: int | None = None) -> AgentSnapshot:
    """Rebuild a snapshot from a run's linear trace (the events its ``event_bus`` received, or
    their JSON), up to and including the event whose ``seq`` is ``anchor`` (default: the whole
    trace). Replaying it re-serves the model turns and tool outputs traced before the anchor.

    Raises :class:`~bindloop.checkpoints.CheckpointFormatError` for an event that does not decode, and
    :class:`~bindloop.errors.UsageError` for an ``anchor`` that is not in the trace."""
    events: list[TraceEvent] = []
    for i, raw in enumerate(trace):
        try:
            events.append(raw if isinstance(raw, TraceEvent) else
                          msgspec.convert(raw, TraceEvent))
        except msgspec.ValidationError as exc:
            raise CheckpointFormatError(f"trace[{i}]", str(exc), document="snapshot") from exc
    if anchor is not None and not any(e.seq == anchor for e in events):
        raise UsageError(f"restore_snapshot(anchor={anchor!r}): no trace event has that seq")
    root = _Building(None)
    frames: dict[str, _Building] = {}  # span id (agent or generation span) -> frame
    for event in events:
        if anchor is not None and event.seq > anchor:
            break
        attrs = event.attributes
        if event.type == "span_start" and attrs.get("gen_ai.operation.name") == "invoke_agent":
            path = attrs.get("bindloop.frame.path")
            if not isinstance(path, list) or not path:
                raise CheckpointFormatError(f"trace seq {event.seq}", "agent span without a "
                                            "bindloop.frame.path attribute", document="snapshot")
            node = root
            for step in path[:-1]:
                node = node.children.setdefault(int(step), _Building(None))
            child = node.children.get(int(path[-1]))
            if child is None:
                child = node.children[int(path[-1])] = _Building(attrs.get("gen_ai.agent.name"))
            child.agent_id = attrs.get("gen_ai.agent.name")
            frames[event.span_id] = child
        elif event.type == "span_start" and event.name == "bindloop.generation":
            frames[event.span_id] = frames.get(event.parent_span_id or "", root)
        elif event.type == "span_start" and event.parent_span_id in frames:
            frames[event.span_id] = frames[event.parent_span_id or ""]
        elif event.type == "span_end" and "bindloop.turn" in attrs:
            owner = frames.get(event.span_id, root)
            turn = msgspec.convert(attrs["bindloop.turn"], ModelTurnResult)
            owner.turns.append((str(attrs.get("bindloop.prompt_hash", "")), turn, {}))
        elif event.type == "span_end" and "bindloop.tool.outcome" in attrs:
            owner = frames.get(event.span_id, root)
            call_id = attrs.get("gen_ai.tool.call.id")
            outcome = msgspec.convert(attrs["bindloop.tool.outcome"], ToolOutcome)
            for _, turn, tools in reversed(owner.turns):
                if any(c.id == call_id for c in turn.tool_calls):
                    tools[str(call_id)] = outcome
                    break
        elif event.type == "event" and event.name == "bindloop.memory.set":
            owner = frames.get(event.span_id, root)
            key = str(attrs.get("bindloop.memory.key"))
            if "bindloop.memory.value" in attrs:
                owner.memory[key] = attrs["bindloop.memory.value"]
            else:  # a value with no JSON form was set: the earlier one is stale, keep neither
                owner.memory.pop(key, None)
    return AgentSnapshot(root=root.freeze())
