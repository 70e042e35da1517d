"""Google Gemini API (``generateContent`` / ``streamGenerateContent?alt=sse``).

Reasoning: Gemini attaches thought signatures to response *parts* rather than to a separate block.
Consecutive thought text parts become one reasoning block (with its signature; a signature seals
the block), and a signature on a function-call or answer part becomes a signature-only block. On
the way back thought text is sent as ``thought`` parts, and signature-only blocks are reattached to
the turn's first function call (where Gemini validates them) or, in a turn without calls, to its
last text part.

Tool-call ids: Gemini may send ``functionCall.id``; when it does not, an id is minted from the
response's ``responseId`` (``<responseId>_<n>``), so ids stay unique across turns, deterministically.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import msgspec

from ..clock import Clock
from ..completion import (
    ErrorEvent,
    FinishEvent,
    FinishReason,
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
    Prepared,
    WireCache,
    around,
    check_cache_size,
    encoded,
    joined,
    prepare,
    tool_array,
)
from ._common import (
    JSON_HEADERS,
    SSE_ACCEPT,
    decode_arguments,
    decode_error_body,
    decode_json,
    encode_body,
    inline_media_type,
    parts_of,
    prepare_history,
    text_of,
    tool_parameters,
)
from ._errors import (
    IncompleteStreamError,
    ProviderHttpError,
    WireRequestError,
)
from ._gemini_calls import FunctionCall, StreamedCall
from ._gemini_errors import classify_gemini_error
from ._names import GEMINI_NAMES, ToolNames
from ._secrets import scrub_shapes
from ._sse import SseEvent
from ._types import (
    CachePolicy,
    ForcedTool,
    Headers,
    HttpRequest,
    StreamDecoder,
    WireName,
    WireOptions,
)

__all__ = ("GeminiAdapter", "classify_gemini_error", "gemini_schema")

_FINISH: MappingProxyType[str, FinishReason] = MappingProxyType({
    "STOP": "stop", "MAX_TOKENS": "length", "SAFETY": "content_filter",
    "RECITATION": "content_filter", "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter", "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter", "MALFORMED_FUNCTION_CALL": "error",
    "UNEXPECTED_TOOL_CALL": "error",
})
_ENCODE = msgspec.json.Encoder()
_Headers = tuple[tuple[str, str], ...]  # a request's headers (HttpRequest.headers)

# The OpenAPI-3.0 subset Gemini's ``Schema`` accepts.
_SCHEMA_KEYS = frozenset({
    "type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
    "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
    "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum",
})


def gemini_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` reduced to Gemini's ``Schema`` subset: unknown keywords dropped, ``const`` as a
    one-value ``enum``, ``anyOf: [X, {"type": "null"}]`` as ``X`` with ``nullable: true``. Expects
    an already sanitized schema (no ``$ref``)."""
    out: dict[str, Any] = {}
    any_of = schema.get("anyOf")
    if isinstance(any_of, list):
        branches = [b for b in any_of if isinstance(b, Mapping)]
        non_null = [b for b in branches if b.get("type") != "null"]
        if len(non_null) == 1 and len(branches) == 2:
            merged = gemini_schema(non_null[0])
            merged["nullable"] = True
            for key in ("description", "title"):
                if key in schema and key not in merged:
                    merged[key] = schema[key]
            return merged
    for key, value in schema.items():
        if key == "const":
            out["enum"] = [value]
        elif key not in _SCHEMA_KEYS:
            continue
        elif key == "properties" and isinstance(value, Mapping):
            out[key] = {name: gemini_schema(sub) for name, sub in value.items()
                        if isinstance(sub, Mapping)}
        elif key == "items" and isinstance(value, Mapping):
            out[key] = gemini_schema(value)
        elif key == "anyOf" and isinstance(value, list):
            out[key] = [gemini_schema(b) for b in value if isinstance(b, Mapping)]
        elif key == "enum" and isinstance(value, list):
            out[key] = [v if isinstance(v, str) else _ENCODE.encode(v).decode() for v in value]
        else:
            out[key] = value
    return out


