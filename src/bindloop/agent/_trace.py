"""Trace events for agent, generation, model and tool spans, named after OpenTelemetry's GenAI
semantic conventions (``gen_ai.*`` attributes), emitted to the run's ``event_bus``.

Events carry no wall-clock time (the core has no clock): ``seq`` orders them and an exporter stamps
times as they arrive (``bindloop.hosts.telemetry.otel``). Span and trace ids are counters, so a replayed run
emits the same trace. Chat and tool span ends also carry the journal data (the turn, its prompt hash,
the tool outcome) that :func:`~bindloop.agent.snapshots.restore_snapshot` rebuilds a snapshot from.
"""

from __future__ import annotations

from typing import Any, Final, Literal, Protocol

import msgspec

from ._stream import (
    RunEvent,
    ToolFinishedEvent,
    ToolStartedEvent,
    TurnDoneEvent,
    TurnFailedEvent,
    TurnStartEvent,
)

__all__ = ("ChatSpans", "ToolSpans", "TraceEmitter", "TraceEvent", "TraceOptions", "Tracer")


class TraceEvent(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, dict=True):
    """One trace record. ``type``: ``span_start`` / ``span_end`` / ``event`` (a point event inside
    ``span_id``). ``name`` is the span name (``invoke_agent search_agent``, ``chat gpt-x``,
    ``execute_tool search``); ``attributes`` use GenAI names (``gen_ai.operation.name``,
    ``gen_ai.agent.name``, ``gen_ai.request.model``, ``gen_ai.usage.input_tokens``, ...) plus
    ``bindloop.*`` ones. ``status`` is ``ok`` / ``error`` on a span end, and :attr:`exception`
    the exception itself for an in-process exporter (not a field: never encoded)."""

    seq: int
    type: Literal["span_start", "span_end", "event"]
    trace_id: str
    span_id: str
    name: str
    parent_span_id: str | None = None
    attributes: dict[str, Any] = {}
    status: Literal["ok", "error"] | None = None
    error: str | None = None

    @property
    def exception(self) -> BaseException | None:
        """What ended the span with ``error`` (a tool's raise, a failed turn), or ``None``."""
        raised: BaseException | None = self.__dict__.get("raised")
        return raised


class TraceEmitter(Protocol):
    """Where trace events go: ``emit(event)`` (synchronous; keep it cheap, queue if you export)."""

    def emit(self, event: TraceEvent, /) -> None: ...


class TraceOptions(msgspec.Struct, frozen=True, kw_only=True):
    """``run_with(trace=)``: the trace id to use, the parent span of the root spans (a host's request
    span), and attributes added to every span start."""

    trace_id: str | None = None
    parent_span_id: str | None = None
    attributes: dict[str, Any] = {}


_FIRST_TRACE_ID: Final = "0" * 31 + "1"


class Tracer:
    """Mints span ids and emits events; inert (``enabled`` false) without an event bus."""

    __slots__ = ("_bus", "_next_span", "_seq", "attributes", "enabled", "parent", "trace_id")

    def __init__(self, bus: TraceEmitter | None, options: TraceOptions | None) -> None:
        self._bus = bus
        self.enabled = bus is not None
        if options is None:  # every untraced run: no options object to build and read
            self.trace_id, self.parent, self.attributes = _FIRST_TRACE_ID, None, {}
        else:
            self.trace_id = options.trace_id or _FIRST_TRACE_ID
            self.parent = options.parent_span_id
            self.attributes = dict(options.attributes)
        self._seq = 0
        self._next_span = 0

    def _emit(self, raised: BaseException | None = None, **fields: Any) -> None:
        assert self._bus is not None
        self._seq += 1
        event = TraceEvent(seq=self._seq, trace_id=self.trace_id, **fields)
        if raised is not None:
            event.__dict__["raised"] = raised
        self._bus.emit(event)

    def start(self, name: str, parent: str | None, attributes: dict[str, Any]) -> str:
        self._next_span += 1
        span = f"{self._next_span:016x}"
        if self.enabled:
            self._emit(type="span_start", span_id=span, name=name,
                       parent_span_id=parent if parent is not None else self.parent,
                       attributes={**self.attributes, **attributes})
        return span

    def end(self, span: str, name: str, attributes: dict[str, Any] | None = None,
            error: BaseException | None = None) -> None:
        if self.enabled:
            self._emit(error, type="span_end", span_id=span, name=name,
                       attributes=attributes or {}, status="error" if error is not None else "ok",
                       error=None if error is None else f"{type(error).__name__}: {error}")

    def event(self, span: str | None, name: str, attributes: dict[str, Any]) -> None:
        if self.enabled:
            self._emit(type="event", span_id=span or "", name=name, attributes=attributes)


