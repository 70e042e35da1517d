"""The scripted ports of one scenario run, and the event log they write.

:class:`ScenarioRun` turns a :class:`~conformance._schema.Scenario` into ``ToolLoopParams``
fields: a scripted model (ordinary turns served by the testing kit's ``ScriptedModel``), a tool
runner over scripted tools, the hooks, and the stop signal's checks the scenario wires, each
appending what it saw to ``events`` in the order the loop called it. Time is a stepping clock that the scripted model and tools advance;
nothing reads the wall clock.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import anyio.lowlevel

from bindloop import (
    AbortController,
    AssistantMessage,
    Message,
    ModelTurnResult,
    RunCancelledError,
    RunStats,
    RunTimeoutError,
    StepSettlement,
    ToolCall,
    ToolDefinition,
    ToolError,
    ToolLoopState,
    ToolMessage,
    ToolOutcome,
    ToolResult,
    TurnUsage,
)
from bindloop.contracts import CompactionApplied, content_text, messages_from_openai
from bindloop.completion import StreamEvent
from bindloop.compaction import persist_tool_output
from bindloop.loop import LoopCounters, LoopHooks, OpenSuspend, ToolBatchOptions, ToolRunner
from bindloop.model import ModelRequest, turn_events
from bindloop.testing import ScriptedModel, SteppingClock, stepping_clock

from ._schema import CommitError, Scenario, ToolSpec, make_exception, model_turn, tool_outcome

__all__ = ("ScenarioRun",)

T = TypeVar("T")


def _port(style: str, fn: Callable[..., T]) -> Callable[..., T | Awaitable[T]]:
    """The port as a plain function (``sync`` style) or a coroutine function (``async``)."""
    if style == "sync":
        return fn

    async def port(*args: Any) -> T:
        return fn(*args)

    return port


class ScenarioRun:
    """One scenario's scripted ports and what they recorded: ``events`` (in call order), the
    stepping ``clock``, the abort ``controller`` (when a signal is wired), the activated plugins and
    skills, and per-port call counters (scenarios address a port's Nth call)."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.events: list[dict[str, Any]] = []
        self.clock: SteppingClock = stepping_clock(sc.clock.start, sc.clock.step)
        self.controller: AbortController | None = None
        self.plugins: list[str] = []
        self.skills: list[str] = []
        self.counts: dict[str, int] = {}

    def count(self, port: str) -> int:
        n = self.counts.get(port, 0) + 1
        self.counts[port] = n
        return n

    def fire(self, reason: str, by: str) -> None:
        assert self.controller is not None
        self.events.append({"event": "abort_signal", "by": by, "reason": reason})
        self.controller.abort(reason)

    # -- the model ---------------------------------------------------------------------------------

    def model(self) -> _ScenarioModel:
        """The scripted model. Built eagerly: the kit's ScriptedModel checks the script at
        construction (an id used twice raises ``UsageError``)."""
        return _ScenarioModel(self)

    # -- tools -------------------------------------------------------------------------------------

    def tool(self) -> Callable[[ToolCall], Any]:
        """The scripted ``run_tool_call`` (the harness wraps it to record ran / side_effects)."""
        sc = self.sc
        default = ToolSpec()

        def begin(call: ToolCall) -> ToolSpec:
            spec = sc.tools.by_id.get(call.id) or sc.tools.by_name.get(call.name) or default
            event: dict[str, Any] = {"event": "tool_start", "id": call.id}
            if sc.ports.activate_plugins:
                event["plugins"] = list(self.plugins)
            if sc.ports.activate_skills:
                event["skills"] = list(self.skills)
            self.events.append(event)
            return spec

        def finish(call: ToolCall, spec: ToolSpec) -> ToolOutcome:
            if spec.delay_ms:
                self.clock.advance(spec.delay_ms)
            if spec.abort_signal is not None:
                self.fire(spec.abort_signal, call.id)
            if spec.raise_ is not None:
                exc = make_exception(spec.raise_)
                self.events.append({"event": "tool_raise", "id": call.id,
                                    "error": type(exc).__name__})
                raise exc
            outcome = tool_outcome(spec, call)
            kind = ("result" if isinstance(outcome, ToolResult)
                    else "error" if isinstance(outcome, ToolError) else "suspend")
            self.events.append({"event": "tool_end", "id": call.id, "outcome": kind})
            return outcome

        if sc.ports.style == "sync":
            def run_sync(call: ToolCall) -> ToolOutcome:
                return finish(call, begin(call))
            return run_sync

        async def run_async(call: ToolCall) -> ToolOutcome:
            spec = begin(call)
            for _ in range(spec.yields):
                await anyio.lowlevel.checkpoint()
            outcome = finish(call, spec)
            if spec.persist is not None and isinstance(outcome, ToolResult) \
                    and isinstance(outcome.content, str):
                outcome = await self.persist(call, spec, outcome.content)
            return outcome

        return run_async

    async def persist(self, call: ToolCall, spec: ToolSpec, text: str) -> ToolResult:
        """Route a large result through the persisted-output stub, writing to memory."""
        assert spec.persist is not None
        written: list[tuple[str, int]] = []

        def write(path: str, blob: str) -> None:
            written.append((path, len(blob.encode("utf-8"))))

        message = ToolMessage(tool_call_id=call.id, content=text * spec.persist.repeat, name=call.name)
        sent = await persist_tool_output(message, path=spec.persist.path, write=write,
                                         threshold_bytes=spec.persist.threshold_bytes)
        self.events.append({"event": "persisted", "id": call.id, "stubbed": sent is not message,
                            "writes": [{"path": p, "bytes": n} for p, n in written]})
        return ToolResult(content=sent.content)

    # -- the run's inputs --------------------------------------------------------------------------

    def initial_state(self) -> ToolLoopState:
        """The scenario's starting state (messages, seeded totals, open suspends)."""
        spec = self.sc.state
        totals = spec.totals
        return ToolLoopState(
            messages=messages_from_openai(spec.messages),
            totals=RunStats(input_tokens=totals.input_tokens, output_tokens=totals.output_tokens,
                            cached_input_tokens=totals.cached_input_tokens, cost=totals.cost),
            counters=LoopCounters(requested_tool_calls=totals.tool_calls,
                                  last_prompt_tokens=totals.last_prompt_tokens,
                                  last_output_tokens=totals.last_output_tokens,
                                  has_fresh_token_count=totals.has_fresh_token_count),
            open_suspends=[OpenSuspend(tool_call_id=s.tool_call_id, tool_name=s.tool_name,
                                       mode=s.mode, detail=s.detail)
                           for s in spec.open_suspends],
        )

    def params(self, state: ToolLoopState) -> dict[str, Any]:
        """Every ``ToolLoopParams`` field the scenario wires, for ``loop_harness(**fields)``.

        Builds the scripted model, so the testing kit's construction-time checks raise here."""
        sc = self.sc
        ports = sc.ports
        fields: dict[str, Any] = {
            "state": state,
            "model": self.model(),
            "max_iterations": sc.max_iterations,
            "now": self.clock,
        }

        def either(fn: Callable[..., Any]) -> Callable[..., Any]:
            return _port(ports.style, fn)

        def wired(table: tuple[tuple[bool, str, Callable[..., Any]], ...]) -> dict[str, Any]:
            return {name: port for on, name, port in table if on}

        # The predicates and format_tool_exception are always synchronous.
        fields["runner"] = ToolRunner(
            run_tool_call=self.tool(),
            batch_options=(None if ports.max_per_tool is None
                           else ToolBatchOptions(max_per_tool=ports.max_per_tool)),
            **wired((
                (ports.build_tools is not None, "build_tools", either(self.build_tools)),
                (ports.runs_serially is not None, "runs_serially", self.runs_serially),
                (ports.is_fatal is not None, "is_fatal_tool_error", self.is_fatal_tool_error),
            )))
        # on_tool_call_rejected and on_progress_update are always synchronous.
        fields["hooks"] = LoopHooks(**wired((
            # The loop has one activation hook; the scenario format wires it per kind.
            (ports.activate_plugins or ports.activate_skills, "activate", either(self.activate)),
            (ports.on_assistant_message, "on_assistant_message", either(self.on_assistant_message)),
            (ports.before_tool_message_accepted is not None, "before_tool_message_accepted",
             either(self.before_tool_message_accepted)),
            (ports.on_step_settled is not None, "on_step_settled", either(self.on_step_settled)),
            (ports.on_turn_would_end is not None, "on_turn_would_end",
             either(self.on_turn_would_end)),
            (ports.compact is not None, "compact", either(self.compact)),
            (ports.on_tool_call_rejected, "on_tool_call_rejected", self.on_tool_call_rejected),
            (ports.on_progress_update, "on_progress_update", self.on_progress_update),
        )))
        # The stop signal: the scenario's own, and the polled sources it wires as its checks
        # (asked in this order at every boundary).
        checks = [check for on, check in (
            (ports.ensure_not_cancelled is not None, self.ensure_not_cancelled),
            (ports.throw_if_timed_out is not None, self.throw_if_timed_out),
            (ports.should_stop is not None, self.should_stop),
        ) if on]
        if ports.signal is not None or checks:
            self.controller = AbortController()
            if ports.signal is not None and ports.signal.pre_aborted:
                self.controller.abort(ports.signal.reason)
            for check in checks:
                self.controller.signal.add_check(check)
            fields["signal"] = self.controller.signal
        return fields

    # -- the ports (each wired only when the scenario asks for it) ---------------------------------

    def runs_serially(self, call: ToolCall) -> bool:
        return call.name in (self.sc.ports.runs_serially or ())

    def is_fatal_tool_error(self, exc: BaseException) -> bool:
        return type(exc).__name__ in (self.sc.ports.is_fatal or ())

    def on_tool_call_rejected(self, call_id: str, exc: BaseException) -> None:
        self.events.append({"event": "rejected", "id": call_id, "error": type(exc).__name__})

    def build_tools(self) -> list[ToolDefinition]:
        spec = self.sc.ports.build_tools
        assert spec is not None
        names = list(spec.base)
        for plugin in self.plugins:
            names.extend(spec.plugins.get(plugin, ()))
        return [ToolDefinition(name=n) for n in names]

    def activate(self, kind: str, names: tuple[str, ...]) -> None:
        self.events.append({"event": "activate", "kind": kind, "names": list(names)})
        active = self.plugins if kind == "plugins" else self.skills
        active.extend(n for n in names if n not in active)

    def should_stop(self) -> str | None:
        spec = self.sc.ports.should_stop
        assert spec is not None
        n = self.count("should_stop")
        self.events.append({"event": "should_stop", "n": n, "stop": n >= spec.true_from})
        return "the host asked the run to stop" if n >= spec.true_from else None

    def ensure_not_cancelled(self) -> RunCancelledError | None:
        spec = self.sc.ports.ensure_not_cancelled
        assert spec is not None
        n = self.count("ensure_not_cancelled")
        self.events.append({"event": "ensure_not_cancelled", "n": n})
        if n == spec.raise_on_call:
            return RunCancelledError(f"cancelled by the host at boundary {n}")
        return None

    def throw_if_timed_out(self) -> RunTimeoutError | None:
        spec = self.sc.ports.throw_if_timed_out
        assert spec is not None
        n = self.count("throw_if_timed_out")
        self.events.append({"event": "throw_if_timed_out", "n": n})
        if n == spec.raise_on_call:
            return RunTimeoutError(f"run budget expired at boundary {n}", label="scenario")
        return None

    def on_assistant_message(self, message: AssistantMessage) -> None:
        self.events.append({"event": "assistant", "text": content_text(message.content),
                            "tool_calls": [c.id for c in message.tool_calls]})

    def on_progress_update(self, output_tokens: int, tool_calls: int) -> None:
        self.events.append({"event": "progress", "output_tokens": output_tokens,
                            "tool_calls": tool_calls})

    def before_tool_message_accepted(self, message: ToolMessage, ordinal: int) -> None:
        spec = self.sc.ports.before_tool_message_accepted
        assert spec is not None
        n = self.count("accept")
        self.events.append({"event": "accept", "id": message.tool_call_id, "ordinal": ordinal})
        if n == spec.raise_on_call:
            raise CommitError(f"could not commit the result of {message.tool_call_id}")

    def on_step_settled(self, would_end: bool) -> StepSettlement | None:
        settlements = self.sc.ports.on_step_settled or []
        n = self.count("settle")
        spec = settlements[n - 1] if n <= len(settlements) else None
        self.events.append({"event": "settle", "n": n, "would_end": would_end,
                            "messages": 0 if spec is None else len(spec.messages),
                            "stop": False if spec is None else spec.stop})
        if spec is None:
            return None
        if spec.raise_ is not None:
            raise make_exception(spec.raise_)
        return StepSettlement(messages=tuple(messages_from_openai(spec.messages)), stop=spec.stop)

    def on_turn_would_end(self, turn: ModelTurnResult) -> list[Message] | None:
        nudges = self.sc.ports.on_turn_would_end or []
        n = self.count("nudge")
        spec = nudges[n - 1] if n <= len(nudges) else None
        self.events.append({"event": "nudge", "n": n, "messages": 0 if spec is None else len(spec)})
        return None if spec is None else messages_from_openai(spec)

    def compact(self, messages: list[Message]) -> CompactionApplied | None:
        n = self.count("compact")
        spec = next((c for c in self.sc.ports.compact or () if c.on_call == n), None)
        self.events.append({"event": "compact", "n": n, "applied": spec is not None})
        if spec is None:
            return None
        if spec.delay_ms:
            self.clock.advance(spec.delay_ms)
        kept = messages[len(messages) - spec.keep_last:] if spec.keep_last else []
        return CompactionApplied(messages=(*messages_from_openai(spec.messages), *kept),
                                 usage=spec.usage.to_usage(), cost=spec.cost)


class _ScenarioModel:
    """The scenario's model: ordinary turns go through the testing kit's ScriptedModel (its
    contracts are part of what is checked); ``raw`` turns and raising calls are served here,
    untouched."""

    id = "scenario"
    provider: str | None = None
    structured_output = "tool"

    def __init__(self, run: ScenarioRun) -> None:
        self.run = run
        self.turns = run.sc.model
        self.scripted = ScriptedModel([model_turn(t) for t in self.turns
                                       if not t.raw and t.raise_ is None])
        self.position = 0

    def price(self, usage: TurnUsage, /) -> int:
        return 0

    async def complete(self, messages: Sequence[Message], request: ModelRequest, /,
                       on_event: Callable[[StreamEvent], None] | None = None,
                       on_reset: Callable[[], None] | None = None) -> ModelTurnResult:
        run, turns = self.run, self.turns
        event: dict[str, Any] = {"event": "model", "n": run.count("model"),
                                 "messages": len(messages)}
        if run.sc.ports.build_tools is not None:
            event["tools"] = [t.name for t in request.tools]
        run.events.append(event)
        if self.position >= len(turns):  # the kit raises ScriptExhaustedError
            return await self.scripted.complete(messages, request)
        spec = turns[self.position]
        self.position += 1
        if spec.delay_ms:
            run.clock.advance(spec.delay_ms)
        if spec.abort_signal is not None:
            run.fire(spec.abort_signal, f"model#{event['n']}")
        if spec.raise_ is not None:
            raise make_exception(spec.raise_)
        if spec.raw:
            return model_turn(spec)
        return await self.scripted.complete(messages, request)

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest, /) -> AsyncIterator[StreamEvent]:
        for event in turn_events(await self.complete(messages, request)):
            yield event
