"""The agent this Worker runs, with no Workers API in it: providers from the Worker's env, the route
plan, the tools, and one function that runs a session's checkpoint until it settles.

Everything Workers-specific (requests, the Durable Object, the SSE stream, ``fetch``) stays in
``entry.py`` and reaches this module as plain values and callables. When bindloop's agent API lands,
:func:`run_session` is the one function to rewrite: it builds the loop's ports from
:class:`AgentConfig` and drives ``run_from_checkpoint``; the HTTP surface, the storage and the event
stream do not change.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import msgspec

from bindloop.completion import TurnStreamEvent, TurnTextStream, create_turn_text_stream
from bindloop.contracts import ToolCall, ToolDefinition, ToolError, ToolOutcome, ToolResult, ToolSuspend
from bindloop.loop import BoundaryDecision
from bindloop.routing import (
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteStage,
    canonical_model_id,
    provider_id,
)
from bindloop.session import (
    CheckpointRunResult,
    LoopCheckpoint,
    RestoredLoop,
    run_from_checkpoint,
)
from bindloop.wire import WIRE_NAMES, ModelAdapter, RoutedModel, Transport, WireOptions, create_wire_adapter

MAX_BODY_BYTES = 64 * 1024
"""Requests above this are refused with 413 before they are parsed."""

DEFAULT_MAX_ITERATIONS = 8
SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class HttpError(Exception):
    """A request the Worker refuses: ``status`` (4xx), a stable ``code`` and a message naming the
    problem and the fix. Rendered as ``{"error": code, "message": ...}``."""

    def __init__(self, status: int, code: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {"error": self.code, "message": self.message, **self.extra}


class Provider(msgspec.Struct, frozen=True, kw_only=True):
    """One provider endpoint. ``api_key`` comes from a Worker secret; it is never logged or echoed."""

    id: str
    base_url: str
    wire: str
    model: str
    api_key: str


class AgentConfig(msgspec.Struct, frozen=True, kw_only=True):
    providers: tuple[Provider, ...]
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    system_prompt: str | None = None


def _setting(env: Any, name: str) -> str | None:
    value = getattr(env, name, None)
    if value is None:
        return None
    text = str(value)
    return text if text and text != "undefined" else None


def config_from_env(env: Any) -> AgentConfig:
    """``PROVIDER_*`` (required) and ``FALLBACK_*`` (optional) vars: ``BASE_URL``, ``WIRE``
    (one of bindloop's wire names), ``MODEL``, and the secret ``API_KEY``. ``MAX_ITERATIONS`` bounds a
    session's model turns; ``SYSTEM_PROMPT`` opens every new session. A misconfigured Worker answers
    500 naming the variable (never its value)."""
    providers: list[Provider] = []
    for prefix, pid in (("PROVIDER", "primary"), ("FALLBACK", "fallback")):
        base_url = _setting(env, f"{prefix}_BASE_URL")
        if base_url is None:
            if prefix == "PROVIDER":
                raise HttpError(500, "misconfigured", "the Worker has no PROVIDER_BASE_URL var; set it "
                                "in wrangler.jsonc (vars) or the dashboard")
            continue
        wire = _setting(env, f"{prefix}_WIRE") or "openai_chat"
        if wire not in WIRE_NAMES:
            raise HttpError(500, "misconfigured", f"{prefix}_WIRE must be one of "
                            f"{', '.join(WIRE_NAMES)}, got {wire!r}")
        model = _setting(env, f"{prefix}_MODEL")
        if model is None:
            raise HttpError(500, "misconfigured", f"the Worker has no {prefix}_MODEL var")
        api_key = _setting(env, f"{prefix}_API_KEY")
        if api_key is None:
            raise HttpError(500, "misconfigured", f"the Worker has no {prefix}_API_KEY secret; add "
                            f"it with `uv run pywrangler secret put {prefix}_API_KEY`")
        providers.append(Provider(id=pid, base_url=base_url, wire=wire, model=model, api_key=api_key))
    raw_max = _setting(env, "MAX_ITERATIONS")
    max_iterations = DEFAULT_MAX_ITERATIONS
    if raw_max is not None:
        if not raw_max.isdigit() or int(raw_max) < 1:
            raise HttpError(500, "misconfigured", f"MAX_ITERATIONS must be a positive integer, got {raw_max!r}")
        max_iterations = int(raw_max)
    return AgentConfig(providers=tuple(providers), max_iterations=max_iterations,
                       system_prompt=_setting(env, "SYSTEM_PROMPT"))


def route_plan(config: AgentConfig) -> RoutePlan:
    """Primary first, then the fallback: a failed attempt (a 503, a dropped stream) moves on."""
    model_id = canonical_model_id("worker/agent")
    candidates = tuple(
        RouteCandidate(provider_id=provider_id(p.id), canonical_model_id=model_id,
                       provider_invocation_model=p.model, credential_source="platform")
        for p in config.providers)
    return RoutePlan(stages=(RouteStage(
        role="primary", model=model_id,
        policy=OrderedPolicy(providers=tuple(c.provider_id for c in candidates)),
        candidates=candidates),))


# -- tools ---------------------------------------------------------------------------------------

TOOLS: tuple[ToolDefinition, ...] = (
    ToolDefinition(
        name="ask_user",
        description="Ask the user a question and wait for the answer before continuing.",
        parameters={"type": "object", "properties": {"question": {"type": "string"}},
                    "required": ["question"]},
    ),
    ToolDefinition(
        name="word_count",
        description="Count the words in a text.",
        parameters={"type": "object", "properties": {"text": {"type": "string"}},
                    "required": ["text"]},
    ),
)


def run_tool_call(call: ToolCall) -> ToolOutcome:
    try:
        args = msgspec.json.decode(call.arguments)
    except msgspec.DecodeError:
        return ToolError(error=f"arguments of {call.name} are not JSON", kind="validation")
    if not isinstance(args, dict):
        return ToolError(error=f"arguments of {call.name} must be a JSON object", kind="validation")
    if call.name == "ask_user":
        question = args.get("question")
        if not isinstance(question, str) or not question:
            return ToolError(error="ask_user needs a non-empty 'question' string", kind="validation")
        # The run stops as waiting_for_reply; POST /v1/sessions/{id}/reply answers this call.
        return ToolSuspend(mode="waiting_for_reply", detail=question)
    if call.name == "word_count":
        text = args.get("text")
        if not isinstance(text, str):
            return ToolError(error="word_count needs a 'text' string", kind="validation")
        return ToolResult(content=str(len(text.split())))
    return ToolError(error=f"no tool named {call.name!r}", kind="not_found")


# -- one run -------------------------------------------------------------------------------------

Commit = Callable[[LoopCheckpoint], Awaitable[None]]


class _Sink:
    """The SSE client re-renders from events (wasm/demo/turn-stream.js), so it can be told to
    discard a failed attempt's text: retractable, and routing keeps its whole fallback chain."""

    retractable = True

    def __init__(self, emit: Callable[[TurnStreamEvent], None]) -> None:
        self._emit = emit

    def emit(self, event: TurnStreamEvent, /) -> None:
        self._emit(event)


async def run_session(checkpoint: LoopCheckpoint, *, config: AgentConfig,
                      transport_for: Callable[[Provider, Sequence[tuple[str, str]]], Transport],
                      commit: Commit, on_turn_event: Callable[[TurnStreamEvent], None],
                      ) -> CheckpointRunResult:
    """Run a ``ready`` checkpoint until it settles (done, waiting for a reply, out of budget).

    ``commit`` persists each settled checkpoint before the run goes on (and raises if storage refused
    it: a second writer). ``on_turn_event`` receives the turn text stream: text and resets, scoped by
    ``turn_id`` = ``<execution>:<iteration>``. A provider failure propagates after the stream was
    finished; storage then still holds the last settled checkpoint.
    """
    models: dict[str, ModelAdapter] = {}
    for p in config.providers:
        adapter = create_wire_adapter(p.wire)
        models[p.id] = ModelAdapter(adapter, transport_for(p, adapter.auth_headers(p.api_key)),
                                    WireOptions(model=p.model, stream=True))
    turn = [checkpoint.iterations]
    sink = _Sink(on_turn_event)

    def next_stream() -> TurnTextStream:
        turn[0] += 1
        return create_turn_text_stream(turn_id=f"{checkpoint.execution_id}:{turn[0]}", sink=sink)

    routed = RoutedModel(plan=route_plan(config), models=models, text_stream=next_stream)

    def restore(cp: LoopCheckpoint) -> RestoredLoop:
        return RestoredLoop(call_model=routed.call_model, run_tool_call=run_tool_call,
                            build_tools=lambda: TOOLS, capture_bindings=lambda: cp.bindings)

    async def on_commit(cp: LoopCheckpoint) -> BoundaryDecision:
        await commit(cp)
        return "continue"

    return await run_from_checkpoint(checkpoint=checkpoint, restore=restore, commit=on_commit)
