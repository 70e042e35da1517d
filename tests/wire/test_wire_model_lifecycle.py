"""ModelAdapter's call lifecycle with in-memory transports, on asyncio and trio: the transport's
context is entered and left in one scope (a transport may hold a task group across its yield),
closing a stream closes the connection at once, the body iterator is closed before the transport,
the consumer's time is not the provider's silence, bytes of an event still arriving are progress,
the caller's abort reason survives, and a failing supervisor never leaks an exception group."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing, asynccontextmanager

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.completion import StreamEvent, TextEvent, TurnCollector
from bindloop.model import ModelRequest
from bindloop.wire import StreamStalledError
from bindloop.contracts import ModelTurnResult, TurnUsage, UserMessage
from bindloop.errors import RunCancelledError, RunTimeoutError
from harness.fixtures.provider_replies import render_body, render_sse
from bindloop.run import create_run_deadline, watch_deadline
from bindloop.signal import AbortController, AbortSignal
from bindloop.wire import StreamBudgets
from bindloop.wire import (
    SseDecoder,
    HttpRequest,
    ModelAdapter,
    TransportError,
    WireDecodeError,
    WireOptions,
    create_wire_adapter,
)

pytestmark = pytest.mark.anyio

ANSWER = ModelTurnResult(text="2 + 3 = 5", usage=TurnUsage(input_tokens=35, output_tokens=6),
                         finish_reason="stop")
MESSAGES = [UserMessage(content="x")]
SSE = render_sse("openai_chat", ANSWER)
# Minutes: only what a test arranges can end a call.
GENEROUS = StreamBudgets()


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def loop_ms() -> float:
    """The event loop's clock in ms: the watchdog's clock and its supervisor's sleeps agree."""
    return anyio.current_time() * 1000.0


class _Body:
    """A response whose body iterator logs when it is closed."""

    def __init__(self, chunks: Sequence[bytes], log: list[str], *, delay: float,
                 stall_after: int | None, status: int = 200) -> None:
        self.status = status
        self.headers: tuple[tuple[str, str], ...] = ()
        self._chunks = chunks
        self._log = log
        self._delay = delay
        self._stall_after = stall_after

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        try:
            for n, chunk in enumerate(self._chunks):
                if self._stall_after is not None and n >= self._stall_after:
                    await anyio.sleep_forever()
                if self._delay:
                    await anyio.sleep(self._delay)
                yield chunk
        finally:
            self._log.append("body-iter-closed")


class MemoryTransport:
    """Replies with ``chunks``; ``log`` records open, body-iter-closed and closed, in order."""

    def __init__(self, chunks: Sequence[bytes], *, delay: float = 0.0,
                 stall_after: int | None = None, header_delay: float | None = None,
                 status: int = 200, on_open: Callable[[], None] | None = None) -> None:
        self.chunks = chunks
        self.delay = delay
        self.stall_after = stall_after
        self.header_delay = header_delay
        self.status = status
        self.on_open = on_open
        self.log: list[str] = []

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_Body]:
        self.log.append("open")
        try:
            if self.on_open is not None:
                self.on_open()
            if self.header_delay is not None:
                await anyio.sleep(self.header_delay)
            yield _Body(self.chunks, self.log, delay=self.delay, stall_after=self.stall_after,
                        status=self.status)
        finally:
            self.log.append("closed")


class _PumpBody:
    status = 200
    headers: tuple[tuple[str, str], ...] = ()

    def __init__(self, receive: anyio.abc.ObjectReceiveStream[bytes]) -> None:
        self._receive = receive

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        async for chunk in self._receive:
            yield chunk


class PumpTransport:
    """A transport whose ``open()`` holds a task group across its ``yield``: a background task pumps
    the body into a memory stream (the natural shape of a thread- or websocket-backed client).
    ``stall_after`` chunks the pump goes silent; ``hold_headers`` it never lets ``open()`` yield."""

    def __init__(self, chunks: Sequence[bytes], *, stall_after: int | None = None,
                 hold_headers: bool = False) -> None:
        self.chunks = chunks
        self.stall_after = stall_after
        self.hold_headers = hold_headers
        self.log: list[str] = []

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_PumpBody]:
        send, receive = anyio.create_memory_object_stream[bytes](100)

        async def pump() -> None:
            async with send:
                for n, chunk in enumerate(self.chunks):
                    if self.stall_after is not None and n >= self.stall_after:
                        await anyio.sleep_forever()
                    await anyio.sleep(0.001)
                    await send.send(chunk)
            self.log.append("pumped")

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(pump)
                if self.hold_headers:
                    await anyio.sleep_forever()
                with receive:
                    yield _PumpBody(receive)
                tg.cancel_scope.cancel()
        finally:
            self.log.append("closed")


