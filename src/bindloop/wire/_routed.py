"""The routed model: attempts through :func:`~bindloop.routing.execute_route_plan`, so fallback
between providers is decided by the routing table, not here, and a turn text stream driven across
those attempts; plus the mapping of a model call's exceptions onto the routing taxonomy."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeAlias

import msgspec

from ..completion import (
    StreamEvent,
    StreamStalledError,
    TextEvent,
    ToolCallDeltaError,
    TurnOutcome,
    TurnTextStream,
)
from ..contracts import Message, ModelTurnResult, ToolDefinition
from ..errors import PortContractError, PromptTooLongError, UsageError
from ..routing import (
    AttemptError,
    AttemptFailure,
    AttemptOutcome,
    AttemptSuccess,
    AttemptTarget,
    CircuitBreaker,
    RouteCandidate,
    RouteCursor,
    RouteFailure,
    RoutePlan,
    RouteResult,
    execute_route_plan,
    is_cancellation,
)
from ..signal import AbortSignal
from ._adapter import ModelAdapter
from ._errors import (
    IncompleteStreamError,
    ProviderHttpError,
    SseError,
    TransportError,
    WireDecodeError,
)

__all__ = ("RoutedModel", "TextStreamSource", "attempt_error_from")


def attempt_error_from(error: BaseException, target: AttemptTarget) -> AttemptError:
    """Map an exception from a :class:`ModelAdapter` call onto the routing taxonomy.

    Classified provider errors keep their category, status and ``retry_after_ms``; a stalled stream
    is ``stream_stall``; a stream cut short or a transport failure is ``connection`` / ``timeout``;
    a malformed body or chunk is ``response_defect``; cancellation is ``cancelled``; a
    :class:`~bindloop.errors.PromptTooLongError` is ``context_length``; anything else is
    ``client_error`` (a bug: it propagates instead of being retried on every provider).
    """
    if isinstance(error, AttemptError):
        return error
    if is_cancellation(error):
        return AttemptError("cancelled", target, cause=error)
    if isinstance(error, ProviderHttpError):
        return AttemptError(error.category, target, status_code=error.status_code,  # type: ignore[arg-type]
                            retry_after_ms=error.retry_after_ms, cause=error)
    if isinstance(error, StreamStalledError):
        return AttemptError("stream_stall", target, cause=error)
    if isinstance(error, TransportError):
        return AttemptError("timeout" if error.kind == "timeout" else "connection", target,
                            cause=error)
    if isinstance(error, IncompleteStreamError):
        return AttemptError("connection", target, cause=error)
    if isinstance(error, (WireDecodeError, SseError, ToolCallDeltaError)):
        return AttemptError("response_defect", target, cause=error)
    if isinstance(error, PromptTooLongError):
        # A transport or middleware that refuses the prompt itself (not a provider reply):
        # compaction, not a bug. (One predicate for this lives in errors once it lands.)
        return AttemptError("context_length", target, cause=error)
    return AttemptError("client_error", target, cause=error)


TextStreamSource: TypeAlias = TurnTextStream | Callable[[], TurnTextStream]
"""What :class:`RoutedModel` streams a turn's text into: one
:class:`~bindloop.completion.TurnTextStream` (serves a single turn), or a zero-argument factory
called once at the start of every turn (for a model the loop calls turn after turn)."""


class RoutedModel:
    """``call_model`` over a route plan: each candidate's ``provider_id`` names a
    :class:`ModelAdapter` in ``models``; the candidate's ``provider_invocation_model`` replaces
    ``options.model`` for that attempt. ``on_route`` receives every :class:`RouteResult` (the
    attempt log is the fallback trace). A route that fails raises its last
    :class:`~bindloop.routing.AttemptError` (its ``cause`` is the provider error, so a
    prompt-too-long stays recognisable through ``__cause__``).

    ``text_stream`` (see :data:`TextStreamSource`) is driven across the attempts of one turn: one
    stream per turn (built before the first attempt, never per attempt — a per-attempt stream never
    sees the retry it exists to repair), :meth:`~bindloop.completion.TurnTextStream.begin_attempt`
    at the top of every attempt, :meth:`~bindloop.completion.TurnTextStream.observe` with each
    :class:`~bindloop.completion.TextEvent`'s text and nothing else, and
    :meth:`~bindloop.completion.TurnTextStream.finish` with the route's outcome (also when the
    route raised). A retractable surface thus keeps the whole fallback chain (it is sent a reset,
    then the retry's text); a permanent one clamps on its first byte.

    ``produced_output`` on a failed attempt — the flag routing clamps on — is the stream's
    :attr:`~bindloop.completion.TurnTextStream.produced_output`. Without a stream it is true only
    once answer *text* reached the adapter's ``on_event`` sink. Tool-call deltas never count (a
    call is not an effect until it is dispatched, after the turn), and neither do reasoning
    deltas: whether shown thinking is output is a product decision, and the conservative default
    here keeps a fallback available. A host that displays thinking as a permanent record says so
    with :meth:`~bindloop.completion.TurnTextStream.mark_produced_output` from its sink.
    """

    __slots__ = ("_breaker", "_models", "_on_route", "_plan", "_signal", "_text_stream",
                 "last_result")

    def __init__(self, *, plan: RoutePlan, models: Mapping[str, ModelAdapter],
                 breaker: CircuitBreaker | None = None,
                 on_route: Callable[[RouteResult[ModelTurnResult]], None] | None = None,
                 signal: AbortSignal | None = None,
                 text_stream: TextStreamSource | None = None) -> None:
        if text_stream is not None and not (isinstance(text_stream, TurnTextStream)
                                            or callable(text_stream)):
            raise UsageError("text_stream must be a TurnTextStream or a zero-argument factory "
                             f"returning one, got {type(text_stream).__name__}")
        self._plan = plan
        self._models = dict(models)
        self._breaker = breaker
        self._on_route = on_route
        self._signal = signal
        self._text_stream = text_stream
        self.last_result: RouteResult[ModelTurnResult] | None = None

    def _turn_stream(self) -> TurnTextStream | None:
        source = self._text_stream
        if source is None:
            return None
        if isinstance(source, TurnTextStream):
            if source.finished:
                raise UsageError(
                    "the TurnTextStream given to RoutedModel already finished its turn; a stream "
                    "serves one turn, so pass a factory for a model that is called once per turn")
            return source
        stream = source()
        if not isinstance(stream, TurnTextStream):
            raise PortContractError(
                f"the text_stream factory returned {type(stream).__name__}, not a TurnTextStream")
        return stream

    async def call_model(self, messages: list[Message],
                         tools: list[ToolDefinition]) -> ModelTurnResult:
        stream = self._turn_stream()

        async def attempt(candidate: RouteCandidate,
                          cursor: RouteCursor) -> AttemptOutcome[ModelTurnResult]:
            if stream is not None:
                stream.begin_attempt()
            target = AttemptTarget(cursor=cursor, provider_id=candidate.provider_id,
                                   canonical_model_id=candidate.canonical_model_id,
                                   provider_invocation_model=candidate.provider_invocation_model)
            model = self._models.get(candidate.provider_id)
            if model is None:
                return AttemptFailure(error=AttemptError(
                    "client_error", target,
                    message=f"no ModelAdapter bound to provider {candidate.provider_id!r}"))
            options = msgspec.structs.replace(model.options,
                                              model=candidate.provider_invocation_model)
            sink = model.on_event
            text_shown = False

            def watch(event: StreamEvent) -> None:
                nonlocal text_shown
                if isinstance(event, TextEvent) and event.content:
                    if stream is not None:
                        stream.observe(event.content)
                    if sink is not None:
                        # Marked before the sink runs: one that raised may still have shown it.
                        text_shown = True
                if sink is not None:
                    sink(event)

            watching = sink is not None or stream is not None
            try:
                turn = await model.complete(messages, tools, options=options, signal=self._signal,
                                            on_event=watch if watching else None)
            except Exception as exc:  # classified into facts; routing decides
                produced = stream.produced_output if stream is not None else text_shown
                return AttemptFailure(error=attempt_error_from(exc, target),
                                      produced_output=produced)
            return AttemptSuccess(turn)

        outcome: TurnOutcome = "failed"
        try:
            result = await execute_route_plan(plan=self._plan, attempt=attempt,
                                              breaker=self._breaker, signal=self._signal)
            outcome = "succeeded" if result.ok else "failed"
        finally:
            if stream is not None:
                stream.finish(outcome)
        self.last_result = result
        if self._on_route is not None:
            self._on_route(result)
        if isinstance(result, RouteFailure):
            result.raise_error()
        return result.value
