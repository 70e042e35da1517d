"""OpenAI Chat Completions (``POST /chat/completions``) and the OpenAI-compatible servers that speak it.

Reasoning: the Chat Completions request has no field for reasoning blocks, so none are sent; on the
way back the non-standard ``reasoning_content`` (DeepSeek, vLLM) and ``reasoning`` (OpenRouter,
Ollama) deltas are read as reasoning. A refusal is surfaced as the turn's text with finish reason
``content_filter``.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Any, Literal

import msgspec

from ..clock import Clock
from ..completion import (
    ErrorEvent,
    ExtraEvent,
    FinishEvent,
    FinishReason,
    ReasoningEvent,
    StreamEvent,
    TextEvent,
    ToolCallChunk,
    ToolCallDeltaError,
    ToolCallEvent,
    UsageEvent,
    collect_turn,
)
from ..contracts import Message, ModelTurnResult, ReasoningPart, ToolDefinition, TurnUsage

from ..errors import TranscriptFormatError
from ._chat_request import message_to_openai_request
from ._cache import (
    DEFAULT_REQUEST_CACHE,
    ArrayBody,
    WireCache,
    array,
    check_cache_size,
    encoded,
    prepare,
    tool_array,
)
from ._common import (
    JSON_HEADERS,
    SSE_ACCEPT,
    body_snippet,
    classify,
    decode_error_body,
    decode_json,
    encode_body,
    finish_reason,
    prepare_history,
    str_field,
    tool_parameters,
)
from ._errors import IncompleteStreamError, ProviderHttpError, WireRequestError
from ._names import OPENAI_NAMES, ToolNames, short_id
from ._sse import SseEvent
from ._types import ForcedTool, Headers, HttpRequest, StreamDecoder, WireName, WireOptions

__all__ = ("OpenAIChatAdapter", "classify_openai_error")

_FINISH: MappingProxyType[str, FinishReason] = MappingProxyType({
    "stop": "stop", "length": "length", "tool_calls": "tool_calls", "function_call": "tool_calls",
    "content_filter": "content_filter",
})


class _Fn(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class _ToolCallDelta(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    function: _Fn | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    refusal: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_ToolCallDelta] | None = None


class _ChunkChoice(msgspec.Struct):
    index: int = 0
    delta: _Delta | None = None
    finish_reason: str | None = None


class _PromptDetails(msgspec.Struct):
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None  # OpenRouter, for providers that bill cache writes


class _CompletionDetails(msgspec.Struct):
    reasoning_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    prompt_tokens_details: _PromptDetails | None = None
    completion_tokens_details: _CompletionDetails | None = None


class _Chunk(msgspec.Struct):
    choices: list[_ChunkChoice] | None = None
    usage: _Usage | None = None
    model: str | None = None
    error: dict[str, Any] | None = None


class _ToolCall(msgspec.Struct):
    id: str
    function: _Fn
    type: str = "function"


class _Message(msgspec.Struct):
    content: str | None = None
    refusal: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None
    tool_calls: list[_ToolCall] | None = None


class _Choice(msgspec.Struct):
    message: _Message
    index: int = 0
    finish_reason: str | None = None


class _Response(msgspec.Struct):
    choices: list[_Choice]
    usage: _Usage | None = None
    model: str | None = None


_CHUNK = msgspec.json.Decoder(_Chunk)
_decode_chunk = _CHUNK.decode
_RESPONSE = msgspec.json.Decoder(_Response)


def _usage(u: _Usage) -> TurnUsage:
    prompt, completion = u.prompt_tokens_details, u.completion_tokens_details
    return TurnUsage(input_tokens=u.prompt_tokens or 0, output_tokens=u.completion_tokens or 0,
                     cached_input_tokens=(prompt.cached_tokens or 0) if prompt else 0,
                     cache_write_tokens=(prompt.cache_write_tokens or 0) if prompt else 0,
                     reasoning_tokens=(completion.reasoning_tokens or 0) if completion else 0)


class OpenAIChatAdapter:
    """The Chat Completions wire.

    ``max_tokens_field`` picks ``max_completion_tokens`` (OpenAI today) or the older ``max_tokens``
    many compatible servers still want; ``sanitize_schemas`` passes tool schemas through
    :func:`~bindloop.schema.sanitize_tool_schema` (strict mode rejects the whole request otherwise).
    ``request_cache`` is how many messages and tool definitions keep their encoded wire form
    between requests (by identity, bounded; ``0`` converts everything on every request): a
    request then converts only what it has not sent before, with the same bytes.
    """

    __slots__ = ("_body", "_cache", "_headers", "_max_tokens_field", "_names", "_sanitize")

    def __init__(self, *, max_tokens_field: Literal["max_completion_tokens", "max_tokens"] =
                 "max_completion_tokens", sanitize_schemas: bool = True,
                 request_cache: int = DEFAULT_REQUEST_CACHE) -> None:
        self._max_tokens_field = max_tokens_field
        self._sanitize = sanitize_schemas
        self._names = ToolNames(OPENAI_NAMES)
        self._cache = WireCache(request_cache) if check_cache_size(request_cache) else None
        self._headers = (JSON_HEADERS, JSON_HEADERS + SSE_ACCEPT)  # by options.stream
        self._body = ArrayBody("messages")  # the cached build's body, around the messages

    @property
    def wire(self) -> WireName:
        return "openai_chat"

    def auth_headers(self, api_key: str) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {api_key}"),)

    # -- requests ------------------------------------------------------------------------------

    def build_request(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                      options: WireOptions) -> HttpRequest:
        cache = self._cache
        if cache is not None:
            try:
                prep = prepare(cache, self._names, messages, tools, options, "openai")
                found = prep.found
                for i in prep.missing:
                    m = messages[i]
                    found[i] = piece = encoded(_message(prep.message(m)))
                    prep.keep(m, piece, len(piece))
                prep.sent()
                wire_tools = tool_array(cache, tools, prep.tools, self._tool)
                return self._kept_request(found, wire_tools, prep.tools, prep.options)
            except Exception:
                # A request the wire refuses: the uncached build below raises the very error,
                # in the same words, as it always did.
                pass
        messages, tools, options = self._names.renamed(messages, tools, options)
        return self._request([_message(m) for m in prepare_history(messages, "openai")],
                             [self._tool(t) for t in tools], tools, options)

    def _kept_request(self, found: list[bytes], wire_tools: msgspec.Raw,
                      tools: Sequence[ToolDefinition], options: WireOptions) -> HttpRequest:
        """The request from the cached build's encoded pieces: each message's encoded form
        (empty for none) and the tool array."""
        if options.extra_body:  # merged over the top level: through the dict
            return self._request(array(found), wire_tools, tools, options)
        return HttpRequest(method="POST", path="/chat/completions",
                           headers=self._headers[bool(options.stream)],
                           body=self._body.write(options, found, wire_tools, bool(tools),
                                                 self._options),
                           stream=options.stream)

    def _request(self, wire_messages: Any, wire_tools: Any, tools: Sequence[ToolDefinition],
                 options: WireOptions) -> HttpRequest:
        """The request of a body built as a dict (its values objects or ``msgspec.Raw``)."""
        body: dict[str, Any] = {"model": options.model, "messages": wire_messages}
        if tools:
            body["tools"] = wire_tools
        body.update(self._options(options, bool(tools)))
        return HttpRequest(method="POST", path="/chat/completions",
                           headers=self._headers[bool(options.stream)],
                           body=encode_body(body, options), stream=options.stream)

    def _options(self, options: WireOptions, tools: bool) -> dict[str, Any]:
        """The body's keys from ``options`` after ``tools`` (``tools``: whether the request
        sends any tool)."""
        body: dict[str, Any] = {}
        if options.tool_choice is not None and tools:
            # A tool_choice without tools is refused by the API (400), whatever its value.
            body["tool_choice"] = (
                {"type": "function", "function": {"name": options.tool_choice.name}}
                if isinstance(options.tool_choice, ForcedTool) else options.tool_choice
            )
        if options.parallel_tool_calls is not None and tools:
            body["parallel_tool_calls"] = options.parallel_tool_calls
        if options.response_format is not None:
            fmt = options.response_format
            schema: dict[str, Any] = {"name": fmt.name, "schema": fmt.schema, "strict": fmt.strict}
            if fmt.description:
                schema["description"] = fmt.description
            body["response_format"] = {"type": "json_schema", "json_schema": schema}
        if options.max_tokens is not None:
            body[self._max_tokens_field] = options.max_tokens
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.top_p is not None:
            body["top_p"] = options.top_p
        if options.stop:
            body["stop"] = list(options.stop)
        if options.reasoning is not None and options.reasoning.effort is not None:
            body["reasoning_effort"] = options.reasoning.effort
        if options.cache is not None:
            # Caching is automatic on OpenAI; these are its explicit controls.
            if options.cache.key is not None:
                body["prompt_cache_key"] = options.cache.key
            if options.cache.retention is not None:
                body["prompt_cache_retention"] = options.cache.retention
        if options.stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body

    def _tool(self, tool: ToolDefinition) -> dict[str, Any]:
        fn: dict[str, Any] = {"name": tool.name}
        if tool.description:
            fn["description"] = tool.description
        fn["parameters"] = tool_parameters(tool, sanitize=self._sanitize)
        if tool.strict is not None:
            fn["strict"] = tool.strict
        return {"type": "function", "function": fn}

    # -- responses -----------------------------------------------------------------------------

    def parse_response(self, body: bytes) -> ModelTurnResult:
        return collect_turn(self.response_events(body))

    def response_events(self, body: bytes) -> list[StreamEvent]:
        resp: _Response = decode_json(body, _RESPONSE, "a chat completion")
        if not resp.choices:
            raise IncompleteStreamError("the chat completion has no choices")
        events = _message_events(resp.choices[0], resp.model)
        if resp.usage is not None:
            events.append(UsageEvent(usage=_usage(resp.usage)))
        return self._names.restore(events)

    def stream_decoder(self) -> StreamDecoder:
        return self._names.decoder(_ChatStreamDecoder())

    def classify_error(self, status: int, headers: Headers, body: bytes, *,
                       now: Clock | None = None) -> ProviderHttpError:
        return classify_openai_error("openai_chat", status, headers, decode_error_body(body),
                                     body, now=now)


def _message_events(choice: _Choice, model: str | None) -> list[StreamEvent]:
    m = choice.message
    events: list[StreamEvent] = []
    reasoning = m.reasoning_content or m.reasoning
    if reasoning:
        events.append(ReasoningEvent(part=ReasoningPart(text=reasoning, provider="openai",
                                                        model=model)))
    if m.content:
        events.append(TextEvent(content=m.content))
    if m.refusal:
        events.append(TextEvent(content=m.refusal))
    for i, call in enumerate(m.tool_calls or ()):
        events.append(ToolCallEvent(tool_call=ToolCallChunk(
            index=i, id=call.id, name=call.function.name or "",
            arguments=call.function.arguments or "")))
    reason = finish_reason(choice.finish_reason, _FINISH)
    if m.refusal and reason in (None, "stop"):
        reason = "content_filter"
    if reason is not None:
        events.append(FinishEvent(finish_reason=reason))
    return events


class _ChatStreamDecoder:
    """Tool-call deltas are placed by their ``index``. Some compatible servers omit it; such a
    delta is placed by its ``id`` (a new id takes the next free slot, a known id its own), which
    is only sound because the id tells the calls apart. A delta with neither cannot be placed
    without guessing — appending it to the previous call could fuse two calls — so it raises
    :class:`~bindloop.completion.ToolCallDeltaError`.

    An ``{"error": ...}`` chunk (OpenAI-compatible gateways send one and close) ends the turn:
    its error is the outcome, and nothing after it is read."""

    __slots__ = ("_done", "_finished", "_id_slots", "_refused")

    def __init__(self) -> None:
        self._done = False
        self._finished = False
        self._refused = False
        self._id_slots: dict[str, int] = {}

    def decode(self, events: Sequence[SseEvent]) -> list[StreamEvent]:
        # One loop per read, inline: this is the hot path of the most common wire.
        out: list[StreamEvent] = []
        for sse in events:
            payload = sse.data
            if payload == "[DONE]":
                self._done = True
                continue
            if self._done or not payload:
                continue
            try:  # decode_json() inline: one call fewer per chunk on the hot path
                chunk: _Chunk = _decode_chunk(payload)
            except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
                chunk = decode_json(payload, _CHUNK, "a chat completion chunk")  # raises why
            if chunk.error is not None:
                self._done = True
                out.append(ErrorEvent(error=classify_openai_error(
                    "openai_chat", None, (), {"error": chunk.error}, payload.encode())))
                continue
            for choice in chunk.choices or ():
                if choice.index != 0:
                    continue  # n > 1 is not a turn the loop can act on; choice 0 is the answer
                delta = choice.delta
                if delta is not None:
                    if delta.content and not (delta.reasoning_content or delta.reasoning
                                              or delta.refusal or delta.tool_calls):
                        out.append(TextEvent(content=delta.content))  # the common delta, inline
                    else:
                        self._delta(delta, chunk.model, out)
                if choice.finish_reason is not None:
                    self._finished = True
                    reason = finish_reason(choice.finish_reason, _FINISH)
                    if self._refused and reason == "stop":
                        reason = "content_filter"
                    assert reason is not None
                    out.append(FinishEvent(finish_reason=reason))
            if chunk.usage is not None:
                out.append(UsageEvent(usage=_usage(chunk.usage)))
        return out

    def _delta(self, delta: _Delta, model: str | None, out: list[StreamEvent]) -> None:
        reasoning = delta.reasoning_content or delta.reasoning
        if reasoning:
            out.append(ReasoningEvent(part=ReasoningPart(text=reasoning, provider="openai",
                                                         model=model)))
        if delta.content:
            out.append(TextEvent(content=delta.content))
        if delta.refusal:
            if not self._refused:
                self._refused = True
                out.append(ExtraEvent(extra={"refusal": True}))
            out.append(TextEvent(content=delta.refusal))
        if delta.tool_calls:
            for tc in delta.tool_calls:
                fn = tc.function
                out.append(ToolCallEvent(tool_call=ToolCallChunk(
                    index=self._slot(tc), id=tc.id,
                    name=fn.name if fn else None, arguments=fn.arguments if fn else None)))

    def _slot(self, tc: _ToolCallDelta) -> int:
        slots = self._id_slots
        if tc.index is not None:
            if tc.id:
                slots.setdefault(tc.id, tc.index)
            return tc.index
        if not tc.id:
            raise ToolCallDeltaError(
                "a streamed tool-call delta has neither an index nor an id, so the call it "
                "continues cannot be told apart from the others; refusing to merge it by position")
        slot = slots.get(tc.id)
        if slot is None:
            slot = slots[tc.id] = max(slots.values(), default=-1) + 1
        return slot

    def end(self) -> list[StreamEvent]:
        if not (self._done or self._finished):
            raise IncompleteStreamError("the chat completion stream ended before [DONE]")
        return []


# -- requests: messages --------------------------------------------------------------------------

_CALL_ID_MAX = 40  # the API's 400: "'messages[N].tool_calls[0].id': ... maximum length 40"


def _message(m: Message) -> dict[str, Any]:
    # The request form is the contracts codec's, beside the stored form it shares its parts with.
    try:
        out = message_to_openai_request(m)
    except TranscriptFormatError as exc:
        raise WireRequestError(str(exc)) from None
    # A longer call id (another provider's, a gateway's) goes shortened, alike for the call and
    # its result, so they still pair; the API's answers carry ids it mints itself.
    if "tool_calls" in out:
        for call in out["tool_calls"]:
            call["id"] = short_id(call["id"], _CALL_ID_MAX)
    elif "tool_call_id" in out:
        out["tool_call_id"] = short_id(out["tool_call_id"], _CALL_ID_MAX)
    return out


# -- errors --------------------------------------------------------------------------------------

_CODE_CATEGORY: MappingProxyType[str, str] = MappingProxyType({
    "context_length_exceeded": "context_length",
    "string_above_max_length": "context_length",
    # Quota exhaustion is a billing state, not a burst: it lasts until someone pays, so it opens the
    # breaker and traverses at once (as a refused credential does) instead of being retried and
    # counted like a transient 429.
    "insufficient_quota": "auth",
    "rate_limit_exceeded": "rate_limited",
    "invalid_api_key": "auth",
    "model_not_found": "model_not_found",
    "content_policy_violation": "content_filter",
    "content_filter": "content_filter",
    "unsupported_parameter": "provider_bad_request",
    "unsupported_value": "provider_bad_request",
    "server_error": "server_error",
    "server_is_overloaded": "server_error",
})


def classify_openai_error(wire: str, status: int | None, headers: Headers, payload: object,
                          body: bytes, *, now: Clock | None = None) -> ProviderHttpError:
    """Classify an OpenAI-shaped error ``{"error": {"message", "type", "param", "code"}}`` (Chat
    Completions, Responses, and most compatible servers)."""
    err = payload.get("error") if isinstance(payload, dict) else None
    message = str_field(err, "message") or body_snippet(body)
    code = str_field(err, "code")
    kind = str_field(err, "type")
    category = _CODE_CATEGORY.get(code or "") or _CODE_CATEGORY.get(kind or "")
    too_long = category == "context_length" or (
        status in (400, 413) and "maximum context length" in message.lower())
    return classify(wire, status, headers, message=message, error_type=kind, error_code=code,
                    category=category, prompt_too_long=too_long, now=now)
