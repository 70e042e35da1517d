"""Composition: a wire adapter plus a host transport is a model the loop can call.

:class:`ModelAdapter` sends one request and yields normalized events, under a stream watchdog, and
offers :meth:`ModelAdapter.call_model` for :class:`~bindloop.loop.ToolLoopParams`. The transport is
a port: the core never does I/O itself. A streamed body is read once (:class:`WireStream`: one SSE
parse feeds the decoder and the watchdog); a non-streamed body is decoded to events once and
folded once.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio
import msgspec

from ..clock import Clock, monotonic_ms
from ..completion import (
    ErrorEvent,
    ReasoningEvent,
    StreamEvent,
    TextEvent,
    ToolCallEvent,
    TurnCollector,
)
from ..contracts import Message, ModelTurnResult, ToolDefinition, TurnUsage
from ..errors import UsageError
from ..signal import AbortSignal
from ._call import Call, cancelled, open_call
from ._retry import RetryPolicy
from ._stream import WireStream
from ._transport import Transport
from ._types import HttpRequest, WireAdapter, WireOptions
from ._watchdog import StreamBudgets

__all__ = ("ModelAdapter",)

_DEFAULT_RETRY = RetryPolicy()


def is_content(event: StreamEvent) -> bool:
    """Output a consumer folds into the turn and cannot be made to forget (text, reasoning, a
    tool-call delta): after it a retry would splice two answers, and a failed attempt that sent it
    cannot be taken back. One test for the adapter's retries and the route's fallback."""
    return (isinstance(event, TextEvent) and bool(event.content)) or isinstance(
        event, (ReasoningEvent, ToolCallEvent))


class ModelAdapter:
    """One provider binding: ``adapter`` (pure) + ``transport`` (host) + default ``options``.

    ``on_event`` sees every event as it is decoded (a UI sink); ``price`` turns usage into the
    turn's integer cost, charged once by the fold of :meth:`complete` — the one cost mechanism:
    it is what ``RunStats.cost`` sums and what ``bindloop.agent`` budgets count. ``max_error_body_bytes`` bounds how much of an error response is read.
    ``budgets`` is checked here: anything but a valid :class:`StreamBudgets` raises
    :class:`~bindloop.errors.UsageError` before a request is ever sent.

    Every call — :meth:`complete`, :meth:`open_stream`, :meth:`stream` — runs in one cancel scope
    holding the transport's context from sending the request to closing the connection, beside one
    watchdog supervisor task. The watchdog cancels only waits on the provider (headers, the next
    chunk), and its idle budgets stand still while the consumer holds what was read.

    ``retry`` (a :class:`~bindloop.wire.RetryPolicy`; on by default: three calls in all) makes
    :meth:`complete` and :meth:`stream` call the provider again after a transient failure — a 429,
    a 5xx, a refused or dropped connection, a stall — as long as no output (text, reasoning, a
    tool-call delta) has reached a consumer, waiting the provider's ``Retry-After`` or a backoff
    through ``sleep`` (seconds; ``anyio.sleep``) with jitter from ``random``. ``retry=None``
    switches it off. :meth:`open_stream` is always one call. Inside a
    :class:`~bindloop.wire.RoutedModel` the route decides instead (it falls back to the next
    candidate, and its breaker keeps a ``Retry-After``): a routed attempt is one call.
    """

    __slots__ = ("_budgets", "_clock", "_max_error", "_random", "_sleep", "adapter", "on_event",
                 "options", "price", "retry", "transport")

    def __init__(self, adapter: WireAdapter, transport: Transport, options: WireOptions, *,
                 budgets: StreamBudgets = StreamBudgets(), clock: Clock = monotonic_ms,
                 on_event: Callable[[StreamEvent], None] | None = None,
                 price: Callable[[TurnUsage], int] | None = None,
                 max_error_body_bytes: int = 65_536,
                 retry: RetryPolicy | None = _DEFAULT_RETRY,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
                 random: Callable[[], float] = lambda: 1.0) -> None:
        if not isinstance(budgets, StreamBudgets):
            raise UsageError(f"budgets must be a StreamBudgets, got {type(budgets).__name__}")
        if not isinstance(options, WireOptions):
            raise UsageError(f"options must be a WireOptions, got {type(options).__name__}")
        if transport is None or not callable(getattr(transport, "open", None)):
            raise UsageError("transport must be a Transport (an object with an open(request) "
                             f"context manager), got {type(transport).__name__}")
        if (isinstance(max_error_body_bytes, bool) or not isinstance(max_error_body_bytes, int)
                or max_error_body_bytes < 1):
            raise UsageError(f"max_error_body_bytes must be a positive int, got "
                             f"{max_error_body_bytes!r}")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise UsageError(f"retry must be a RetryPolicy or None, got {type(retry).__name__}")
        self.retry = retry
        self._sleep = sleep
        self._random = random
        self.adapter = adapter
        self.transport = transport
        self.options = options
        self.on_event = on_event
        self.price = price
        # replace() re-runs StreamBudgets' own check, which msgspec.structs.force_setattr skips.
        self._budgets = msgspec.structs.replace(budgets)
        self._clock = clock
        self._max_error = max_error_body_bytes

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
        :class:`~bindloop.wire.StreamStalledError` or the caller's cancellation (see
        :meth:`complete`). One that runs out while the consumer holds an event never cancels the
        consumer's code; the iterator's next step raises it. The idle budgets stand still while the
        consumer holds events (a slow consumer is not a stalled provider); ``total_ms`` keeps
        counting, so it bounds the whole call including the consumer's time.
        """
        opts = msgspec.structs.replace(options or self.options, stream=True)
        return self._streamed(messages, tools, opts, signal, self.on_event)

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
        attempt = 0
        while True:
            attempt += 1
            produced = False
            try:
                async with self.open_stream(messages, tools, options=options,
                                            signal=signal) as events:
                    async for event in events:
                        if not produced and is_content(event):
                            produced = True
                        yield event
                return
            except Exception as exc:
                delay = None if produced else self._retry_delay_ms(attempt, exc)
                if delay is None:
                    raise
            await self._sleep(delay / 1000.0)

    def _retry_delay_ms(self, attempt: int, error: BaseException) -> float | None:
        policy = self.retry
        return None if policy is None else policy.delay_ms(attempt, error, self._random)

    async def complete(self, messages: Sequence[Message], tools: Sequence[ToolDefinition] = (),
                       *, options: WireOptions | None = None,
                       signal: AbortSignal | None = None,
                       on_event: Callable[[StreamEvent], None] | None = None) -> ModelTurnResult:
        """One turn, streamed or not as ``options.stream`` says, folded into a result. An
        :class:`~bindloop.completion.ErrorEvent` inside the stream raises its error. ``on_event``
        replaces the adapter's sink for this call (a non-streamed reply's events reach it too,
        once the whole body is read).

        Raises :class:`~bindloop.wire.ProviderHttpError` for an error status,
        :class:`~bindloop.wire.StreamStalledError` when the watchdog tears the call down, the
        decoder's errors, and for ``signal``: its reason itself when that is a
        :class:`~bindloop.errors.RunCancelledError` or :class:`~bindloop.errors.RunTimeoutError`
        (a run deadline's signal raises the deadline's error), else a
        :class:`~bindloop.errors.RunCancelledError` naming the reason and chained from it.

        With :attr:`retry`, a transient failure before any output reached the sink is followed by
        another call (see the class docstring); the error raised is the last call's."""
        sink = on_event if on_event is not None else self.on_event
        attempt = 0
        while True:
            attempt += 1
            produced = False
            watched = sink
            if sink is not None:
                own = sink

                def watched(event: StreamEvent) -> None:
                    nonlocal produced
                    if not produced and is_content(event):
                        produced = True  # before the sink runs: one that raised may have shown it
                    own(event)
            try:
                return await self._complete_once(messages, tools, options=options,
                                                 signal=signal, on_event=watched)
            except Exception as exc:
                delay = None if produced else self._retry_delay_ms(attempt, exc)
                if delay is None:
                    raise
            await self._sleep(delay / 1000.0)

    async def _complete_once(self, messages: Sequence[Message],
                             tools: Sequence[ToolDefinition] = (), *,
                             options: WireOptions | None = None,
                             signal: AbortSignal | None = None,
                             on_event: Callable[[StreamEvent], None] | None = None,
                             ) -> ModelTurnResult:
        """:meth:`complete` as one call, never retried (a route's attempt)."""
        collector = TurnCollector(price=self.price)
        sink = on_event if on_event is not None else self.on_event
        opts = options or self.options
        if opts.stream:
            async with self._streamed(messages, tools, opts, signal, sink) as events:
                async for event in events:
                    collector.observe(event)
            return collector.result()
        request = self._request(messages, tools, opts, signal)
        parts = []
        async with self._open(request, signal) as (call, chunks):
            while (chunk := await call.read(chunks)) is not None:
                call.watchdog.observed_chunk("reasoning")  # body bytes: progress, not answer
                parts.append(chunk)
        for event in map(call.scrub, self.adapter.response_events(b"".join(parts))):
            if sink is not None:
                sink(event)
            collector.observe(event)
        return collector.result()

    async def call_model(self, messages: list[Message],
                         tools: list[ToolDefinition]) -> ModelTurnResult:
        """The loop's ``call_model`` port."""
        return await self.complete(messages, tools)

    def _request(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                 options: WireOptions, signal: AbortSignal | None) -> HttpRequest:
        if signal is not None and signal.aborted:  # before the request is even built
            raise cancelled(signal.reason, started=False)
        return self.adapter.build_request(messages, tools, options)

    def _open(self, request: HttpRequest, signal: AbortSignal | None,
              ) -> AbstractAsyncContextManager[tuple[Call, AsyncIterator[bytes]]]:
        return open_call(self.transport, request, budgets=self._budgets, clock=self._clock,
                         signal=signal, classify_error=self.adapter.classify_error,
                         max_error_body_bytes=self._max_error)

    @asynccontextmanager
    async def _streamed(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                        options: WireOptions, signal: AbortSignal | None,
                        sink: Callable[[StreamEvent], None] | None,
                        ) -> AsyncGenerator[AsyncIterator[StreamEvent], None]:
        request = self._request(messages, tools, options, signal)
        async with self._open(request, signal) as (call, chunks):
            events = _events(call, WireStream(self.adapter.stream_decoder()), chunks, sink)
            try:
                yield events
            finally:
                await events.aclose()


async def _events(call: Call, stream: WireStream, chunks: AsyncIterator[bytes],
                  sink: Callable[[StreamEvent], None] | None,
                  ) -> AsyncGenerator[StreamEvent, None]:
    """The response's events. Holds no scope: a wait the watchdog cuts raises the cancellation
    through the consumer to the call's scope, which turns it into the reason."""
    watchdog = call.watchdog
    while (chunk := await call.read(chunks)) is not None:
        for event in stream.feed_watched(chunk, watchdog):
            # An in-stream error may echo a credential. The decoders make exact ErrorEvents, and
            # the type check costs a tenth of isinstance() on this per-event path.
            if type(event) is ErrorEvent:
                event = call.scrub(event)
            if sink is not None:
                sink(event)
            yield event
    for event in map(call.scrub, stream.end()):
        if sink is not None:
            sink(event)
        yield event
