"""Composition: a wire adapter plus a host transport is a model the loop can call.

:class:`ModelAdapter` sends one request and yields normalized events, under a stream watchdog, and
offers :meth:`ModelAdapter.call_model` for :class:`~bindloop.loop.ToolLoopParams`. :class:`RoutedModel`
feeds attempts through :func:`~bindloop.routing.execute_route_plan`, so fallback between providers is
decided by the routing table, not here, and can drive a turn text stream across those attempts. The
transport is a port: the core never does I/O itself.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, aclosing
from typing import Protocol, TypeAlias, TypeVar

import anyio
import msgspec

from ..clock import Clock, monotonic_ms
from ..completion import (
    FinishEvent,
    ReasoningEvent,
    StreamEvent,
    StreamStalledError,
    StreamWatchdog,
    TextEvent,
    ToolCallChunk,
    ToolCallDeltaError,
    ToolCallEvent,
    TurnCollector,
    TurnOutcome,
    TurnTextStream,
    UsageEvent,
    create_stream_watchdog,
)
from ..contracts import Message, ModelTurnResult, ToolDefinition, TurnUsage
from ..errors import PortContractError, RunCancelledError, UsageError
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
from ._errors import (
    IncompleteStreamError,
    ProviderHttpError,
    SseError,
    TransportError,
    WireDecodeError,
)
from ._types import HttpRequest, WireAdapter, WireOptions

__all__ = (
    "ModelAdapter",
    "RoutedModel",
    "StreamBudgets",
    "TextStreamSource",
    "Transport",
    "TransportResponse",
    "attempt_error_from",
)

_T = TypeVar("_T")


class TransportResponse(Protocol):
    """An open HTTP response. ``headers`` are (name, value) pairs as received."""

    @property
    def status(self) -> int: ...

    @property
    def headers(self) -> Sequence[tuple[str, str]]: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...


class Transport(Protocol):
    """The host's HTTP port. ``open`` sends ``request`` (adding base URL and credentials) and yields
    the response once its status and headers arrived; leaving the context — normally, by an
    exception, or by cancellation — closes the connection. Entering it may be cancelled too (the
    watchdog's budgets and the caller's signal run while headers are awaited): a cancelled entry
    must abandon the request and release its connection. Failures before a status exists raise
    :class:`~bindloop.wire.TransportError`."""

    def open(self, request: HttpRequest) -> AbstractAsyncContextManager[TransportResponse]: ...


class StreamBudgets(msgspec.Struct, frozen=True, kw_only=True):
    """The stall watchdog's budgets in ms (see :func:`~bindloop.completion.create_stream_watchdog`);
    ``None`` disables one.

    All three are armed when the request is sent, not when headers arrive: ``first_token_ms`` bounds
    the wait for headers plus the first answer output (for a non-streamed call, whose headers come
    only once the whole reply is generated, it bounds the whole generation), ``total_ms`` the whole
    call, ``inter_chunk_ms`` the silence between chunks once the answer flows. Each must be a finite
    positive number or ``None``; anything else raises :class:`~bindloop.errors.UsageError`.
    """

    first_token_ms: float | None = 120_000.0
    inter_chunk_ms: float | None = 30_000.0
    total_ms: float | None = 600_000.0

    def __post_init__(self) -> None:
        _check_budgets(self)


def _check_budgets(budgets: StreamBudgets) -> None:
    for name in ("first_token_ms", "inter_chunk_ms", "total_ms"):
        value = getattr(budgets, name)
        if value is None:
            continue
        # NaN compares false with everything (a budget that never fires), infinity is not how a
        # budget is disabled (None is), and zero or less tears down every stream at once.
        if (isinstance(value, bool) or not isinstance(value, (int, float))
                or not math.isfinite(value) or value <= 0):
            raise UsageError(f"StreamBudgets.{name} must be a finite positive number of "
                             f"milliseconds or None, got {value!r}")


def _chunk_kind(events: Sequence[StreamEvent]) -> str:
    kind = "none"
    for e in events:
        if isinstance(e, (TextEvent, ToolCallEvent)):
            return "answer"
        if isinstance(e, ReasoningEvent):
            kind = "reasoning"
    return kind


class ModelAdapter:
    """One provider binding: ``adapter`` (pure) + ``transport`` (host) + default ``options``.

    ``on_event`` sees every event as it is decoded (a UI sink); ``price`` turns usage into the
    turn's integer cost. ``max_error_body_bytes`` bounds how much of an error response is read.
    ``budgets`` is checked here: anything but a valid :class:`StreamBudgets` raises
    :class:`~bindloop.errors.UsageError` before a request is ever sent.
    """

    __slots__ = ("_budgets", "_clock", "_max_error", "adapter", "on_event", "options", "price",
                 "transport")

    def __init__(self, adapter: WireAdapter, transport: Transport, options: WireOptions, *,
                 budgets: StreamBudgets = StreamBudgets(), clock: Clock = monotonic_ms,
                 on_event: Callable[[StreamEvent], None] | None = None,
                 price: Callable[[TurnUsage], int] | None = None,
                 max_error_body_bytes: int = 65_536) -> None:
        if not isinstance(budgets, StreamBudgets):
            raise UsageError(f"budgets must be a StreamBudgets, got {type(budgets).__name__}")
        _check_budgets(budgets)  # again: msgspec.structs.force_setattr skips __post_init__
        self.adapter = adapter
        self.transport = transport
        self.options = options
        self.on_event = on_event
        self.price = price
        self._budgets = budgets
        self._clock = clock
        self._max_error = max_error_body_bytes

    async def stream(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = (), *,
                     options: WireOptions | None = None,
                     signal: AbortSignal | None = None) -> AsyncIterator[StreamEvent]:
        """Send one streamed request and yield its events.

        Raises :class:`~bindloop.wire.ProviderHttpError` for an error status,
        :class:`~bindloop.completion.StreamStalledError` when the watchdog tears the stream down,
        :class:`~bindloop.errors.RunCancelledError` when ``signal`` fires, and the decoder's errors.
        Closing the generator early closes the connection. Each wait starts its own watchdog
        supervisor task (a generator cannot keep one across its yields); :meth:`complete` with
        ``on_event`` sees the same events live with one supervisor for the whole call.
        """
        opts = msgspec.structs.replace(options or self.options, stream=True)
        watchdog = self._watchdog(signal)
        # No supervisor task can live across this generator's yields, so each wait gets its own.
        async for event in self._events(messages, tools, opts, watchdog, self.on_event,
                                        supervised=False):
            yield event

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = (),
                       *, options: WireOptions | None = None,
                       signal: AbortSignal | None = None,
                       on_event: Callable[[StreamEvent], None] | None = None) -> ModelTurnResult:
        """One turn, streamed or not as ``options.stream`` says, folded into a result. An
        :class:`~bindloop.completion.ErrorEvent` inside the stream raises its error. ``on_event``
        replaces the adapter's sink for this call."""
        opts = options or self.options
        collector = TurnCollector(price=self.price)
        sink = on_event if on_event is not None else self.on_event
        watchdog = self._watchdog(signal)
        failure: Exception | None = None
        # One supervisor for the whole call (a task per read would cost far more than the read):
        # this coroutine, unlike a generator, can hold a task group while it consumes events.
        async with anyio.create_task_group() as tg:
            tg.start_soon(watchdog.supervise)
            try:
                async with aclosing(self._events(messages, tools, opts, watchdog, sink,
                                                 supervised=True)) as events:
                    async for event in events:
                        collector.observe(event)
            except Exception as exc:  # re-raised below, not wrapped in the task group's group
                failure = exc
            finally:
                tg.cancel_scope.cancel()
        if failure is not None:
            raise failure
        return collector.result()

    async def call_model(self, messages: list[Message],
                         tools: list[ToolDefinition]) -> ModelTurnResult:
        """The loop's ``call_model`` port."""
        return await self.complete(messages, tools)

    def _watchdog(self, signal: AbortSignal | None) -> StreamWatchdog:
        if signal is not None and signal.aborted:
            raise RunCancelledError("the model call was cancelled before it started")
        b = self._budgets
        return create_stream_watchdog(first_token_ms=b.first_token_ms,
                                      inter_chunk_ms=b.inter_chunk_ms, total_ms=b.total_ms,
                                      external=signal, clock=self._clock)

    async def _events(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                      options: WireOptions, watchdog: StreamWatchdog,
                      sink: Callable[[StreamEvent], None] | None, *,
                      supervised: bool) -> AsyncGenerator[StreamEvent, None]:
        """The request's events. ``supervised``: the caller runs ``watchdog.supervise()`` for
        the whole call; otherwise each wait starts its own supervisor (see :meth:`_watched`)."""
        scope_box: list[anyio.CancelScope] = []
        # The watchdog's signal (a budget that ran out, or the caller's abort) cancels whatever
        # wait is in flight. Nothing else does: see _watched.
        remove = watchdog.signal.add_listener(
            lambda _reason: scope_box[-1].cancel() if scope_box else None)

        def watched(wait: Callable[[], Awaitable[_T]]) -> Awaitable[_T]:
            return self._watched(wait, watchdog, scope_box, supervised=supervised)

        async def next_chunk() -> bytes | None:
            async def read() -> bytes | None:
                try:
                    return await chunks.__anext__()
                except StopAsyncIteration:
                    return None
            return await watched(read)

        try:
            request = self.adapter.build_request(messages, tools, options)
            # Armed before the request goes out, not when headers arrive: a provider that accepts
            # the connection and never answers would otherwise hang the turn with no budget
            # running and the caller's signal unheard (a non-streamed reply's headers come only
            # after the whole generation, so that wait is the call).
            watchdog.open()
            async with AsyncExitStack() as stack:
                response = await watched(
                    lambda: stack.enter_async_context(self.transport.open(request)))
                chunks = response.aiter_bytes()
                if response.status >= 400:
                    body = bytearray()
                    while len(body) < self._max_error:
                        if (chunk := await next_chunk()) is None:
                            break
                        body += chunk
                    raise self.adapter.classify_error(response.status, response.headers,
                                                      bytes(body[: self._max_error]))
                if request.stream:
                    decoder = self.adapter.stream_decoder()
                    while (chunk := await next_chunk()) is not None:
                        events = decoder.feed(chunk)
                        watchdog.observed_chunk(_chunk_kind(events))  # type: ignore[arg-type]
                        for event in events:
                            if sink is not None:
                                sink(event)
                            yield event
                    for event in decoder.end():
                        yield event
                else:
                    parts = []
                    while (chunk := await next_chunk()) is not None:
                        watchdog.observed_chunk("reasoning")  # body bytes: progress, not answer
                        parts.append(chunk)
                    turn = self.adapter.parse_response(b"".join(parts))
                    for event in _turn_events(turn):
                        if sink is not None:
                            sink(event)
                        yield event
        finally:
            remove()
            watchdog.dispose()

    @staticmethod
    async def _watched(wait: Callable[[], Awaitable[_T]], watchdog: StreamWatchdog,
                       scope_box: list[anyio.CancelScope], *, supervised: bool) -> _T:
        """Await ``wait()`` (connecting and reading headers, or one body chunk) under the watchdog.

        Deadlines are watched by :meth:`~bindloop.completion.StreamWatchdog.supervise` in a task
        beside the wait (the caller's, when ``supervised``), never by a timeout on the wait itself:
        the supervisor sleeps on the event loop's clock and re-checks on the injected one, so when
        the two disagree it merely wakes early, and only a budget that really ran out (or the
        caller's abort) fires the signal that cancels the wait. A timeout on the read would cancel
        it on every early wake, and a cancelled ``__anext__`` finalizes the transport's iterator:
        a healthy stream read as EOF.

        A task group started here lives for this one wait, never across a ``yield`` of the
        caller's generator (a scope held across a yield would cancel the consumer's code instead).
        """
        if watchdog.signal.aborted:
            raise _torn_down(watchdog)
        done = False
        value: _T | None = None
        error: Exception | None = None

        async def guarded() -> None:
            nonlocal done, value, error
            with anyio.CancelScope() as scope:
                scope_box.append(scope)
                try:
                    value = await wait()
                    done = True
                except Exception as exc:  # re-raised below, outside any task group's wrapping
                    error = exc
                finally:
                    scope_box.pop()

        if supervised or watchdog.next_deadline_ms is None:
            await guarded()  # the caller's supervisor times it, or only the signal can end it
        else:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watchdog.supervise)
                await guarded()
                tg.cancel_scope.cancel()
        if watchdog.signal.aborted and not done:
            # The wait was cut by the watchdog (a transport may turn the cancellation into its
            # own error): report why, not how the transport noticed.
            raise _torn_down(watchdog) from error
        if error is not None:
            raise error
        return value  # type: ignore[return-value]


