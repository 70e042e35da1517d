"""A canary API key configured the way a host configures a real one never shows up in any output
of a run: reprs, exception messages and their chains, stream events, the route log, loop results,
transcripts, checkpoints and log records. Runs over real HTTP on loopback, on every wire, for a
success after a provider 401, a transport failure and a crash in the host's own sink."""

from __future__ import annotations

import logging
import socket
import traceback
from collections.abc import Iterator

import msgspec
import pytest

from bindloop.completion import StreamEvent
from bindloop.contracts import (
    ModelTurnResult,
    ToolCall,
    ToolDefinition,
    ToolResult,
    TurnUsage,
    UserMessage,
    encode_messages,
)
from bindloop.loop import ToolLoopParams, ToolLoopState, run_tool_loop
from bindloop.routing import (
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteResult,
    RouteStage,
    canonical_model_id,
    provider_id,
)
from bindloop.checkpoints import create_loop_checkpoint, serialize_loop_checkpoint
from bindloop.wire import (
    WIRE_NAMES,
    HttpRequest,
    ModelAdapter,
    RoutedModel,
    WireOptions,
    create_wire_adapter,
)
from bindloop.wire._types import redact_headers

httpx_transport = pytest.importorskip("bindloop.hosts.transports.httpx")
from harness.fixtures.scripted_server import (  # noqa: E402
    ScriptedProviderServer,
    error_reply,
    turn_reply,
)
from bindloop.loop import ToolRunner

pytestmark = pytest.mark.anyio

CANARY = "sk-canary-0d9f3be1c7a54e22"
CALL = ModelTurnResult(text="adding", tool_calls=(
    ToolCall(id="call_1", name="add", arguments='{"a":2,"b":3}'),),
    usage=TurnUsage(input_tokens=9, output_tokens=4), finish_reason="tool_calls")
ANSWER = ModelTurnResult(text="5", usage=TurnUsage(input_tokens=12, output_tokens=1),
                         finish_reason="stop")
TOOLS = [ToolDefinition(name="add", parameters={"type": "object", "properties": {
    "a": {"type": "integer"}, "b": {"type": "integer"}}})]
# What OpenAI answers a bad key with (tests/fixtures: the recorded 401 masks the key it echoes).
UNAUTHORIZED = (b'{"error":{"message":"Incorrect API key provided: sk-cana***********4e22.",'
                b'"type":"invalid_request_error","param":null,"code":"invalid_api_key"}}')


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedProviderServer]:
    with ScriptedProviderServer() as srv:
        yield srv


