"""An OpenTelemetry exporter for the agent API's trace events (extra ``otel``).

``OtelTraceBus(tracer)`` is an ``event_bus`` for :func:`bindloop.agent.run_with`: it turns each
``span_start`` / ``span_end`` pair into an OTel span (times stamped as the events arrive, since the
core has no clock), point events into span events, ``status="error"`` into an error status. The
``gen_ai.*`` attributes pass through as they are. Message content — the journaled turn, tool
outcomes and memory values that :func:`~bindloop.agent.snapshots.restore_snapshot` reads — stays out of the
spans unless ``include_content=True``, and so does the exception itself (a tool's raise, as the
run's ``tool_finished`` event carries it to the trace; a failed turn's), which is then recorded on
its span as an OTel exception event (``record_exception``: its message and traceback).

    from opentelemetry import trace
    bus = OtelTraceBus(trace.get_tracer("my-app"))
    await run_with(main, event_bus=bus)
"""

from __future__ import annotations

from typing import Any

import msgspec

from bindloop.agent.events import TraceEvent

__all__ = ("CONTENT_ATTRIBUTES", "OtelTraceBus")

CONTENT_ATTRIBUTES = frozenset({"bindloop.turn", "bindloop.tool.outcome", "bindloop.memory.value"})


def _otel() -> Any:
    try:
        from opentelemetry import trace
    except ImportError as exc:  # pragma: no cover - exercised only without the extra
        raise ImportError("bindloop.hosts.telemetry.otel needs OpenTelemetry: pip install "
                          "opentelemetry-api (bindloop's otel extra)") from exc
    return trace


def _attribute(value: Any) -> Any:
    """An OTel attribute value: scalars and homogeneous scalar lists as they are, anything else as
    compact JSON text."""
    if isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, str) for v in value):
        return list(value)
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return list(value)
    try:
        return msgspec.json.encode(value).decode()
    except TypeError:
        return repr(value)


class OtelTraceBus:
    """``emit(event)`` for ``run_with(event_bus=)``, exporting through an OTel ``tracer``.

    ``parent_context`` (an OTel ``Context``) parents the root spans (a host's request span).
    Spans left open (a run that crashed mid-span) are ended by :meth:`close`."""

    def __init__(self, tracer: Any, *, include_content: bool = False,
                 parent_context: Any = None) -> None:
        self._trace = _otel()
        self._tracer = tracer
        self._include = include_content
        self._parent = parent_context
        self._spans: dict[str, Any] = {}

    def _attributes(self, attributes: dict[str, Any]) -> dict[str, Any]:
        return {k: _attribute(v) for k, v in attributes.items()
                if self._include or k not in CONTENT_ATTRIBUTES}

    def emit(self, event: TraceEvent) -> None:
        if event.type == "span_start":
            parent = self._spans.get(event.parent_span_id or "")
            context = (self._trace.set_span_in_context(parent) if parent is not None
                       else self._parent)
            self._spans[event.span_id] = self._tracer.start_span(
                event.name, context=context, attributes=self._attributes(event.attributes))
        elif event.type == "span_end":
            span = self._spans.pop(event.span_id, None)
            if span is None:
                return
            span.set_attributes(self._attributes(event.attributes))
            if event.status == "error":
                status = self._trace.Status(self._trace.StatusCode.ERROR, event.error)
                span.set_status(status)
                span.set_attribute("error.type", (event.error or "error").split(":", 1)[0])
                if self._include and event.exception is not None:
                    span.record_exception(event.exception)
            span.end()
        else:
            span = self._spans.get(event.span_id)
            if span is not None:
                span.add_event(event.name, attributes=self._attributes(event.attributes))

    def close(self) -> None:
        """End every span still open."""
        for span in self._spans.values():
            span.end()
        self._spans.clear()
