"""``ToolContext``: the context a tool call is run with, built by the agent for every call."""

from __future__ import annotations

from typing import Any

import msgspec

__all__ = ("ToolContext",)


class ToolContext(msgspec.Struct, frozen=True):
    """What a tool and its middlewares see of one call: the tool's name, description and
    JSON-schema ``parameters``, the call's raw ``input`` (JSON text or a mapping), the ``call_id``
    (``None`` for :func:`~bindloop.agent.call_tool`), the calling agent's id, and the run's
    metadata (rejelly's ``metadata.sessionId`` / ``metadata.traceId``): ``session_id`` as given to
    ``run_with(session_id=)`` and ``trace_id``, the run's trace id (``run_with(trace=
    TraceOptions(trace_id=))``, or the tracer's own when an ``event_bus`` traces the run) — each
    ``None`` when the run has none.

    The agent passes one as the ``ctx`` of every tool it runs; a function tool receives it in the
    parameter annotated ``ToolContext`` (:func:`~bindloop.tools.define_tool`). A host running
    tools through its own dispatcher passes its own context instead.

    A frozen msgspec Struct (one is built per tool call, and a Struct costs a tenth of a frozen
    dataclass to build); fields are positional or keyword, in this order."""

    tool_name: str
    description: str
    parameters: dict[str, object]
    input: Any
    call_id: str | None
    agent_id: str | None
    session_id: str | None = None
    trace_id: str | None = None
