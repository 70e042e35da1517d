"""``create_model("provider:model")``: a model from one line.

``create_model("openai:gpt-5.1")`` is a :class:`~bindloop.wire.ModelAdapter` on the OpenAI Chat
Completions wire, sending to ``https://api.openai.com/v1`` with the key from ``OPENAI_API_KEY``,
streaming. The providers are :data:`PROVIDERS`: ``openai``, ``openai-responses``, ``anthropic`` and
``google`` (the Gemini API). ``base_url=`` points any of them at another endpoint speaking the same
wire (``create_model("openai:llama3", base_url="http://127.0.0.1:11434/v1")``).

Where the key comes from:

* ``api_key=`` always wins;
* else, on CPython, the provider's variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``,
  ``GEMINI_API_KEY``) in ``env`` (default ``os.environ``), read when the model is built;
* under Pyodide and Cloudflare Python Workers (``sys.platform == "emscripten"``) no environment is
  read: pass ``api_key=``, or ``env=`` the Worker's bindings (``env=self.env``), which are read
  the same way;
* with ``base_url=`` the provider's variable is not read at all (a key for the provider's own
  endpoint is never sent to another one): the key is ``api_key=``, or none (a local server).

Without ``base_url=``, ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL`` move the endpoint where the key
variable is read, as the providers' own SDKs do (a gateway or local server configured beside the
key): so a program written for the provider runs unchanged against another endpoint.

The transport is :class:`~bindloop.hosts.transports.httpx.HttpxTransport` on CPython (extra
``bindloop[httpx]``) and :class:`~bindloop.hosts.transports.js_fetch.FetchTransport` under emscripten.

Every :class:`~bindloop.wire.WireOptions` field but ``model`` is a keyword (``max_tokens=``,
``temperature=``, ``reasoning=``, ...); ``stream`` defaults to ``True`` here, so a listener sees
text as it arrives. ``fallback=`` (a model string, a model, or several) makes a
:class:`~bindloop.wire.RoutedModel` (through :func:`~bindloop.wire.fallback_route`) that tries
them in order when the one before fails in a way routing falls back on (a 5xx, a 429, a refused
connection, a stall before output).

No key appears in an error message or a ``repr``: messages name the variable and the parameter,
never a value.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypedDict, Unpack, overload

from bindloop.contracts import TurnUsage
from bindloop.errors import UsageError
from bindloop.wire import (
    CachePolicy,
    JsonSchemaFormat,
    ModelAdapter,
    ReasoningOptions,
    Redactor,
    RetryPolicy,
    RoutedModel,
    StreamBudgets,
    ToolChoice,
    Transport,
    WireName,
    WireOptions,
    create_wire_adapter,
    fallback_route,
)

__all__ = ("PROVIDERS", "MissingApiKeyError", "ModelOptions", "Provider", "create_model")


@dataclass(frozen=True)
class Provider:
    """One provider a model string can name: the ``wire`` it speaks, its ``base_url``, and
    ``key_variable``, the environment variable its key is read from on CPython, and
    ``base_url_variable``, the one that moves its endpoint there (as the provider's own SDK
    reads it: a gateway or a local server the user configured beside the key)."""

    name: str
    wire: WireName
    base_url: str
    key_variable: str
    base_url_variable: str | None = None


PROVIDERS: Mapping[str, Provider] = MappingProxyType({p.name: p for p in (
    Provider(name="openai", wire="openai_chat", base_url="https://api.openai.com/v1",
             key_variable="OPENAI_API_KEY", base_url_variable="OPENAI_BASE_URL"),
    Provider(name="openai-responses", wire="openai_responses",
             base_url="https://api.openai.com/v1", key_variable="OPENAI_API_KEY",
             base_url_variable="OPENAI_BASE_URL"),
    Provider(name="anthropic", wire="anthropic", base_url="https://api.anthropic.com",
             key_variable="ANTHROPIC_API_KEY", base_url_variable="ANTHROPIC_BASE_URL"),
    Provider(name="google", wire="gemini", base_url="https://generativelanguage.googleapis.com",
             key_variable="GEMINI_API_KEY"),
)})
"""The providers ``create_model`` knows, by the name a model string starts with."""

# Route ids for fallback models passed as objects: the provider a wire belongs to.
_WIRE_PROVIDER: Mapping[str, str] = MappingProxyType(
    {p.wire: p.name for p in PROVIDERS.values()})


class MissingApiKeyError(UsageError):
    """``create_model`` found no API key for ``provider``: neither ``api_key=`` nor, where one is
    read, the environment variable ``variable``. The message names both, never a value."""

    def __init__(self, message: str, *, provider: str, variable: str) -> None:
        super().__init__(message)
        self.provider = provider
        self.variable = variable


class ModelOptions(TypedDict, total=False):
    """The :class:`~bindloop.wire.WireOptions` fields ``create_model`` takes as keywords (every one
    but ``model``, which the model string names). Each is checked as ``WireOptions`` checks it."""

    stream: bool
    max_tokens: int | None
    temperature: float | None
    top_p: float | None
    stop: tuple[str, ...]
    tool_choice: ToolChoice | None
    parallel_tool_calls: bool | None
    response_format: JsonSchemaFormat | None
    reasoning: ReasoningOptions | None
    extra_body: dict[str, object] | None
    cache: CachePolicy | None


_OPTION_NAMES = frozenset(WireOptions.__struct_fields__) - {"model"}
_FORM = ("a model string is 'provider:model' (e.g. 'openai:gpt-5.1', "
         "'anthropic:claude-sonnet-4-5', 'google:gemini-2.5-flash')")


def _known() -> str:
    return ", ".join(sorted(PROVIDERS))


def _shown_provider(name: str) -> str:
    # Shown only when it looks like a provider name: a string of another shape may be a key passed
    # in the wrong place, and an error message must not repeat it.
    if 0 < len(name) <= 20 and all(c.isascii() and (c.isalnum() or c in "-_.") for c in name):
        return repr(name)
    return f"of {len(name)} characters"


def _parse(spec: object) -> tuple[Provider, str]:
    if not isinstance(spec, str):
        raise UsageError(f"create_model() takes the model as a str, got {type(spec).__name__}; "
                         f"{_FORM}")
    name, colon, model = spec.partition(":")
    if not colon or not name or not model:
        what = ("has no ':'" if not colon else "has no provider before ':'" if not name
                else "has no model after ':'")
        # The string itself is not shown: a key passed as the first argument has no ':' either.
        raise UsageError(f"create_model(): the model string {what}; {_FORM}")
    provider = PROVIDERS.get(name)
    if provider is None:
        raise UsageError(f"create_model(): unknown provider {_shown_provider(name)}; known "
                         f"providers: {_known()} (any OpenAI-compatible endpoint is "
                         "'openai:<model>' with base_url=...)")
    if model != model.strip():
        raise UsageError("create_model(): the model name after ':' has leading or trailing "
                         f"whitespace; {_FORM}")
    return provider, model


def _on_emscripten() -> bool:
    """Pyodide (browser, Node) and Cloudflare Python Workers: read when a model is built."""
    return sys.platform == "emscripten"


def _read(env: object, variable: str) -> object:
    """``variable`` of ``env``: a mapping's item or an object's attribute (a Worker's ``env``)."""
    if isinstance(env, Mapping):
        return env.get(variable)
    return getattr(env, variable, None)


def _checked(value: str, where: str) -> str:
    # A key is sent as a header value: visible ASCII only (a space or a line break is a mangled
    # paste, which httpx would otherwise refuse with the key in its message).
    if not all("!" <= c <= "~" for c in value):
        raise UsageError(f"create_model(): {where} ({len(value)} characters) holds a space, a line "
                         "break or a non-ASCII character, which no HTTP header can carry; check "
                         "how it was set")
    return value


def _resolve_key(provider: Provider, *, api_key: str | None, env: object, own_endpoint: bool,
                 emscripten: bool, keys: list[str]) -> str | None:
    """The key to send; ``None`` for none (an endpoint of the caller's own that needs none). A key
    read from ``env`` is added to ``keys`` (what error messages are redacted of)."""
    var = provider.key_variable
    if api_key is not None:
        if not isinstance(api_key, str):
            raise UsageError(f"create_model(api_key=...) must be a str, got "
                             f"{type(api_key).__name__}")
        if not api_key:
            raise UsageError("create_model(api_key=...) is empty; pass the key, or leave api_key "
                             f"out to read {var}")
        return _checked(api_key, "the api_key= value")
    if own_endpoint:
        source = env if env is not None else None if emscripten else os.environ
    else:
        # base_url=: the provider's variable goes to another endpoint only when env= says so.
        source = env
    value = None if source is None else _read(source, var)
    if value is None or value == "":
        if not own_endpoint:
            return None
        raise _missing(provider, emscripten=emscripten, env_given=env is not None)
    where = f"env's {var}" if env is not None else f"the environment variable {var}"
    if not isinstance(value, str):
        raise UsageError(f"create_model(): {where} is a {type(value).__name__}, not a str key")
    keys.append(value)
    return _checked(value, where)


def _missing(provider: Provider, *, emscripten: bool, env_given: bool) -> MissingApiKeyError:
    var, spec_name = provider.key_variable, provider.name
    if env_given:
        text = (f"create_model('{spec_name}:...'): no API key: env= has no {var}; set {var} "
                "there or pass api_key=...")
    elif emscripten:
        text = (f"create_model('{spec_name}:...'): no API key: under Pyodide and Workers no "
                f"environment variable is read, so pass api_key=... (in a Worker, the secret "
                f"{var}: api_key=self.env.{var}, or env=self.env)")
    else:
        text = (f"create_model('{spec_name}:...'): no API key: set the {var} environment "
                "variable or pass api_key=...")
    return MissingApiKeyError(text, provider=spec_name, variable=var)


def _transport(base_url: str, headers: tuple[tuple[str, str], ...], *, fetch: Any,
               emscripten: bool) -> Transport:
    if emscripten:
        from bindloop.hosts.transports.js_fetch import FetchTransport

        return FetchTransport(base_url, headers=headers, fetch=fetch)
    if fetch is not None:
        raise UsageError("create_model(fetch=...) is the JS fetch of Pyodide or a Worker; on "
                         "CPython requests go through httpx (leave fetch out)")
    from bindloop.hosts.transports.httpx import HttpxTransport

    return HttpxTransport(base_url, headers=headers)


def _extra_headers(headers: object) -> tuple[tuple[str, str], ...]:
    try:
        items = headers.items() if isinstance(headers, Mapping) else headers
        pairs = tuple((n, v) for n, v in items)  # type: ignore[attr-defined]
    except (TypeError, ValueError):
        pairs = None
    if pairs is None or isinstance(headers, (str, bytes)) or not all(
            isinstance(n, str) and isinstance(v, str) for n, v in pairs):
        raise UsageError("create_model(headers=...) must be a mapping or (name, value) pairs of "
                         f"str, got {type(headers).__name__}")
    return pairs


def _wire_options(model: str, options: Mapping[str, object]) -> WireOptions:
    unknown = sorted(str(k) for k in options if k not in _OPTION_NAMES)
    if unknown:
        raise UsageError(f"create_model() got an unknown keyword {', '.join(map(repr, unknown))}: "
                         "neither a create_model parameter nor a WireOptions field; the "
                         f"WireOptions keywords are {', '.join(sorted(_OPTION_NAMES))} (the model "
                         "string names the model)")
    return WireOptions(model=model, **{"stream": True, **options})  # type: ignore[arg-type]


def _assemble(spec: object, *, api_key: str | None, base_url: str | None, headers: object,
              env: object, fetch: Any, budgets: StreamBudgets | None,
              retry: RetryPolicy | None, price: Callable[[TurnUsage], int] | None,
              options: Mapping[str, object], keys: list[str]) -> ModelAdapter:
    provider, model = _parse(spec)
    if base_url is not None and not isinstance(base_url, str):
        raise UsageError(f"create_model(base_url=...) must be a str URL, got "
                         f"{type(base_url).__name__}")
    emscripten = _on_emscripten()
    key = _resolve_key(provider, api_key=api_key, env=env, own_endpoint=base_url is None,
                       emscripten=emscripten, keys=keys)
    adapter = create_wire_adapter(provider.wire)
    auth = adapter.auth_headers(key) if key is not None else ()
    url = provider.base_url if base_url is None else base_url
    if base_url is None and provider.base_url_variable is not None:
        # The endpoint variable the provider's SDK honours, read where the key is read.
        source = env if env is not None else None if emscripten else os.environ
        moved = None if source is None else _read(source, provider.base_url_variable)
        if isinstance(moved, str) and moved:
            url = moved
    wire_options = _wire_options(model, options)
    transport = _transport(url, (*_extra_headers(headers), *auth), fetch=fetch,
                           emscripten=emscripten)
    if budgets is None:
        return ModelAdapter(adapter, transport, wire_options, retry=retry, price=price)
    return ModelAdapter(adapter, transport, wire_options, budgets=budgets, retry=retry,
                        price=price)


_DEFAULT_RETRY = RetryPolicy()  # ModelAdapter's own default


@overload
def create_model(spec: str, *, api_key: str | None = None, base_url: str | None = None,
                 headers: Mapping[str, str] | Sequence[tuple[str, str]] = (),
                 env: object = None, fetch: Any = None, fallback: None = None,
                 budgets: StreamBudgets | None = None, retry: RetryPolicy | None = _DEFAULT_RETRY,
                 price: Callable[[TurnUsage], int] | None = None,
                 **options: Unpack[ModelOptions]) -> ModelAdapter: ...


@overload
def create_model(spec: str, *, api_key: str | None = None, base_url: str | None = None,
                 headers: Mapping[str, str] | Sequence[tuple[str, str]] = (),
                 env: object = None, fetch: Any = None,
                 fallback: str | ModelAdapter | Sequence[str | ModelAdapter],
                 budgets: StreamBudgets | None = None, retry: RetryPolicy | None = _DEFAULT_RETRY,
                 price: Callable[[TurnUsage], int] | None = None,
                 **options: Unpack[ModelOptions]) -> RoutedModel: ...


def create_model(spec: str, *, api_key: str | None = None, base_url: str | None = None,
                 headers: Mapping[str, str] | Sequence[tuple[str, str]] = (),
                 env: object = None, fetch: Any = None,
                 fallback: str | ModelAdapter | Sequence[str | ModelAdapter] | None = None,
                 budgets: StreamBudgets | None = None, retry: RetryPolicy | None = _DEFAULT_RETRY,
                 price: Callable[[TurnUsage], int] | None = None,
                 **options: Unpack[ModelOptions]) -> ModelAdapter | RoutedModel:
    """A model for ``spec`` (``"provider:model"``; see :data:`PROVIDERS`), streaming by default.

    ``api_key`` wins over the environment; ``env`` is where the provider's variable is read
    (default ``os.environ`` on CPython, nothing under Pyodide and Workers; a mapping, or an object
    with the variable as an attribute, such as a Worker's ``self.env``). ``base_url`` replaces the
    provider's endpoint, and then only ``api_key=`` (or ``env=``) supplies a key. ``headers`` are
    added to every request (after the adapter's own, before the key's). ``fetch`` is the JS fetch
    to use under emscripten (default: the global one). ``budgets``, ``retry`` and ``price`` are
    :class:`~bindloop.wire.ModelAdapter`'s. ``options`` are :class:`~bindloop.wire.WireOptions`
    fields (``stream`` defaults to ``True``).

    ``fallback``: a model string, a model built by ``create_model`` (or any
    :class:`~bindloop.wire.ModelAdapter`), or a sequence of them, tried in order after this one.
    Then the result is a :class:`~bindloop.wire.RoutedModel` (see
    :func:`~bindloop.wire.fallback_route`; each route id is the provider's name, numbered when one
    repeats). A fallback *string* gets this call's ``options``, ``budgets``, ``env`` and ``fetch``;
    not ``api_key``, ``base_url``, ``headers`` or ``price``, which belong to this endpoint (pass
    ``fallback=create_model(...)`` for those).

    Raises :class:`~bindloop.errors.UsageError` for a malformed string (saying the expected form),
    an unknown provider (listing the known ones), a keyword that is not a ``WireOptions`` field
    (naming it) or a value ``WireOptions`` refuses; :class:`MissingApiKeyError` (a ``UsageError``)
    when no key is found, naming the variable and ``api_key=``. No message shows a key.
    """
    # A key handed to the wrong parameter (the model string, temperature=, headers=, fallback=)
    # would be echoed by the check that refuses it: every message raised here passes a redactor of
    # the keys known by then, and the refused error is not chained (it would show the key again).
    keys: list[str] = [api_key] if isinstance(api_key, str) else []
    try:
        return _create(spec, api_key=api_key, base_url=base_url, headers=headers, env=env,
                       fetch=fetch, fallback=fallback, budgets=budgets, retry=retry, price=price,
                       options=options, keys=keys)
    except UsageError as exc:
        refused = exc
    text = Redactor(keys).text(str(refused))
    if text == str(refused):
        raise refused
    raise UsageError(text)  # outside the except block: no __context__ holding the original


def _create(spec: object, *, api_key: str | None, base_url: str | None, headers: object,
            env: object, fetch: Any, fallback: object, budgets: StreamBudgets | None,
            retry: RetryPolicy | None, price: Callable[[TurnUsage], int] | None,
            options: Mapping[str, object], keys: list[str]) -> ModelAdapter | RoutedModel:
    primary = _assemble(spec, api_key=api_key, base_url=base_url, headers=headers, env=env,
                        fetch=fetch, budgets=budgets, retry=retry, price=price, options=options,
                        keys=keys)
    if fallback is None:
        return primary
    entries = ([fallback] if isinstance(fallback, (str, ModelAdapter))
               else list(fallback) if isinstance(fallback, Sequence) else None)
    if not entries:
        raise UsageError("create_model(fallback=...) must be a model string, a ModelAdapter, or "
                         f"a non-empty sequence of them, got {type(fallback).__name__}")
    models = [primary]
    for i, entry in enumerate(entries):
        if isinstance(entry, str):
            models.append(_assemble(entry, api_key=None, base_url=None, headers=(), env=env,
                                    fetch=fetch, budgets=budgets, retry=retry, price=None,
                                    options=options, keys=keys))
        elif isinstance(entry, ModelAdapter):
            models.append(entry)
        else:
            raise UsageError(f"create_model(fallback=...): entry {i} is a "
                             f"{type(entry).__name__}, not a model string or a ModelAdapter")
    return fallback_route(*models, names=_route_names(models))


def _route_names(models: Sequence[ModelAdapter]) -> tuple[str, ...]:
    """Each model's provider name (``openai``, ``anthropic``, ...), numbered from the second time
    one repeats (``openai``, ``openai-2``)."""
    seen: dict[str, int] = {}
    names = []
    for m in models:
        base = _WIRE_PROVIDER.get(getattr(m.adapter, "wire", ""), "model")
        seen[base] = seen.get(base, 0) + 1
        names.append(base if seen[base] == 1 else f"{base}-{seen[base]}")
    return tuple(names)
