"""The values every wire adapter shares: the HTTP request it builds, the options it reads, and the
two protocols (:class:`WireAdapter`, :class:`StreamDecoder`) the composition relies on."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Literal, Protocol, TypeAlias

import msgspec

from ..clock import Clock
from ..completion import StreamEvent
from ..contracts import Message, ModelTurnResult, ToolDefinition
from ._errors import ProviderHttpError

__all__ = (
    "ForcedTool",
    "Headers",
    "HttpRequest",
    "JsonSchemaFormat",
    "ReasoningOptions",
    "StreamDecoder",
    "ToolChoice",
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


class ForcedTool(msgspec.Struct, frozen=True, kw_only=True):
    """``tool_choice`` that forces one named tool."""

    name: str


ToolChoice: TypeAlias = Literal["auto", "none", "required"] | ForcedTool


class JsonSchemaFormat(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Structured output: the answer text must be JSON matching ``schema``."""

    name: str
    schema: dict[str, object]
    strict: bool = True
    description: str | None = None


class ReasoningOptions(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Reasoning / thinking controls. ``effort`` drives OpenAI (``reasoning_effort`` /
    ``reasoning.effort``) and Gemini 3 (``thinkingLevel``); ``budget_tokens`` drives Anthropic
    extended thinking and Gemini 2.5 ``thinkingBudget``; ``summary`` asks OpenAI Responses for a
    reasoning summary; ``include_thoughts`` asks Gemini for thought summaries."""

    effort: Literal["minimal", "low", "medium", "high"] | None = None
    budget_tokens: int | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None
    include_thoughts: bool = True


class WireOptions(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """Per-request options, provider-neutral. ``model`` is the provider's invocation name.
    ``extra_body`` is merged into the top level of the JSON body last (an escape hatch for a field
    this layer does not model; it wins over what the adapter wrote)."""

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


class StreamDecoder(Protocol):
    """Turns one streamed response body into normalized stream events.

    ``feed`` returns the events the bytes completed (maybe none); ``end`` is called once at EOF and
    raises :class:`~bindloop.wire.IncompleteStreamError` if the wire's terminal event never came.
    A provider error inside the stream is returned as an :class:`~bindloop.completion.ErrorEvent`
    holding a :class:`~bindloop.wire.ProviderHttpError`; malformed chunks raise
    :class:`~bindloop.wire.WireDecodeError`; oversized lines :class:`~bindloop.wire.SseLimitError`.
    """

    def feed(self, data: bytes) -> list[StreamEvent]: ...

    def end(self) -> list[StreamEvent]: ...


class WireAdapter(Protocol):
    """A pure translator between the canonical transcript and one provider's JSON wire."""

    @property
    def wire(self) -> WireName: ...

    def build_request(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                      options: WireOptions) -> HttpRequest: ...

    def parse_response(self, body: bytes) -> ModelTurnResult: ...

    def stream_decoder(self) -> StreamDecoder: ...

    def classify_error(self, status: int, headers: Headers, body: bytes, *,
                       now: Clock | None = None) -> ProviderHttpError: ...

    def auth_headers(self, api_key: str) -> tuple[tuple[str, str], ...]: ...
