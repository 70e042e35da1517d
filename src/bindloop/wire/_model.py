"""Composition: a wire adapter plus a host transport is a model the loop can call.

:class:`ModelAdapter` sends one request and yields normalized events, under a stream watchdog, and
offers :meth:`ModelAdapter.call_model` for :class:`~bindloop.loop.ToolLoopParams`. :class:`RoutedModel`
feeds attempts through :func:`~bindloop.routing.execute_route_plan`, so fallback between providers is
decided by the routing table, not here. The transport is a port: the core never does I/O itself.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Protocol

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
    UsageEvent,
    create_stream_watchdog,
)
from ..contracts import Message, ModelTurnResult, ToolDefinition, TurnUsage
from ..errors import RunCancelledError
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
    "Transport",
    "TransportResponse",
    "attempt_error_from",
)


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
    exception, or by cancellation — closes the connection. Failures before a status exists raise
    :class:`~bindloop.wire.TransportError`."""

    def open(self, request: HttpRequest) -> AbstractAsyncContextManager[TransportResponse]: ...


class StreamBudgets(msgspec.Struct, frozen=True, kw_only=True):
    """The stall watchdog's budgets in ms (see :func:`~bindloop.completion.create_stream_watchdog`);
    ``None`` disables one."""

    first_token_ms: float | None = 120_000.0
    inter_chunk_ms: float | None = 30_000.0
    total_ms: float | None = 600_000.0


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
    """

    __slots__ = ("_budgets", "_clock", "_max_error", "adapter", "on_event", "options", "price",
                 "transport")

    def __init__(self, adapter: WireAdapter, transport: Transport, options: WireOptions, *,
                 budgets: StreamBudgets = StreamBudgets(), clock: Clock = monotonic_ms,
                 on_event: Callable[[StreamEvent], None] | None = None,
                 price: Callable[[TurnUsage], int] | None = None,
                 max_error_body_bytes: int = 65_536) -> None:
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
        Closing the generator early closes the connection.
        """
        opts = msgspec.structs.replace(options or self.options, stream=True)
        async for event in self._events(messages, tools, opts, signal, self.on_event):
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
        async for event in self._events(messages, tools, opts, signal, sink):
            collector.observe(event)
        return collector.result()

    async def call_model(self, messages: list[Message],
                         tools: list[ToolDefinition]) -> ModelTurnResult:
        """The loop's ``call_model`` port."""
        return await self.complete(messages, tools)

    async def _events(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                      options: WireOptions, signal: AbortSignal | None,
                      sink: Callable[[StreamEvent], None] | None) -> AsyncIterator[StreamEvent]:
        if signal is not None and signal.aborted:
            raise RunCancelledError("the model call was cancelled before it started")
        request = self.adapter.build_request(messages, tools, options)
        b = self._budgets
        watchdog = create_stream_watchdog(first_token_ms=b.first_token_ms,
                                          inter_chunk_ms=b.inter_chunk_ms, total_ms=b.total_ms,
                                          external=signal, clock=self._clock)
        scope_box: list[anyio.CancelScope] = []
        remove = watchdog.signal.add_listener(
            lambda _reason: scope_box[-1].cancel() if scope_box else None)
        try:
            async with self.transport.open(request) as response:
                watchdog.open()
                chunks = response.aiter_bytes()
                if response.status >= 400:
                    body = await self._read_error_body(chunks, watchdog, scope_box)
                    raise self.adapter.classify_error(response.status, response.headers, body)
                if request.stream:
                    decoder = self.adapter.stream_decoder()
                    while (chunk := await self._next(chunks, watchdog, scope_box)) is not None:
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
                    while (chunk := await self._next(chunks, watchdog, scope_box)) is not None:
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

    async def _next(self, chunks: AsyncIterator[bytes], watchdog: StreamWatchdog,
                    scope_box: list[anyio.CancelScope]) -> bytes | None:
        """The next body chunk (``None`` at EOF), read under the watchdog's nearest deadline."""
        while True:
            if watchdog.signal.aborted:
                stall = watchdog.stall()
                if stall is not None:
                    raise StreamStalledError(stall)
                raise RunCancelledError("the model call was cancelled")
            deadline = watchdog.next_deadline_ms
            delay = math.inf if deadline is None else max(0.0, (deadline - self._clock()) / 1000.0)
            with anyio.move_on_after(delay) as scope:
                # The watchdog's signal cancels this scope (external abort or a budget firing).
                scope_box.append(scope)
                try:
                    return await chunks.__anext__()
                except StopAsyncIteration:
                    return None
                finally:
                    scope_box.pop()
            # Interrupted: a budget may have run out (check fires the signal), or woke early.
            watchdog.check()

    async def _read_error_body(self, chunks: AsyncIterator[bytes], watchdog: StreamWatchdog,
                               scope_box: list[anyio.CancelScope]) -> bytes:
        out = bytearray()
        while len(out) < self._max_error:
            chunk = await self._next(chunks, watchdog, scope_box)
            if chunk is None:
                break
            out += chunk
        return bytes(out[: self._max_error])


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


class RoutedModel:
    """``call_model`` over a route plan: each candidate's ``provider_id`` names a
    :class:`ModelAdapter` in ``models``; the candidate's ``provider_invocation_model`` replaces
    ``options.model`` for that attempt. ``on_route`` receives every :class:`RouteResult` (the
    attempt log is the fallback trace). A route that fails raises its last
    :class:`~bindloop.routing.AttemptError` (its ``cause`` is the provider error, so a
    prompt-too-long stays recognisable through ``__cause__``).

    ``produced_output``: when the adapter has an ``on_event`` sink and an answer event already
    reached it, routing is told the attempt cannot be retracted (it then propagates).
    """

    __slots__ = ("_breaker", "_models", "_on_route", "_plan", "_signal", "last_result")

    def __init__(self, *, plan: RoutePlan, models: Mapping[str, ModelAdapter],
                 breaker: CircuitBreaker | None = None,
                 on_route: Callable[[RouteResult[ModelTurnResult]], None] | None = None,
                 signal: AbortSignal | None = None) -> None:
        self._plan = plan
        self._models = dict(models)
        self._breaker = breaker
        self._on_route = on_route
        self._signal = signal
        self.last_result: RouteResult[ModelTurnResult] | None = None

    async def call_model(self, messages: list[Message],
                         tools: list[ToolDefinition]) -> ModelTurnResult:
        async def attempt(candidate: RouteCandidate,
                          cursor: RouteCursor) -> AttemptOutcome[ModelTurnResult]:
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
            shown = [False]
            sink = model.on_event

            def watch(event: StreamEvent) -> None:
                if isinstance(event, (TextEvent, ToolCallEvent)):
                    shown[0] = True
                assert sink is not None
                sink(event)

            try:
                turn = await model.complete(messages, tools, options=options, signal=self._signal,
                                            on_event=watch if sink is not None else None)
            except Exception as exc:  # classified into facts; routing decides
                return AttemptFailure(error=attempt_error_from(exc, target),
                                      produced_output=shown[0])
            return AttemptSuccess(turn)

        result = await execute_route_plan(plan=self._plan, attempt=attempt,
                                          breaker=self._breaker, signal=self._signal)
        self.last_result = result
        if self._on_route is not None:
            self._on_route(result)
        if isinstance(result, RouteFailure):
            result.raise_error()
        return result.value