class ChatSpans:
    """A prompt's ``chat`` spans, read off its turn events: a span opens at a turn's
    :class:`~bindloop.agent.events.TurnStartEvent` (a second start of the same turn, a route's fallback
    taking over, keeps it) and ends at its :class:`~bindloop.agent.events.TurnDoneEvent` -- with the
    turn's usage and finish reason, and the journal data the event carries for the host (the
    prompt hash and the turn, which :func:`~bindloop.agent.snapshots.restore_snapshot` reads) -- or its
    :class:`~bindloop.agent.events.TurnFailedEvent` (``error``). The same events the stream carries."""

    __slots__ = ("_open", "name", "parent", "provider", "tracer")

    def __init__(self, tracer: Tracer, parent: str | None, model: str,
                 provider: str | None) -> None:
        self.tracer = tracer
        self.parent = parent
        self.name = f"chat {model}"
        self.provider = provider or "unknown"
        self._open: dict[int, str] = {}  # turn index -> its span

    def observe(self, index: int, event: RunEvent) -> None:
        kind = type(event)
        if kind is TurnStartEvent:
            if index not in self._open:
                self._open[index] = self.tracer.start(self.name, self.parent, {
                    "gen_ai.operation.name": "chat",
                    "gen_ai.request.model": self.name[len("chat "):],
                    "gen_ai.provider.name": self.provider, "bindloop.turn_index": index})
        elif kind is TurnDoneEvent:
            assert isinstance(event, TurnDoneEvent)
            span = self._open.pop(index, None)
            if span is not None:
                turn = event.turn
                self.tracer.end(span, self.name, {
                    "gen_ai.usage.input_tokens": event.usage.input_tokens,
                    "gen_ai.usage.output_tokens": event.usage.output_tokens,
                    "gen_ai.response.finish_reasons": [event.finish_reason],
                    "bindloop.prompt_hash": event.prompt_hash,
                    "bindloop.turn": None if turn is None else msgspec.to_builtins(turn)})
        elif kind is TurnFailedEvent:
            assert isinstance(event, TurnFailedEvent)
            span = self._open.pop(index, None)
            if span is not None:
                self.tracer.end(span, self.name, error=event.raised)


class ToolSpans:
    """A prompt's ``execute_tool`` spans, read off its run events: a span opens at a call's
    :class:`~bindloop.agent.events.ToolStartedEvent` and ends at its
    :class:`~bindloop.agent.events.ToolFinishedEvent` -- with the outcome the model read (the journal data
    :func:`~bindloop.agent.snapshots.restore_snapshot` reads), or ``error`` for a raise. The same events the
    stream carries, so a traced run and a watched one report the same calls (a journaled call a
    replay serves included)."""

    __slots__ = ("_open", "parent", "tracer")

    def __init__(self, tracer: Tracer, parent: str | None) -> None:
        self.tracer = tracer
        self.parent = parent
        self._open: dict[str, str] = {}  # call id -> its span

    def observe(self, event: RunEvent) -> None:
        kind = type(event)
        if kind is ToolStartedEvent:
            call = event.call  # type: ignore[union-attr]
            self._open[call.id] = self.tracer.start(f"execute_tool {call.name}", self.parent, {
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id})
        elif kind is ToolFinishedEvent:
            assert isinstance(event, ToolFinishedEvent)
            call = event.call
            span = self._open.pop(call.id, None)
            if span is None:
                return
            name = f"execute_tool {call.name}"
            if event.error is not None:
                self.tracer.end(span, name, error=event.error)
            else:
                self.tracer.end(span, name, {
                    "gen_ai.tool.call.id": call.id,
                    "bindloop.tool.outcome": msgspec.to_builtins(event.outcome)})
