"""One call's lifecycle: from sending the request to closing its connection, under the stall
watchdog and the caller's signal.

Scopes nest in one order, entered and left in one frame: the supervisor's task group (on a backend
other than asyncio), then the call's cancel scope, then the transport's context (which may hold
task groups of its own across its yield), then the body iterator, closed in reverse. Exceptions are
caught inside the task group and re-raised outside it, so they are never wrapped in an exception
group.

On asyncio (CPython, Pyodide, workerd) the watchdog needs no task: it is supervised by timer
callbacks of the running loop (:meth:`~bindloop.wire.StreamWatchdog.supervise_on`), so a call keeps
no task group, task, event or timer scope alive across its reads, only one timer handle. Elsewhere
(trio) :meth:`~bindloop.wire.StreamWatchdog.supervise` runs as a task in a task group of the call.
Both make the same decisions at the same deadlines.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import anyio
from anyio.abc import TaskGroup

from .._eventloop import running_asyncio_loop
from ..clock import Clock
from ..completion import ErrorEvent, StreamEvent
from ..errors import RunCancelledError, RunTimeoutError
from ..signal import AbortSignal
from ._errors import ProviderHttpError, StreamStalledError
from ._secrets import Redactor, transport_redactor
from ._transport import Transport, TransportResponse
from ._types import Headers, HttpRequest
from ._watchdog import StreamBudgets, StreamWatchdog, create_stream_watchdog

__all__ = ("Call", "cancelled", "open_call")


def cancelled(reason: object, *, started: bool = True) -> Exception:
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


class Call:
    """What one call's context and its readers share: the watchdog, the scope the transport
    lives in, whether a wait on the provider is in flight, and the transport's
    :class:`~bindloop.wire._secrets.Redactor`, which every error made from the response or the
    transport's failure passes before it is raised."""

    __slots__ = ("_error", "_ours", "external", "redactor", "scope", "waiting", "watchdog")

    def __init__(self, watchdog: StreamWatchdog, external: AbortSignal | None,
                 redactor: Redactor | None = None) -> None:
        self.watchdog = watchdog
        self.redactor = redactor if redactor is not None else Redactor()
        self.external = external
        self.scope = anyio.CancelScope()
        self.waiting = False
        self._error: Exception | None = None
        self._ours = False  # whether _error was made here (and so may be given a cause)

    def scrub(self, event: StreamEvent) -> StreamEvent:
        """``event``, or for an :class:`~bindloop.completion.ErrorEvent` (an error the provider
        sent inside the body) the same event with its error redacted."""
        if isinstance(event, ErrorEvent) and isinstance(event.error, Exception):
            error = self.redactor.exception(event.error)
            if error is not event.error:
                return ErrorEvent(error=error)
        return event

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
                self._error = cancelled(self.external.reason)
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
        if watchdog.fired:  # fired while the consumer held the last events
            raise self.torn_down()
        watchdog.resume()
        self.waiting = True
        try:
            return await chunks.__anext__()
        except StopAsyncIteration:
            return None
        except Exception as exc:
            if (error := self.cut(self.redactor.exception(exc))) is exc:
                raise
            raise error  # chained by cut() when the error is its own
        finally:
            self.waiting = False
            watchdog.pause()


ClassifyError = Callable[[int, Headers, bytes], ProviderHttpError]


