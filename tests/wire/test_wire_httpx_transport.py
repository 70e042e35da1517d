"""HttpxTransport and the scripted server, on asyncio and trio: compressed replies reach the decoder
decoded, a shared client's read timeout never overrides the watchdog's budgets, and stopping the
server while a reply is paused logs nothing."""

from __future__ import annotations

import gzip
import logging
import threading
import time
from collections.abc import Iterator

import anyio
import pytest

from bindloop.completion import TextEvent
from bindloop.contracts import ModelTurnResult, TurnUsage, UserMessage
from bindloop.wire import StreamBudgets
from bindloop.wire import (
    WIRE_NAMES,
    ModelAdapter,
    WireDecodeError,
    WireOptions,
    create_wire_adapter,
)

httpx = pytest.importorskip("httpx")
from bindloop.hosts.transports.httpx import HttpxTransport  # noqa: E402
from harness.fixtures.scripted_server import ScriptedProviderServer, ScriptedReply, turn_reply  # noqa: E402

pytestmark = pytest.mark.anyio

ANSWER = ModelTurnResult(text="2 + 3 = 5 ünïcode", usage=TurnUsage(input_tokens=35, output_tokens=6),
                         finish_reason="stop")


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def server(anyio_backend: str) -> Iterator[ScriptedProviderServer]:
    with ScriptedProviderServer() as srv:
        yield srv


def _model(transport: HttpxTransport, wire: str, *, stream: bool, **kw: object) -> ModelAdapter:
    return ModelAdapter(create_wire_adapter(wire), transport, WireOptions(model="m", stream=stream),
                        **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_gzip_reply_is_decoded(server: ScriptedProviderServer, wire: str,
                                     stream: bool) -> None:
    prefix = f"gzip-{wire}-{stream}"
    server.enqueue(prefix, turn_reply(wire, ANSWER, stream=stream, gzip=True))
    seen: list[str] = []
    # A sink consumes the events, so the call streams: the JSON body is read without one.
    sink = {"on_event": lambda e: seen.append(e.content) if isinstance(e, TextEvent) else None}
    model = _model(HttpxTransport(server.base_url(prefix)), wire, stream=stream,
                   **(sink if stream else {}))
    with anyio.fail_after(5):
        turn = await model.complete([UserMessage(content="x")])
    assert turn.text == ANSWER.text
    assert "".join(seen) == (ANSWER.text if stream else "")
    # httpx asked for it and the server really compressed it.
    assert "gzip" in dict(server.requests[-1].headers)["accept-encoding"]


@pytest.mark.parametrize("stream", [True, False], ids=["sse", "json"])
def test_gzip_reply_is_really_compressed(stream: bool) -> None:
    reply = turn_reply("openai_chat", ANSWER, stream=stream, gzip=True)
    assert ("content-encoding", "gzip") in reply.headers
    with ScriptedProviderServer() as srv:
        srv.enqueue("raw", reply)
        with httpx.Client() as client:
            with client.stream("POST", srv.base_url("raw") + "/chat/completions",
                               content=b"{}") as resp:
                raw = b"".join(resp.iter_raw())
    assert resp.headers["content-encoding"] == "gzip"
    assert raw[:2] == b"\x1f\x8b"
    assert gzip.decompress(raw) == b"".join(
        turn_reply("openai_chat", ANSWER, stream=stream).chunks)


async def test_corrupt_gzip_body_is_a_wire_decode_error(server: ScriptedProviderServer) -> None:
    server.enqueue("gzip-corrupt", ScriptedReply(
        headers=(("content-type", "application/json"), ("content-encoding", "gzip")),
        chunks=(b"\x1f\x8b this is not gzip",), streamed=False))
    model = _model(HttpxTransport(server.base_url("gzip-corrupt")), "openai_chat", stream=False)
    with pytest.raises(WireDecodeError, match="gzip"):
        await model.complete([UserMessage(content="x")])


async def test_shared_client_read_timeout_does_not_override_the_budgets(
        server: ScriptedProviderServer) -> None:
    # The client's own read timeout (0.2 s) is shorter than the provider's pause before each chunk
    # (0.5 s); the watchdog's budgets (seconds) allow it. The watchdog owns the budgets.
    server.enqueue("slow-client", turn_reply("openai_chat", ANSWER, stream=True, delay_s=0.5))
    async with httpx.AsyncClient(timeout=0.2) as client:
        model = _model(HttpxTransport(server.base_url("slow-client"), client=client),
                       "openai_chat", stream=True,
                       budgets=StreamBudgets(first_token_ms=3000, inter_chunk_ms=3000,
                                             total_ms=20_000))
        with anyio.fail_after(15):
            turn = await model.complete([UserMessage(content="x")])
    assert turn.text == ANSWER.text


async def test_shared_client_connect_timeout_still_applies(
        server: ScriptedProviderServer) -> None:
    # connect_timeout bounds connecting, whatever the shared client says.
    async with httpx.AsyncClient(timeout=0.2) as client:
        transport = HttpxTransport(server.base_url("x"), client=client, connect_timeout=7.5)
        seen: list[object] = []

        async def capture(request: object) -> None:
            seen.append(request.extensions["timeout"])  # type: ignore[attr-defined]

        client.event_hooks["request"] = [capture]
        server.enqueue("x", turn_reply("openai_chat", ANSWER, stream=True))
        await _model(transport, "openai_chat", stream=True).complete([UserMessage(content="x")])
    assert seen == [{"connect": 7.5, "read": None, "write": None, "pool": None}]


def test_stop_while_a_reply_is_paused_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="asyncio")
    srv = ScriptedProviderServer().start()
    srv.enqueue("p", ScriptedReply(chunks=(b"a", b"b"), delay_s=30.0))
    failures: list[BaseException] = []

    def request() -> None:
        try:
            httpx.get(srv.base_url("p") + "/x", timeout=60)
        except httpx.HTTPError as exc:  # the server went away mid-reply, as intended
            failures.append(exc)

    client = threading.Thread(target=request)
    client.start()
    deadline = time.monotonic() + 5
    while not srv.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # the handler is now sleeping in delay_s
    srv.stop()
    client.join(timeout=10)
    assert len(failures) == 1
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def _two_calls(model: ModelAdapter, server: ScriptedProviderServer) -> object:
    async def run() -> list[str]:
        texts = []
        for _ in range(2):
            server.enqueue("loops", turn_reply("openai_chat", ANSWER, stream=True))
            with anyio.fail_after(5):
                texts.append((await model.complete([UserMessage(content="x")])).text)
        return texts
    return run


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_a_model_built_once_serves_event_loop_after_event_loop() -> None:
    # The documented shape: the model is built once, outside any loop, and several anyio.run calls
    # use it over keep-alive connections. Each loop gets its own pool; within one loop the
    # connection is reused.
    with ScriptedProviderServer(keep_alive=True) as srv:
        model = _model(HttpxTransport(srv.base_url("loops")), "openai_chat", stream=True)
        backends = ["asyncio", "asyncio", "trio", "asyncio", "trio", "trio"]
        for backend in backends:
            assert anyio.run(_two_calls(model, srv), backend=backend) == [ANSWER.text] * 2
        assert len(srv.requests) == 2 * len(backends)
        assert srv.connections == len(backends)


