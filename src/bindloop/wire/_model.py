"""Composition: a wire adapter plus a host transport is a model the loop can call.

:class:`ModelAdapter` sends one request and yields normalized events, under a stream watchdog, and
offers :meth:`ModelAdapter.call_model` for :class:`~bindloop.loop.ToolLoopParams`. :class:`RoutedModel`
feeds attempts through :func:`~bindloop.routing.execute_route_plan`, so fallback between providers is
decided by the routing table, not here, and can drive a turn text stream across those attempts. The
transport is a port: the core never does I/O itself.

Each call is one structured unit: a task group running the watchdog's supervisor, a cancel scope,
and inside it the transport's context and the body; all entered and left in one frame, in one
order. See :meth:`ModelAdapter.open_stream` for what that means for a consumer.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Protocol, TypeAlias

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
from ..errors import PortContractError, RunCancelledError, RunTimeoutError, UsageError
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


class TransportResponse(Protocol):
    """An open HTTP response. ``headers`` are (name, value) pairs as received. ``aiter_bytes()``
    yields the body decoded from its ``content-encoding``; :class:`ModelAdapter` calls it once and,
    when the iterator has an ``aclose()``, closes it before it leaves the transport's context."""

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
    :class:`~bindloop.wire.TransportError`.

    :class:`ModelAdapter` enters and leaves the context in the same task and cancel scope, so
    ``open()`` may hold a task group or cancel scope across its ``yield`` (a body-pump task, say).
    When the watchdog tore the call down, the context is left inside that cancelled scope."""

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


class _EventGrowth:
    """Tells a read that grew an SSE event still arriving (bytes are flowing: progress) from one that
    only carried keep-alive comments or a whole event that decodes to nothing (an Anthropic ping).

    Tracks just enough of the SSE line grammar: whether the bytes since the last line end belong to
    a comment or a field line, and whether a field line was seen since the last blank line (the
    event is open). Only the part after a read's last blank line matters, so a read is searched
    from its end and scanned line by line only there.
    """

    __slots__ = ("_after_cr", "_line", "_open")

    def __init__(self) -> None:
        self._line = 0  # 0: at a line start; 1: inside a comment line; 2: inside a field line
        self._open = False
        self._after_cr = False

    def grew(self, chunk: bytes) -> bool:
        """Feed one read; ``True`` when it added field bytes to an event that is still open."""
        if self._after_cr and chunk[:1] == b"\n":
            chunk = chunk[1:]  # the LF of a CRLF split across reads
        if b"\r" in chunk:
            self._after_cr = chunk[-1:] == b"\r"
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        else:
            self._after_cr = False
        blank = chunk.rfind(b"\n\n")
        if blank >= 0:  # a blank line ends whatever event was open: start from after it
            self._line = 0
            self._open = False
            chunk = chunk[blank + 2:]
            if not chunk:
                return False
        grew = False
        line = self._line
        segments = chunk.split(b"\n")
        last = len(segments) - 1
        for i, segment in enumerate(segments):
            if line:  # the rest of a line begun earlier
                kind = line
                grew = grew or (kind == 2 and bool(segment))
            elif not segment:
                if i != last:  # an empty line: a blank line at the start of this read
                    self._open = False
                continue
            else:
                kind = 1 if segment[0] == 58 else 2  # ':' starts a comment
                if kind == 2:
                    grew = self._open = True
            line = kind if i == last else 0
        self._line = line
        return grew and self._open


def _cancelled(reason: object, *, started: bool = True) -> Exception:
    """The error for the caller's abort: its own reason when that already is one of the run's stop
    errors (a run deadline's :class:`~bindloop.errors.RunTimeoutError`), else a
    :class:`~bindloop.errors.RunCancelledError` naming the reason and chained from it."""
    if isinstance(reason, (RunCancelledError, RunTimeoutError)):
        return reason
    message = "the model call was cancelled" if started else \
        "the model call was cancelled before it started"
    error = RunCancelledError(message if reason is None else f"{message}: {reason}")
    if isinstance(reason, BaseException):
        error.__cause__ = reason
    return error


class _Call:
    """What one call's context and its event iterator share: the watchdog, the scope the transport
    lives in, and whether a wait on the provider is in flight."""

    __slots__ = ("_error", "_ours", "external", "scope", "waiting", "watchdog")

    def __init__(self, watchdog: StreamWatchdog, external: AbortSignal | None) -> None:
        self.watchdog = watchdog
        self.external = external
        self.scope = anyio.CancelScope()
        self.waiting = False
        self._error: Exception | None = None
        self._ours = False  # whether _error was made here (and so may be given a cause)

    def on_abort(self, _reason: object) -> None:
        # The watchdog's signal cancels a wait on the provider, never the consumer's own code: a
        # budget or an abort that lands while the consumer holds an event is raised by the next
        # step instead (and only the total cap can run out then: the idle clock is paused).
        if self.waiting:
            self.scope.cancel()

    def torn_down(self) -> Exception:
        """Why the watchdog's signal fired: its stall, the caller's abort, or the supervisor's own
        failure. One instance per call, so it is never wrapped in itself."""
        if self._error is None:
            stall = self.watchdog.stall()
            reason = self.watchdog.signal.reason
            if stall is not None:
                self._error, self._ours = StreamStalledError(stall), True
            elif self.external is not None and self.external.aborted:
                self._error = _cancelled(self.external.reason)
                self._ours = self._error is not self.external.reason
            elif isinstance(reason, Exception):
                self._error = reason  # supervise() failed (a clock that raises): raise the cause
            else:
                self._error, self._ours = RunCancelledError("the model call was cancelled"), True
        return self._error

    def cut(self, error: Exception) -> Exception:
        """``error`` escaped a wait or the teardown: when the watchdog cut the call, report why,
        not how the transport noticed (it may turn the cancellation into its own error)."""
        if not self.scope.cancel_called:
            return error
        reason = self.torn_down()
        if reason is not error and self._ours and reason.__cause__ is None:
            reason.__cause__ = error
        return reason

    async def read(self, chunks: AsyncIterator[bytes]) -> bytes | None:
        """The next body chunk (``None`` at EOF), the idle clock running only while it is awaited."""
        watchdog = self.watchdog
        if watchdog.signal.aborted:  # fired while the consumer held the last events
            raise self.torn_down()
        watchdog.resume()
        self.waiting = True
        try:
            return await chunks.__anext__()
        except StopAsyncIteration:
            return None
        except Exception as exc:
            if (error := self.cut(exc)) is exc:
                raise
            raise error  # chained by cut() when the error is its own
        finally:
            self.waiting = False
            watchdog.pause()


class ModelAdapter:
    """One provider binding: ``adapter`` (pure) + ``transport`` (host) + default ``options``.

    ``on_event`` sees every event as it is decoded (a UI sink); ``price`` turns usage into the
    turn's integer cost. ``max_error_body_bytes`` bounds how much of an error response is read.
    ``budgets`` is checked here: anything but a valid :class:`StreamBudgets` raises
    :class:`~bindloop.errors.UsageError` before a request is ever sent.

    Every call — :meth:`complete`, :meth:`open_stream`, :meth:`stream` — runs in one cancel scope
    holding the transport's context from sending the request to closing the connection, beside one
    watchdog supervisor task. The watchdog cancels only waits on the provider (headers, the next
    chunk), and its idle budgets stand still while the consumer holds what was read.
    """

    __slots__ = ("_budgets", "_clock", "_max_error", "_supervised", "adapter", "on_event",
                 "options", "price", "transport")

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
        # Without any budget only the caller's signal can end a wait: no supervisor task needed.
        self._supervised = any(b is not None for b in (
            budgets.first_token_ms, budgets.inter_chunk_ms, budgets.total_ms))

    def open_stream(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = (), *,
                    options: WireOptions | None = None, signal: AbortSignal | None = None,
                    ) -> AbstractAsyncContextManager[AsyncIterator[StreamEvent]]:
        """Send one streamed request; the context yields its events as an async iterator.

        ``async with model.open_stream(messages) as events: async for event in events: ...``.
        Entering sends the request and waits for the status and headers: an error status raises
        :class:`~bindloop.wire.ProviderHttpError` there. Leaving closes the body and then the
        connection, at once, however the block ends (early ``break`` included).

        The block runs inside the call's cancel scope, beside one watchdog supervisor. When a budget
        runs out (or ``signal`` fires) while the iterator waits on the provider, that wait is
        cancelled: the block unwinds like any cancelled code, and leaving it raises
        :class:`~bindloop.completion.StreamStalledError` or the caller's cancellation (see
        :meth:`complete`). One that runs out while the consumer holds an event never cancels the
        consumer's code; the iterator's next step raises it. The idle budgets stand still while the
        consumer holds events (a slow consumer is not a stalled provider); ``total_ms`` keeps
        counting, so it bounds the whole call including the consumer's time.
        """
        opts = msgspec.structs.replace(options or self.options, stream=True)
        return self._call(messages, tools, opts, signal, self.on_event)

    async def stream(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = (), *,
                     options: WireOptions | None = None,
                     signal: AbortSignal | None = None) -> AsyncGenerator[StreamEvent, None]:
        """:meth:`open_stream` as an async generator, with the same semantics and errors (raised
        from the generator itself, never inside the consumer's loop body).

        Closing the generator (``aclose()``, or leaving ``aclosing(...)``) closes the connection at
        once. The generator holds the call's cancel scope, the supervisor's task group and the
        transport's context across its yields (it never cancels the consumer through them), so:
        close it (``aclosing``, or run it to the end: one abandoned mid-stream is finalized in
        another task, where its scopes cannot be left — an error on asyncio, a corrupted run on
        trio), iterate it in one task, and do not await a single ``__anext__()`` under a cancel
        scope of your own. :meth:`open_stream` has none of these rules.
        """
        async with self.open_stream(messages, tools, options=options, signal=signal) as events:
            async for event in events:
                yield event

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = (),
                       *, options: WireOptions | None = None,
                       signal: AbortSignal | None = None,
                       on_event: Callable[[StreamEvent], None] | None = None) -> ModelTurnResult:
        """One turn, streamed or not as ``options.stream`` says, folded into a result. An
        :class:`~bindloop.completion.ErrorEvent` inside the stream raises its error. ``on_event``
        replaces the adapter's sink for this call.

        Raises :class:`~bindloop.wire.ProviderHttpError` for an error status,
        :class:`~bindloop.completion.StreamStalledError` when the watchdog tears the call down, the
        decoder's errors, and for ``signal``: its reason itself when that is a
        :class:`~bindloop.errors.RunCancelledError` or :class:`~bindloop.errors.RunTimeoutError`
        (a run deadline's signal raises the deadline's error), else a
        :class:`~bindloop.errors.RunCancelledError` naming the reason and chained from it."""
        collector = TurnCollector(price=self.price)
        sink = on_event if on_event is not None else self.on_event
        async with self._call(messages, tools, options or self.options, signal, sink) as events:
            async for event in events:
                collector.observe(event)
        return collector.result()

    async def call_model(self, messages: list[Message],
                         tools: list[ToolDefinition]) -> ModelTurnResult:
        """The loop's ``call_model`` port."""
        return await self.complete(messages, tools)

    @asynccontextmanager
    async def _call(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                    options: WireOptions, signal: AbortSignal | None,
                    sink: Callable[[StreamEvent], None] | None,
                    ) -> AsyncGenerator[AsyncIterator[StreamEvent], None]:
        """One request, from sending it to closing its connection.

        Scopes nest in one order, entered and left in this one frame: the supervisor's task group,
        then the call's cancel scope, then the transport's context (which may hold task groups of
        its own across its yield), then the body iterator and the event iterator, closed in
        reverse. Exceptions are caught inside the task group and re-raised outside it, so they are
        never wrapped in an exception group.
        """
        if signal is not None and signal.aborted:
            raise _cancelled(signal.reason, started=False)
        request = self.adapter.build_request(messages, tools, options)
        b = self._budgets
        watchdog = create_stream_watchdog(first_token_ms=b.first_token_ms,
                                          inter_chunk_ms=b.inter_chunk_ms, total_ms=b.total_ms,
                                          external=signal, clock=self._clock)
        call = _Call(watchdog, signal)
        remove = watchdog.signal.add_listener(call.on_abort)
        cancelled = anyio.get_cancelled_exc_class()
        failure: BaseException | None = None
        try:
            async with AsyncExitStack() as supervision:
                if self._supervised:
                    tg = await supervision.enter_async_context(anyio.create_task_group())
                    tg.start_soon(watchdog.supervise)
                try:
                    with call.scope:
                        async with AsyncExitStack() as stack:
                            # Armed before the request goes out, not when headers arrive: a
                            # provider that accepts the connection and never answers would
                            # otherwise hang the turn with no budget running and the caller's
                            # signal unheard (a non-streamed reply's headers come only after the
                            # whole generation, so that wait is the call).
                            watchdog.open()
                            call.waiting = True
                            try:
                                response = await stack.enter_async_context(
                                    self.transport.open(request))
                            except Exception as exc:
                                if (error := call.cut(exc)) is exc:
                                    raise
                                raise error  # chained by cut()
                            finally:
                                call.waiting = False
                            watchdog.pause()  # the consumer's time from here on is not silence
                            chunks = response.aiter_bytes()
                            close_body = getattr(chunks, "aclose", None)
                            if close_body is not None:
                                stack.push_async_callback(close_body)
                            if response.status >= 400:
                                await self._raise_for_status(call, response, chunks)
                            events = self._events(call, request, chunks, sink)
                            stack.push_async_callback(events.aclose)
                            yield events
                    if call.scope.cancel_called:  # the scope absorbed its own cancellation
                        raise call.torn_down()
                except cancelled:
                    raise  # someone else's cancellation: the task group and scopes handle it
                except BaseException as exc:  # re-raised below, outside the task group
                    failure = call.cut(exc) if isinstance(exc, Exception) else exc
                finally:
                    watchdog.dispose()  # ends the supervisor
        finally:
            remove()
        if failure is not None:
            raise failure

    async def _raise_for_status(self, call: _Call, response: TransportResponse,
                                chunks: AsyncIterator[bytes]) -> None:
        body = bytearray()
        while len(body) < self._max_error:
            if (chunk := await call.read(chunks)) is None:
                break
            body += chunk
        raise self.adapter.classify_error(response.status, response.headers,
                                          bytes(body[: self._max_error]))

    async def _events(self, call: _Call, request: HttpRequest, chunks: AsyncIterator[bytes],
                      sink: Callable[[StreamEvent], None] | None,
                      ) -> AsyncGenerator[StreamEvent, None]:
        """The response's events. Holds no scope: a wait the watchdog cuts raises the
        cancellation through the consumer to the call's scope, which turns it into the reason."""
        watchdog = call.watchdog
        if request.stream:
            decoder = self.adapter.stream_decoder()
            growth = _EventGrowth()
            while (chunk := await call.read(chunks)) is not None:
                events = decoder.feed(chunk)
                if growth.grew(chunk) and not events:
                    watchdog.observed_progress()  # a large event still arriving
                else:
                    watchdog.observed_chunk(_chunk_kind(events))  # type: ignore[arg-type]
                for event in events:
                    if sink is not None:
                        sink(event)
                    yield event
            for event in decoder.end():
                if sink is not None:
                    sink(event)
                yield event
        else:
            parts = []
            while (chunk := await call.read(chunks)) is not None:
                watchdog.observed_chunk("reasoning")  # body bytes: progress, not answer
                parts.append(chunk)
            turn = self.adapter.parse_response(b"".join(parts))
            for event in _turn_events(turn):
                if sink is not None:
                    sink(event)
                yield event


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
