"""Composition: a wire adapter plus a host transport is a model the loop can call.

:class:`ModelAdapter` sends one request and yields normalized events, under a stream watchdog, and
is a :class:`~bindloop.model.Model` (the loop's ``model`` port takes it as it is). The transport
is a port: the core never does I/O itself. A streamed body is read once (:class:`WireStream`: one SSE
parse feeds the decoder and the watchdog); a non-streamed body is decoded to events once and
folded once.
"""

from __future__ import annotations

from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterable,
    Mapping,
    Sequence,
)
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import msgspec

from ..clock import Clock, monotonic_ms
from ..completion import StreamEvent, TurnCollector
from ..contracts import Message, ModelTurnResult, ToolDefinition, TurnUsage
from ..errors import UsageError
from ..model import JsonSchemaFormat, ModelRequest, StructuredOutputMode
from ..signal import AbortSignal
from ._call import Call, cancelled, open_call
from ._retry import RetryAttempt, RetryPolicy, is_content_event, retry_attempts
from ._stream import WireStream
from ._transport import Transport
from ._types import HttpRequest, WireAdapter, WireOptions
from ._watchdog import StreamBudgets

__all__ = ("ModelAdapter",)

_DEFAULT_RETRY = RetryPolicy()
_NO_REQUEST = ModelRequest()


class _OneCall:
    """The one attempt of a call without a retry policy (a route's attempt): what
    ``retry_attempts(None)`` gives, without a generator and a :class:`RetryAttempt` kept alive
    across the call. Stateless, so one instance serves every call."""

    __slots__ = ()

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *_exc: object) -> bool:
        return False  # never retried: the error goes through


_ONE_CALL = (_OneCall(),)
_MODES = ("json_schema", "tool")


def request_changes(request: ModelRequest) -> dict[str, Any]:
    """A call's :class:`WireOptions` field changes: ``additional_options``, then the schema as
    ``response_format`` and the tool choice (these two win: the caller asked for them)."""
    extra = request.additional_options
    if extra is not None and not isinstance(extra, Mapping):
        raise UsageError("additional_options must be a mapping of WireOptions field names to "
                         f"values, got {type(extra).__name__}")
    changes: dict[str, Any] = dict(extra or {})
    if request.schema is not None:
        changes["response_format"] = JsonSchemaFormat(name=request.schema_name,
                                                      schema=request.schema)
    if request.tool_choice is not None:
        changes["tool_choice"] = request.tool_choice
    return changes