def _torn_down(watchdog: StreamWatchdog) -> Exception:
    """The error for a watchdog whose signal fired: its stall, or else the caller's abort."""
    stall = watchdog.stall()
    if stall is not None:
        return StreamStalledError(stall)
    return RunCancelledError("the model call was cancelled")


def _turn_events(turn: ModelTurnResult) -> list[StreamEvent]:
    """A parsed whole-body turn as events, so both paths share one fold. Every field of a
    reasoning part has a :class:`~bindloop.completion.ReasoningEvent` counterpart, so the fold
    gives the parts back unchanged."""
    events: list[StreamEvent] = []
    for index, part in enumerate(turn.reasoning):
        events.append(ReasoningEvent(content=part.text, index=index, signature=part.signature,
                                     redacted=part.redacted, data=part.data,
                                     encrypted_content=part.encrypted_content,
                                     provider=part.provider, model=part.model, id=part.id))
    if turn.text:
        events.append(TextEvent(content=turn.text))
    for index, call in enumerate(turn.tool_calls):
        events.append(ToolCallEvent(tool_call=ToolCallChunk(index=index, id=call.id,
                                                            name=call.name,
                                                            arguments=call.arguments)))
    events.append(UsageEvent(usage=turn.usage))
    if turn.finish_reason is not None:
        reason = turn.finish_reason
        events.append(FinishEvent(finish_reason=reason))  # type: ignore[arg-type]
    return events


def attempt_error_from(error: BaseException, target: AttemptTarget) -> AttemptError:
    """Map an exception from a :class:`ModelAdapter` call onto the routing taxonomy.

    Classified provider errors keep their category, status and ``retry_after_ms``; a stalled stream
    is ``stream_stall``; a stream cut short or a transport failure is ``connection`` / ``timeout``;
    a malformed body or chunk is ``response_defect``; cancellation is ``cancelled``; anything else is
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
