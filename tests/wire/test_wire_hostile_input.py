"""Bad values refused at construction, JSON nested 100,000 deep, and Gemini retry delays outside
the documented grammar: each ends in a typed error (or a bounded value), never a bare crash."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.contracts import (
    AssistantMessage,
    FilePart,
    ImagePart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
    messages_to_openai,
)
from bindloop.errors import ProviderError, UsageError
from bindloop.routing import AttemptTarget, RouteCursor
from bindloop.wire import (
    WIRE_NAMES,
    ForcedTool,
    ProviderHttpError,
    ReasoningOptions,
    WireDecodeError,
    WireOptions,
    WireRequestError,
    attempt_error_from,
    create_wire_adapter,
)
from bindloop.wire._stream import decode_stream  # the test helper of this area

httpx_transport = pytest.importorskip("bindloop.hosts.transports.httpx")

DEEP = 100_000
TARGET = AttemptTarget(cursor=RouteCursor(stage=0, candidate=0), provider_id="p",
                       canonical_model_id="m", provider_invocation_model="m")


# -- 7. runtime validation --------------------------------------------------------------------------

@pytest.mark.parametrize(("field", "value", "accepted"), [
    ("temperature", "hot", "number"),
    ("temperature", math.nan, "number"),
    ("temperature", -1.0, "non-negative"),
    ("top_p", True, "number"),
    ("stream", "yes", "True or False"),
    ("stream", 1, "True or False"),
    ("max_tokens", 0, "positive int"),
    ("max_tokens", 10.5, "positive int"),
    ("stop", ["x"], "tuple of str"),
    ("stop", (1,), "tuple of str"),
    ("tool_choice", "always", "ForcedTool"),
    ("parallel_tool_calls", "no", "True, False"),
    ("response_format", {"name": "x"}, "JsonSchemaFormat"),
    ("reasoning", {"effort": "high"}, "ReasoningOptions"),
    ("extra_body", [("a", 1)], "dict"),
    ("model", "", "model name"),
    ("model", None, "model name"),
])
def test_wire_options_refuse_bad_values_naming_the_field(field: str, value: object,
                                                        accepted: str) -> None:
    kwargs: dict[str, object] = {"model": "m", field: value}
    with pytest.raises(UsageError, match=f"WireOptions.{field} must be .*{accepted}"):
        WireOptions(**kwargs)  # type: ignore[arg-type]


def test_wire_options_accept_every_documented_value() -> None:
    opts = WireOptions(model="m", stream=True, max_tokens=5, temperature=0, top_p=1.0,
                       stop=("x",), tool_choice=ForcedTool(name="f"), parallel_tool_calls=False,
                       reasoning=ReasoningOptions(effort="low", budget_tokens=-1),
                       extra_body={"seed": 1})
    for choice in ("auto", "none", "required"):
        WireOptions(model="m", tool_choice=choice)  # type: ignore[arg-type]
    assert opts.temperature == 0


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"effort": "max"}, "effort"), ({"budget_tokens": "1k"}, "budget_tokens"),
    ({"summary": "long"}, "summary"), ({"include_thoughts": "yes"}, "include_thoughts")])
def test_reasoning_options_refuse_bad_values(kwargs: dict[str, object], field: str) -> None:
    with pytest.raises(UsageError, match=f"ReasoningOptions.{field}"):
        ReasoningOptions(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("build", "match"), [
    (lambda: UserMessage(content=123), r"UserMessage.content must be a string .*got int"),
    (lambda: UserMessage(content=[TextPart(text="a"), {"type": "text"}]),
     r"UserMessage.content .*list holding dict"),
    (lambda: UserMessage(content="x", name=5), r"UserMessage.name must be a string or None"),
    (lambda: SystemMessage(content=None), r"SystemMessage.content"),
    (lambda: AssistantMessage(content=b"x"), r"AssistantMessage.content must be a string, None"),
    (lambda: ToolMessage(tool_call_id=None, content="x"), r"ToolMessage.tool_call_id"),
    (lambda: ToolMessage(tool_call_id="c", content=1.5), r"ToolMessage.content"),
])
def test_messages_refuse_bad_content_with_a_typed_error(build: object, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        build()  # type: ignore[operator]


@pytest.mark.parametrize(("args", "kwargs", "match"), [
    ((None,), {}, r"base_url=\.\.\.\) must be .*got NoneType"),
    (("api.openai.com/v1",), {}, r"http:// or https://"),
    (("https://x.test",), {"headers": "authorization: Bearer k"}, r"headers=\.\.\.\) must be"),
    (("https://x.test",), {"headers": [("a", 1)]}, r"headers=\.\.\.\) must be"),
])
def test_httpx_transport_refuses_bad_arguments(args: tuple[object, ...],
                                               kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        httpx_transport.HttpxTransport(*args, **kwargs)


def test_httpx_transport_accepts_a_mapping_of_headers() -> None:
    transport = httpx_transport.HttpxTransport("https://x.test/v1/", headers={"x-a": "b"})
    assert repr(transport) == "HttpxTransport('https://x.test/v1')"


# -- 8. 100,000-deep nesting ------------------------------------------------------------------------

def _deep(kind: str) -> str:
    return ("[" * DEEP + "]" * DEEP) if kind == "array" else ('{"a":' * DEEP + "1" + "}" * DEEP)


@pytest.mark.parametrize("wire", WIRE_NAMES)
@pytest.mark.parametrize("kind", ["array", "object"])
def test_deep_error_body_is_a_classified_http_error(wire: str, kind: str) -> None:
    body = ('{"error": ' + _deep(kind) + "}").encode()
    error = create_wire_adapter(wire).classify_error(503, (), body)
    assert isinstance(error, ProviderHttpError) and error.category == "server_error"
    assert attempt_error_from(error, TARGET).category == "server_error"  # routing falls back


@pytest.mark.parametrize("wire", WIRE_NAMES)
@pytest.mark.parametrize("where", ["top", "inside"])
def test_deep_response_body_is_a_decode_error(wire: str, where: str) -> None:
    deep = _deep("array")
    body = deep if where == "top" else {
        "openai_chat": '{"choices": [{"message": {"content": "x", "tool_calls": ' + deep + "}}]}",
        "openai_responses": '{"status": "completed", "output": [{"type": "x", "content": '
                            + deep + "}]}",
        "anthropic": '{"content": [{"type": "tool_use", "id": "t", "input": ' + deep + "}]}",
        "gemini": '{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", '
                  '"args": ' + deep + "}}]}}]}",
    }[wire]
    with pytest.raises(WireDecodeError, match="nested too deeply|not the documented"):
        create_wire_adapter(wire).parse_response(body.encode())
    try:
        create_wire_adapter(wire).parse_response(body.encode())
    except WireDecodeError as exc:
        assert attempt_error_from(exc, TARGET).category == "response_defect"


@pytest.mark.parametrize("wire", WIRE_NAMES)
def test_deep_stream_event_is_a_decode_error(wire: str) -> None:
    event = {
        "openai_chat": '{"choices": [{"index": 0, "delta": {"tool_calls": ' + _deep("array")
                       + "}}]}",
        "openai_responses": '{"type": "response.output_item.added", "item": {"type": "x", '
                            '"content": ' + _deep("array") + "}}",
        "anthropic": '{"type": "error", "error": ' + _deep("object") + "}",
        "gemini": '{"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", '
                  '"args": ' + _deep("object") + "}}]}}]}",
    }[wire]
    with pytest.raises(WireDecodeError):
        decode_stream(create_wire_adapter(wire), [b"data: " + event.encode() + b"\n\n"])


@pytest.mark.parametrize("wire", ["anthropic", "gemini"])
def test_deep_tool_arguments_in_the_transcript_are_sent_raw(wire: str) -> None:
    # The wire needs an object; a model's argument text nested too deep is kept visible, not lost.
    deep = _deep("object")
    msgs = [UserMessage(content="q"),
            AssistantMessage(tool_calls=(ToolCall(id="c1", name="f", arguments=deep),)),
            ToolMessage(tool_call_id="c1", name="f", content="r")]
    request = create_wire_adapter(wire).build_request(msgs, [], WireOptions(model="m"))
    assert b"_raw_arguments" in request.body


# -- 11. Gemini retryDelay --------------------------------------------------------------------------

def _gemini_429(delay: object) -> bytes:
    return json.dumps({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "message": "quota",
                                 "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",
                                              "retryDelay": delay}]}}).encode()


@pytest.mark.parametrize(("delay", "ms"), [
    ("34.4s", 34_400.0), ("0s", 0.0), ("0.000000001s", 0.000001), ("41s", 41_000.0),
    ("1.5s", 1_500.0), ("99999999999999999999s", 86_400_000.0), ("90000s", 86_400_000.0),
])
def test_retry_delay_in_the_documented_grammar_is_read_and_clamped(delay: str, ms: float) -> None:
    error = create_wire_adapter("gemini").classify_error(429, (), _gemini_429(delay))
    assert error.retry_after_ms == pytest.approx(ms)
    assert attempt_error_from(error, TARGET).retry_after_ms == pytest.approx(ms)


@pytest.mark.parametrize("delay", [
    "1e308s", "1_0s", "\u0661\u0660s", "\uff11s", "-0s", "-1s", "+1s", " 1s", "1s ", "1.s",
    ".5s", "1.0000000001s", "inf", "nans", "infs", "1", "1m", "", 5, 5.0, None, ["1s"],
])
def test_retry_delay_outside_the_grammar_is_ignored(delay: object) -> None:
    error = create_wire_adapter("gemini").classify_error(429, (), _gemini_429(delay))
    assert error.retry_after_ms is None
    assert error.category == "rate_limited"
    attempt_error_from(error, TARGET)  # builds: a 429 never breaks routing


def test_recorded_gemini_429_retry_info() -> None:
    from .wire_fixtures import fixture

    error = create_wire_adapter("gemini").classify_error(
        429, (), fixture("gemini", "realwire_err_429_retry_info.json"))
    assert error.retry_after_ms == pytest.approx(34_400.0)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=30))
def test_any_retry_delay_text_gives_a_finite_bounded_delay_or_none(delay: str) -> None:
    error = create_wire_adapter("gemini").classify_error(429, (), _gemini_429(delay))
    value = error.retry_after_ms
    assert value is None or (math.isfinite(value) and 0 <= value <= 86_400_000.0)
    assert isinstance(attempt_error_from(error, TARGET).cause, ProviderError)


# -- one OpenAI-chat codec rule for inline media ----------------------------------------------------

@pytest.mark.parametrize("wire", WIRE_NAMES)
@pytest.mark.parametrize("part", [ImagePart(data="iVBORw0KGgo="), FilePart(data="JVBE")],
                         ids=["image", "file"])
def test_inline_bytes_without_a_media_type_are_refused_on_every_wire(
        wire: str, part: ImagePart | FilePart) -> None:
    # Never guessed (image/png, application/pdf): a provider that checks the bytes refuses a
    # wrong type, and the stored form could not read back as the same part.
    with pytest.raises(WireRequestError, match="needs its media_type"):
        create_wire_adapter(wire).build_request([UserMessage(content=(part,))], [],
                                                WireOptions(model="m"))
    with pytest.raises(UsageError, match="needs its media_type"):
        messages_to_openai([UserMessage(content=(part,))])


@pytest.mark.parametrize("wire", WIRE_NAMES)
def test_inline_bytes_with_a_media_type_carry_it_on_every_wire(wire: str) -> None:
    part = ImagePart(data="/9j/4AAQ", media_type="image/jpeg")
    body = create_wire_adapter(wire).build_request([UserMessage(content=(part,))], [],
                                                   WireOptions(model="m")).body
    assert b"image/jpeg" in body and b"image/png" not in body
    assert messages_to_openai([UserMessage(content=(part,))])[0]["content"][0][
        "image_url"]["url"] == "data:image/jpeg;base64,/9j/4AAQ"


@pytest.mark.parametrize("part", [
    ImagePart(url="https://cdn.test/cat.png?X-Goog-Signature=0a1b2c3d4e5f6a7b8c9d"),
    FilePart(url="gs://bucket/report.pdf"),
    ImagePart(url="https://generativelanguage.googleapis.com/v1beta/files/abc123")],
    ids=["signed-image-url", "gs-file", "files-api-uri"])
def test_a_gemini_url_part_without_a_media_type_is_refused_not_guessed(
        part: ImagePart | FilePart) -> None:
    # The same rule as for inline bytes: an extension does not say what a URL serves, and Files
    # API or gs:// URIs have none; a guessed mimeType is refused or misread by the model.
    kind = type(part).__name__
    with pytest.raises(WireRequestError) as info:
        create_wire_adapter("gemini").build_request(
            [UserMessage(content=(TextPart(text="look"), part))], [], WireOptions(model="m"))
    message = str(info.value)
    assert "content[1]" in message and kind in message and "media_type" in message
    assert f"{kind}(url=..., media_type=" in message  # the fix
    assert "Signature" not in message  # a signed URL's query is not repeated


@pytest.mark.parametrize("part", [
    ImagePart(url="https://cdn.test/cat", media_type="image/webp"),
    FilePart(url="gs://bucket/report", media_type="application/pdf")], ids=["image", "file"])
def test_a_gemini_url_part_sends_exactly_its_media_type(part: ImagePart | FilePart) -> None:
    body = json.loads(create_wire_adapter("gemini").build_request(
        [UserMessage(content=(part,))], [], WireOptions(model="m")).body)
    assert body["contents"][0]["parts"] == [
        {"fileData": {"mimeType": part.media_type, "fileUri": part.url}}]


# -- routing keeps falling back past a hostile body (real HTTP on loopback) -------------------------

@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("wire", WIRE_NAMES)
async def test_routing_falls_back_past_deeply_nested_replies(wire: str, anyio_backend: str) -> None:
    from bindloop.contracts import ModelTurnResult, TurnUsage
    from harness.fixtures.scripted_server import (
        ScriptedProviderServer,
        ScriptedReply,
        error_reply,
        turn_reply,
    )
    from bindloop.routing import (
        OrderedPolicy,
        RouteCandidate,
        RoutePlan,
        RouteStage,
        canonical_model_id,
        provider_id,
    )
    from bindloop.wire import ModelAdapter, RoutedModel

    answer = ModelTurnResult(text="fine", usage=TurnUsage(input_tokens=1, output_tokens=1),
                             finish_reason="stop")
    deep_event = b"data: " + ('{"a":' * DEEP + "1" + "}" * DEEP).encode() + b"\n\n"
    names = ("deep_error", "deep_stream", "good")
    with ScriptedProviderServer() as server:
        server.enqueue(f"{wire}-deep_error",
                       error_reply(500, ('{"error":' + _deep("array") + "}").encode()))
        server.enqueue(f"{wire}-deep_stream", ScriptedReply(chunks=(deep_event,)))
        server.enqueue(f"{wire}-good", turn_reply(wire, answer, stream=True))
        model_id = canonical_model_id("acme/m")
        plan = RoutePlan(stages=(RouteStage(
            role="primary", model=model_id,
            policy=OrderedPolicy(providers=tuple(provider_id(n) for n in names)),
            candidates=tuple(RouteCandidate(provider_id=provider_id(n), canonical_model_id=model_id,
                                            provider_invocation_model="m",
                                            credential_source="platform") for n in names)),))
        adapter = create_wire_adapter(wire)
        routes: list[object] = []
        routed = RoutedModel(plan=plan, on_route=routes.append, models={
            n: ModelAdapter(adapter, httpx_transport.HttpxTransport(server.base_url(f"{wire}-{n}")),
                            WireOptions(model="m", stream=True)) for n in names})
        turn = await routed.complete([UserMessage(content="hi")])
    assert turn.text == "fine"
    attempts = routes[0].attempts  # type: ignore[attr-defined]
    assert [a.category for a in attempts[:2]] == ["server_error", "response_defect"]
