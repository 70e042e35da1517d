"""The routed model: attempts through :func:`~bindloop.routing.execute_route_plan`, so fallback
between providers is decided by the routing table, not here, and a turn text stream driven across
those attempts; plus the mapping of a model call's exceptions onto the routing taxonomy."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, TypeAlias

import anyio
import msgspec

from ..completion import StreamEvent, TextEvent
from ..textstream import TurnOutcome, TurnTextStream
from ..contracts import Message, ModelTurnResult, ToolDefinition, TurnUsage
from ..errors import PortContractError, RunCancelledError, UsageError
from ..model import JsonSchemaFormat, ModelRequest, StructuredOutputMode
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
)
from ..signal import AbortSignal, linked_signal
from ._adapter import ModelAdapter
from ._errors import ProviderHttpError
from ._retry import failure_category, is_content_event
from ._types import WireOptions

__all__ = ("RouteStreaming", "RoutedModel", "TextStreamSource", "attempt_error_from")


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
    if isinstance(error, ProviderHttpError):
        return AttemptError(error.category, target, status_code=error.status_code,  # type: ignore[arg-type]
                            retry_after_ms=error.retry_after_ms, cause=error)
    return AttemptError(failure_category(error), target, cause=error)


TextStreamSource: TypeAlias = TurnTextStream | Callable[[], TurnTextStream]
"""What :class:`RoutedModel` streams a turn's text into: one
:class:`~bindloop.textstream.TurnTextStream` (serves a single turn), or a zero-argument factory
called once at the start of every turn (for a model the loop calls turn after turn)."""

RouteStreaming: TypeAlias = Literal["settled", "live"]
"""How a :class:`RoutedModel` hands a turn's events to their consumer (see the class docstring)."""

_ROUTE_STREAMING = ("settled", "live")
_MODES = ("json_schema", "tool")
_NO_REQUEST = ModelRequest()

# WireOptions fields a call may override; ``model`` is each candidate's provider_invocation_model.
_OVERRIDABLE = frozenset(WireOptions.__struct_fields__) - {"model"}


def _checked_overrides(request: ModelRequest) -> dict[str, Any]:
    """``request`` as WireOptions field changes (``additional_options``, then the schema as
    ``response_format`` and the tool choice), refused here (before any attempt) when a name is not
    a field, is ``model``, or a value is not what the field takes."""
    changes = _checked_additional(request.additional_options)
    if request.schema is not None:
        changes["response_format"] = JsonSchemaFormat(name=request.schema_name,
                                                      schema=request.schema)
    if request.tool_choice is not None:
        changes["tool_choice"] = request.tool_choice
    return changes


def _checked_additional(options: Mapping[str, Any] | None) -> dict[str, Any]:
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise UsageError("RoutedModel: additional_options must be a mapping of WireOptions "
                         f"field names to values, got {type(options).__name__}")
    changes = dict(options)
    if "model" in changes:
        raise UsageError("RoutedModel: additional_options cannot set 'model': a route calls each "
                         "candidate's provider_invocation_model; change the plan instead")
    unknown = sorted(str(k) for k in changes if k not in _OVERRIDABLE)
    if unknown:
        raise UsageError(f"RoutedModel: additional_options names {unknown}, not WireOptions "
                         f"fields; use one of {sorted(_OVERRIDABLE)}")
    if changes:  # WireOptions checks every value on construction: a bad type fails here, once
        WireOptions(model="probe", **changes)
    return changes


