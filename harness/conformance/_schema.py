"""The scenario format as a schema, and the conversions from its specs to loop inputs.

Decoding a scenario file into :class:`Scenario` validates it: unknown fields are rejected, so a
typo in a scenario fails loudly instead of silently testing less. ``harness/conformance/README.md``
documents every field; :func:`check` catches the inconsistencies a schema alone cannot.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Literal

import msgspec

from bindloop import (
    ModelTurnResult,
    ProviderError,
    ReasoningPart,
    RunCancelledError,
    RunTimeoutError,
    ToolCall,
    ToolError,
    ToolOutcome,
    ToolResult,
    ToolSuspend,
    TurnUsage,
)
from bindloop.contracts import message_from_openai

__all__ = (
    "CheckpointSpec",
    "CommitError",
    "ExpectSpec",
    "PersistenceError",
    "Scenario",
    "ScenarioError",
    "ScenarioToolError",
    "ToolSpec",
    "check",
    "decode_scenario",
    "make_exception",
    "model_turn",
    "tool_outcome",
)


# ---- exceptions scenarios can raise ------------------------------------------------------------

class ScenarioToolError(Exception):
    """A tool failure a scenario raises (non-fatal unless ``ports.is_fatal`` names it)."""


class PersistenceError(Exception):
    """A host failure to record an outcome: the classic fatal tool error."""


class CommitError(Exception):
    """Raised by the scripted ``before_tool_message_accepted`` port when told to fail."""


class ScenarioError(Exception):
    """The scenario file itself is inconsistent (not a loop failure)."""


_RAISABLE: Mapping[str, Callable[[str], Exception]] = MappingProxyType({
    "ScenarioToolError": ScenarioToolError,
    "PersistenceError": PersistenceError,
    "ProviderError": ProviderError,
    "RunCancelledError": RunCancelledError,
    "RunTimeoutError": RunTimeoutError,
    "RuntimeError": RuntimeError,
})


# ---- the scenario schema -----------------------------------------------------------------------

class UsageSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0

    def to_usage(self) -> TurnUsage:
        return TurnUsage(input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                         cached_input_tokens=self.cached_input_tokens)


class RaiseSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    type: str
    message: str = ""


class CallSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A tool call with an explicit id. ``arguments``: a JSON object (encoded for the call) or a raw
    string (used as is); ``unencoded_arguments`` hands the object itself to the loop (malformed)."""

    id: str
    name: str
    arguments: str | dict[str, Any] = msgspec.field(default_factory=dict)
    unencoded_arguments: bool = False


class TurnSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One scripted model turn, or (``raise``) a model call that fails."""

    text: str | None = None
    tool_calls: list[CallSpec] = msgspec.field(default_factory=list)
    reasoning: list[dict[str, Any]] = msgspec.field(default_factory=list)
    usage: UsageSpec = UsageSpec()
    cost: int = 0
    finish_reason: str | None = None
    accept_message: bool = True
    delay_ms: float = 0.0
    abort_signal: str | None = None
    raise_: RaiseSpec | None = msgspec.field(default=None, name="raise")
    raw: bool = False


class PersistSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Send the tool's text result (repeated ``repeat`` times) through
    ``bindloop.compaction.persist_tool_output`` with an in-memory write port: a result over
    ``threshold_bytes`` reaches the transcript as the byte-stable ``<persisted-output>`` stub."""

    path: str
    repeat: int = 1
    threshold_bytes: int = 32 * 1024


class ToolSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What one tool call does. At most one of result / error / suspend / raise; none means the
    default result ``"<name> ok"``."""

    result: str | list[dict[str, Any]] | None = None
    activate_plugins: list[str] = msgspec.field(default_factory=list)
    activate_skills: list[str] = msgspec.field(default_factory=list)
    error: str | None = None
    kind: str = "error"
    suspend: Literal["waiting_for_reply", "resuming_later"] | None = None
    detail: str | None = None
    raise_: RaiseSpec | None = msgspec.field(default=None, name="raise")
    delay_ms: float = 0.0
    yields: int = 0
    abort_signal: str | None = None
    persist: PersistSpec | None = None


class ToolsSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    by_id: dict[str, ToolSpec] = msgspec.field(default_factory=dict)
    by_name: dict[str, ToolSpec] = msgspec.field(default_factory=dict)


class ShouldStopSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    true_from: int


class SignalSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    pre_aborted: bool = False
    reason: str | None = None


class SettlementSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    messages: list[dict[str, Any]] = msgspec.field(default_factory=list)
    stop: bool = False
    raise_: RaiseSpec | None = msgspec.field(default=None, name="raise")


class RaiseOnCallSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    raise_on_call: int | None = None


class CompactionSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    on_call: int
    messages: list[dict[str, Any]] = msgspec.field(default_factory=list)
    keep_last: int = 0
    usage: UsageSpec = UsageSpec()
    cost: int = 0
    delay_ms: float = 0.0


class BuildToolsSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    base: list[str] = msgspec.field(default_factory=list)
    plugins: dict[str, list[str]] = msgspec.field(default_factory=dict)


class PortsSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    style: Literal["async", "sync"] = "async"
    runs_serially: list[str] | None = None
    activate_plugins: bool = False
    activate_skills: bool = False
    is_fatal: list[str] | None = None
    on_tool_call_rejected: bool = True
    should_stop: ShouldStopSpec | None = None
    signal: SignalSpec | None = None
    on_step_settled: list[SettlementSpec | None] | None = None
    on_turn_would_end: list[list[dict[str, Any]] | None] | None = None
    before_tool_message_accepted: RaiseOnCallSpec | None = None
    compact: list[CompactionSpec] | None = None
    max_per_tool: int | None = None
    ensure_not_cancelled: RaiseOnCallSpec | None = None
    throw_if_timed_out: RaiseOnCallSpec | None = None
    on_assistant_message: bool = False
    on_progress_update: bool = False
    build_tools: BuildToolsSpec | None = None


class TotalsSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cost: int = 0
    tool_calls: int = 0
    last_prompt_tokens: int = 0
    last_output_tokens: int = 0
    has_fresh_token_count: bool = False


class OpenSuspendSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    tool_call_id: str
    tool_name: str
    mode: Literal["waiting_for_reply", "resuming_later"]
    detail: str | None = None


class StateSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    messages: list[dict[str, Any]]
    totals: TotalsSpec = TotalsSpec()
    open_suspends: list[OpenSuspendSpec] = msgspec.field(default_factory=list)


class ClockSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    start: float = 0.0
    step: float = 1.0


class OutcomeSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    stop_reason: str | None = None
    error: str | None = None
    message: str | None = None


class ExpectSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    outcome: OutcomeSpec
    transcript: list[dict[str, Any]]
    events: list[dict[str, Any]]
    state: dict[str, Any]
    stats: dict[str, Any] | None = None
    ran: list[str] | None = None
    side_effects: list[str] | None = None


class CheckpointSpec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Run the scenario through ``bindloop.checkpoints`` instead: create a checkpoint from the starting
    messages, stop at the commit whose checkpoint has consumed ``stop_at_iterations`` model turns,
    and resume from ``stored`` — the checkpoint as CPython wrote it there — so every runtime resumes
    what CPython checkpointed. ``expect`` is the uninterrupted run's."""

    execution_id: str
    stop_at_iterations: int
    stored: dict[str, Any]
    config: dict[str, Any] = msgspec.field(default_factory=dict)
    environment: dict[str, Any] = msgspec.field(default_factory=dict)