class _Part(msgspec.Struct):
    text: str | None = None
    thought: bool = False
    thoughtSignature: str | None = None  # noqa: N815 - wire name
    functionCall: FunctionCall | None = None  # noqa: N815


class _Content(msgspec.Struct):
    parts: list[_Part] | None = None
    role: str | None = None


class _Candidate(msgspec.Struct):
    content: _Content | None = None
    finishReason: str | None = None  # noqa: N815
    index: int = 0


class _UsageMeta(msgspec.Struct):
    promptTokenCount: int | None = None  # noqa: N815
    candidatesTokenCount: int | None = None  # noqa: N815
    cachedContentTokenCount: int | None = None  # noqa: N815
    thoughtsTokenCount: int | None = None  # noqa: N815


class _Feedback(msgspec.Struct):
    blockReason: str | None = None  # noqa: N815


class _Response(msgspec.Struct):
    candidates: list[_Candidate] | None = None
    usageMetadata: _UsageMeta | None = None  # noqa: N815
    modelVersion: str | None = None  # noqa: N815
    responseId: str | None = None  # noqa: N815
    promptFeedback: _Feedback | None = None  # noqa: N815
    error: dict[str, Any] | None = None


_RESPONSE = msgspec.json.Decoder(_Response)
_decode_response = _RESPONSE.decode


def _usage(u: _UsageMeta) -> TurnUsage:
    # Thought tokens are billed as output but reported apart from candidatesTokenCount.
    thoughts = u.thoughtsTokenCount or 0
    return TurnUsage(input_tokens=u.promptTokenCount or 0,
                     output_tokens=(u.candidatesTokenCount or 0) + thoughts,
                     cached_input_tokens=u.cachedContentTokenCount or 0,
                     reasoning_tokens=thoughts)


class _TurnState:
    """What a Gemini turn's parts fold into, shared by the whole-body and streamed paths.

    Consecutive thought parts are one reasoning block (a streamed thought summary arrives as one
    part per chunk), until a signature seals the block: a block carries at most one signature,
    so the thought after a signed one starts a new block. Any other part ends the block.

    A function call streamed in pieces (:class:`StreamedCall`) is one call, emitted whole when
    it ends (or when the candidate finishes with the call still open)."""

    __slots__ = ("block", "calls", "id_prefix", "model", "open_call", "thought", "thought_signed")

    def __init__(self, id_prefix: str | None) -> None:
        self.calls = 0
        self.block = 0
        self.model: str | None = None
        self.id_prefix = id_prefix
        self.thought: int | None = None  # the open thought block's index
        self.thought_signed = False
        self.open_call: StreamedCall | None = None

    def _emit_call(self, index: int, call_id: str | None, name: str, args: Any,
                   out: list[StreamEvent]) -> None:
        out.append(ToolCallEvent(tool_call=ToolCallChunk(
            index=index, id=call_id or f"{self.id_prefix or 'call'}_{index}",
            name=name, arguments=_ENCODE.encode(args if args is not None else {}).decode())))

    def close_call(self, out: list[StreamEvent]) -> None:
        """Emit the streamed call still open, if any."""
        call, self.open_call = self.open_call, None
        if call is not None:
            self._emit_call(call.index, call.id, call.name, call.args, out)

    def _function_call(self, call: FunctionCall, out: list[StreamEvent]) -> None:
        open_call = self.open_call
        if open_call is not None and call.name and open_call.name and call.name != open_call.name:
            self.close_call(out)  # a new call began without the old one saying it ended
            open_call = None
        if open_call is None and not (call.willContinue or call.partialArgs):
            if not call.name and call.args is None and call.id is None:
                return  # an empty end marker with no streamed call open: nothing to end
            index = self.calls
            self.calls += 1
            self._emit_call(index, call.id, call.name, call.args, out)
            return
        if open_call is None:
            open_call = self.open_call = StreamedCall(self.calls, call)
            self.calls += 1
        else:
            open_call.name = open_call.name or call.name
            open_call.id = open_call.id or call.id
        if call.partialArgs:
            open_call.apply(call.partialArgs)
        if not call.willContinue:
            self.close_call(out)

    def parts(self, parts: Sequence[_Part], out: list[StreamEvent]) -> None:
        for part in parts:
            if part.thought and part.functionCall is None:
                self._thought(part, out)
                continue
            self.thought = None
            if part.functionCall is not None:
                self._function_call(part.functionCall, out)
                if part.thoughtSignature:
                    self._block(out, signature=part.thoughtSignature)
            elif part.text is not None:
                if part.text:
                    out.append(TextEvent(content=part.text))
                if part.thoughtSignature:
                    self._block(out, signature=part.thoughtSignature)

    def _thought(self, part: _Part, out: list[StreamEvent]) -> None:
        signature = part.thoughtSignature or None
        if self.thought is not None and not self.thought_signed:
            out.append(ReasoningEvent(index=self.thought, part=ReasoningPart(text=part.text or "",
                                                                             signature=signature,
                                                                             provider="google",
                                                                             model=self.model)))
        else:
            self.thought = self.block
            self._block(out, content=part.text or "", signature=signature)
        self.thought_signed = signature is not None

    def _block(self, out: list[StreamEvent], *, content: str = "",
               signature: str | None = None) -> None:
        out.append(ReasoningEvent(index=self.block, part=ReasoningPart(text=content,
                                                                       signature=signature,
                                                                       provider="google",
                                                                       model=self.model)))
        self.block += 1