@pytest.mark.filterwarnings("ignore::ResourceWarning")
def test_a_passed_client_used_from_a_second_loop_is_refused_by_name() -> None:
    from bindloop.errors import UsageError

    with ScriptedProviderServer(keep_alive=True) as srv:
        client = httpx.AsyncClient()
        model = _model(HttpxTransport(srv.base_url("loops"), client=client), "openai_chat",
                       stream=True)
        assert anyio.run(_two_calls(model, srv)) == [ANSWER.text] * 2
        with pytest.raises(UsageError, match="another event loop.*omit client="):
            anyio.run(_two_calls(model, srv))


def test_aclose_closes_the_owned_client_of_the_running_loop() -> None:
    with ScriptedProviderServer(keep_alive=True) as srv:
        transport = HttpxTransport(srv.base_url("loops"))
        model = _model(transport, "openai_chat", stream=True)

        async def run() -> object:
            await _two_calls(model, srv)()
            client = transport._client
            await transport.aclose()
            return client

        client = anyio.run(run)
        assert client.is_closed
        # Closed, the transport still serves a later call with a fresh client.
        assert anyio.run(_two_calls(model, srv)) == [ANSWER.text] * 2


def test_log_records_name_the_request_and_never_a_credential(
        caplog: pytest.LogCaptureFixture) -> None:
    key = "sk-live-0123456789abcdef"
    with ScriptedProviderServer(keep_alive=True) as srv:
        model = ModelAdapter(create_wire_adapter("openai_chat"),
                             HttpxTransport(srv.base_url("logs") + f"?key={key}",
                                            headers=[("authorization", f"Bearer {key}")]),
                             WireOptions(model="m", stream=True), retry=None)
        srv.enqueue("logs", turn_reply("openai_chat", ANSWER, stream=True),
                    turn_reply("openai_chat", ANSWER, stream=True, drop_after=1))

        async def run() -> None:
            await model.complete([UserMessage(content="x")])
            with pytest.raises(Exception):
                await model.complete([UserMessage(content="x")])

        with caplog.at_level(logging.DEBUG, logger="bindloop.hosts.transports.httpx"):
            anyio.run(run)
    records = [r for r in caplog.records if r.name == "bindloop.hosts.transports.httpx"]
    text = "\n".join(r.getMessage() for r in records)
    assert key not in text and "0123456789abcdef" not in text
    assert [r.levelname for r in records] == ["DEBUG", "DEBUG", "WARNING"]
    assert "POST http://127.0.0.1" in text and "/logs/chat/completions -> 200 in" in text
    assert "failed: TransportError: the connection failed mid-response" in text