@asynccontextmanager
async def open_call(transport: Transport, request: HttpRequest, *, budgets: StreamBudgets,
                    clock: Clock, signal: AbortSignal | None, classify_error: ClassifyError,
                    max_error_body_bytes: int,
                    ) -> AsyncGenerator[tuple[Call, AsyncIterator[bytes]], None]:
    """Send ``request`` and yield the call and its body chunks once a success status arrived (an
    error status is read up to ``max_error_body_bytes``, redacted by the transport's
    :class:`~bindloop.wire._secrets.Redactor`, and raised as ``classify_error`` says). Every
    exception the transport raises passes the same redactor.

    The block runs inside the call's cancel scope under one watchdog supervisor: timer callbacks
    of the running loop on asyncio, a task beside the block elsewhere, none when every budget is
    disabled (then only ``signal`` can end a wait). Leaving it closes the body and the
    connection; a teardown by the watchdog or ``signal`` is raised as its reason.
    """
    if signal is not None and signal.aborted:
        raise cancelled(signal.reason, started=False)
    watchdog = create_stream_watchdog(budgets=budgets, external=signal, clock=clock)
    supervised = any(b is not None for b in (
        budgets.first_token_ms, budgets.inter_chunk_ms, budgets.total_ms))
    call = Call(watchdog, signal, transport_redactor(transport))
    remove = watchdog.signal.add_listener(call.on_abort)
    cancelled_exc = anyio.get_cancelled_exc_class()
    failure: BaseException | None = None
    # Plain ``async with``/``try`` blocks, no exit stacks: everything made here lives as long as
    # the call, across every read of the stream, and each object more per call is one more for
    # the cyclic collector to walk while thousands of calls are in flight.
    loop = running_asyncio_loop() if supervised else None
    group: AbstractAsyncContextManager[TaskGroup | None] = (
        anyio.create_task_group() if supervised and loop is None else _UNSUPERVISED)
    try:
        async with group as tg:
            if tg is not None:
                tg.start_soon(watchdog.supervise)
            try:
                with call.scope:
                    # Armed before the request goes out, not when headers arrive: a provider that
                    # accepts the connection and never answers would otherwise hang the turn with
                    # no budget running and the caller's signal unheard (a non-streamed reply's
                    # headers come only after the whole generation, so that wait is the call).
                    watchdog.open()
                    if loop is not None:
                        watchdog.supervise_on(loop)  # its timer armed now, for open()'s deadline
                    call.waiting = True  # until the transport's context is entered
                    try:
                        async with transport.open(request) as response:
                            call.waiting = False
                            watchdog.pause()  # the consumer's time from here on is not silence
                            chunks = response.aiter_bytes()
                            close_body = getattr(chunks, "aclose", None)
                            try:
                                if response.status >= 400:
                                    await _raise_for_status(call, response, chunks, classify_error,
                                                            max_error_body_bytes)
                                yield call, chunks
                            finally:
                                if close_body is not None:
                                    await close_body()
                    except Exception as exc:
                        if not call.waiting:
                            raise  # from the block or the transport's exit: handled below
                        call.waiting = False
                        if (error := call.cut(call.redactor.exception(exc))) is exc:
                            raise
                        raise error  # chained by cut()
                    finally:
                        call.waiting = False
                if call.scope.cancel_called:  # the scope absorbed its own cancellation
                    raise call.torn_down()
            except cancelled_exc:
                raise  # someone else's cancellation: the task group and scopes handle it
            except BaseException as exc:  # re-raised below, outside the task group
                failure = call.cut(call.redactor.exception(exc, foreign=False)) \
                    if isinstance(exc, Exception) else exc
            finally:
                watchdog.dispose()  # ends the supervisor
    finally:
        remove()
    if failure is not None:
        raise failure


class _Unsupervised:
    """The supervision context of a call with every budget disabled, or supervised by timer
    callbacks (on asyncio): no task group."""

    __slots__ = ()

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *_exc: object) -> None:
        return None


_UNSUPERVISED = _Unsupervised()


async def _raise_for_status(call: Call, response: TransportResponse,
                            chunks: AsyncIterator[bytes], classify_error: ClassifyError,
                            limit: int) -> None:
    body = bytearray()
    while len(body) < limit:
        if (chunk := await call.read(chunks)) is None:
            break
        body += chunk
    redactor = call.redactor
    error = classify_error(response.status, response.headers, redactor.body(bytes(body), limit))
    raise redactor.exception(error)  # also what the adapter decoded (a JSON \u escape)