class ModelAdapter:
    """One provider binding: ``adapter`` (pure) + ``transport`` (host) + default ``options``; a
    :class:`~bindloop.model.Model`.

    ``id`` (default ``options.model``), ``provider`` (default the adapter's wire name) and
    ``structured_output`` (``"json_schema"``: every built-in wire sends a request's schema as its
    native ``response_format``; ``"tool"`` for a provider model without it) are its declared
    capabilities. A call's :class:`~bindloop.model.ModelRequest` is applied on top of
    ``options``: its ``additional_options`` replace option fields, its schema goes out as
    ``response_format`` and its tool choice as ``tool_choice``.

    ``on_event`` sees every event as it is decoded (a UI sink); ``price`` turns usage into the
    turn's integer cost, charged once by the fold of :meth:`complete` — the one cost mechanism:
    it is what ``RunStats.cost`` sums and what ``bindloop.agent`` budgets count. ``max_error_body_bytes`` bounds how much of an error response is read.
    ``budgets`` is checked here: anything but a valid :class:`StreamBudgets` raises
    :class:`~bindloop.errors.UsageError` before a request is ever sent.

    Every call — :meth:`complete`, :meth:`open_stream`, :meth:`stream` — runs in one cancel scope
    holding the transport's context from sending the request to closing the connection, under one
    watchdog supervisor (timer callbacks of the running loop on asyncio, a task on trio). The
    watchdog cancels only waits on the provider (headers, the next chunk), and its idle budgets
    stand still while the consumer holds what was read.

    ``retry`` (a :class:`~bindloop.wire.RetryPolicy`; on by default: three calls in all) makes
    :meth:`complete` and :meth:`stream` call the provider again after a transient failure — a 429,
    a 5xx, a refused or dropped connection, a stall — as long as no output (text, reasoning, a
    tool-call delta) has reached a consumer, waiting the provider's ``Retry-After`` or a backoff
    through ``sleep`` (seconds; ``anyio.sleep``) with jitter from ``random``. ``retry=None``
    switches it off. :meth:`open_stream` is always one call. Inside a
    :class:`~bindloop.wire.RoutedModel` the route decides instead (it falls back to the next
    candidate, and its breaker keeps a ``Retry-After``): a routed attempt is one call.
    """

    __slots__ = ("_budgets", "_clock", "_max_error", "_price", "_random", "_sleep", "adapter", "id",
                 "on_event", "options", "provider", "retry", "structured_output", "transport")

    def __init__(self, adapter: WireAdapter, transport: Transport, options: WireOptions, *,
                 budgets: StreamBudgets = StreamBudgets(), clock: Clock = monotonic_ms,
                 on_event: Callable[[StreamEvent], None] | None = None,
                 price: Callable[[TurnUsage], int] | None = None,
                 max_error_body_bytes: int = 65_536,
                 retry: RetryPolicy | None = _DEFAULT_RETRY,
                 sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
                 random: Callable[[], float] = lambda: 1.0,
                 id: str | None = None, provider: str | None = None,
                 structured_output: StructuredOutputMode = "json_schema") -> None:
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
        if structured_output not in _MODES:
            raise UsageError("structured_output must be 'json_schema' or 'tool', got "
                             f"{structured_output!r}")
        self.id: str = id or options.model
        self.provider: str | None = provider or adapter.wire
        self.structured_output: StructuredOutputMode = structured_output
        self.retry = retry
        self._sleep = sleep
        self._random = random
        self.adapter = adapter
        self.transport = transport
        self.options = options
        self.on_event = on_event
        self._price = price
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

    def price(self, usage: TurnUsage, /) -> int:
        """The turn's cost by ``ModelAdapter(price=)`` (``0`` without one); :meth:`complete`'s
        fold charges it once per turn."""
        price = self._price
        return 0 if price is None else price(usage)

    def wire_options(self, request: ModelRequest) -> WireOptions:
        """``options`` with ``request`` applied (see the class docstring). Raises
        :class:`~bindloop.errors.UsageError` when ``additional_options`` names a field
        :class:`WireOptions` does not have or gives one a value it does not take."""
        if (request.schema is None and request.tool_choice is None
                and not request.additional_options):
            return self.options
        try:
            return msgspec.structs.replace(self.options, **request_changes(request))
        except TypeError as exc:
            raise UsageError(f"additional_options for model {self.id!r} name a field WireOptions "
                             f"does not have: {exc}") from exc

    async def stream(self, messages: Sequence[Message], request: ModelRequest = _NO_REQUEST, /,
                     ) -> AsyncGenerator[StreamEvent, None]:
        """:meth:`open_stream` of ``request`` as an async generator, with the same semantics and
        errors (raised from the generator itself, never inside the consumer's loop body).

        Closing the generator (``aclose()``, or leaving ``aclosing(...)``) closes the connection at
        once. The generator holds the call's cancel scope, the watchdog's supervisor (a task group
        on trio) and the transport's context across its yields (it never cancels the consumer
        through them), so: close it (``aclosing``, or run it to the end: one abandoned mid-stream
        is finalized in another task, where its scopes cannot be left — an error on asyncio, a
        corrupted run on trio), iterate it in one task, and do not await a single ``__anext__()``
        under a cancel scope of your own. :meth:`open_stream` has none of these rules.
        """
        options = self.wire_options(request)
        tools, signal = request.tools, request.signal
        for attempt in retry_attempts(self.retry, random=self._random, sleep=self._sleep):
            async with attempt:
                async with self.open_stream(messages, tools, options=options,
                                            signal=signal) as events:
                    async for event in events:
                        if not attempt.produced and is_content_event(event):
                            attempt.produced = True
                        yield event
                return

    def complete(self, messages: Sequence[Message], request: ModelRequest = _NO_REQUEST, /,
                 on_event: Callable[[StreamEvent], None] | None = None,
                 on_reset: Callable[[], None] | None = None,
                 ) -> Coroutine[Any, Any, ModelTurnResult]:
        """One turn of ``request``, folded into a result and priced by :meth:`price` (await it).
        The call streams whenever its events have a consumer (``on_event``, or the adapter's own
        ``on_event``: both see every event, the adapter's first), else as ``options.stream``
        says. An :class:`~bindloop.completion.ErrorEvent` inside the stream raises its error.
        ``on_reset`` is never called: a retry happens only before any output reached a sink.

        Raises :class:`~bindloop.wire.ProviderHttpError` for an error status,
        :class:`~bindloop.wire.StreamStalledError` when the watchdog tears the call down, the
        decoder's errors, and for ``request.signal``: its reason itself when that is a
        :class:`~bindloop.errors.RunCancelledError` or :class:`~bindloop.errors.RunTimeoutError`
        (a run deadline's signal raises the deadline's error), else a
        :class:`~bindloop.errors.RunCancelledError` naming the reason and chained from it.

        With :attr:`retry`, a transient failure before any output reached the sink is followed by
        another call (see the class docstring); the error raised is the last call's."""
        # The call's own coroutine, not one awaiting it: every frame waiting in a streamed call
        # is resumed once per chunk.
        return self._complete(messages, request.tools, self.wire_options(request),
                              request.signal, _both(self.on_event, on_event), self.retry)

    async def _complete(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                        options: WireOptions | None, signal: AbortSignal | None,
                        on_event: Callable[[StreamEvent], None] | None,
                        retry: RetryPolicy | None) -> ModelTurnResult:
        """:meth:`complete` under ``retry`` (``None``: one call, as a route's attempt is);
        ``on_event`` is the call's whole sink. A consumed call streams."""
        sink = on_event
        opts = options or self.options
        if sink is not None and not opts.stream:
            opts = msgspec.structs.replace(opts, stream=True)
        attempts: Iterable[RetryAttempt | _OneCall] = (
            _ONE_CALL if retry is None
            else retry_attempts(retry, random=self._random, sleep=self._sleep))
        for attempt in attempts:
            async with attempt:
                watched = sink
                if sink is not None and isinstance(attempt, RetryAttempt):
                    watched = _marking(sink, attempt)
                collector = TurnCollector(price=self._price)
                observe = collector.observe
                request = self._request(messages, tools, opts, signal)
                async with self._open(request, signal) as (call, chunks):
                    if opts.stream:
                        # _events()' loop inline (an async generator between the reads and the
                        # fold costs two calls per chunk); each read's events from the one
                        # per-chunk step both share, WireStream.feed_watched.
                        stream = WireStream(self.adapter.stream_decoder(), scrub=call.scrub)
                        watchdog = call.watchdog
                        while (chunk := await call.read(chunks)) is not None:
                            for event in stream.feed_watched(chunk, watchdog):
                                if watched is not None:
                                    watched(event)
                                observe(event)
                        for event in stream.end():
                            if watched is not None:
                                watched(event)
                            observe(event)
                    else:
                        parts: list[bytes] = []
                        while (chunk := await call.read(chunks)) is not None:
                            call.watchdog.observed_chunk("reasoning")  # progress, not answer
                            parts.append(chunk)
                if not opts.stream:
                    for event in map(call.scrub, self.adapter.response_events(b"".join(parts))):
                        if watched is not None:
                            watched(event)
                        observe(event)
                return collector.result()
        raise AssertionError("unreachable: every attempt returns or raises")

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
            events = _events(call, WireStream(self.adapter.stream_decoder(), scrub=call.scrub),
                             chunks, sink)
            try:
                yield events
            finally:
                await events.aclose()


