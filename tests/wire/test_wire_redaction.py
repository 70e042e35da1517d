"""The one redaction rule (``bindloop.wire._secrets``): a credential the request carried never
reaches an error message, a repr, a traceback, the route log or a stream event, whatever form the
provider or a proxy echoes it in. Real HTTP on loopback for all four wires (401/400 bodies echoing
the key, an in-stream error echoing it, a server that hangs up on a URL carrying ``?key=``), and a
Hypothesis property over any key text and any body embedding it."""

from __future__ import annotations

import json
import socket
import threading
import traceback
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from urllib.parse import quote, quote_plus

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from bindloop.completion import ErrorEvent, StreamEvent
from bindloop.contracts import Message, ModelTurnResult, UserMessage
from bindloop.routing import (
    OrderedPolicy,
    RouteCandidate,
    RoutePlan,
    RouteResult,
    RouteStage,
    canonical_model_id,
    provider_id,
)
from bindloop.wire import (
    WIRE_NAMES,
    HttpRequest,
    ModelAdapter,
    ProviderHttpError,
    RoutedModel,
    TransportError,
    WireOptions,
    create_wire_adapter,
)
from bindloop.wire._secrets import REDACTED, Redactor, scrub_shapes

httpx_transport = pytest.importorskip("bindloop.hosts.transports.httpx")
from harness.fixtures.scripted_server import (  # noqa: E402
    ScriptedProviderServer,
    ScriptedReply,
    error_reply,
)

KEY = "sk-proj-Zq81xYv0canaryKEY7c5e"
MESSAGES: list[Message] = [UserMessage(content="hi")]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedProviderServer]:
    with ScriptedProviderServer() as srv:
        yield srv


def texts_of(value: object) -> list[str]:
    """Every text a host could print or log of ``value``."""
    out = [repr(value), str(value)]
    if isinstance(value, BaseException):
        out.append("".join(traceback.format_exception(value)))
        out.extend(repr(v) for v in vars(value).values())
        out.extend(str(a) for a in value.args)
    elif isinstance(value, msgspec.Struct):
        out.append(msgspec.json.encode(value, enc_hook=repr).decode())
    return out


def assert_no_key(values: Sequence[object], *forms: str) -> None:
    texts = [t for v in values for t in texts_of(v)]
    for form in (KEY, *forms):
        leaked = [t for t in texts if form in t]
        assert not leaked, leaked[0][:600]


def _plan(*providers: str) -> RoutePlan:
    model_id = canonical_model_id("acme/model-1")
    return RoutePlan(stages=(RouteStage(
        role="primary", model=model_id,
        policy=OrderedPolicy(providers=tuple(provider_id(p) for p in providers)),
        candidates=tuple(RouteCandidate(provider_id=provider_id(p), canonical_model_id=model_id,
                                        provider_invocation_model=f"{p}-model",
                                        credential_source="platform")
                         for p in providers)),))


