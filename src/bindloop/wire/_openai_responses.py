"""OpenAI Responses (``POST /responses``), stateless: ``store`` is ``false`` by default, so reasoning
travels as items carrying ``encrypted_content`` (requested through ``include``) rather than as
server-side references.

A reasoning block is sent back as a ``reasoning`` input item only when it has the item ``id`` the API
minted and, without server storage, its ``encrypted_content``; a block from another wire (the policy
keeps unsigned ones) has no such item to be, so it is not sent.

Output items the canonical turn does not model (``tool_search_call``, ``custom_tool_call``,
``shell_call``, ``local_shell_call``, ``apply_patch_call``, ``mcp_approval_request``, the server-run
``*_call`` items, ...) are carried as :class:`~bindloop.contracts.ProviderItemPart` holding the
item's bytes, and sent back as the same bytes; their fields are never read, so a shape bindloop does
not know cannot fail the response. Stream events of types this decoder does not read are ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from ..clock import Clock
from ..completion import (
    ErrorEvent,
    ExtraEvent,
    FinishEvent,
    FinishReason,
    ProviderItemEvent,
    ReasoningEvent,
    StreamEvent,
    TextEvent,
    ToolCallChunk,
    ToolCallEvent,
    UsageEvent,
    collect_turn,
)
from ..contracts import (
    AssistantMessage,
    FilePart,
    ImagePart,
    Message,
    ModelTurnResult,
    ProviderItemPart,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolDefinition,
    ToolMessage,
    TurnUsage,
    UserMessage,
)
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
    decode_error_body,
    decode_json,
    encode_body,
    file_data_url,
    image_data_url,
    parts_of,
    prepare_history,
    text_of,
    tool_parameters,
)
from ._errors import (
    IncompleteStreamError,
    ProviderHttpError,
    WireDecodeError,
    WireRequestError,
)
from ._names import OPENAI_NAMES, ToolNames, short_id
from ._openai_chat import classify_openai_error
from ._sse import SseEvent
from ._types import ForcedTool, Headers, HttpRequest, StreamDecoder, WireName, WireOptions

__all__ = ("OpenAIResponsesAdapter",)


class _Part(msgspec.Struct):
    type: str = ""
    text: str | None = None
    refusal: str | None = None


class _Item(msgspec.Struct):
    type: str = ""
    id: str | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    content: list[_Part] | None = None
    summary: list[_Part] | None = None
    encrypted_content: str | None = None


class _InDetails(msgspec.Struct):
    cached_tokens: int | None = None


class _OutDetails(msgspec.Struct):
    reasoning_tokens: int | None = None


class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    input_tokens_details: _InDetails | None = None
    output_tokens_details: _OutDetails | None = None


class _Incomplete(msgspec.Struct):
    reason: str | None = None


class _Error(msgspec.Struct):
    code: str | int | None = None
    message: str | None = None
    type: str | None = None


class _Response(msgspec.Struct):
    status: str | None = None
    # Items stay raw until their type is known: an item type bindloop does not model may carry
    # any JSON (a tool_search_call's arguments are an object), and must not fail the response.
    output: list[msgspec.Raw] | None = None
    usage: _Usage | None = None
    incomplete_details: _Incomplete | None = None
    error: _Error | None = None
    model: str | None = None


class _Event(msgspec.Struct):
    type: str
    # Typed for the events read here; an event type not read here may hold anything (an object
    # `delta`), and its decode failure sends it to the tolerant path in _event().
    delta: str | None = None
    output_index: int = 0
    summary_index: int = 0
    item: msgspec.Raw = msgspec.Raw()
    response: _Response | None = None
    code: str | int | None = None
    message: str | None = None
    arguments: str | None = None
    error: _Error | None = None


class _Kind(msgspec.Struct):
    type: Any = None


class _ItemHead(msgspec.Struct):
    type: Any = None
    id: Any = None


_RESPONSE = msgspec.json.Decoder(_Response)
_EVENT = msgspec.json.Decoder(_Event)
_KIND = msgspec.json.Decoder(_Kind)
_ITEM = msgspec.json.Decoder(_Item)
_ITEM_HEAD = msgspec.json.Decoder(_ItemHead)
_ANY = msgspec.json.Decoder()

# The item types the canonical turn models; every other output item is carried opaquely.
_MODELLED_ITEMS = frozenset({"message", "function_call", "reasoning"})
# The event types this decoder reads; any other type is ignored, whatever its fields hold.
_READ_EVENTS = frozenset({
    "response.output_text.delta", "response.function_call_arguments.delta",
    "response.function_call_arguments.done", "response.reasoning_summary_text.delta",
    "response.reasoning_text.delta", "response.reasoning_summary_part.added",
    "response.refusal.delta", "response.output_item.added", "response.output_item.done",
    "response.created", "response.completed", "response.incomplete", "response.failed", "error",
})
WIRE = "openai_responses"


def _item(raw: msgspec.Raw, what: str) -> tuple[str, _Item | ProviderItemPart | None]:
    """An output item's type and its decoded form: an :class:`_Item` for the types the canonical
    turn models (decoded strictly), a :class:`ProviderItemPart` holding the item's bytes for any
    other type, ``None`` for an item without a string type (nothing could send it back)."""
    head: _ItemHead = decode_json(raw, _ITEM_HEAD, what)
    kind = head.type
    if not isinstance(kind, str) or not kind:
        return "", None
    if kind in _MODELLED_ITEMS:
        return kind, decode_json(raw, _ITEM, what)
    try:
        # msgspec does not validate the UTF-8 of a value it only spans; the part must hold text.
        data = bytes(raw).decode()
    except UnicodeDecodeError:
        raise WireDecodeError(f"{what} ({kind[:40]!r}) is not UTF-8 text") from None
    return kind, ProviderItemPart(wire=WIRE, kind=kind, data=data,
                                  id=head.id if isinstance(head.id, str) else None)


def _usage(u: _Usage) -> TurnUsage:
    cached = u.input_tokens_details.cached_tokens if u.input_tokens_details else None
    reasoning = u.output_tokens_details.reasoning_tokens if u.output_tokens_details else None
    return TurnUsage(input_tokens=u.input_tokens or 0, output_tokens=u.output_tokens or 0,
                     cached_input_tokens=cached or 0, reasoning_tokens=reasoning or 0)


def _finish(resp: _Response, called: bool, refused: bool) -> FinishReason:
    if resp.status == "incomplete":
        reason = resp.incomplete_details.reason if resp.incomplete_details else None
        return {"max_output_tokens": "length", "content_filter": "content_filter"}.get(
            reason or "", "unknown")  # type: ignore[return-value]
    if resp.status not in (None, "completed"):
        return "unknown"
    if refused:
        return "content_filter"
    return "tool_calls" if called else "stop"


def _response_error(resp: _Response, status: int | None = None) -> ProviderHttpError:
    err = resp.error
    payload = {"error": {"code": err.code, "type": err.type,
                         "message": err.message or "the response failed"}} \
        if err else {"error": {"message": "the response failed"}}
    return classify_openai_error("openai_responses", status, (), payload, b"")


class OpenAIResponsesAdapter:
    """The Responses wire. ``store`` is sent as given (``None`` omits it);
    ``sanitize_schemas`` and ``request_cache`` as for :class:`OpenAIChatAdapter`."""

    __slots__ = ("_body", "_cache", "_headers", "_names", "_sanitize", "_store")

    def __init__(self, *, store: bool | None = False, sanitize_schemas: bool = True,
                 request_cache: int = DEFAULT_REQUEST_CACHE) -> None:
        self._store = store
        self._sanitize = sanitize_schemas
        self._names = ToolNames(OPENAI_NAMES)
        self._cache = WireCache(request_cache) if check_cache_size(request_cache) else None
        self._headers = (JSON_HEADERS, JSON_HEADERS + SSE_ACCEPT)  # by options.stream
        self._body = ArrayBody("input")  # the cached build's body, around the items

    @property
    def wire(self) -> WireName:
        return "openai_responses"

    def auth_headers(self, api_key: str) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {api_key}"),)

    def build_request(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                      options: WireOptions) -> HttpRequest:
        if options.stop:
            raise WireRequestError("the Responses API has no stop sequences")
        cache = self._cache
        if cache is not None:
            try:
                prep = prepare(cache, self._names, messages, tools, options, "openai")
                found = prep.found
                for i in prep.missing:
                    m = messages[i]
                    own: list[Any] = []
                    self._items(prep.message(m), own)
                    # The message's items as one run of array elements ("a,b"; empty for none).
                    found[i] = piece = b",".join([encoded(item) for item in own])
                    prep.keep(m, piece, len(piece))
                prep.sent()
                wire_tools = tool_array(cache, tools, prep.tools, self._tool)
                return self._kept_request(found, wire_tools, prep.tools, prep.options)
            except Exception:
                # A request the wire refuses: the uncached build below raises the very error,
                # in the same words, as it always did.
                pass
        messages, tools, options = self._names.renamed(messages, tools, options)
        items: list[Any] = []
        for m in prepare_history(messages, "openai"):
            self._items(m, items)
        return self._request(items, [self._tool(t) for t in tools], tools, options)

    def _kept_request(self, found: list[bytes], wire_tools: msgspec.Raw,
                      tools: Sequence[ToolDefinition], options: WireOptions) -> HttpRequest:
        """The request from the cached build's encoded pieces: each message's run of items
        (empty for none) and the tool array."""
        if options.extra_body:  # merged over the top level: through the dict
            return self._request(array(found), wire_tools, tools, options)
        return HttpRequest(method="POST", path="/responses",
                           headers=self._headers[bool(options.stream)],
                           body=self._body.write(options, found, wire_tools, bool(tools),
                                                 self._options),
                           stream=options.stream)

    def _request(self, items: Any, wire_tools: Any, tools: Sequence[ToolDefinition],
                 options: WireOptions) -> HttpRequest:
        """The request of a body built as a dict (its values objects or ``msgspec.Raw``)."""
        body: dict[str, Any] = {"model": options.model, "input": items}
        if tools:
            body["tools"] = wire_tools
        body.update(self._options(options, bool(tools)))
        return HttpRequest(method="POST", path="/responses",
                           headers=self._headers[bool(options.stream)],
                           body=encode_body(body, options), stream=options.stream)

    def _options(self, options: WireOptions, tools: bool) -> dict[str, Any]:
        """The body's keys from ``options`` after ``tools`` (``tools``: whether the request
        sends any tool)."""
        body: dict[str, Any] = {}
        if options.tool_choice is not None and tools:
            # A tool_choice without tools is refused by the API (400), whatever its value.
            body["tool_choice"] = (
                {"type": "function", "name": options.tool_choice.name}
                if isinstance(options.tool_choice, ForcedTool) else options.tool_choice
            )
        if options.parallel_tool_calls is not None and tools:
            body["parallel_tool_calls"] = options.parallel_tool_calls
        if options.response_format is not None:
            fmt = options.response_format
            spec: dict[str, Any] = {"type": "json_schema", "name": fmt.name, "schema": fmt.schema,
                                    "strict": fmt.strict}
            if fmt.description:
                spec["description"] = fmt.description
            body["text"] = {"format": spec}
        if options.max_tokens is not None:
            body["max_output_tokens"] = options.max_tokens
        if options.temperature is not None:
            body["temperature"] = options.temperature
        if options.top_p is not None:
            body["top_p"] = options.top_p
        if options.reasoning is not None:
            reasoning: dict[str, Any] = {}
            if options.reasoning.effort is not None:
                reasoning["effort"] = options.reasoning.effort
            if options.reasoning.summary is not None:
                reasoning["summary"] = options.reasoning.summary
            body["reasoning"] = reasoning
            if self._store is False:
                body["include"] = ["reasoning.encrypted_content"]
        if options.cache is not None:
            # Caching is automatic on OpenAI; these are its explicit controls.
            if options.cache.key is not None:
                body["prompt_cache_key"] = options.cache.key
            if options.cache.retention is not None:
                body["prompt_cache_retention"] = options.cache.retention
        if self._store is not None:
            body["store"] = self._store
        if options.stream:
            body["stream"] = True
        return body

    def _tool(self, tool: ToolDefinition) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "function", "name": tool.name}
        if tool.description:
            out["description"] = tool.description
        out["parameters"] = tool_parameters(tool, sanitize=self._sanitize)
        # The Responses API defaults strict to true; say what the definition says.
        out["strict"] = bool(tool.strict)
        return out

    def _items(self, m: Message, items: list[Any]) -> None:
        # The exact classes first: a missed isinstance() on a Struct class is a call of its
        # metaclass's __instancecheck__, and an agent's new messages are assistant turns and
        # tool results.
        usual = type(m) is AssistantMessage or type(m) is ToolMessage
        if not usual and isinstance(m, SystemMessage):
            items.append({"role": "system", "content": text_of(parts_of(m.content),
                                                                "a system message")})
        elif not usual and isinstance(m, UserMessage):
            items.append({"role": "user", "content": _user_content(m)})
        elif type(m) is AssistantMessage or (type(m) is not ToolMessage
                                             and isinstance(m, AssistantMessage)):
            text: list[str] = []
            for part in parts_of(m.content):
                if isinstance(part, ReasoningPart):
                    item = self._reasoning_item(part)
                    if item is not None:
                        items.append(item)
                elif isinstance(part, ProviderItemPart):
                    if part.wire == WIRE:
                        items.append(_opaque_item(part))
                elif isinstance(part, TextPart):
                    text.append(part.text)
                else:
                    raise WireRequestError(
                        f"an assistant message carries only text here, got {type(part).__name__}")
            if text:
                items.append({"role": "assistant", "content": "".join(text)})
            for call in m.tool_calls:
                # call_id has maxLength 64; a longer id (another provider's, a gateway's) is
                # sent shortened, the same way for the call and its output.
                items.append({"type": "function_call", "call_id": short_id(call.id),
                              "name": call.name, "arguments": call.arguments})
        elif type(m) is ToolMessage or isinstance(m, ToolMessage):
            items.append({"type": "function_call_output", "call_id": short_id(m.tool_call_id),
                          "output": text_of(parts_of(m.content), "a tool result")})
        else:
            raise WireRequestError(f"not a message: {type(m).__name__}")

    def _reasoning_item(self, part: ReasoningPart) -> dict[str, Any] | None:
        if part.id is None or (self._store is False and not part.encrypted_content):
            return None
        item: dict[str, Any] = {
            "type": "reasoning", "id": part.id,
            "summary": [{"type": "summary_text", "text": part.text}] if part.text else [],
        }
        if part.encrypted_content:
            item["encrypted_content"] = part.encrypted_content
        return item

    def parse_response(self, body: bytes) -> ModelTurnResult:
        return collect_turn(self.response_events(body))

    def response_events(self, body: bytes) -> list[StreamEvent]:
        resp: _Response = decode_json(body, _RESPONSE, "a response")
        if resp.status == "failed":
            raise _response_error(resp)
        events: list[StreamEvent] = []
        called = refused = False
        for index, raw in enumerate(resp.output or ()):
            kind, item = _item(raw, "a response output item")
            if isinstance(item, ProviderItemPart):
                events.append(ProviderItemEvent(index=index, part=item))
            elif item is None:
                continue
            elif kind == "reasoning":
                events.append(_reasoning_event(index, item, resp.model))
            elif kind == "message":
                for part in item.content or ():
                    if part.type == "output_text" and part.text:
                        events.append(TextEvent(content=part.text))
                    elif part.type == "refusal" and part.refusal:
                        refused = True
                        events.append(TextEvent(content=part.refusal))
            elif kind == "function_call":
                called = True
                events.append(ToolCallEvent(tool_call=ToolCallChunk(
                    index=index, id=item.call_id, name=item.name or "",
                    arguments=item.arguments or "")))
        if resp.usage is not None:
            events.append(UsageEvent(usage=_usage(resp.usage)))
        events.append(FinishEvent(finish_reason=_finish(resp, called, refused)))
        return self._names.restore(events)

    def stream_decoder(self) -> StreamDecoder:
        return self._names.decoder(_ResponsesStreamDecoder())

    def classify_error(self, status: int, headers: Headers, body: bytes, *,
                       now: Clock | None = None) -> ProviderHttpError:
        return classify_openai_error("openai_responses", status, headers,
                                     decode_error_body(body), body, now=now)


def _reasoning_event(index: int, item: _Item, model: str | None) -> ReasoningEvent:
    text = "\n\n".join(p.text or "" for p in item.summary or () if p.text)
    if not text:
        text = "".join(p.text or "" for p in item.content or () if p.type == "reasoning_text")
    return ReasoningEvent(index=index, part=ReasoningPart(text=text,
                                                          encrypted_content=item.encrypted_content,
                                                          provider="openai", model=model,
                                                          id=item.id or None))


class _ResponsesStreamDecoder:
    """Function-call arguments normally stream as ``function_call_arguments.delta`` events, but
    the API (and proxies in front of it) may also deliver them only whole: on the added item, in
    ``function_call_arguments.done``, or on the finished item. The first of those that carries
    text for an output index is used and the rest are ignored, so the arguments are neither lost
    nor doubled."""

    __slots__ = ("_args", "_called", "_calls", "_done", "_items", "_model", "_refused",
                 "_streamed_reasoning")

    def __init__(self) -> None:
        self._done = False
        self._called = False
        self._refused = False
        self._model: str | None = None
        self._streamed_reasoning: set[int] = set()
        self._calls: set[int] = set()  # output indexes whose call id and name were emitted
        self._args: set[int] = set()  # output indexes whose arguments text was emitted
        self._items: set[int] = set()  # output indexes whose opaque item was emitted

    def decode(self, events: Sequence[SseEvent]) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        one = self._event
        for sse in events:
            one(sse, out)
        return out

    def _event(self, sse: SseEvent, out: list[StreamEvent]) -> None:
        if self._done or not sse.data or sse.data == "[DONE]":
            return
        try:
            ev: _Event = _EVENT.decode(sse.data)
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            # An event type this decoder does not read may hold anything (an object `delta`):
            # skip it. One it reads must have the documented shape.
            head: _Kind = decode_json(sse.data, _KIND, "a Responses stream event")
            if not isinstance(head.type, str) or head.type in _READ_EVENTS:
                decode_json(sse.data, _EVENT, "a Responses stream event")  # raises the reason
            return
        kind = ev.type
        if kind not in _READ_EVENTS:
            return
        delta = ev.delta
        if kind == "response.output_text.delta":
            if delta:
                out.append(TextEvent(content=delta))
        elif kind == "response.function_call_arguments.delta":
            if delta:
                self._args.add(ev.output_index)
                out.append(ToolCallEvent(tool_call=ToolCallChunk(index=ev.output_index,
                                                                  arguments=delta)))
        elif kind == "response.function_call_arguments.done":
            self._whole_arguments(ev.output_index, ev.arguments, out)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            if delta:
                self._streamed_reasoning.add(ev.output_index)
                out.append(ReasoningEvent(index=ev.output_index, part=ReasoningPart(text=delta,
                                                                                    provider="openai",
                                                                                    model=self._model)))
        elif kind == "response.reasoning_summary_part.added":
            if ev.summary_index > 0:
                out.append(ReasoningEvent(index=ev.output_index, part=ReasoningPart(text="\n\n",
                                                                                    provider="openai",
                                                                                    model=self._model)))
        elif kind == "response.refusal.delta":
            if delta:
                if not self._refused:
                    self._refused = True
                    out.append(ExtraEvent(extra={"refusal": True}))
                out.append(TextEvent(content=delta))
        elif kind == "response.output_item.added" and ev.item:
            self._item_added(ev.output_index, ev.item, out)
        elif kind == "response.output_item.done" and ev.item:
            self._item_done(ev.output_index, ev.item, out)
        elif kind == "response.created" and ev.response is not None:
            self._model = ev.response.model
        elif kind in ("response.completed", "response.incomplete"):
            self._done = True
            resp = ev.response or _Response()
            # An opaque item the stream announced only in the final response (a proxy that
            # sends no output_item.done) is taken from there.
            for index, raw in enumerate(resp.output or ()):
                if index not in self._items:
                    _, item = _item(raw, "a response output item")
                    if isinstance(item, ProviderItemPart):
                        self._items.add(index)
                        out.append(ProviderItemEvent(index=index, part=item))
            if resp.usage is not None:
                out.append(UsageEvent(usage=_usage(resp.usage)))
            out.append(FinishEvent(finish_reason=_finish(resp, self._called, self._refused)))
        elif kind == "response.failed":
            self._done = True
            out.append(ErrorEvent(error=_response_error(ev.response or _Response())))
        elif kind == "error":
            # The reference puts code and message at the top level; real traffic nests them
            # under "error" (with a "type"). Read both, the nested one first.
            self._done = True
            nested = ev.error or _Error()
            payload = {"error": {"code": nested.code if nested.code is not None else ev.code,
                                 "type": nested.type,
                                 "message": nested.message or ev.message or "stream error"}}
            out.append(ErrorEvent(error=classify_openai_error(
                "openai_responses", None, (), payload, sse.data.encode())))

    def _whole_arguments(self, index: int, arguments: object,
                         out: list[StreamEvent]) -> None:
        if isinstance(arguments, str) and arguments and index not in self._args:
            self._args.add(index)
            out.append(ToolCallEvent(tool_call=ToolCallChunk(index=index, arguments=arguments)))

    def _call(self, index: int, item: _Item, out: list[StreamEvent]) -> None:
        self._called = True
        if index not in self._calls:
            self._calls.add(index)
            out.append(ToolCallEvent(tool_call=ToolCallChunk(index=index, id=item.call_id,
                                                              name=item.name)))
        self._whole_arguments(index, item.arguments, out)

    def _item_added(self, index: int, raw: msgspec.Raw, out: list[StreamEvent]) -> None:
        kind, item = _item(raw, "an added output item")
        if not isinstance(item, _Item):
            return  # an opaque item is taken whole, when it is done
        if kind == "function_call":
            self._call(index, item, out)
        elif kind == "reasoning" and item.id:
            # Sent here and again with the finished item, so either event alone is enough.
            out.append(ReasoningEvent(index=index, part=ReasoningPart(provider="openai",
                                                                      model=self._model,
                                                                      id=item.id)))

    def _item_done(self, index: int, raw: msgspec.Raw, out: list[StreamEvent]) -> None:
        kind, item = _item(raw, "a finished output item")
        if isinstance(item, ProviderItemPart):
            if index not in self._items:
                self._items.add(index)
                out.append(ProviderItemEvent(index=index, part=item))
            return
        if item is None:
            return
        if kind == "function_call":
            self._call(index, item, out)
            return
        if kind != "reasoning":
            return
        if index in self._streamed_reasoning:
            # The text already streamed; the finished item adds what arrives whole.
            out.append(ReasoningEvent(index=index, part=ReasoningPart(
                                                                      encrypted_content=item.encrypted_content,
                                                                      provider="openai",
                                                                      model=self._model,
                                                                      id=item.id or None)))
        else:
            out.append(_reasoning_event(index, item, self._model))

    def end(self) -> list[StreamEvent]:
        if not self._done:
            raise IncompleteStreamError("the Responses stream ended before response.completed")
        return []


def _opaque_item(part: ProviderItemPart) -> msgspec.Raw:
    """The item as it was received, byte for byte; text that is not one JSON object (a stored
    part edited by hand) is refused rather than sent as a broken body."""
    try:
        value = _ANY.decode(part.data)
    except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
        value = None
    if not isinstance(value, dict):
        raise WireRequestError(f"a provider item part ({part.kind!r}) does not hold one JSON "
                               "object, so it cannot be sent back")
    return msgspec.Raw(part.data.encode())


def _user_content(m: UserMessage) -> str | list[dict[str, Any]]:
    if isinstance(m.content, str):
        return m.content
    parts: list[dict[str, Any]] = []
    for p in m.content:
        if isinstance(p, TextPart):
            parts.append({"type": "input_text", "text": p.text})
        elif isinstance(p, ImagePart):
            parts.append({"type": "input_image", "image_url": image_data_url(p),
                          "detail": p.detail or "auto"})
        elif isinstance(p, FilePart):
            file: dict[str, Any] = {"type": "input_file"}
            if p.file_id is not None:
                file["file_id"] = p.file_id
            elif p.data is not None:
                file["file_data"] = file_data_url(p)
                if p.filename:
                    file["filename"] = p.filename
            elif p.url is not None:
                file["file_url"] = p.url
            else:
                raise WireRequestError("a file part needs a file_id, inline data or a url")
            parts.append(file)
    return parts