class _Outputs:
    """Everything a run put out, as text."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def add(self, value: object) -> None:
        self.texts.append(repr(value))
        self.texts.append(str(value))
        if isinstance(value, BaseException):
            self.texts.append("".join(traceback.format_exception(value)))
            self.texts.extend(repr(v) for v in vars(value).values())
        elif isinstance(value, msgspec.Struct):
            self.texts.append(msgspec.json.encode(value, enc_hook=repr).decode())

    def check(self) -> None:
        assert self.texts
        leaked = [t for t in self.texts if CANARY in t]
        assert not leaked, leaked[0][:500]


def _plan(*providers: str) -> RoutePlan:
    model_id = canonical_model_id("acme/model-1")
    return RoutePlan(stages=(RouteStage(
        role="primary", model=model_id,
        policy=OrderedPolicy(providers=tuple(provider_id(p) for p in providers)),
        candidates=tuple(RouteCandidate(provider_id=provider_id(p), canonical_model_id=model_id,
                                        provider_invocation_model=f"{p}-model",
                                        credential_source="platform")
                         for p in providers)),))


def _closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # nothing listens there once the socket is closed


async def _run(routed: RoutedModel, out: _Outputs) -> None:
    state = ToolLoopState(messages=[UserMessage(content="2 + 3?")])

    def add(call: ToolCall) -> ToolResult:
        args = msgspec.json.decode(call.arguments)
        return ToolResult(content=str(args["a"] + args["b"]))

    try:
        result = await run_tool_loop(ToolLoopParams(
            state=state,
            model=routed,
            max_iterations=3,
            runner=ToolRunner(run_tool_call=add, build_tools=lambda: TOOLS),
        ))
        out.add(result)
        out.add(result.stats)
    except Exception as exc:  # a failed run's error is an output too
        out.add(exc)
    out.texts.append(encode_messages(state.messages).decode())
    out.add(state)
    checkpoint = create_loop_checkpoint(execution_id="exec-1", messages=state.messages,
                                        max_iterations=3)
    out.texts.append(serialize_loop_checkpoint(checkpoint).decode())


@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_a_canary_key_never_leaks_from_any_output(server: ScriptedProviderServer,
                                                        wire: str,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # httpx, httpcore and anything else that logs
    out = _Outputs()
    adapter = create_wire_adapter(wire)
    events: list[StreamEvent] = []

    def model(base_url: str, *, sink: object = None) -> ModelAdapter:
        transport = httpx_transport.HttpxTransport(base_url,
                                                   headers=adapter.auth_headers(CANARY))
        out.add(transport)
        m = ModelAdapter(adapter, transport, WireOptions(model="m", stream=True),
                         on_event=sink or events.append)  # type: ignore[arg-type]
        out.add(m)
        return m

    routes: list[RouteResult[ModelTurnResult]] = []
    seen = len(server.requests)

    # A provider 401, then the fallback provider answers: a successful two-turn tool run.
    server.enqueue(f"{wire}-bad", error_reply(401, UNAUTHORIZED), error_reply(401, UNAUTHORIZED))
    server.enqueue(f"{wire}-good", turn_reply(wire, CALL, stream=True),
                   turn_reply(wire, ANSWER, stream=True))
    await _run(RoutedModel(plan=_plan("bad", "good"), on_route=routes.append, models={
        "bad": model(server.base_url(f"{wire}-bad")),
        "good": model(server.base_url(f"{wire}-good"))}), out)
    assert routes and routes[0].ok and len(routes[0].attempts) == 2  # the 401 really happened

    # A transport failure: nothing listens on the port.
    await _run(RoutedModel(plan=_plan("down"), on_route=routes.append,
                           models={"down": model(_closed_port_url())}), out)

    # A crash: the host's own event sink raises mid-stream.
    def crash(event: StreamEvent) -> None:
        raise RuntimeError(f"sink broke on {event!r}")

    server.enqueue(f"{wire}-crash", turn_reply(wire, ANSWER, stream=True))
    await _run(RoutedModel(plan=_plan("crash"), on_route=routes.append,
                           models={"crash": model(server.base_url(f"{wire}-crash"),
                                                  sink=crash)}), out)

    for route in routes:
        out.add(route)
        for attempt in route.attempts:
            out.add(attempt)
    for event in events:
        out.add(event)
    for record in caplog.records:
        out.texts.append(record.getMessage())
        out.texts.append(repr(record.args))
    out.texts.append(caplog.text)

    # Positive control: the key was configured and really sent to the provider.
    sent = server.requests[seen:]
    assert any(CANARY in value for r in sent for _, value in r.headers)
    assert len(events) > 3 and len(routes) == 4  # two turns, then one failed turn each
    out.check()


def test_http_request_repr_and_errors_redact_credential_headers() -> None:
    request = HttpRequest(method="POST", path="/v1/messages", body=b'{"model":"m"}', headers=(
        ("content-type", "application/json"), ("authorization", f"Bearer {CANARY}"),
        ("x-api-key", CANARY), ("x-goog-api-key", CANARY), ("X-Custom-Token", CANARY)))
    for text in (repr(request), str(request), f"{request!r}", repr([request]),
                 repr(request.__rich_repr__())):
        assert CANARY not in text
        assert "content-type" in text and "application/json" in text and "/v1/messages" in text
    assert redact_headers({"Authorization": "x", "accept": "y"}) == (
        ("Authorization", "<redacted>"), ("accept", "y"))
    # The value itself is untouched: the transport still sends it.
    assert dict(request.headers)["x-api-key"] == CANARY
