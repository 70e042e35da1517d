"""``create_model("provider:model")`` over real loopback HTTP: each provider string speaks its wire
to the URL it should, with the key in the header it should, streaming by default; keys come from
``api_key=`` or the provider's variable (never sent to another ``base_url``), and never from the
environment under emscripten; bad input is refused by name, and no message or repr shows a key;
``fallback=`` falls back across a 503 in one call."""

from __future__ import annotations

import inspect
import os
import string
import sys
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from types import MappingProxyType, SimpleNamespace
from typing import Any

import anyio
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from bindloop.completion import StreamEvent, TextEvent
from bindloop.contracts import ModelTurnResult, TurnUsage, UserMessage
from bindloop.errors import UsageError
from bindloop.wire import (
    CachePolicy,
    ForcedTool,
    JsonSchemaFormat,
    ModelAdapter,
    ReasoningOptions,
    RoutedModel,
    WireOptions,
)

httpx = pytest.importorskip("httpx")
import bindloop.hosts as hosts  # noqa: E402
from bindloop.hosts import models  # noqa: E402
from bindloop.hosts.transports.httpx import HttpxTransport  # noqa: E402
from bindloop.hosts.transports.js_fetch import FetchTransport  # noqa: E402
from bindloop.hosts.models import (  # noqa: E402
    PROVIDERS,
    MissingApiKeyError,
    ModelOptions,
    Provider,
    create_model,
)
from harness.fixtures.provider_replies import render_sse  # noqa: E402
from harness.fixtures.scripted_server import (  # noqa: E402
    ScriptedProviderServer,
    ScriptedReply,
    error_reply,
    turn_reply,
)

ANSWER = ModelTurnResult(text="hello live", usage=TurnUsage(input_tokens=3, output_tokens=2),
                         finish_reason="stop")
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY")

# provider -> (wire, the request path after the base URL, the auth header for key "k-123456789")
SPEAKS: dict[str, tuple[str, str, tuple[str, str]]] = {
    "openai": ("openai_chat", "/chat/completions", ("authorization", "Bearer k-123456789")),
    "openai-responses": ("openai_responses", "/responses",
                         ("authorization", "Bearer k-123456789")),
    "anthropic": ("anthropic", "/v1/messages", ("x-api-key", "k-123456789")),
    "google": ("gemini", "/v1beta/models/m-1:streamGenerateContent?alt=sse",
               ("x-goog-api-key", "k-123456789")),
}


@pytest.fixture(autouse=True)
def _no_keys_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in KEY_VARIABLES:
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def server() -> Iterator[ScriptedProviderServer]:
    with ScriptedProviderServer() as srv:
        yield srv


def _complete(model: ModelAdapter | RoutedModel) -> ModelTurnResult:
    """One turn through the model (the one call site to adapt if the call's name changes)."""
    async def go() -> ModelTurnResult:
        with anyio.fail_after(10):
            return await model.complete([UserMessage(content="hi")])
    return anyio.run(go)


def _text_before_the_end(model: ModelAdapter) -> list[str]:
    """The text a listener saw while the provider still held the rest of its answer back."""
    seen: list[str] = []

    async def go() -> None:
        arrived = anyio.Event()

        def sink(event: StreamEvent) -> None:
            if isinstance(event, TextEvent) and event.content:
                seen.append(event.content)
                arrived.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(model.complete, [UserMessage(content="hi")], on_event=sink))
            with anyio.fail_after(10):
                await arrived.wait()
            tg.cancel_scope.cancel()

    anyio.run(go)
    return seen


def _stalling_reply(wire: str) -> ScriptedReply:
    """``wire``'s streamed answer, held back after its first chunk of text."""
    chunks = render_sse(wire, ANSWER)
    first = next(i for i, c in enumerate(chunks) if b"hello" in c)
    return turn_reply(wire, ANSWER, stream=True, stall_after=first + 1)