def model(transport: object, *, stream: bool = True, **kw: object) -> ModelAdapter:
    kw.setdefault("retry", None)  # one call: these tests study a single attempt's lifecycle
    return ModelAdapter(create_wire_adapter("openai_chat"), transport,  # type: ignore[arg-type]
                        WireOptions(model="m", stream=stream), **kw)  # type: ignore[arg-type]


async def turn_via(m: ModelAdapter, via: str, *, signal: AbortSignal | None = None,
                   pause_s: float = 0.0) -> ModelTurnResult:
    """One turn through ``complete()``, ``open_stream()`` or ``stream()``; the two streaming
    consumers spend ``pause_s`` on every event (a UI awaiting backpressure)."""
    if via == "complete":
        return await m.complete(MESSAGES, ModelRequest(signal=signal))
    collector = TurnCollector()
    if via == "open_stream":
        async with m.open_stream(MESSAGES, signal=signal) as events:
            async for event in events:
                collector.observe(event)
                await anyio.sleep(pause_s)
    else:
        async with aclosing(m.stream(MESSAGES, ModelRequest(signal=signal))) as gen:
            async for event in gen:
                collector.observe(event)
                await anyio.sleep(pause_s)
    return collector.result()


VIAS = ["complete", "open_stream", "stream"]


# -- M1: a transport that holds a task group across its yield ---------------------------------------

@pytest.mark.parametrize("via", VIAS)
async def test_transport_holding_a_task_group_across_its_yield(via: str) -> None:
    transport = PumpTransport(SSE)
    with anyio.fail_after(5):
        turn = await turn_via(model(transport), via)
    assert turn.text == "2 + 3 = 5"
    assert transport.log == ["pumped", "closed"]


@pytest.mark.parametrize("via", VIAS)
async def test_task_group_transport_stalled_mid_body_is_a_stall(via: str) -> None:
    transport = PumpTransport(SSE, stall_after=2)
    budgets = StreamBudgets(first_token_ms=2000, inter_chunk_ms=100, total_ms=5000)
    with anyio.fail_after(5):
        with pytest.raises(StreamStalledError) as info:
            await turn_via(model(transport, budgets=budgets), via)
    assert info.value.stall.kind == "inter_chunk"
    assert transport.log == ["closed"]


@pytest.mark.parametrize("via", VIAS)
async def test_task_group_transport_stalled_before_headers_is_a_stall(via: str) -> None:
    transport = PumpTransport(SSE, hold_headers=True)
    budgets = StreamBudgets(first_token_ms=100, inter_chunk_ms=100, total_ms=5000)
    with anyio.fail_after(5):
        with pytest.raises(StreamStalledError) as info:
            await turn_via(model(transport, budgets=budgets), via)
    assert info.value.stall.kind == "first_token"
    assert transport.log[-1] == "closed"


@pytest.mark.parametrize("via", VIAS)
@pytest.mark.parametrize("where", ["headers", "body"])
async def test_outer_cancel_scope_closes_the_call(via: str, where: str) -> None:
    transport = MemoryTransport(SSE, header_delay=100 if where == "headers" else None,
                                stall_after=None if where == "headers" else 2)
    controller = AbortController()
    with anyio.fail_after(5):
        with anyio.move_on_after(0.1) as scope:
            await turn_via(model(transport), via, signal=controller.signal)
    assert scope.cancelled_caught
    assert transport.log[-1] == "closed"
    assert transport.log == (["open", "closed"] if where == "headers"
                             else ["open", "body-iter-closed", "closed"])
    # The call detached from the caller's long-lived signal.
    assert not controller.signal._listeners


# -- M3 / N1: closing ---------------------------------------------------------------------------------

async def test_closing_the_stream_closes_the_connection_at_once() -> None:
    transport = MemoryTransport(SSE, stall_after=3)
    gen = model(transport).stream(MESSAGES)
    async for event in gen:
        if isinstance(event, TextEvent) and event.content:
            break
    assert transport.log == ["open"]
    await gen.aclose()
    # No checkpoint, no polling: aclose() itself closed the body and then the connection.
    assert transport.log == ["open", "body-iter-closed", "closed"]