def _turn_head(role: str) -> bytes:
    """The encoded start of a content of ``role``, up to its first part."""
    return b'{"role":' + encoded(role) + b',"parts":['


_HEAD = MappingProxyType({role: len(_turn_head(role)) for role in ("user", "model")})


# The calls' names a request has seen, newest first: (one message's call id -> name, the calls
# before it), or None before the first call. Links are shared between a session's requests.
_Calls = tuple[dict[str, str], "_Calls"] | None


def _called(calls: _Calls, call_id: str) -> str:
    """The name of call ``call_id`` in a chain of calls' names, the newest
    call of that id (as a dict filled in message order holds). Raises ``KeyError`` when no
    earlier call has that id."""
    while calls is not None:
        named, calls = calls
        name: str | None = named.get(call_id)
        if name is not None:
            return name
    raise KeyError(call_id)


def _content(group: list[Any]) -> bytes:
    """One content's encoded bytes from its messages' kept pieces (one role): a piece keeps
    its message's own content, whose parts are the bytes between its start and its closing
    ``]}``."""
    if len(group) == 1:
        alone: bytes = group[0][1]
        return alone
    role = group[0][0]
    head = _HEAD[role]
    return _turn_head(role) + b",".join([piece[1][head:-2] for piece in group]) + b"]}"