def _marking(sink: Callable[[StreamEvent], None],
             attempt: RetryAttempt) -> Callable[[StreamEvent], None]:
    """``sink``, marking ``attempt`` as having produced output at its first content event (a
    closure of its own, so a call without a retry policy keeps no cells for it)."""

    def watched(event: StreamEvent) -> None:
        # Marked before the sink runs: one that raised may have shown it.
        if not attempt.produced and is_content_event(event):
            attempt.produced = True
        sink(event)
    return watched


def _both(own: Callable[[StreamEvent], None] | None,
          theirs: Callable[[StreamEvent], None] | None) -> Callable[[StreamEvent], None] | None:
    """The adapter's sink and a call's, as one (either alone when the other is absent)."""
    if own is None:
        return theirs
    if theirs is None:
        return own

    def both(event: StreamEvent) -> None:
        own(event)
        theirs(event)
    return both


async def _events(call: Call, stream: WireStream, chunks: AsyncIterator[bytes],
                  sink: Callable[[StreamEvent], None] | None,
                  ) -> AsyncGenerator[StreamEvent, None]:
    """The response's events. Holds no scope: a wait the watchdog cuts raises the cancellation
    through the consumer to the call's scope, which turns it into the reason."""
    watchdog = call.watchdog
    while (chunk := await call.read(chunks)) is not None:
        for event in stream.feed_watched(chunk, watchdog):
            if sink is not None:
                sink(event)
            yield event
    for event in stream.end():
        if sink is not None:
            sink(event)
        yield event