async def test_leaving_open_stream_early_closes_the_connection_at_once() -> None:
    transport = MemoryTransport(SSE, stall_after=3)
    async with model(transport).open_stream(MESSAGES) as events:
        async for event in events:
            if isinstance(event, TextEvent) and event.content:
                break
        assert transport.log == ["open"]
    assert transport.log == ["open", "body-iter-closed", "closed"]


@pytest.mark.parametrize("via", VIAS)
async def test_body_iterator_is_closed_before_the_transport_after_a_decode_error(
        via: str) -> None:
    transport = MemoryTransport([SSE[0], b"data: {not json}\n\n", *SSE[1:]])
    with pytest.raises(WireDecodeError):
        await turn_via(model(transport), via)
    assert transport.log == ["open", "body-iter-closed", "closed"]


async def test_body_iterator_is_closed_when_the_sink_raises() -> None:
    transport = MemoryTransport(SSE)

    def sink(event: StreamEvent) -> None:
        raise ValueError("the UI went away")

    with pytest.raises(ValueError, match="UI went away"):
        await model(transport, on_event=sink).complete(MESSAGES)
    assert transport.log == ["open", "body-iter-closed", "closed"]


async def test_error_status_raises_on_entering_open_stream_and_closes() -> None:
    body = b'{"error":{"message":"slow down","type":"tokens","code":"rate_limit_exceeded"}}'
    transport = MemoryTransport([body], status=429)
    from bindloop.wire import ProviderHttpError

    with pytest.raises(ProviderHttpError) as info:
        async with model(transport).open_stream(MESSAGES):
            raise AssertionError("the body must not run for an error status")
    assert info.value.category == "rate_limited"
    assert transport.log == ["open", "body-iter-closed", "closed"]


async def test_non_streamed_body_through_complete() -> None:
    transport = MemoryTransport([render_body("openai_chat", ANSWER)])
    turn = await model(transport, stream=False).complete(MESSAGES)
    assert turn == ANSWER
    assert transport.log == ["open", "body-iter-closed", "closed"]


# -- S1/S2: the consumer's time is not the provider's silence -----------------------------------------

@pytest.mark.parametrize("via", ["open_stream", "stream"])
async def test_slow_consumer_is_not_a_stall(via: str) -> None:
    # The provider sends every chunk within a millisecond; the consumer spends 150 ms on each
    # event, longer than the 100 ms inter-chunk budget. Only the provider's silence counts.
    budgets = StreamBudgets(first_token_ms=1000, inter_chunk_ms=100, total_ms=20_000)
    transport = MemoryTransport(SSE, delay=0.001)
    with anyio.fail_after(10):
        turn = await turn_via(model(transport, budgets=budgets, clock=loop_ms), via,
                              pause_s=0.15)
    assert turn.text == "2 + 3 = 5"
    assert transport.log == ["open", "body-iter-closed", "closed"]


@pytest.mark.parametrize("via", ["open_stream", "stream"])
async def test_total_budget_keeps_counting_while_the_consumer_holds_an_event(via: str) -> None:
    budgets = StreamBudgets(first_token_ms=1000, inter_chunk_ms=100, total_ms=200)
    transport = MemoryTransport(SSE)
    seen = 0
    with anyio.fail_after(5):
        with pytest.raises(StreamStalledError) as info:
            m = model(transport, budgets=budgets, clock=loop_ms)
            if via == "open_stream":
                async with m.open_stream(MESSAGES) as events:
                    async for _ in events:
                        seen += 1
                        await anyio.sleep(0.3)
            else:
                async with aclosing(m.stream(MESSAGES)) as gen:
                    async for _ in gen:
                        seen += 1
                        await anyio.sleep(0.3)
    assert info.value.stall.kind == "total"
    # The budget ran out while the consumer held the first event: the consumer's own await was
    # not cancelled (it slept its 300 ms), and the next step raised.
    assert seen == 1
    assert transport.log == ["open", "body-iter-closed", "closed"]


async def test_stalled_provider_inside_open_stream_raises_on_leaving_the_block() -> None:
    # A stall cuts the read the consumer waits on; the block unwinds like a cancel scope and the
    # stall is raised where the block ends.
    budgets = StreamBudgets(first_token_ms=2000, inter_chunk_ms=100, total_ms=5000)
    transport = MemoryTransport(SSE, stall_after=2)
    reached_end_of_block = False
    with anyio.fail_after(5):
        with pytest.raises(StreamStalledError) as info:
            async with model(transport, budgets=budgets).open_stream(MESSAGES) as events:
                async for _ in events:
                    pass
                reached_end_of_block = True
    assert info.value.stall.kind == "inter_chunk"
    assert not reached_end_of_block
    assert transport.log == ["open", "body-iter-closed", "closed"]