class GeminiAdapter:
    """The Gemini API wire. ``api_version`` is the path prefix (``v1beta``); ``sanitize_schemas``
    and ``request_cache`` as for :class:`~bindloop.wire.OpenAIChatAdapter`."""

    __slots__ = ("_api_version", "_around", "_cache", "_headers", "_last_frame", "_names",
                 "_sanitize")

    def __init__(self, *, api_version: str = "v1beta", sanitize_schemas: bool = True,
                 request_cache: int = DEFAULT_REQUEST_CACHE) -> None:
        self._api_version = api_version
        self._sanitize = sanitize_schemas
        self._names = ToolNames(GEMINI_NAMES)
        self._cache = WireCache(request_cache) if check_cache_size(request_cache) else None
        self._headers = (JSON_HEADERS, JSON_HEADERS + SSE_ACCEPT)  # by options.stream
        # The last options' encoded frame: (options, whether tools are sent, frame).
        self._last_frame: tuple[WireOptions, bool, tuple[bytes, str, _Headers]] | None = None
        # The last cached body's bytes after its contents, by what they were written from:
        # (system parts, tool array, frame tail, whether tools are sent, the bytes).
        self._around: tuple[list[bytes], msgspec.Raw, bytes, bool, bytes] | None = None

    @property
    def wire(self) -> WireName:
        return "gemini"

    def auth_headers(self, api_key: str) -> tuple[tuple[str, str], ...]:
        return (("x-goog-api-key", api_key),)

    def build_request(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                      options: WireOptions) -> HttpRequest:
        cache = options.cache if options.cache is not None and options.cache.cached_content else None
        skip = cache.cached_messages if cache is not None else 0
        memo = self._cache
        if memo is not None:
            try:
                return self._kept_request(*self._cached(memo, messages, tools, options, skip),
                                          cache)
            except Exception:
                # A request the wire refuses: the uncached build below raises the very error,
                # in the same words, as it always did.
                pass
        system, contents, wire_tools, tools, options = self._uncached(messages, tools, options,
                                                                      skip)
        return self._request(system, contents, wire_tools, tools, options, cache)

    def _kept_request(self, system: list[bytes], contents: list[bytes], wire_tools: msgspec.Raw,
                      tools: Sequence[ToolDefinition], options: WireOptions,
                      cache: CachePolicy | None) -> HttpRequest:
        """The request from the cached build's encoded pieces: its system parts, its contents
        and its tool array."""
        if options.extra_body:  # merged over the top level: through the dict
            return self._request([msgspec.Raw(p) for p in system], joined(contents), wire_tools,
                                 tools, options, cache)
        # The body is written in the order _request's dict has (the bytes its encoding gives):
        # the bytes after the contents, kept for the last system parts, tool array and frame (a
        # session's requests share them: the resumed system list is replaced, never changed in
        # place), around the contents.
        if cache is not None:
            # The cache holds the system instruction, tools and tool config; Gemini refuses a
            # request that sends them again beside cachedContent.
            system, tools = [], ()
        tail, path, headers = self._frame(options, bool(tools))
        kept = self._around
        if cache is None and kept is not None and kept[0] is system and kept[1] is wire_tools \
                and kept[2] is tail and kept[3] == bool(tools):
            after = kept[4]
        else:
            parts: list[Any] = [b"]"]
            if cache is not None:
                parts += (b',"cachedContent":', encoded(cache.cached_content))
            if system:
                parts += (b',"systemInstruction":{"parts":[', b",".join(system), b"]}")
            if tools:
                parts += (b',"tools":[{"functionDeclarations":', wire_tools, b"}]")
            parts.append(tail)
            after = b"".join(parts)
            if cache is None:
                self._around = (system, wire_tools, tail, bool(tools), after)
        body = around(b'{"contents":[', contents, after)
        return HttpRequest(method="POST", path=path, headers=headers, body=body,
                           stream=options.stream)

    def _frame(self, options: WireOptions, tools: bool) -> tuple[bytes, str, _Headers]:
        """The body's encoded keys after ``tools`` (with the closing brace), the path and the
        headers of ``options``. Kept for the last options object when it holds no dict a caller
        could change in place (no ``response_format``; ``extra_body`` never comes here)."""
        kept = self._last_frame
        if kept is not None and kept[0] is options and kept[1] is tools:
            return kept[2]
        end = self._options(options, tools)
        frame = (b"," + encode_body(end, options)[1:] if end else b"}", self._path(options),
                 self._headers[bool(options.stream)])
        if options.response_format is None:
            self._last_frame = (options, tools, frame)
        return frame

    def _path(self, options: WireOptions) -> str:
        method = "streamGenerateContent?alt=sse" if options.stream else "generateContent"
        return f"/{self._api_version}/models/{options.model}:{method}"

    def _request(self, system: list[Any], contents: Any, wire_tools: Any,
                 tools: Sequence[ToolDefinition], options: WireOptions,
                 cache: CachePolicy | None) -> HttpRequest:
        """The request of a body built as a dict (its values objects or ``msgspec.Raw``)."""
        body: dict[str, Any] = {"contents": contents}
        if cache is not None:
            # The cache holds the system instruction, tools and tool config; Gemini refuses a
            # request that sends them again beside cachedContent.
            body["cachedContent"] = cache.cached_content
            system, tools = [], ()
        if system:
            body["systemInstruction"] = {"parts": system}
        if tools:
            body["tools"] = [{"functionDeclarations": wire_tools}]
        body.update(self._options(options, bool(tools)))
        return HttpRequest(method="POST", path=self._path(options),
                           headers=self._headers[bool(options.stream)],
                           body=encode_body(body, options), stream=options.stream)

    def _options(self, options: WireOptions, tools: bool) -> dict[str, Any]:
        """The body's keys from ``options`` after ``tools`` (``tools``: whether the request
        sends any tool)."""
        body: dict[str, Any] = {}
        if options.tool_choice is not None and tools:
            choice = options.tool_choice
            config: dict[str, Any]
            if isinstance(choice, ForcedTool):
                config = {"mode": "ANY", "allowedFunctionNames": [choice.name]}
            else:
                config = {"mode": {"auto": "AUTO", "none": "NONE", "required": "ANY"}[choice]}
            body["toolConfig"] = {"functionCallingConfig": config}
        generation: dict[str, Any] = {}
        if options.max_tokens is not None:
            generation["maxOutputTokens"] = options.max_tokens
        if options.temperature is not None:
            generation["temperature"] = options.temperature
        if options.top_p is not None:
            generation["topP"] = options.top_p
        if options.stop:
            generation["stopSequences"] = list(options.stop)
        if options.response_format is not None:
            generation["responseMimeType"] = "application/json"
            generation["responseSchema"] = gemini_schema(options.response_format.schema)
        if options.reasoning is not None:
            r = options.reasoning
            thinking: dict[str, Any] = {"includeThoughts": r.include_thoughts}
            if r.budget_tokens is not None:
                thinking["thinkingBudget"] = r.budget_tokens
            elif r.effort is not None:
                # Gemini 3 has all four levels (MINIMAL, LOW, MEDIUM, HIGH): each is sent as asked.
                thinking["thinkingLevel"] = r.effort
            generation["thinkingConfig"] = thinking
        if generation:
            body["generationConfig"] = generation
        if options.parallel_tool_calls is False:
            # Parallel calls are Gemini's only behaviour (True asks for what it does anyway).
            raise WireRequestError("the Gemini API cannot be told to avoid parallel tool calls")
        return body

    def _uncached(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                  options: WireOptions, skip: int) -> tuple[Any, ...]:
        """System parts, contents and tools converted from scratch (the build before issue 31)."""
        messages, tools, options = self._names.renamed(messages, tools, options)
        system: list[dict[str, Any]] = []
        contents: list[dict[str, Any]] = []
        names: dict[str, str] = {}
        for m in prepare_history(messages, "google"):
            if isinstance(m, SystemMessage):
                text = text_of(parts_of(m.content), "a system message")
                if text:
                    system.append({"text": text})
                continue
            if skip:
                # Held by the cache; a tool result there still names its call for later ones.
                skip -= 1
                if isinstance(m, AssistantMessage):
                    names.update((c.id, c.name) for c in m.tool_calls)
                continue
            role, parts = _parts(m, names)
            if not parts:
                continue
            if contents and contents[-1]["role"] == role:
                contents[-1]["parts"].extend(parts)
            else:
                contents.append({"role": role, "parts": parts})
        return system, contents, [self._tool(t) for t in tools], tools, options

    def _cached(self, memo: WireCache, messages: Sequence[Message],
                tools: Sequence[ToolDefinition], options: WireOptions, skip: int,
                ) -> tuple[list[bytes], list[bytes], msgspec.Raw, Sequence[ToolDefinition],
                           WireOptions]:
        """:meth:`_uncached`'s values from each message's kept encoded form, in message order
        (a tool result without a name takes it from the calls before it): the system parts,
        the contents, the tool array, the tools and options as sent."""
        prep = prepare(memo, self._names, messages, tools, options, "google")
        # Resumed from the previous request of this session (without cachedContent, which
        # leaves a prefix out): its system parts, closed contents' bytes, open content (the next
        # message may merge into it) and the names its calls gave. They are shared with that
        # request's state, so they are replaced here, never changed in place.
        resumable = skip == 0
        state = prep.state if resumable else None
        system: list[bytes]
        done: list[bytes]
        group: list[Any]
        # Only a tool result without a name reads the calls' names (_Calls), so a request
        # adds its own calls' links and copies none.
        calls: _Calls
        if state is None:
            system, done, group, calls, last, begin = [], [], [], None, None, 0
        else:
            system, done, group, calls, last = state
            begin = prep.start
        closed: list[bytes] = []  # the contents closed by this request's messages
        found = prep.found
        for i in range(begin, len(found)):
            piece = found[i]
            if piece is None or piece[3] is not None or skip:
                m = messages[i]
                # The exact classes first: a missed isinstance() on a Struct class is slow.
                if type(m) is not ToolMessage and type(m) is not AssistantMessage \
                        and isinstance(m, SystemMessage):
                    if piece is None:
                        piece = self._piece(prep, m)
                elif skip:
                    skip -= 1
                    if isinstance(m, AssistantMessage) and m.tool_calls:
                        calls = ({c.id: prep.call_name(c.name) for c in m.tool_calls}, calls)
                    continue
                elif (type(m) is ToolMessage or (type(m) is not AssistantMessage
                                                 and isinstance(m, ToolMessage))) \
                        and m.name is None:
                    name = _called(calls, m.tool_call_id)  # none: the uncached build says why
                    if piece is None or piece[3] != name:
                        piece = self._piece(prep, m, name)
                elif piece is None:
                    piece = self._piece(prep, m)
                found[i] = piece
            role = piece[0]
            if role is None:  # a system message: its part, or b"" when it has no text
                if piece[1]:
                    system = system + [piece[1]]
                continue
            if piece[2]:
                calls = (piece[2], calls)
            if not piece[1]:
                continue
            if role == last:
                group = group + [piece]
            else:
                if group:
                    closed.append(_content(group))
                group = [piece]
                last = role
        if closed:
            done = done + closed
        prep.sent((system, done, group, calls, last) if resumable else None)
        contents = done + [_content(group)] if group else done
        return (system, contents, tool_array(memo, tools, prep.tools, self._tool), prep.tools,
                prep.options)

    def _piece(self, prep: Prepared, m: Message, name: str | None = None) -> Any:
        """A message's kept form, and keep it: ``(role, the encoded content of this message
        alone or b"" when it has no part, its calls' id -> name, the name a nameless tool
        result was sent under)``; for a system message ``(None, its encoded part or b"", (),
        None)``. ``name`` is a nameless tool result's. The content is encoded in one call."""
        wire_m = prep.message(m)
        piece: Any
        exact = type(wire_m)  # the usual classes first (a missed isinstance() on a Struct is slow)
        if exact is not ToolMessage and exact is not AssistantMessage \
                and isinstance(wire_m, SystemMessage):
            text = text_of(parts_of(wire_m.content), "a system message")
            piece = (None, encoded({"text": text}) if text else b"", (), None)
        else:
            # A nameless tool result finds its name here; an assistant's calls land here.
            names = {wire_m.tool_call_id: name} if name is not None \
                and isinstance(wire_m, ToolMessage) else {}
            role, parts = _parts(wire_m, names)
            piece = (role, encoded({"role": role, "parts": parts}) if parts else b"",
                     names if names and isinstance(wire_m, AssistantMessage) else (), name)
        prep.keep(m, piece, len(piece[1]))
        return piece

    def _tool(self, tool: ToolDefinition) -> dict[str, Any]:
        out: dict[str, Any] = {"name": tool.name}
        if tool.description:
            out["description"] = tool.description
        params = gemini_schema(tool_parameters(tool, sanitize=self._sanitize))
        if params.get("properties"):
            out["parameters"] = params
        return out

    def parse_response(self, body: bytes) -> ModelTurnResult:
        return collect_turn(self.response_events(body))

    def response_events(self, body: bytes) -> list[StreamEvent]:
        resp: _Response = decode_json(body, _RESPONSE, "a generateContent response")
        if resp.error is not None:
            raise classify_gemini_error(None, (), {"error": resp.error}, body)
        state = _TurnState(resp.responseId or _digest(body))
        state.model = resp.modelVersion
        events: list[StreamEvent] = []
        reason = _fold(resp, state, events)
        if reason is None:
            raise IncompleteStreamError("the Gemini response has no finish reason")
        events.append(FinishEvent(finish_reason=reason))
        return self._names.restore(events)

    def stream_decoder(self) -> StreamDecoder:
        return self._names.decoder(_GeminiStreamDecoder())

    def classify_error(self, status: int, headers: Headers, body: bytes, *,
                       now: Clock | None = None) -> ProviderHttpError:
        return classify_gemini_error(status, headers, decode_error_body(body), body, now=now)