# Bodies a provider or proxy answers a bad key with, echoing it in different forms.
ECHOES = {
    "openai_401": (401, json.dumps({"error": {
        "message": f"Incorrect API key provided: {KEY}. You can find your API key at ...",
        "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}}).encode()),
    "json_unicode_escaped": (401, (
        '{"error": {"message": "bad key ' + "".join(f"\\u{ord(c):04x}" for c in KEY)
        + '", "type": "authentication_error"}}').encode()),
    "proxy_authorization_echo": (400, (
        f"<html><body>400 Bad Request<br>Authorization: Bearer {KEY}<br>"
        f"x-api-key: {KEY}</body></html>").encode()),
    "gemini_url_in_message": (400, json.dumps({"error": {
        "code": 400, "status": "INVALID_ARGUMENT", "message":
        "Request to https://generativelanguage.googleapis.com/v1beta/models/m:generateContent"
        f"?key={quote(KEY, safe='')} failed"}}).encode()),
    "url_encoded_plain": (403, f"forbidden: api_key={quote_plus(KEY)}".encode()),
}


@pytest.mark.anyio
@pytest.mark.parametrize("echo", sorted(ECHOES))
@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_an_error_body_echoing_the_key_is_redacted_on_every_wire(
        server: ScriptedProviderServer, wire: str, echo: str) -> None:
    status, body = ECHOES[echo]
    adapter = create_wire_adapter(wire)
    prefix = f"echo-{wire}-{echo}"
    server.enqueue(prefix, error_reply(status, body), error_reply(status, body))
    transport = httpx_transport.HttpxTransport(server.base_url(prefix),
                                               headers=adapter.auth_headers(KEY))
    model = ModelAdapter(adapter, transport, WireOptions(model="m", stream=True), retry=None)
    seen = len(server.requests)
    with pytest.raises(ProviderHttpError) as info:
        await model.complete(MESSAGES)
    error = info.value
    assert error.status_code == status  # classified as the status it was, redaction or not
    assert "<redacted" in str(error)
    # Through the router too: the route log and its attempt errors.
    routes: list[RouteResult[ModelTurnResult]] = []
    routed = RoutedModel(plan=_plan("p"), models={"p": model}, on_route=routes.append)
    with pytest.raises(Exception) as routed_info:
        await routed.complete(MESSAGES)
    assert routes and not routes[0].ok
    attempts = [a for r in routes for a in r.attempts]
    # Positive control: the key really went out with both requests.
    sent = server.requests[seen:]
    assert len(sent) == 2 and all(KEY in v for r in sent for _, v in r.headers
                                  if _.lower() in ("authorization", "x-api-key",
                                                   "x-goog-api-key"))
    assert_no_key([error, routed_info.value, *routes, *attempts],
                  quote(KEY, safe=""), quote_plus(KEY))
    await transport.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_an_in_stream_error_echoing_the_key_is_redacted(
        server: ScriptedProviderServer, wire: str) -> None:
    adapter = create_wire_adapter(wire)
    text = f"upstream refused key {KEY}"
    event = {"openai_chat": {"error": {"message": text, "type": "invalid_request_error"}},
             "openai_responses": {"type": "error", "code": "invalid_api_key", "message": text},
             "anthropic": {"type": "error", "error": {"type": "authentication_error",
                                                      "message": text}},
             "gemini": {"error": {"code": 401, "status": "UNAUTHENTICATED", "message": text}},
             }[wire]
    name = {"anthropic": "event: error\n", "openai_responses": "event: error\n"}.get(wire, "")
    chunk = f"{name}data: {json.dumps(event)}\n\n".encode()
    prefix = f"stream-{wire}"
    server.enqueue(prefix, ScriptedReply(headers=(("content-type", "text/event-stream"),),
                                         chunks=(chunk,)))
    transport = httpx_transport.HttpxTransport(server.base_url(prefix),
                                               headers=adapter.auth_headers(KEY))
    events: list[StreamEvent] = []
    model = ModelAdapter(adapter, transport, WireOptions(model="m", stream=True),
                         on_event=events.append, retry=None)
    with pytest.raises(ProviderHttpError) as info:
        await model.complete(MESSAGES)
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert errors and errors[0].error is info.value  # the sink saw the redacted one too
    assert "<redacted" in str(info.value)
    assert_no_key([info.value, *events])
    await transport.aclose()


class _HangUpServer:
    """Accepts each connection, reads the request head, records its request line and closes."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.lines: list[str] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    part = conn.recv(65536)
                    if not part:
                        break
                    data += part
                self.lines.append(data.split(b"\r\n", 1)[0].decode("latin-1"))

    def close(self) -> None:
        self.sock.close()
        self.thread.join(5)


@pytest.mark.anyio
@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_a_hang_up_on_a_url_carrying_the_key_is_redacted(wire: str) -> None:
    hang = _HangUpServer()
    try:
        adapter = create_wire_adapter(wire)
        # Gemini's query-parameter auth: the key in the base URL's query, merged into each request.
        transport = httpx_transport.HttpxTransport(f"{hang.url}/v1?key={KEY}&x=1",
                                                   headers=adapter.auth_headers(KEY))
        model = ModelAdapter(adapter, transport, WireOptions(model="m", stream=True), retry=None)
        routes: list[RouteResult[ModelTurnResult]] = []
        routed = RoutedModel(plan=_plan("p"), models={"p": model}, on_route=routes.append)
        with pytest.raises(TransportError) as info:
            await model.complete(MESSAGES)
        with pytest.raises(Exception) as routed_info:
            await routed.complete(MESSAGES)
        # Positive control: the key really was in the URL the server saw, after the path's query.
        assert len(hang.lines) == 2 and all(f"key={KEY}&x=1" in line for line in hang.lines)
        assert hang.lines[0].startswith("POST /v1/")
        assert info.value.kind == "connection"
        attempts = [a for r in routes for a in r.attempts]
        assert attempts and attempts[0].category == "connection"
        assert_no_key([info.value, routed_info.value, transport, *routes, *attempts])
        await transport.aclose()
    finally:
        hang.close()


@pytest.mark.anyio
async def test_a_transport_exception_showing_the_url_is_rewritten_and_unchained() -> None:
    """A third-party transport raising its client's error with the full URL in it: the error
    that leaves the model is a TransportError naming the type, and the dirty chain is cut."""
    adapter = create_wire_adapter("gemini")
    url = f"https://generativelanguage.googleapis.com/v1beta?key={KEY}"

    class Leaky:
        redactor = Redactor.for_credentials(url, ())

        @asynccontextmanager
        async def open(self, request: HttpRequest) -> AsyncIterator[object]:
            try:
                raise OSError(f"cannot connect to {url}{request.path}")
            except OSError as exc:
                raise ConnectionError(f"failed: {exc}") from exc
            yield None  # pragma: no cover

    model = ModelAdapter(adapter, Leaky(), WireOptions(model="m"))  # type: ignore[arg-type]
    with pytest.raises(TransportError) as info:
        await model.complete(MESSAGES)
    assert "ConnectionError" in str(info.value) and "key=<redacted" in str(info.value)
    assert info.value.__cause__ is None
    assert_no_key([info.value])


def test_shapes_are_redacted_without_knowing_the_key() -> None:
    assert scrub_shapes("Authorization: Bearer abc.DEF_123-xyz") == f"Authorization: Bearer {REDACTED}"
    assert scrub_shapes("GET /v1?alt=sse&key=AIzaSyA-1234&x=2") == f"GET /v1?alt=sse&key={REDACTED}&x=2"
    assert scrub_shapes("https://bob:hunter2@proxy.test/v1") == f"https://{REDACTED}@proxy.test/v1"
    assert scrub_shapes("Basic dXNlcjpwYXNzd29yZA==") == f"Basic {REDACTED}"
    # Prose stays as it is.
    for prose in ("basic authentication failed", "Basic Authentication is not enabled",
                  "max tokens exceeded: 8192", "the bearer of this message"):
        assert scrub_shapes(prose) == prose
    # A redacted text is a fixed point.
    once = scrub_shapes("?key=AIza12345678 Bearer sk-12345678")
    assert scrub_shapes(once) == once


def test_a_long_key_keeps_a_four_character_tail_and_the_redactor_hides_what_it_knows() -> None:
    r = Redactor.for_credentials("https://h.test", (("x-api-key", KEY),))
    assert r.text(f"key {KEY}!") == f"key <redacted …{KEY[-4:]}>!"
    assert KEY not in repr(r)
    short = Redactor.for_credentials("https://h.test", (("x-api-key", "abc12345"),))
    assert short.text("x abc12345 y") == f"x {REDACTED} y"


def test_a_cut_error_body_does_not_keep_the_beginning_of_a_key() -> None:
    r = Redactor.for_credentials("https://h.test", (("authorization", f"Bearer {KEY}"),))
    body = f"error: {KEY}".encode()
    for limit in range(len("error: ") + 4, len(body)):
        cut = r.body(body, limit).decode()
        assert KEY[:limit - len("error: ")] not in cut, (limit, cut)


# -- the property -------------------------------------------------------------------------------

class _ErrorTransport:
    """The transport port answering one error status with one body, holding the credentials the
    way the shipped transports do (their ``redactor``); the HTTP itself is what the loopback
    tests above cover."""

    def __init__(self, status: int, body: bytes, headers: Sequence[tuple[str, str]]) -> None:
        self.status = status
        self.body = body
        self.redactor = Redactor.for_credentials("https://provider.test/v1", headers)

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_ErrorTransport]:
        yield self

    @property
    def headers(self) -> Sequence[tuple[str, str]]:
        return (("content-type", "application/json"),)

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        yield self.body


def _embed(key: str, how: str) -> str:
    if how == "raw":
        return key
    if how == "json":
        return json.dumps(key, ensure_ascii=False)[1:-1]
    if how == "json_ascii":
        return json.dumps(key)[1:-1]
    if how == "url":
        return quote(key, safe="")
    if how == "url_plus":
        return quote_plus(key)
    return f"Bearer {key}"


KEYS = st.text(min_size=8, max_size=40) | st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", min_size=8,
    max_size=60)


# The redaction's own wording and the failure type names: a key that is a piece of them (Hypothesis
# found ``'<redacted>'`` and ``'Transpor'``) would "leak" through the very words that replace it.
_OWN_WORDS = ("<redacted>", "<redacted \u2026", "<withheld: the text contained a credential>",
              "TransportError", "ProviderHttpError", "RouteUnavailableError", "AttemptError",
              "ConnectionError", "OSError", "ValueError")


def _not_own_words(key: str) -> bool:
    return not any(key in word for word in _OWN_WORDS)


async def _outputs(wire: str, status: int, body: bytes, key: str, limit: int) -> list[str]:
    adapter = create_wire_adapter(wire)
    model = ModelAdapter(adapter, _ErrorTransport(status, body, adapter.auth_headers(key)),
                         WireOptions(model="m"), max_error_body_bytes=limit)
    try:
        await model.complete(MESSAGES)
    except ProviderHttpError as exc:
        return texts_of(exc)
    raise AssertionError("no error raised")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wire=st.sampled_from(WIRE_NAMES), key=KEYS, before=st.text(max_size=30),
       after=st.text(max_size=30), how=st.sampled_from(
           ("raw", "json", "json_ascii", "url", "url_plus", "bearer")),
       shape=st.sampled_from(("json_message", "plain")), status=st.sampled_from((400, 401, 403)),
       limit=st.integers(min_value=16, max_value=400))
def test_no_message_contains_the_key_whatever_the_body_embeds(
        wire: str, key: str, before: str, after: str, how: str, shape: str, status: int,
        limit: int) -> None:
    text = f"{before}{_embed(key, how)}{after}"
    body = (json.dumps({"error": {"message": text, "type": "invalid_request_error"}},
                       ensure_ascii=how == "json_ascii").encode()
            if shape == "json_message" else text.encode())
    # Only a key that is not a piece of the error's own wording can be asked for.
    assume(_not_own_words(key))
    baseline = anyio.run(_outputs, wire, status, b"", key, limit)
    assume(not any(key in t for t in baseline))
    outputs = anyio.run(_outputs, wire, status, body, key, limit)
    forms = {key, _embed(key, how) if how in ("json", "json_ascii", "url", "url_plus") else key}
    for form in forms:
        leaked = [t for t in outputs if form in t]
        assert not leaked, leaked[0][:400]


class _FailingTransport:
    """A transport whose client fails with ``error`` (which may show the URL it was sent to)."""

    def __init__(self, error: Exception, base_url: str, headers: Sequence[tuple[str, str]]) -> None:
        self.error = error
        self.redactor = Redactor.for_credentials(base_url, headers)

    @asynccontextmanager
    async def open(self, request: HttpRequest) -> AsyncIterator[_ErrorTransport]:
        raise self.error
        yield  # pragma: no cover


async def _transport_outputs(wire: str, error: Exception, base_url: str, key: str) -> list[str]:
    adapter = create_wire_adapter(wire)
    model = ModelAdapter(adapter, _FailingTransport(error, base_url, adapter.auth_headers(key)),
                         WireOptions(model="m"))
    routes: list[RouteResult[ModelTurnResult]] = []
    routed = RoutedModel(plan=_plan("p"), models={"p": model}, on_route=routes.append)
    try:
        await routed.complete(MESSAGES)
    except Exception as exc:
        return [*texts_of(exc), *(t for r in routes for t in texts_of(r))]
    raise AssertionError("no error raised")


@settings(max_examples=150, deadline=None)
@given(wire=st.sampled_from(WIRE_NAMES), key=KEYS, how=st.sampled_from(
           ("raw", "json", "json_ascii", "url", "url_plus", "bearer")),
       kind=st.sampled_from((TransportError, OSError, ConnectionError, ValueError)),
       in_query=st.booleans())
def test_no_transport_failure_shows_the_key(wire: str, key: str, how: str,
                                            kind: type[Exception], in_query: bool) -> None:
    base = f"https://provider.test/v1?key={quote(key, safe='')}" if in_query else \
        "https://provider.test/v1"
    error = kind(f"cannot send to {base}/x: {_embed(key, how)}")
    if in_query:
        error.__cause__ = OSError(f"GET {base} refused")
    assume(_not_own_words(key))
    baseline = anyio.run(_transport_outputs, wire, kind("cannot send"), base, key)
    assume(not any(key in t for t in baseline))
    outputs = anyio.run(_transport_outputs, wire, error, base, key)
    assert any("<redacted" in t or "<withheld" in t for t in outputs)
    for form in {key, _embed(key, how) if how in ("json", "json_ascii", "url", "url_plus") else key}:
        leaked = [t for t in outputs if form in t]
        assert not leaked, leaked[0][:400]