def _loopback_providers(monkeypatch: pytest.MonkeyPatch, srv: ScriptedProviderServer) -> None:
    """Every provider's own endpoint moved to the loopback server (prefix = the provider name)."""
    monkeypatch.setattr(models, "PROVIDERS", MappingProxyType({
        name: Provider(name=p.name, wire=p.wire, base_url=srv.base_url(name),
                       key_variable=p.key_variable) for name, p in PROVIDERS.items()}))


# ---- each provider string against its wire ------------------------------------------------------

@pytest.mark.parametrize("provider", sorted(SPEAKS))
def test_each_provider_string_speaks_its_wire_to_its_url_with_its_key(
        provider: str, server: ScriptedProviderServer) -> None:
    wire, path, auth = SPEAKS[provider]
    server.enqueue("p", turn_reply(wire, ANSWER, stream=True))
    model = create_model(f"{provider}:m-1", api_key="k-123456789", base_url=server.base_url("p"))
    assert isinstance(model, ModelAdapter) and model.adapter.wire == wire
    assert model.options == WireOptions(model="m-1", stream=True)
    assert _complete(model).text == "hello live"
    [request] = server.requests
    assert request.method == "POST" and request.path == "/p" + path
    assert auth in request.headers
    if wire != "gemini":  # Gemini asks for a stream by its path (above)
        assert msgspec.json.decode(request.body)["stream"] is True
        assert msgspec.json.decode(request.body)["model"] == "m-1"


@pytest.mark.parametrize("provider", sorted(SPEAKS))
def test_a_listener_sees_text_while_the_provider_still_holds_the_rest(
        provider: str, server: ScriptedProviderServer) -> None:
    wire = SPEAKS[provider][0]
    server.enqueue("p", _stalling_reply(wire))
    model = create_model(f"{provider}:m-1", api_key="k-123456789", base_url=server.base_url("p"))
    assert _text_before_the_end(model) == ["hello" if wire != "gemini" else "hello live"]


def test_stream_false_waits_for_the_whole_answer(server: ScriptedProviderServer) -> None:
    server.enqueue("p", turn_reply("openai_chat", ANSWER, stream=False))
    model = create_model("openai:m-1", api_key="k-123456789", base_url=server.base_url("p"),
                         stream=False)
    assert model.options.stream is False
    assert _complete(model).text == "hello live"
    assert "stream" not in msgspec.json.decode(server.requests[0].body)


# ---- keys ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("provider", sorted(SPEAKS))
def test_the_provider_variable_is_read_and_sent_to_the_provider_endpoint(
        provider: str, server: ScriptedProviderServer, monkeypatch: pytest.MonkeyPatch) -> None:
    wire, path, (header, value) = SPEAKS[provider]
    _loopback_providers(monkeypatch, server)
    monkeypatch.setenv(PROVIDERS[provider].key_variable, "k-123456789")
    server.enqueue(provider, turn_reply(wire, ANSWER, stream=True))
    assert _complete(create_model(f"{provider}:m-1")).text == "hello live"
    [request] = server.requests
    assert request.path == f"/{provider}{path}"
    assert (header, value) in request.headers


def test_the_default_endpoints_and_variables() -> None:
    assert {name: (p.wire, p.base_url, p.key_variable) for name, p in PROVIDERS.items()} == {
        "openai": ("openai_chat", "https://api.openai.com/v1", "OPENAI_API_KEY"),
        "openai-responses": ("openai_responses", "https://api.openai.com/v1", "OPENAI_API_KEY"),
        "anthropic": ("anthropic", "https://api.anthropic.com", "ANTHROPIC_API_KEY"),
        "google": ("gemini", "https://generativelanguage.googleapis.com", "GEMINI_API_KEY"),
    }
    model = create_model("google:gemini-2.5-flash", api_key="k-123456789")
    assert isinstance(model.transport, HttpxTransport)
    assert repr(model.transport) == "HttpxTransport('https://generativelanguage.googleapis.com')"