def _digest(body: bytes) -> str:
    return "call_" + hashlib.sha256(body).hexdigest()[:12]


def _fold(resp: _Response, state: _TurnState, out: list[StreamEvent]) -> FinishReason | None:
    """Append a response (or stream chunk)'s events; return its finish reason, if it has one."""
    reason: FinishReason | None = None
    candidates = resp.candidates or ()
    for cand in candidates:
        if cand.index != 0:
            continue
        if cand.content is not None and cand.content.parts:
            state.parts(cand.content.parts, out)
        if cand.finishReason is not None:
            state.close_call(out)
            reason = _FINISH.get(cand.finishReason, "unknown")
    if resp.usageMetadata is not None:
        # Each chunk's usageMetadata is the whole count so far, and a later one may be lower (the
        # prompt count is revised in the final chunk): the last snapshot wins, never a maximum.
        out.append(UsageEvent(usage=_usage(resp.usageMetadata), snapshot=True))
    if not candidates and resp.promptFeedback is not None and resp.promptFeedback.blockReason:
        reason = "content_filter"  # the prompt itself was blocked
    if reason == "stop" and state.calls:
        reason = "tool_calls"
    return reason


class _GeminiStreamDecoder:
    __slots__ = ("_finished", "_state")

    def __init__(self) -> None:
        self._state: _TurnState | None = None
        self._finished = False

    def decode(self, events: Sequence[SseEvent]) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        one = self._event
        for sse in events:
            one(sse, out)
        return out

    def _event(self, sse: SseEvent, out: list[StreamEvent]) -> None:
        if not sse.data:
            return
        try:  # decode_json() inline: one call fewer per chunk on the hot path
            resp: _Response = _decode_response(sse.data)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            resp = decode_json(sse.data, _RESPONSE, "a Gemini stream chunk")  # raises why
        if resp.error is not None:
            self._finished = True
            out.append(ErrorEvent(error=classify_gemini_error(
                None, (), {"error": resp.error}, sse.data.encode())))
            return
        if self._state is None:
            self._state = _TurnState(resp.responseId or _digest(sse.data.encode()))
            self._state.model = resp.modelVersion
        reason = _fold(resp, self._state, out)
        if reason is not None:
            self._finished = True
            out.append(FinishEvent(finish_reason=reason))

    def end(self) -> list[StreamEvent]:
        if not self._finished:
            raise IncompleteStreamError("the Gemini stream ended without a finish reason")
        return []