# -- N3: bytes of an event still arriving are progress; keep-alives are not ---------------------------

def _big_event_in_pieces() -> list[bytes]:
    big = ModelTurnResult(text="A" * 20 + "B" * 20_000, usage=ANSWER.usage, finish_reason="stop")
    chunks = render_sse("openai_chat", big)
    # chunks[2] is the second text delta (the answer already flows): 10 KB in 11 reads.
    pieces = [chunks[2][i:i + 1000] for i in range(0, len(chunks[2]), 1000)]
    assert len(pieces) == 11
    return [*chunks[:2], *pieces, *chunks[3:]]


@pytest.mark.parametrize("via", VIAS)
async def test_a_large_event_arriving_slowly_is_progress(via: str) -> None:
    budgets = StreamBudgets(first_token_ms=2000, inter_chunk_ms=200, total_ms=20_000)
    transport = MemoryTransport(_big_event_in_pieces(), delay=0.05)
    with anyio.fail_after(10):
        turn = await turn_via(model(transport, budgets=budgets, clock=loop_ms), via)
    assert turn.text == "A" * 20 + "B" * 20_000


async def test_keep_alive_comments_are_not_progress() -> None:
    budgets = StreamBudgets(first_token_ms=2000, inter_chunk_ms=200, total_ms=20_000)
    pings = [b": keep-alive\n\n"] * 11
    transport = MemoryTransport([*SSE[:2], *pings, *SSE[2:]], delay=0.05)
    with anyio.fail_after(10):
        with pytest.raises(StreamStalledError) as info:
            await model(transport, budgets=budgets, clock=loop_ms).complete(MESSAGES)
    assert info.value.stall.kind == "inter_chunk"


async def test_a_keep_alive_split_across_reads_is_not_progress() -> None:
    budgets = StreamBudgets(first_token_ms=2000, inter_chunk_ms=200, total_ms=20_000)
    pings = [b": keep-", b"alive\r", b"\n\r\n"] * 4
    transport = MemoryTransport([*SSE[:2], *pings, *SSE[2:]], delay=0.05)
    with anyio.fail_after(10):
        with pytest.raises(StreamStalledError):
            await model(transport, budgets=budgets, clock=loop_ms).complete(MESSAGES)


# -- S3: the caller's abort reason survives ---------------------------------------------------------

@pytest.mark.parametrize("via", VIAS)
async def test_run_deadline_reason_is_raised_as_is(via: str) -> None:
    deadline = create_run_deadline(timeout_ms=100)
    transport = MemoryTransport(SSE, header_delay=100)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(watch_deadline, deadline)
            with pytest.raises(RunTimeoutError) as info:
                await turn_via(model(transport), via, signal=deadline.signal)
            tg.cancel_scope.cancel()
    assert info.value is deadline.signal.reason
    assert transport.log == ["open", "closed"]


@pytest.mark.parametrize("via", VIAS)
async def test_caller_reason_mid_body_is_named_and_chained(via: str) -> None:
    controller = AbortController()
    reason = ConnectionResetError("the user's socket closed")
    transport = MemoryTransport(SSE, stall_after=2)

    async def abort_soon() -> None:
        await anyio.sleep(0.05)
        controller.abort(reason)

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(abort_soon)
            with pytest.raises(RunCancelledError) as info:
                await turn_via(model(transport), via, signal=controller.signal)
    assert info.value.__cause__ is reason
    assert "the user's socket closed" in str(info.value)
    assert transport.log == ["open", "body-iter-closed", "closed"]


async def test_plain_reason_is_mentioned_in_the_cancellation() -> None:
    controller = AbortController()
    controller.abort("user pressed stop")
    with pytest.raises(RunCancelledError, match="user pressed stop"):
        await model(MemoryTransport(SSE)).complete(MESSAGES, ModelRequest(signal=controller.signal))