class RoutedModel:
    """A :class:`~bindloop.model.Model` over a route plan: each candidate's ``provider_id`` names a
    :class:`ModelAdapter` in ``models``; the candidate's ``provider_invocation_model`` replaces
    ``options.model`` for that attempt. ``on_route`` receives every :class:`RouteResult` (the
    attempt log is the fallback trace). A route that fails raises its last
    :class:`~bindloop.routing.AttemptError` (its ``cause`` is the provider error, so a
    prompt-too-long stays recognisable through ``__cause__``).

    ``text_stream`` (see :data:`TextStreamSource`) is driven across the attempts of one turn: one
    stream per turn (built before the first attempt, never per attempt — a per-attempt stream never
    sees the retry it exists to repair), :meth:`~bindloop.textstream.TurnTextStream.begin_attempt`
    at the top of every attempt, :meth:`~bindloop.textstream.TurnTextStream.observe` with each
    :class:`~bindloop.completion.TextEvent`'s text and nothing else, and
    :meth:`~bindloop.textstream.TurnTextStream.finish` with the route's outcome (also when the
    route raised). A retractable surface thus keeps the whole fallback chain (it is sent a reset,
    then the retry's text); a permanent one clamps on its first byte.

    ``produced_output`` on a failed attempt — the flag routing clamps on — is the stream's
    :attr:`~bindloop.textstream.TurnTextStream.produced_output`. Without a stream it is true only
    once answer *text* reached the adapter's ``on_event`` sink. Tool-call deltas never count (a
    call is not an effect until it is dispatched, after the turn), and neither do reasoning
    deltas: whether shown thinking is output is a product decision, and the conservative default
    here keeps a fallback available. A host that displays thinking as a permanent record says so
    with :meth:`~bindloop.textstream.TurnTextStream.mark_produced_output` from its sink. A
    call's own ``on_event`` adds to this only when the route streams live through :meth:`stream`.

    Declared capabilities: ``id`` (default ``"routed"``), ``provider`` (default ``None``: the
    serving candidate varies), ``structured_output`` (default ``"json_schema"`` when every
    candidate of the plan is bound to a ``ModelAdapter``, whose wires all send a schema natively,
    else ``"tool"``) and :meth:`price`. A call's :class:`~bindloop.model.ModelRequest`
    (``additional_options``, the schema as ``response_format``, the tool choice) is applied on top
    of *each candidate's* own ``WireOptions`` for its attempt (never ``model``, which is the
    candidate's): a forced output tool is forced on every candidate, a schema goes out natively on
    each, and a wrong name or value is refused with :class:`~bindloop.errors.UsageError` before any
    request.

    How a turn's events reach their consumer (``streaming``). The consumer of the agent's stream
    cannot take an event back (its fold keeps every delta, and so may its consumers), so a failed
    attempt must never have been shown unless its failure ends the turn, or the consumer was told
    to forget it. ``"live"`` (the default) streams every attempt at once: :meth:`complete` with an
    ``on_reset`` treats ``on_event`` as a retractable surface and calls ``on_reset()`` before a
    fallback takes over from an attempt it saw; :meth:`stream` (a plain iterator, which cannot
    retract — what a stream-only wrapper reads) is settled unless ``"live"`` was asked explicitly,
    and then lets the first content delta clamp the route, so a failure after it fails the turn.
    ``"settled"`` holds an attempt's events while a fallback could still follow it and streams
    live from the moment none can (the plan's last possible attempt, or a permanent text surface
    already clamped the route): ``on_event`` then gets the events of the attempt that serves the
    turn and of no other, and a failed attempt's held events are dropped.
    """

    __slots__ = ("_breaker", "_live", "_models", "_on_route", "_plan", "_signal", "_stream_live",
                 "_text_stream", "id", "last_result", "provider", "structured_output")

    def __init__(self, *, plan: RoutePlan, models: Mapping[str, ModelAdapter],
                 breaker: CircuitBreaker | None = None,
                 on_route: Callable[[RouteResult[ModelTurnResult]], None] | None = None,
                 signal: AbortSignal | None = None,
                 text_stream: TextStreamSource | None = None,
                 id: str = "routed", provider: str | None = None,
                 structured_output: StructuredOutputMode | None = None,
                 streaming: RouteStreaming | None = None) -> None:
        if structured_output is not None and structured_output not in _MODES:
            raise UsageError("RoutedModel(structured_output=) must be 'json_schema', 'tool' or "
                             f"None, got {structured_output!r}")
        if streaming is not None and streaming not in _ROUTE_STREAMING:
            raise UsageError(f"RoutedModel(streaming=) must be 'settled', 'live' or None, got "
                             f"{streaming!r}")
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
        self.id = id
        self.provider = provider
        if structured_output is None:
            native = all(c.provider_id in self._models
                         for stage in plan.stages for c in stage.candidates)
            structured_output = "json_schema" if native else "tool"
        self.structured_output: StructuredOutputMode = structured_output
        self._live = streaming != "settled"  # complete(): live (retractable) by default
        # stream() cannot retract: it commits on the first content only when "live" was asked.
        self._stream_live = streaming == "live"

    def price(self, usage: TurnUsage, /) -> int:
        """What the plan's first bound candidate charges for ``usage``. A turn :meth:`complete`
        returns is priced by the adapter of the candidate that served it, inside its fold."""
        for stage in self._plan.stages:
            for candidate in stage.candidates:
                model = self._models.get(candidate.provider_id)
                if model is not None:
                    return model.price(usage)
        return 0

    async def stream(self, messages: Sequence[Message],
                     request: ModelRequest = _NO_REQUEST, /) -> AsyncIterator[StreamEvent]:
        """The turn's events as the route hands them over: settled (only the serving attempt's),
        or with ``streaming="live"`` every attempt's until the first content clamps the route."""
        changes = _checked_overrides(request)
        send, receive = anyio.create_memory_object_stream[StreamEvent | _End](math.inf)

        def hand_over(event: StreamEvent) -> None:
            try:
                send.send_nowait(event)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the consumer closed the stream; the task is being cancelled

        async def route() -> None:
            with send:
                try:
                    await self._call(list(messages), list(request.tools), changes,
                                     signal=request.signal, on_event=hand_over,
                                     events_are_output=self._stream_live)
                except Exception as exc:  # raised from the generator, in the consumer's task
                    send.send_nowait(_End(exc))

        error: Exception | None = None
        async with anyio.create_task_group() as tg, receive:
            tg.start_soon(route)
            try:
                async for item in receive:
                    if isinstance(item, _End):
                        error = item.error
                        break
                    yield item
            except GeneratorExit:
                # Closed early (aclose): stop the route and return. Letting GeneratorExit through
                # the task group would turn it into an exception group the close cannot accept.
                tg.cancel_scope.cancel()
                return
        if error is not None:  # outside the task group: raised as itself, not in a group
            raise _route_error(error)

    def complete(self, messages: Sequence[Message], request: ModelRequest = _NO_REQUEST, /,
                 on_event: Callable[[StreamEvent], None] | None = None,
                 on_reset: Callable[[], None] | None = None) -> Awaitable[ModelTurnResult]:
        """One turn over the route (see the class docstring). Each candidate's ``ModelAdapter``
        folds and prices its own attempt. A route that fails raises its last
        :class:`~bindloop.routing.AttemptError`, or the cancellation itself when the attempt was
        cancelled."""
        return self._complete(messages, request, on_event,
                              on_reset if self._live and on_event is not None else None)

    async def _complete(self, messages: Sequence[Message], request: ModelRequest,
                        on_event: Callable[[StreamEvent], None] | None,
                        on_reset: Callable[[], None] | None) -> ModelTurnResult:
        try:
            return await self._call(list(messages), list(request.tools),
                                    _checked_overrides(request), signal=request.signal,
                                    on_event=on_event, on_reset=on_reset)
        except AttemptError as exc:
            unwrapped = _route_error(exc)
            if unwrapped is exc:
                raise
            raise unwrapped from None  # the cancellation itself, already the route error's cause

    @property
    def plan(self) -> RoutePlan:
        return self._plan

    @property
    def models(self) -> Mapping[str, ModelAdapter]:
        """The bindings by provider id (a copy: the route's own map is fixed at construction)."""
        return dict(self._models)

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

    def _final_candidate(self, cursor: RouteCursor) -> bool:
        """No other candidate follows this one: the plan's last (in the last stage that has
        any). Only a defect retry of the same candidate could still come after it."""
        stages = [i for i, s in enumerate(self._plan.stages) if s.candidates]
        if not stages or cursor.stage != stages[-1]:
            return False
        return cursor.candidate == len(self._plan.stages[cursor.stage].candidates) - 1

    async def _call(self, messages: list[Message], tools: list[ToolDefinition],
                    changes: dict[str, Any], *,
                    signal: AbortSignal | None = None,
                    on_event: Callable[[StreamEvent], None] | None = None,
                    events_are_output: bool = False,
                    on_reset: Callable[[], None] | None = None) -> ModelTurnResult:
        """One turn over the route; the keywords are per call.

        ``changes`` are checked :class:`WireOptions` field changes applied on top of *each
        candidate's* own options for its attempt (see :func:`_checked_overrides`). ``signal`` cancels this call as well as the model's own signal.

        ``on_event`` receives the events of the attempt that ends the turn and of no other: an
        attempt's events are held while another attempt could still follow it, and pass through
        live from the moment none can — it is the plan's last candidate, or it produced output
        (the route then clamps on it). Content (text, reasoning, tool-call deltas) sent live
        counts as produced output, so a defect retry of the last candidate cannot follow it
        either. A success releases what its attempt held before this returns; a failed attempt's
        held events are dropped, so a consumer that folds them never sees two attempts glued.
        With ``events_are_output=True`` every attempt is live: the first content event marks it
        as having produced output, so no fallback follows it (fallback stays open only until an
        attempt's first content).

        With ``on_reset`` the call's ``on_event`` is a retractable surface, as a retractable text
        stream is: every attempt streams live, its content does not count as produced output (a
        fallback may still follow it), and before an attempt that follows one whose events reached
        ``on_event``, ``on_reset()`` is called: drop what the earlier attempt sent.
        """
        if not isinstance(events_are_output, bool):
            raise UsageError(f"events_are_output must be True or False, got {events_are_output!r}")
        stream = self._turn_stream()
        call_signal, detach = linked_signal(self._signal, signal)
        route = _RouteCall(self, messages, tools, changes, stream, call_signal, on_event,
                           events_are_output, on_reset)
        outcome: TurnOutcome = "failed"
        try:
            result = await execute_route_plan(plan=self._plan, attempt=route.attempt,
                                              breaker=self._breaker, signal=call_signal)
            outcome = "succeeded" if result.ok else "failed"
        finally:
            detach()
            if stream is not None:
                stream.finish(outcome)
        self.last_result = result
        if self._on_route is not None:
            self._on_route(result)
        if isinstance(result, RouteFailure):
            result.raise_error()
        return result.value