# -- requests: contents --------------------------------------------------------------------------

def _parts(m: Message, names: dict[str, str]) -> tuple[str, list[dict[str, Any]]]:
    """A message's role and parts; an assistant's calls are recorded in ``names`` (id -> name),
    and a tool result without a name takes its call's from there."""
    # The exact classes first (a missed isinstance() on a Struct class is a call of its
    # metaclass's __instancecheck__): an agent's transcript is mostly tool results and assistant
    # turns.
    if type(m) is ToolMessage or (type(m) is not AssistantMessage and isinstance(m, ToolMessage)):
        name = m.name or names.get(m.tool_call_id)
        if name is None:
            raise WireRequestError(
                f"tool result {m.tool_call_id!r} answers no earlier call; Gemini needs its name")
        content = m.content
        text = content if type(content) is str else text_of(parts_of(content), "a tool result")
        # The documented keys: "output" for the function's output, "error" for a failure.
        return "user", [{"functionResponse": {"id": m.tool_call_id, "name": name,
                                              "response": {"error" if m.is_error else "output":
                                                           text}}}]
    if type(m) is AssistantMessage or isinstance(m, AssistantMessage):
        return "model", _model_parts(m, names)
    if isinstance(m, UserMessage):
        return "user", [_user_part(p, i) for i, p in enumerate(parts_of(m.content))
                        if not isinstance(p, ReasoningPart)]
    raise WireRequestError(f"not a message: {type(m).__name__}")