def test_an_explicit_key_wins_over_the_variable(server: ScriptedProviderServer,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _loopback_providers(monkeypatch, server)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-the-environment")
    server.enqueue("anthropic", turn_reply("anthropic", ANSWER, stream=True))
    _complete(create_model("anthropic:m-1", api_key="explicit-key-1"))
    headers = dict(server.requests[0].headers)
    assert headers["x-api-key"] == "explicit-key-1"
    assert "from-the-environment" not in repr(server.requests[0])


@pytest.mark.parametrize(("provider", "variable"), [
    ("openai", "OPENAI_BASE_URL"), ("openai-responses", "OPENAI_BASE_URL"),
    ("anthropic", "ANTHROPIC_BASE_URL")])
def test_the_sdk_endpoint_variable_moves_the_endpoint_with_the_key(
        provider: str, variable: str, server: ScriptedProviderServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A program written for the provider runs unchanged against a gateway the user configured
    beside the key (OPENAI_BASE_URL / ANTHROPIC_BASE_URL, as the official SDKs read them)."""
    wire, path, (header, value) = SPEAKS[provider]
    monkeypatch.setenv(PROVIDERS[provider].key_variable, "k-123456789")
    monkeypatch.setenv(variable, server.base_url("gateway"))
    server.enqueue("gateway", turn_reply(wire, ANSWER, stream=True))
    assert _complete(create_model(f"{provider}:m-1")).text == "hello live"
    [request] = server.requests
    assert request.path == f"/gateway{path}" and (header, value) in request.headers
    # an explicit base_url= wins over the variable
    server.enqueue("explicit", turn_reply(wire, ANSWER, stream=True))
    _complete(create_model(f"{provider}:m-1", base_url=server.base_url("explicit"),
                           api_key="k-987654321"))
    assert server.requests[1].path == f"/explicit{path}"


def test_a_base_url_never_gets_the_provider_variable(server: ScriptedProviderServer,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret-1")
    server.enqueue("local", turn_reply("openai_chat", ANSWER, stream=True),
                   turn_reply("openai_chat", ANSWER, stream=True))
    local = create_model("openai:llama3", base_url=server.base_url("local"))
    assert _complete(local).text == "hello live"
    assert not [h for h in server.requests[0].headers if h[0] == "authorization"]
    # env= opts in: a proxy that should get the key is handed the environment explicitly.
    proxied = create_model("openai:llama3", base_url=server.base_url("local"), env=os.environ)
    _complete(proxied)
    assert ("authorization", "Bearer sk-openai-secret-1") in server.requests[1].headers


def test_env_is_a_mapping_or_an_object_with_attributes(server: ScriptedProviderServer,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    _loopback_providers(monkeypatch, server)
    monkeypatch.setenv("GEMINI_API_KEY", "from-os-environ")
    server.set_responder("google", lambda _r: turn_reply("gemini", ANSWER, stream=True))
    _complete(create_model("google:m-1", env={"GEMINI_API_KEY": "from-a-mapping"}))
    _complete(create_model("google:m-1", env=SimpleNamespace(GEMINI_API_KEY="from-an-object")))
    sent = [dict(r.headers)["x-goog-api-key"] for r in server.requests]
    assert sent == ["from-a-mapping", "from-an-object"]


@pytest.mark.parametrize("provider", sorted(SPEAKS))
def test_a_missing_key_names_the_variable_and_the_parameter(provider: str) -> None:
    var = PROVIDERS[provider].key_variable
    with pytest.raises(MissingApiKeyError) as caught:
        create_model(f"{provider}:m-1")
    assert isinstance(caught.value, UsageError)
    assert var in str(caught.value) and "api_key=" in str(caught.value)
    assert (caught.value.provider, caught.value.variable) == (provider, var)


def test_an_empty_variable_is_a_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "")
    with pytest.raises(MissingApiKeyError, match="OPENAI_API_KEY"):
        create_model("openai:m-1")
    with pytest.raises(MissingApiKeyError, match="env= has no ANTHROPIC_API_KEY"):
        create_model("anthropic:m-1", env={})


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"api_key": ""}, r"api_key=\.\.\.\) is empty"),
    ({"api_key": 42}, r"api_key=\.\.\.\) must be a str"),
    ({"api_key": "sk-pasted with a space"}, "no HTTP header can carry"),
    ({"env": {"OPENAI_API_KEY": "sk-line\nbreak"}}, "env's OPENAI_API_KEY .*no HTTP header"),
    ({"env": {"OPENAI_API_KEY": 7}}, "env's OPENAI_API_KEY is a int"),
])
def test_an_unusable_key_is_refused_without_showing_it(kwargs: dict[str, Any],
                                                       message: str) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        create_model("openai:m-1", **kwargs)
    assert "sk-" not in str(caught.value)


# ---- Pyodide and Workers ------------------------------------------------------------------------

class _NoEnvironment(Mapping[str, str]):
    """Stands in for ``os.environ`` under emscripten: any read fails the test."""

    def __getitem__(self, key: str) -> str:
        raise AssertionError(f"os.environ[{key!r}] was read")

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("os.environ was iterated")

    def __len__(self) -> int:
        raise AssertionError("os.environ was measured")

    def get(self, key: str, default: Any = None) -> Any:
        raise AssertionError(f"os.environ.get({key!r}) was read")


def test_under_emscripten_fetch_is_used_and_the_environment_is_never_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-be-read")
    monkeypatch.setattr(sys, "platform", "emscripten")
    # Only the module's view of os.environ: pytest itself reads the real one.
    monkeypatch.setattr(models, "os", SimpleNamespace(environ=_NoEnvironment()))
    fetch = object()
    model = create_model("openai:gpt-5.1", api_key="sk-explicit-1", fetch=fetch)
    assert isinstance(model.transport, FetchTransport)
    assert model.transport._fetch is fetch
    assert repr(model.transport) == "FetchTransport('https://api.openai.com/v1')"
    with pytest.raises(MissingApiKeyError) as caught:
        create_model("anthropic:claude-x")
    text = str(caught.value)
    assert "api_key=" in text and "ANTHROPIC_API_KEY" in text and "env=self.env" in text
    # A Worker's bindings: an object whose secrets are attributes.
    worker_env = SimpleNamespace(ANTHROPIC_API_KEY="sk-worker-secret")
    bound = create_model("anthropic:claude-x", env=worker_env)
    assert isinstance(bound.transport, FetchTransport)
    assert bound.transport.redactor.text("sk-worker-secret") != "sk-worker-secret"
    # A fallback string reads the same bindings, and a variable they lack is named.
    with pytest.raises(MissingApiKeyError, match="env= has no OPENAI_API_KEY"):
        create_model("anthropic:claude-x", env=worker_env, fallback="openai:gpt-5.1")
    both = SimpleNamespace(ANTHROPIC_API_KEY="sk-worker-secret", OPENAI_API_KEY="sk-worker-two")
    routed = create_model("anthropic:claude-x", env=both, fallback="openai:gpt-5.1")
    assert all(isinstance(m.transport, FetchTransport) for m in routed.models.values())


def test_fetch_is_refused_on_cpython() -> None:
    with pytest.raises(UsageError, match="fetch="):
        create_model("openai:m-1", api_key="k-123456789", fetch=object())


# ---- malformed input ----------------------------------------------------------------------------

@pytest.mark.parametrize("spec", ["openai", "openai:", ":gpt-5.1", "", "openai: gpt-5.1"])
def test_a_malformed_string_says_the_expected_form(spec: str) -> None:
    with pytest.raises(UsageError, match="'provider:model'"):
        create_model(spec, api_key="k-123456789")


def test_a_model_string_must_be_a_str() -> None:
    with pytest.raises(UsageError, match="takes the model as a str, got int"):
        create_model(7, api_key="k-123456789")  # type: ignore[call-overload]


def test_the_model_name_may_hold_colons(server: ScriptedProviderServer) -> None:
    server.enqueue("p", turn_reply("openai_chat", ANSWER, stream=True))
    model = create_model("openai:llama3:8b", base_url=server.base_url("p"))
    assert model.options.model == "llama3:8b"
    _complete(model)
    assert msgspec.json.decode(server.requests[0].body)["model"] == "llama3:8b"


def test_an_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(UsageError) as caught:
        create_model("mistral:large", api_key="k-123456789")
    text = str(caught.value)
    assert "unknown provider 'mistral'" in text
    for name in PROVIDERS:
        assert name in text
    assert "base_url=" in text


def test_an_unknown_keyword_is_named() -> None:
    with pytest.raises(UsageError, match="unknown keyword 'tempreature'"):
        create_model("openai:m-1", api_key="k-123456789", tempreature=0.2)  # type: ignore[call-overload]


def test_a_value_wire_options_refuses_is_refused() -> None:
    with pytest.raises(UsageError, match="WireOptions.temperature"):
        create_model("openai:m-1", api_key="k-123456789", temperature="hot")  # type: ignore[call-overload]


def test_every_wire_options_field_is_a_keyword() -> None:
    assert set(ModelOptions.__annotations__) == set(WireOptions.__struct_fields__) - {"model"}
    every: dict[str, Any] = {
        "stream": False, "max_tokens": 99, "temperature": 0.5, "top_p": 0.9, "stop": ("END",),
        "tool_choice": ForcedTool(name="f"), "parallel_tool_calls": False,
        "response_format": JsonSchemaFormat(name="out", schema={"type": "object"}),
        "reasoning": ReasoningOptions(effort="low"), "extra_body": {"seed": 1},
        "cache": CachePolicy(key="k"),
    }
    assert set(every) == set(ModelOptions.__annotations__)
    model = create_model("openai:m-1", api_key="k-123456789", **every)
    assert model.options == WireOptions(model="m-1", **every)


_OPTION_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "stream": st.booleans(),
    "max_tokens": st.none() | st.integers(min_value=1, max_value=10**6),
    "temperature": st.none() | st.floats(min_value=0, max_value=2),
    "top_p": st.none() | st.floats(min_value=0, max_value=1),
    "stop": st.lists(st.text(max_size=5), max_size=3).map(tuple),
    "tool_choice": st.none() | st.sampled_from(["auto", "none", "required"])
    | st.builds(ForcedTool, name=st.text(min_size=1, max_size=8)),
    "parallel_tool_calls": st.none() | st.booleans(),
    "response_format": st.none() | st.just(JsonSchemaFormat(name="o", schema={"type": "object"})),
    "reasoning": st.none() | st.builds(ReasoningOptions, effort=st.sampled_from(["low", "high"])),
    "extra_body": st.none() | st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    "cache": st.none() | st.builds(CachePolicy, key=st.text(min_size=1, max_size=5)),
}


@settings(max_examples=80, deadline=None)
@given(provider=st.sampled_from(sorted(PROVIDERS)),
       model=st.text(min_size=1, max_size=30).filter(lambda m: m == m.strip()),
       chosen=st.fixed_dictionaries({}, optional=_OPTION_VALUES))
def test_the_options_are_wire_options_with_streaming_on(provider: str, model: str,
                                                        chosen: dict[str, Any]) -> None:
    assert set(_OPTION_VALUES) == set(ModelOptions.__annotations__)
    built = create_model(f"{provider}:{model}", api_key="k-123456789", **chosen)
    assert built.options == WireOptions(model=model, **{"stream": True, **chosen})
    assert built.adapter.wire == PROVIDERS[provider].wire


def test_the_adapter_settings_pass_through() -> None:
    from bindloop.wire import RetryPolicy, StreamBudgets

    def price(usage: TurnUsage) -> int:
        return usage.input_tokens

    budgets = StreamBudgets(first_token_ms=5_000)
    model = create_model("openai:m-1", api_key="k-123456789", retry=None, price=price,
                         budgets=budgets)
    assert model.retry is None and model._budgets == budgets
    assert model.price(TurnUsage(input_tokens=7, output_tokens=2)) == 7
    assert create_model("openai:m-1", api_key="k-123456789").retry == RetryPolicy()


def test_extra_headers_are_sent(server: ScriptedProviderServer) -> None:
    server.enqueue("p", turn_reply("openai_chat", ANSWER, stream=True))
    model = create_model("openai:m-1", api_key="k-123456789", base_url=server.base_url("p"),
                         headers={"x-title": "bindloop"})
    _complete(model)
    assert ("x-title", "bindloop") in server.requests[0].headers
    with pytest.raises(UsageError, match="headers="):
        create_model("openai:m-1", api_key="k-123456789", headers="x-title: b")  # type: ignore[call-overload]


# ---- no key in any message or repr --------------------------------------------------------------

# A key is not a provider's or a keyword's name ("openai-responses", "temperature" are accepted),
# and mixes letters and digits, as real keys do (an all-letter one may be a word of the message).
_NAMES = {*PROVIDERS, *inspect.signature(create_model).parameters,
          *ModelOptions.__annotations__}
_KEYS = st.text(alphabet=string.ascii_letters + string.digits + "-_", min_size=8,
                max_size=60).filter(lambda k: k not in _NAMES and any(c.isdigit() for c in k)
                                    and any(c.isalpha() for c in k))


def _mistakes(key: str) -> list[Callable[[], object]]:
    """Bad calls a hurried user makes with the key at hand."""
    def build(*args: Any, **kwargs: Any) -> Callable[[], object]:
        return lambda: create_model(*args, **kwargs)

    with_key: dict[str, Any] = {"api_key": key}
    # A key create_model was never handed as one cannot be recognised: only the message's own
    # rule protects it (an unknown provider name is shown up to 20 characters; real keys are
    # longer: Gemini's 39, OpenAI's 51 and more, Anthropic's 108).
    unknown = [build(key), build(f"{key}:gpt-5.1")] if len(key) > 20 else [build(key)]
    return [
        *unknown,
        build(key, **with_key),                                  # the key as the model string
        build(f"{key}:gpt-5.1", **with_key),                     # the key as the provider
        build("openai:gpt-5.1", temperature=key, **with_key),    # the key in the wrong place
        build("openai:gpt-5.1", max_tokens=key, **with_key),
        build("openai:gpt-5.1", stop=key, **with_key),
        build("openai:gpt-5.1", tool_choice=key, **with_key),
        build("openai:gpt-5.1", extra_body=key, **with_key),
        build("openai:gpt-5.1", headers=key, **with_key),
        build("openai:gpt-5.1", base_url=key, **with_key),
        build("openai:gpt-5.1", stream=key, **with_key),
        build("openai:gpt-5.1", budgets=key, **with_key),
        build("openai:gpt-5.1", retry=key, **with_key),
        build("openai:gpt-5.1", **{key: 1}, **with_key),         # the key as a keyword
        build("openai:gpt-5.1", tempreature=1, **with_key),
        build("openai:gpt-5.1", api_key=key + " \n"),            # a mangled paste
        build("openai:gpt-5.1", api_key=" " + key),
        build("openai:gpt-5.1", env={"OPENAI_API_KEY": key + "\n"}),
        build("openai:gpt-5.1", env={"OPENAI_API_KEY": key}, temperature=key),
        build("anthropic:claude-x", fallback=key, **with_key),
        build("anthropic:claude-x", fallback=f"{key}:x", **with_key),
        build("anthropic:claude-x", fallback="openai:gpt-5.1", **with_key),  # no OPENAI_API_KEY
        build("anthropic:claude-x", fallback=[key], **with_key),
        build("anthropic:claude-x", fallback=[1], **with_key),
        build("anthropic:claude-x", fallback=[], **with_key),
        build("anthropic:claude-x", env={"ANTHROPIC_API_KEY": key}, fallback="openai:gpt-5.1"),
        build("anthropic:claude-x", env={"ANTHROPIC_API_KEY": key}, fetch=key),
    ]


def _texts(exc: BaseException) -> Iterator[str]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield str(current)
        yield repr(current)
        yield from (str(a) for a in current.args)
        current = current.__cause__ or current.__context__


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=_KEYS)
def test_no_error_shows_the_key(key: str) -> None:
    for i, mistake in enumerate(_mistakes(key)):
        try:
            mistake()
        except UsageError as exc:
            for text in _texts(exc):
                assert key not in text, (i, text)
        else:
            raise AssertionError(f"mistake {i} was accepted")


@settings(max_examples=30, deadline=None)
@given(key=_KEYS)
def test_no_repr_shows_the_key(key: str) -> None:
    model = create_model("openai:gpt-5.1", api_key=key)
    routed = create_model("anthropic:claude-x", api_key=key, fallback=model)
    for obj in (model, model.transport, model.options, routed, routed.plan, routed.models):
        assert key not in repr(obj)
        assert key not in str(obj)


# ---- fallback -----------------------------------------------------------------------------------

_OVERLOADED = b'{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}'


def test_fallback_serves_from_the_secondary_when_the_primary_answers_503(
        server: ScriptedProviderServer) -> None:
    server.enqueue("primary", error_reply(503, _OVERLOADED))
    server.enqueue("backup", turn_reply("openai_chat", ANSWER, stream=True))
    model = create_model(
        "anthropic:claude-x", api_key="k-anthropic-1", base_url=server.base_url("primary"),
        fallback=create_model("openai:gpt-x", api_key="k-openai-1",
                              base_url=server.base_url("backup")))
    assert isinstance(model, RoutedModel)
    assert _complete(model).text == "hello live"
    first, second = server.requests
    assert first.path == "/primary/v1/messages" and ("x-api-key", "k-anthropic-1") in first.headers
    assert second.path == "/backup/chat/completions"
    assert ("authorization", "Bearer k-openai-1") in second.headers
    assert msgspec.json.decode(second.body)["stream"] is True
    assert model.last_result is not None and model.last_result.served is not None
    assert model.last_result.served.provider_id == "openai"
    [failed] = [a for a in model.last_result.attempts if a.outcome == "failed"]
    assert (failed.provider_id, failed.status_code) == ("anthropic", 503)


def test_a_fallback_string_reads_its_own_variable_and_shares_the_options(
        server: ScriptedProviderServer, monkeypatch: pytest.MonkeyPatch) -> None:
    _loopback_providers(monkeypatch, server)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k-anthropic-env")
    monkeypatch.setenv("OPENAI_API_KEY", "k-openai-env")
    server.enqueue("anthropic", error_reply(503, _OVERLOADED))
    server.enqueue("openai", turn_reply("openai_chat", ANSWER, stream=True))
    model = create_model("anthropic:claude-x", fallback="openai:gpt-x", max_tokens=64)
    assert _complete(model).text == "hello live"
    first, second = server.requests
    assert ("x-api-key", "k-anthropic-env") in first.headers
    assert ("authorization", "Bearer k-openai-env") in second.headers
    body = msgspec.json.decode(second.body)
    assert body["model"] == "gpt-x" and body["max_completion_tokens"] == 64
    assert body["stream"] is True


def test_a_fallback_string_gets_neither_the_key_nor_the_base_url(
        server: ScriptedProviderServer, monkeypatch: pytest.MonkeyPatch) -> None:
    _loopback_providers(monkeypatch, server)
    monkeypatch.setenv("OPENAI_API_KEY", "k-openai-env")
    server.enqueue("primary", error_reply(503, b'{"error":{"message":"busy"}}'))
    server.enqueue("openai", turn_reply("openai_chat", ANSWER, stream=True))
    model = create_model("openai:local-model", api_key="k-local-1",
                         base_url=server.base_url("primary"), fallback="openai:gpt-x")
    _complete(model)
    first, second = server.requests
    assert ("authorization", "Bearer k-local-1") in first.headers
    assert second.path == "/openai/chat/completions"
    assert ("authorization", "Bearer k-openai-env") in second.headers


def test_route_ids_are_provider_names_numbered_when_one_repeats() -> None:
    model = create_model("openai:a", api_key="k-123456789", fallback=[
        create_model("openai:b", api_key="k-123456789"),
        create_model("google:c", api_key="k-123456789"),
        create_model("openai-responses:d", api_key="k-123456789"),
        create_model("openai:e", api_key="k-123456789")])
    [stage] = model.plan.stages
    assert [(c.provider_id, c.provider_invocation_model) for c in stage.candidates] == [
        ("openai", "a"), ("openai-2", "b"), ("google", "c"), ("openai-responses", "d"),
        ("openai-3", "e")]


@pytest.mark.parametrize(("fallback", "message"), [
    ([], "non-empty sequence"),
    (7, "got int"),
    (["openai:b", 3], "entry 1 is a int"),
])
def test_a_bad_fallback_is_refused(fallback: Any, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        create_model("openai:a", api_key="k-123456789", fallback=fallback, env={
            "OPENAI_API_KEY": "k-123456789"})


# ---- in an agent -------------------------------------------------------------------------------

class Weather(msgspec.Struct):
    city: str
    high_c: int


def test_an_agent_gets_a_typed_answer_through_a_model_from_one_line(
        server: ScriptedProviderServer) -> None:
    from bindloop.agent import create_agent, equip_instruction, prompt_agent

    answer = ModelTurnResult(text='{"city": "Lisbon", "high_c": 24}', finish_reason="stop",
                             usage=TurnUsage(input_tokens=5, output_tokens=9))
    server.enqueue("p", turn_reply("openai_chat", answer, stream=True))

    async def handler(city: str) -> Weather:
        equip_instruction(f"Today's weather in {city}?")
        return await prompt_agent(Weather)

    model = create_model("openai:gpt-x", api_key="k-123456789", base_url=server.base_url("p"))
    agent = create_agent(id="weather", handler=handler, model=model)
    assert anyio.run(agent, "Lisbon") == Weather(city="Lisbon", high_c=24)
    body = msgspec.json.decode(server.requests[0].body)
    assert body["stream"] is True and body["response_format"]["type"] == "json_schema"


# ---- the docs ----------------------------------------------------------------------------------

def test_the_wire_page_example_builds_what_it_says(monkeypatch: pytest.MonkeyPatch) -> None:
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "wire.md").read_text()
    section = page.split("## A model from one line", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"```python\n(.*?)```", section, re.S)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-env-1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-anthropic-env-1")
    namespace: dict[str, Any] = {"gemini_key": "gemini-key-1"}
    exec(compile(block, "wire.md", "exec"), namespace)
    assert [type(namespace[n]) for n in ("model", "claude", "gemini", "local", "both")] == [
        ModelAdapter, ModelAdapter, ModelAdapter, ModelAdapter, RoutedModel]
    assert namespace["claude"].options.max_tokens == 2048
    assert repr(namespace["local"].transport) == "HttpxTransport('http://127.0.0.1:11434/v1')"
    assert list(namespace["both"].models) == ["anthropic", "openai"]


# ---- the package's one name ---------------------------------------------------------------------

def test_importing_bindloop_hosts_loads_no_model_code() -> None:
    import subprocess

    probe = ("import sys, bindloop.hosts; "
             "print(sorted(m for m in sys.modules if m.startswith(('bindloop.hosts.', "
             "'bindloop.wire', 'httpx'))))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_bindloop_hosts_names_load_on_first_use() -> None:
    from bindloop.hosts.mcp.toolset import mcp_tools

    assert hosts.__all__ == ("create_model", "mcp_tools")
    assert hosts.create_model is create_model and hosts.mcp_tools is mcp_tools
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        hosts.nothing  # noqa: B018