class _RouteCall:
    """One turn's attempts over the route (:meth:`RoutedModel._call` documents the rules). Plain
    slotted state rather than closures: it lives across every read of every attempt, and each
    object it saves per call is one fewer for the cyclic collector to walk under load."""

    __slots__ = ("call_signal", "changes", "events_are_output", "messages", "on_event", "on_reset",
                 "owner", "retractable", "shown", "stream", "tools")

    def __init__(self, owner: RoutedModel, messages: list[Message], tools: list[ToolDefinition],
                 changes: dict[str, Any], stream: TurnTextStream | None,
                 call_signal: AbortSignal | None,
                 on_event: Callable[[StreamEvent], None] | None, events_are_output: bool,
                 on_reset: Callable[[], None] | None) -> None:
        self.owner = owner
        self.messages = messages
        self.tools = tools
        self.changes = changes
        self.stream = stream
        self.call_signal = call_signal
        self.on_event = on_event
        self.events_are_output = events_are_output
        self.on_reset = on_reset
        self.retractable = on_reset is not None
        self.shown = False  # an attempt's events reached on_event (a retractable one resets first)

    async def attempt(self, candidate: RouteCandidate,
                      cursor: RouteCursor) -> AttemptOutcome[ModelTurnResult]:
        stream = self.stream
        if stream is not None:
            stream.begin_attempt()
        if self.shown and self.on_reset is not None:
            self.shown = False
            self.on_reset()
        target = AttemptTarget(cursor=cursor, provider_id=candidate.provider_id,
                               canonical_model_id=candidate.canonical_model_id,
                               provider_invocation_model=candidate.provider_invocation_model)
        owner = self.owner
        model = owner._models.get(candidate.provider_id)
        if model is None:
            return AttemptFailure(error=AttemptError(
                "client_error", target,
                message=f"no ModelAdapter bound to provider {candidate.provider_id!r}"))
        attempt_options = msgspec.structs.replace(
            model.options, **self.changes, model=candidate.provider_invocation_model)
        on_event = self.on_event
        # Content goes out live at once when no other candidate can follow this attempt.
        eager = self.events_are_output or self.retractable or owner._final_candidate(cursor)
        sink = _AttemptSink(self, model.on_event, eager)
        watching = sink.sink is not None or stream is not None or on_event is not None
        try:
            # One call: retrying is the route's decision (fallback, the breaker), not the
            # adapter's.
            turn = await model._complete(self.messages, self.tools, attempt_options,
                                         self.call_signal, sink.watch if watching else None, None)
        except Exception as exc:  # classified into facts; routing decides
            return AttemptFailure(error=attempt_error_from(exc, target),
                                  produced_output=sink.produced())
        if on_event is not None:
            for event in sink.held:
                on_event(event)
        return AttemptSuccess(turn)


