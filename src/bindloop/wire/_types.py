"""The values every wire adapter shares: the HTTP request it builds, the options it reads, and the
two protocols (:class:`WireAdapter`, :class:`StreamDecoder`) the composition relies on."""

from __future__ import annotations

import math

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol, TypeAlias

import msgspec

from ..clock import Clock
from ..errors import UsageError
from ..completion import StreamEvent
from ..contracts import Message, ModelTurnResult, ToolDefinition
from ..model import (  # re-exported for the wire modules that read them with WireOptions
    ForcedTool as ForcedTool,
    JsonSchemaFormat as JsonSchemaFormat,
    ToolChoice as ToolChoice,
)
from ._errors import ProviderHttpError
from ._sse import SseEvent

__all__ = (
    "ANTHROPIC_CACHE_BREAKPOINTS",
    "CachePolicy",
    "Headers",
    "HttpRequest",
    "ReasoningOptions",
    "StreamDecoder",
    "WireAdapter",
    "WireName",
    "WireOptions",
)

WireName: TypeAlias = Literal["openai_chat", "openai_responses", "anthropic", "gemini"]
Headers: TypeAlias = Mapping[str, str] | Iterable[tuple[str, str]]


class HttpRequest(msgspec.Struct, frozen=True, kw_only=True):
    """What an adapter asks the host to send. ``path`` is relative to the provider base URL the host
    holds (OpenAI-style bases end in ``/v1``; Anthropic's and Gemini's do not) and may carry a query.
    ``headers`` never include credentials: the host adds them (see ``auth_headers``). ``stream``
    says the response is an SSE body to feed to the adapter's :meth:`WireAdapter.stream_decoder`."""

    method: str
    path: str
    headers: tuple[tuple[str, str], ...]
    body: bytes
    stream: bool = False

    def redacted_headers(self) -> tuple[tuple[str, str], ...]:
        """``headers`` with every credential-bearing value replaced by ``<redacted>`` (see
        :func:`redact_headers`): what a repr, a log line or an error message may show."""
        return redact_headers(self.headers)

    def __repr__(self) -> str:
        # A host may still put a credential into the headers; a repr lands in logs and tracebacks.
        return (f"HttpRequest(method={self.method!r}, path={self.path!r}, "
                f"headers={redact_headers(self.headers)!r}, body=<{len(self.body)} bytes>, "
                f"stream={self.stream!r})")

    def __rich_repr__(self) -> list[tuple[str, Any]]:
        return [("method", self.method), ("path", self.path),
                ("headers", redact_headers(self.headers)), ("body", f"<{len(self.body)} bytes>"),
                ("stream", self.stream)]


_SECRET_HEADERS = frozenset({
    "authorization", "proxy-authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie",
    "set-cookie", "x-auth-token",
})
_SECRET_WORDS = ("key", "token", "secret", "auth", "password", "credential", "signature")
REDACTED = "<redacted>"


def redact_headers(headers: Headers) -> tuple[tuple[str, str], ...]:
    """``headers`` with the value of every credential-bearing header replaced by ``<redacted>``:
    the well-known ones (``authorization``, ``x-api-key``, ``x-goog-api-key``, cookies, ...) and any
    whose name mentions a key, token, secret, password or auth. For reprs, logs and errors."""
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for name, value in pairs:
        lowered = str(name).lower()
        if lowered in _SECRET_HEADERS or any(word in lowered for word in _SECRET_WORDS):
            value = REDACTED
        out.append((name, value))
    return tuple(out)