class Scenario(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One conformance scenario (see ``harness/conformance/README.md``)."""

    description: str
    state: StateSpec
    max_iterations: int
    model: list[TurnSpec]
    expect: ExpectSpec
    tools: ToolsSpec = ToolsSpec()
    ports: PortsSpec = PortsSpec()
    clock: ClockSpec = ClockSpec()
    checkpoint: CheckpointSpec | None = None


_SCENARIO_DECODER = msgspec.json.Decoder(Scenario)
_JSON = msgspec.json.Encoder()


def decode_scenario(data: bytes) -> Scenario:
    """Read one scenario file. Raises ``msgspec.ValidationError`` / ``msgspec.DecodeError`` for a
    file that does not fit the schema and :class:`ScenarioError` for an inconsistent one."""
    sc = _SCENARIO_DECODER.decode(data)
    outcome = sc.expect.outcome
    if (outcome.stop_reason is None) == (outcome.error is None):
        raise ScenarioError("expect.outcome needs exactly one of stop_reason / error")
    if outcome.stop_reason is not None and sc.expect.stats is None:
        raise ScenarioError("expect.stats is required when the run returns")
    check(sc)
    return sc


# ---- building loop inputs from specs -----------------------------------------------------------

def make_exception(spec: RaiseSpec) -> Exception:
    """The exception a ``raise`` spec names (only the types in ``_RAISABLE``)."""
    factory = _RAISABLE.get(spec.type)
    if factory is None:
        raise ScenarioError(f"unknown exception type {spec.type!r}; known: {sorted(_RAISABLE)}")
    return factory(spec.message)


def model_turn(spec: TurnSpec) -> ModelTurnResult:
    """The turn a spec describes, built as is (``raw`` turns reach the loop exactly like this)."""
    calls = tuple(
        ToolCall(
            id=c.id,
            name=c.name,
            arguments=(c.arguments if c.unencoded_arguments or isinstance(c.arguments, str)
                       else _JSON.encode(c.arguments).decode()),  # type: ignore[arg-type]
        )
        for c in spec.tool_calls
    )
    reasoning = tuple(msgspec.convert(r, ReasoningPart) for r in spec.reasoning)
    return ModelTurnResult(
        text=spec.text, tool_calls=calls, reasoning=reasoning, usage=spec.usage.to_usage(),
        cost=spec.cost, finish_reason=spec.finish_reason, accept_message=spec.accept_message,
    )


def _tool_content(result: str | list[dict[str, Any]]) -> Any:
    if isinstance(result, str):
        return result
    message = message_from_openai({"role": "tool", "tool_call_id": "-", "content": result},
                                  where="tool result")
    return message.content


def tool_outcome(spec: ToolSpec, call: ToolCall) -> ToolOutcome:
    """What a tool spec returns for ``call`` (a ``raise`` spec is handled by the caller)."""
    if spec.error is not None:
        return ToolError(error=spec.error, kind=spec.kind)
    if spec.suspend is not None:
        return ToolSuspend(mode=spec.suspend, detail=spec.detail)
    content = f"{call.name} ok" if spec.result is None else _tool_content(spec.result)
    return ToolResult(content=content, activate_plugins=tuple(spec.activate_plugins),
                      activate_skills=tuple(spec.activate_skills))


def check(sc: Scenario) -> None:
    """Catch scenario mistakes that the schema alone cannot."""
    for where, spec in [*(("tools.by_id." + k, v) for k, v in sc.tools.by_id.items()),
                        *(("tools.by_name." + k, v) for k, v in sc.tools.by_name.items())]:
        fields = (("result", spec.result), ("error", spec.error), ("suspend", spec.suspend),
                  ("raise", spec.raise_))
        chosen = [name for name, value in fields if value is not None]
        if len(chosen) > 1:
            raise ScenarioError(f"{where}: choose one of {chosen}")
        if spec.abort_signal is not None and sc.ports.signal is None:
            raise ScenarioError(f"{where}: abort_signal needs ports.signal")
        if spec.yields and sc.ports.style == "sync":
            raise ScenarioError(f"{where}: a sync-style tool cannot yield")
        if spec.persist is not None and sc.ports.style == "sync":
            raise ScenarioError(f"{where}: persist writes through an async port; use async style")
        if spec.persist is not None and spec.persist.repeat < 1:
            raise ScenarioError(f"{where}: persist.repeat must be >= 1")
        if spec.raise_ is not None:
            make_exception(spec.raise_)
    for k, turn in enumerate(sc.model, start=1):
        if not turn.raw and any(not c.id for c in turn.tool_calls):
            # The kit's ScriptedModel would mint an id; a scenario must say what it means.
            raise ScenarioError(f"model[{k}]: tool calls need explicit ids (or the turn is raw)")
        if turn.abort_signal is not None and sc.ports.signal is None:
            raise ScenarioError(f"model[{k}]: abort_signal needs ports.signal")
        if turn.raise_ is not None:
            make_exception(turn.raise_)
    for settlement in sc.ports.on_step_settled or ():
        if settlement is not None and settlement.raise_ is not None:
            make_exception(settlement.raise_)
    if sc.checkpoint is not None and (sc.state.totals != TotalsSpec() or sc.state.open_suspends):
        raise ScenarioError("checkpoint: a checkpoint is created from messages alone; "
                            "state.totals and state.open_suspends must be left out")
    for name in sc.ports.is_fatal or ():
        if name not in _RAISABLE:
            raise ScenarioError(f"ports.is_fatal: unknown exception type {name!r}")