class _AttemptSink:
    """One attempt's events on their way to the route's consumer: held while a fallback could
    still follow the attempt, passed live once none can (see :meth:`RoutedModel._call`)."""

    __slots__ = ("committed", "content_sent", "eager", "held", "route", "sink", "text_shown")

    def __init__(self, route: _RouteCall, sink: Callable[[StreamEvent], None] | None,
                 eager: bool) -> None:
        self.route = route
        self.sink = sink  # the adapter's own on_event
        self.eager = eager
        self.text_shown = False
        self.committed = False  # this attempt's events pass to on_event as they come
        self.content_sent = False  # content reached on_event live: it cannot be taken back
        self.held: list[StreamEvent] = []

    def produced(self) -> bool:
        stream = self.route.stream
        natural = stream.produced_output if stream is not None else self.text_shown
        return natural or self.content_sent

    def watch(self, event: StreamEvent) -> None:
        route = self.route
        sink = self.sink
        if isinstance(event, TextEvent) and event.content:
            if route.stream is not None:
                route.stream.observe(event.content)
            if sink is not None:
                # Marked before the sink runs: one that raised may still have shown it.
                self.text_shown = True
        if sink is not None:
            sink(event)
        on_event = route.on_event
        if on_event is not None:
            self._release(event, on_event)

    def _release(self, event: StreamEvent, call_sink: Callable[[StreamEvent], None]) -> None:
        content = is_content_event(event)
        if not self.committed:
            if not ((self.eager and content) or self.produced()):
                self.held.append(event)
                return
            self.committed = True
            held = self.held
            for early in held:
                call_sink(early)
            held.clear()
        if content and not self.route.retractable:
            self.content_sent = True  # before the sink runs, as for text_shown
        self.route.shown = True
        call_sink(event)


def _route_error(exc: Exception) -> Exception:
    """What a route's failure is to its caller: a cancelled attempt is the cancellation itself
    (``RunCancelledError``, as from any other model), everything else the route's own error."""
    if isinstance(exc, AttemptError) and exc.category == "cancelled" and isinstance(
            exc.__cause__, RunCancelledError):
        return exc.__cause__
    return exc


class _End:
    """The route task's last word on the channel: the exception that ended the route."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error