async def test_already_fired_deadline_raises_its_own_error_before_sending() -> None:
    controller = AbortController()
    timeout = RunTimeoutError("run timed out", label="turn")
    controller.abort(timeout)
    transport = MemoryTransport(SSE)
    with pytest.raises(RunTimeoutError) as info:
        async with model(transport).open_stream(MESSAGES, signal=controller.signal):
            raise AssertionError("unreachable")
    assert info.value is timeout
    assert transport.log == []


# -- N2: a supervisor that fails never leaks as an exception group -----------------------------------

class BreakingClock:
    """Reads the loop's clock until ``broken``; then every reading raises."""

    def __init__(self) -> None:
        self.broken = False
        self.error = OSError("the clock source went away")

    def __call__(self) -> float:
        if self.broken:
            raise self.error
        return loop_ms()


@pytest.mark.parametrize("via", VIAS)
async def test_supervisor_failure_is_raised_unwrapped(via: str) -> None:
    clock = BreakingClock()

    def break_clock() -> None:
        clock.broken = True  # while headers are awaited, only the supervisor reads the clock

    # The supervisor reads the clock when its timer (armed before the request went out) runs out.
    budgets = StreamBudgets(first_token_ms=200, inter_chunk_ms=None, total_ms=None)
    transport = MemoryTransport(SSE, header_delay=100, on_open=break_clock)
    with anyio.fail_after(5):
        with pytest.raises(OSError) as info:
            await turn_via(model(transport, clock=clock, budgets=budgets), via)
    assert info.value is clock.error
    assert transport.log == ["open", "closed"]


class _CancelAsTransportErrorBody(_Body):
    """A body whose read turns a cancellation into the transport's own error (some clients do)."""

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in super().aiter_bytes():
                yield chunk
        except anyio.get_cancelled_exc_class():
            raise TransportError("the read was interrupted") from None


async def test_a_cut_that_the_transport_reports_as_its_own_error_is_the_stall() -> None:
    transport = MemoryTransport(SSE, stall_after=2)
    original_open = transport.open

    @asynccontextmanager
    async def open_converting(request: HttpRequest) -> AsyncIterator[_Body]:
        async with original_open(request) as body:
            body.__class__ = _CancelAsTransportErrorBody
            yield body

    transport.open = open_converting  # type: ignore[method-assign]
    budgets = StreamBudgets(first_token_ms=2000, inter_chunk_ms=100, total_ms=5000)
    with anyio.fail_after(5):
        with pytest.raises(StreamStalledError) as info:
            await model(transport, budgets=budgets).complete(MESSAGES)
    assert info.value.stall.kind == "inter_chunk"
    assert isinstance(info.value.__cause__, TransportError)


# -- the SSE progress signal (SseDecoder.grew, from the one parse), under any chunking -------------

def _grew(decoder: SseDecoder, chunk: bytes) -> bool:
    decoder.feed(chunk)
    return decoder.grew


@settings(max_examples=150, deadline=None)
@given(pings=st.lists(st.sampled_from([b": ping\n\n", b":\r\n\r\n", b": keep-alive\r\r", b"\n"]),
                      min_size=1, max_size=8),
       cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=10))
def test_keep_alives_never_count_as_growth_however_split(pings: list[bytes],
                                                         cuts: list[int]) -> None:
    data = b"".join(pings)
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    decoder = SseDecoder()
    assert not any(_grew(decoder, data[a:b]) for a, b in zip(points, points[1:]))


@settings(max_examples=150, deadline=None)
@given(payload=st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)),
                      min_size=1, max_size=60),
       eol=st.sampled_from([b"\n", b"\r\n", b"\r"]),
       cuts=st.lists(st.integers(min_value=1, max_value=200), max_size=10))
def test_bytes_of_an_unfinished_event_count_as_growth(payload: str, eol: bytes,
                                                      cuts: list[int]) -> None:
    # A whole ping event (decodes to nothing: not growth), then a data event split anywhere
    # before its blank line: every piece that adds field bytes while the event is open grows it.
    head = b"event: ping" + eol + b"data: {}" + eol + eol + b": comment" + eol
    event = b"data: " + payload.encode() + eol + b"data: more"
    decoder = SseDecoder()
    assert not _grew(decoder, head)
    points = sorted({c % len(event) for c in cuts} | {0, len(event)})
    pieces = [event[a:b] for a, b in zip(points, points[1:])]
    for piece in pieces:
        field_bytes = piece.strip(b"\r\n") != b""
        assert _grew(decoder, piece) is field_bytes
    assert not _grew(decoder, eol + eol)  # the blank line ends it: complete, not growing