class ReasoningOptions(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Reasoning / thinking controls. ``effort`` drives OpenAI (``reasoning_effort`` /
    ``reasoning.effort``) and Gemini 3 (``thinkingLevel``); ``budget_tokens`` drives Anthropic
    extended thinking and Gemini 2.5 ``thinkingBudget``; ``summary`` asks OpenAI Responses for a
    reasoning summary; ``include_thoughts`` asks Gemini for thought summaries."""

    effort: Literal["minimal", "low", "medium", "high"] | None = None
    budget_tokens: int | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    include_thoughts: bool = True

    def __post_init__(self) -> None:
        if self.effort not in (None, "minimal", "low", "medium", "high"):
            raise UsageError("ReasoningOptions.effort must be 'minimal', 'low', 'medium', 'high' "
                             f"or None, got {self.effort!r}")
        b = self.budget_tokens
        if b is not None and (isinstance(b, bool) or not isinstance(b, int)):
            # Any int: Gemini reads -1 as "dynamic" and 0 as "off"; the wire decides the rest.
            raise UsageError(f"ReasoningOptions.budget_tokens must be an int or None, got {b!r}")
        if self.summary not in (None, "auto", "concise", "detailed"):
            raise UsageError("ReasoningOptions.summary must be 'auto', 'concise', 'detailed' or "
                             f"None, got {self.summary!r}")
        if not isinstance(self.include_thoughts, bool):
            raise UsageError("ReasoningOptions.include_thoughts must be True or False, got "
                             f"{self.include_thoughts!r}")


ANTHROPIC_CACHE_BREAKPOINTS = 4
"""The most ``cache_control`` breakpoints one Anthropic request may carry."""


class CachePolicy(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Ask the provider to cache the stable prefix of the prompt, where the wire has a control.

    Anthropic (explicit breakpoints, at most :data:`ANTHROPIC_CACHE_BREAKPOINTS`): a
    ``cache_control`` on the last system block (``system``), on the last tool (``tools``), and on
    the last block of each of the ``turns`` most recent user turns (the prompt so far is the next
    turn's stable prefix: the last one writes it, the one before reads what the previous request
    wrote). ``ttl`` is ``"5m"`` (the API's default) or ``"1h"``.

    OpenAI (Chat and Responses cache automatically): ``key`` is sent as ``prompt_cache_key`` (it
    routes requests sharing a prefix to the same cache) and ``retention`` as
    ``prompt_cache_retention``. Gemini (implicit caching is automatic): ``cached_content`` names a
    ``cachedContents/...`` resource the host created; it is sent as ``cachedContent``, the system
    instruction, tools and tool config are left out (they live in the cache), and so are the first
    ``cached_messages`` messages after the system ones (the contents the cache holds).

    Fields a wire has no control for are ignored by it, so one policy serves a route across
    providers."""

    system: bool = True
    tools: bool = True
    turns: int = 2
    ttl: Literal["5m", "1h"] | None = None
    key: str | None = None
    retention: Literal["in_memory", "24h"] | None = None
    cached_content: str | None = None
    cached_messages: int = 0

    def __post_init__(self) -> None:
        for field in ("system", "tools"):
            if not isinstance(getattr(self, field), bool):
                raise UsageError(f"CachePolicy.{field} must be True or False, got "
                                 f"{getattr(self, field)!r}")
        for field in ("turns", "cached_messages"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise UsageError(f"CachePolicy.{field} must be an int >= 0, got {value!r}")
        used = self.system + self.tools + self.turns
        if used > ANTHROPIC_CACHE_BREAKPOINTS:
            raise UsageError(
                f"CachePolicy asks for {used} cache breakpoints (system {int(self.system)}, tools "
                f"{int(self.tools)}, turns {self.turns}); Anthropic allows at most "
                f"{ANTHROPIC_CACHE_BREAKPOINTS} per request")
        if self.ttl not in (None, "5m", "1h"):
            raise UsageError(f"CachePolicy.ttl must be '5m', '1h' or None, got {self.ttl!r}")
        if self.retention not in (None, "in_memory", "24h"):
            raise UsageError("CachePolicy.retention must be 'in_memory', '24h' or None, got "
                             f"{self.retention!r}")
        for field in ("key", "cached_content"):
            value = getattr(self, field)
            if value is not None and (not isinstance(value, str) or not value):
                raise UsageError(f"CachePolicy.{field} must be a non-empty str or None, got "
                                 f"{value!r}")
        if self.cached_messages and self.cached_content is None:
            raise UsageError("CachePolicy.cached_messages needs cached_content (the Gemini cache "
                             "that holds those messages)")


class WireOptions(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Per-request options, provider-neutral. ``model`` is the provider's invocation name.
    ``extra_body`` is merged into the top level of the JSON body last (an escape hatch for a field
    this layer does not model; it wins over what the adapter wrote). ``cache`` asks for prompt
    caching (:class:`CachePolicy`)."""

    model: str
    stream: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    response_format: JsonSchemaFormat | None = None
    reasoning: ReasoningOptions | None = None
    extra_body: dict[str, object] | None = None
    cache: CachePolicy | None = None

    def __post_init__(self) -> None:
        _check_options(self)


_TOOL_CHOICES = ("auto", "none", "required")


def _bad(field: str, accepted: str, value: object) -> UsageError:
    shown = repr(value) if len(repr(value)) <= 80 else f"a {type(value).__name__}"
    return UsageError(f"WireOptions.{field} must be {accepted}, got {shown}")


def _number(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _check_options(o: WireOptions) -> None:
    """Every field at construction: a wrong type would otherwise go out as JSON (a temperature of
    ``"hot"``) and come back as the provider's 400, or be read as truthy (``stream="yes"``)."""
    if not isinstance(o.model, str) or not o.model:
        raise _bad("model", "the provider's model name (a non-empty str)", o.model)
    if not isinstance(o.stream, bool):
        raise _bad("stream", "True or False", o.stream)
    if o.max_tokens is not None and (isinstance(o.max_tokens, bool)
                                     or not isinstance(o.max_tokens, int) or o.max_tokens < 1):
        raise _bad("max_tokens", "a positive int or None", o.max_tokens)
    for field in ("temperature", "top_p"):
        value = getattr(o, field)
        if value is not None and (not _number(value) or value < 0):
            raise _bad(field, "a finite non-negative number or None", value)
    if not isinstance(o.stop, tuple) or not all(isinstance(x, str) for x in o.stop):
        raise _bad("stop", "a tuple of str", o.stop)
    if o.tool_choice is not None and not isinstance(o.tool_choice, ForcedTool) \
            and o.tool_choice not in _TOOL_CHOICES:
        raise _bad("tool_choice", "'auto', 'none', 'required', a ForcedTool or None",
                   o.tool_choice)
    if o.parallel_tool_calls is not None and not isinstance(o.parallel_tool_calls, bool):
        raise _bad("parallel_tool_calls", "True, False or None", o.parallel_tool_calls)
    if o.response_format is not None and not isinstance(o.response_format, JsonSchemaFormat):
        raise _bad("response_format", "a JsonSchemaFormat or None", o.response_format)
    if o.reasoning is not None and not isinstance(o.reasoning, ReasoningOptions):
        raise _bad("reasoning", "a ReasoningOptions or None", o.reasoning)
    if o.cache is not None and not isinstance(o.cache, CachePolicy):
        raise _bad("cache", "a CachePolicy or None", o.cache)
    if o.extra_body is not None and not (isinstance(o.extra_body, dict)
                                         and all(isinstance(k, str) for k in o.extra_body)):
        raise _bad("extra_body", "a dict with str keys or None", o.extra_body)


class StreamDecoder(Protocol):
    """Turns the SSE events of one streamed response into normalized stream events. It never sees
    bytes: the caller splits them once (a :class:`~bindloop.wire.WireStream`), so the same pass
    feeds the decoder and the stall watchdog.

    ``decode`` returns the stream events a batch of SSE events completed (maybe none; one batch per
    read, so the decoder's loop runs once per read, not a call per event); ``end`` is called
    once at EOF and raises :class:`~bindloop.wire.IncompleteStreamError` if the wire's terminal
    event never came. A provider error inside the stream is returned as an
    :class:`~bindloop.completion.ErrorEvent` holding a :class:`~bindloop.wire.ProviderHttpError`,
    and ends the stream (what follows it is ignored, and ``end`` does not raise);
    malformed events raise :class:`~bindloop.wire.WireDecodeError`.
    """

    def decode(self, events: Sequence[SseEvent]) -> list[StreamEvent]: ...

    def end(self) -> list[StreamEvent]: ...


class WireAdapter(Protocol):
    """A pure translator between the canonical transcript and one provider's JSON wire.

    ``response_events`` reads a non-streamed body as the stream events a streamed one would give
    (``parse_response`` is their fold), so a model adapter folds either path once and its event
    sink sees both alike."""

    @property
    def wire(self) -> WireName: ...

    def build_request(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                      options: WireOptions) -> HttpRequest: ...

    def parse_response(self, body: bytes) -> ModelTurnResult: ...

    def response_events(self, body: bytes) -> list[StreamEvent]: ...

    def stream_decoder(self) -> StreamDecoder: ...

    def classify_error(self, status: int, headers: Headers, body: bytes, *,
                       now: Clock | None = None) -> ProviderHttpError: ...

    def auth_headers(self, api_key: str) -> tuple[tuple[str, str], ...]: ...