def _model_parts(m: AssistantMessage, names: dict[str, str]) -> list[dict[str, Any]]:
    """An assistant turn's parts: its thoughts and text, then its calls (recorded in
    ``names``), its loose signatures reattached as the module docstring says."""
    content = m.content
    loose: list[str] = []  # signatures minted on call/answer parts, to reattach
    if type(content) is str:  # parts_of's one TextPart, without building it
        parts: list[dict[str, Any]] = [{"text": content}] if content else []
    else:
        parts = []
        for p in parts_of(content):
            if isinstance(p, ReasoningPart):
                if p.text:
                    thought: dict[str, Any] = {"text": p.text, "thought": True}
                    if p.signature:
                        thought["thoughtSignature"] = p.signature
                    parts.append(thought)
                elif p.signature:
                    loose.append(p.signature)
            elif isinstance(p, TextPart):
                if p.text:
                    parts.append({"text": p.text})
            elif isinstance(p, ProviderItemPart):
                continue  # another wire's own item: nothing Gemini could read
            else:
                raise WireRequestError(
                    f"an assistant message carries only text here, got {type(p).__name__}")
    first = len(parts)  # the calls' parts follow the text and thoughts
    for call in m.tool_calls:
        names[call.id] = call.name
        args = decode_arguments(call.arguments)
        parts.append({"functionCall": {
            "id": call.id, "name": call.name,
            "args": args if args is not None else {"_raw_arguments": call.arguments}}})
    if loose:
        target: dict[str, Any] | None = parts[first] if len(parts) > first else next(
            (q for q in reversed(parts) if not q.get("thought")), None)
        if target is None:
            target = {"text": ""}
            parts.append(target)
        target["thoughtSignature"] = loose[0]
    return parts


def _user_part(p: object, index: int) -> dict[str, Any]:
    if isinstance(p, TextPart):
        return {"text": p.text}
    if isinstance(p, (ImagePart, FilePart)):
        if p.data is not None:
            return {"inlineData": {"mimeType": inline_media_type(p), "data": p.data}}
        if p.url is not None:
            if not p.media_type:
                # Never guessed, as for inline bytes (the one media rule): a URL's extension does
                # not say what it serves, Files API and gs:// URIs have none, and a wrong type is
                # refused or misread by the model.
                kind = type(p).__name__
                where = scrub_shapes(p.url.split("?", 1)[0])[:80]
                raise WireRequestError(
                    f"a user message's content[{index}] ({kind}, url {where!r}) has no "
                    f"media_type: Gemini's fileData needs the file's mimeType and bindloop never "
                    f"guesses it; "
                    f"build it as {kind}(url=..., media_type='image/png' or what the URL serves)")
            return {"fileData": {"mimeType": p.media_type, "fileUri": p.url}}
        raise WireRequestError("Gemini needs inline data or a file URI for an image or file part")
    raise WireRequestError(f"cannot send a {type(p).__name__} in a user turn")
