"""Anthropic Messages (``POST /v1/messages``).

System messages are lifted into ``system`` (the wire has no system role; their order is kept, their
position in the conversation is not). Consecutive tool results — and user messages among or after
them — are grouped into one user message, since every ``tool_result`` must sit in the user turn right
after its ``tool_use``; the results go first in that turn, as the API requires. Thinking and redacted thinking blocks are echoed with their signatures, as
the reasoning policy allows. Usage: ``input_tokens`` counts cache reads and writes too (Anthropic
reports them apart), ``cached_input_tokens`` is the cache reads and ``cache_write_tokens`` the
writes; with server-side compaction the totals are the sum of ``usage.iterations``, except the
passes another model ran (advisor, fallback), which are itemised with their ``model`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

import msgspec

from ..clock import Clock
from ..completion import (
    ErrorEvent,
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
    Message,
    ModelTurnResult,
    ProviderItemPart,
    ReasoningPart,
    SystemMessage,
    ToolDefinition,
    ToolMessage,
    TurnUsage,
    UsageIteration,
)
from ._anthropic_request import (
    cache_breakpoints,
    cache_mark,
    marked,
    message_blocks,
    results_first,
    tool_choice,
)
from ._cache import (
    DEFAULT_REQUEST_CACHE,
    WireCache,
    around,
    array,
    check_cache_size,
    encoded,
    joined,
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
    parts_of,
    prepare_history,
    str_field,
    text_of,
    tool_parameters,
)
from ._errors import IncompleteStreamError, ProviderHttpError, WireRequestError
from ._names import OPENAI_NAMES, ToolNames
from ._sse import SseEvent
from ._types import Headers, HttpRequest, StreamDecoder, WireName, WireOptions

__all__ = ("AnthropicAdapter", "classify_anthropic_error")

ANTHROPIC_VERSION = "2023-06-01"

_FINISH: MappingProxyType[str, FinishReason] = MappingProxyType({
    "end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
    "refusal": "content_filter", "model_context_window_exceeded": "length",
})
_ENCODE = msgspec.json.Encoder()


class _Block(msgspec.Struct):
    type: str = ""
    text: str | None = None
    thinking: str | None = None
    signature: str | None = None
    data: str | None = None
    id: str | None = None
    name: str | None = None
    input: Any = None
    content: Any = None  # a compaction block's summary (a server tool result's list, unread)
    encrypted_content: Any = None


class _Delta(msgspec.Struct):
    type: str | None = None
    text: str | None = None
    partial_json: str | None = None
    thinking: str | None = None
    signature: str | None = None
    stop_reason: str | None = None
    content: Any = None  # compaction_delta
    encrypted_content: Any = None


class _Iteration(msgspec.Struct):
    type: str = ""
    model: str | None = None  # advisor_message, fallback_message: the model that ran the pass
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None
    iterations: list[_Iteration] | None = None


class _Message(msgspec.Struct):
    model: str | None = None
    usage: _Usage | None = None
    content: list[_Block] | None = None
    stop_reason: str | None = None


class _Event(msgspec.Struct):
    type: str
    index: int = 0
    content_block: _Block | None = None
    delta: _Delta | None = None
    usage: _Usage | None = None
    message: _Message | None = None
    error: dict[str, Any] | None = None


_EVENT = msgspec.json.Decoder(_Event)
_decode_event = _EVENT.decode
_MESSAGE = msgspec.json.Decoder(_Message)


_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_input_tokens",
                 "cache_creation_input_tokens", "iterations")


def _merged(base: _Usage | None, update: _Usage) -> _Usage:
    """``update`` over ``base``, field by field: a ``message_delta``'s usage is cumulative and may
    carry only the output count (older streams) or every count (newer ones, where the input count
    can differ from ``message_start``'s), so each count reported last is the one that stands."""
    if base is None:
        return update
    return _Usage(**{f: getattr(update, f) if getattr(update, f) is not None else getattr(base, f)
                     for f in _USAGE_FIELDS})


def _iteration(it: _Iteration, model: str | None) -> UsageIteration:
    read = it.cache_read_input_tokens or 0
    created = it.cache_creation_input_tokens or 0
    # A pass names its model only when the API says which ran it (advisor_message,
    # fallback_message); it is another model's when that differs from the message's own.
    other = it.model if it.model is not None and it.model != model else None
    return UsageIteration(kind=it.type or "unknown",
                          input_tokens=(it.input_tokens or 0) + read + created,
                          output_tokens=it.output_tokens or 0, cached_input_tokens=read,
                          cache_write_tokens=created, model=other)


def _usage(u: _Usage, model: str | None = None) -> TurnUsage:
    """What the call is billed: cache reads and writes are input the API counts apart, so they are
    added into ``input_tokens`` (and kept as the details). With server-side compaction the
    top-level counts are the answer's pass only and ``iterations`` itemises every pass: the bill,
    and so the totals, are the sum of the passes ``model`` (the message's) ran. A pass of another
    model (the advisor tool's ``advisor_message``, a fallback model's ``fallback_message``) is
    billed at that model's rate: it is kept in ``iterations`` with its ``model`` and left out of
    the totals (``price_by_model`` prices it)."""
    if u.iterations:
        passes = tuple(_iteration(it, model) for it in u.iterations)
        own = [p for p in passes if p.model is None]
        return TurnUsage(input_tokens=sum(p.input_tokens for p in own),
                         output_tokens=sum(p.output_tokens for p in own),
                         cached_input_tokens=sum(p.cached_input_tokens for p in own),
                         cache_write_tokens=sum(p.cache_write_tokens for p in own),
                         iterations=passes)
    read = u.cache_read_input_tokens or 0
    created = u.cache_creation_input_tokens or 0
    inp = u.input_tokens
    return TurnUsage(input_tokens=(inp + read + created) if inp is not None else 0,
                     output_tokens=u.output_tokens or 0, cached_input_tokens=read,
                     cache_write_tokens=created)


# A turn's encoded start, up to its first block, by role.
_ROLE = MappingProxyType({role: b'{"role":' + encoded(role) + b',"content":['
                          for role in ("user", "assistant")})
_HEAD = MappingProxyType({role: len(start) for role, start in _ROLE.items()})


def _turn(group: list[Any], mark: bytes = b"") -> bytes:
    """One turn's encoded bytes from its messages' kept pieces (one role; tool results first in
    a user turn), its last block marked with ``cache_control`` ``mark`` when given. A piece
    keeps its message's own turn; its blocks are those bytes between the turn's start and its
    closing ``]}``, and a message's blocks are all tool results (a tool message's one block) or
    none, so moving whole messages moves the result blocks as :func:`results_first` does."""
    if len(group) == 1 and not mark:
        alone: bytes = group[0][1]  # the message's own turn
        return alone
    role = group[0][0]
    if role == "user" and any([piece[2] for piece in group]):
        group = [p for p in group if p[2]] + [p for p in group if not p[2]]
    head = _HEAD[role]
    blocks = [piece[1][head:-2] for piece in group]
    if mark:
        blocks[-1] = marked(blocks[-1], mark)
    return _ROLE[role] + b",".join(blocks) + b"]}"


class AnthropicAdapter:
    """The Messages wire. ``max_tokens`` is required by the API, so ``default_max_tokens`` fills in
    when the options give none. ``beta`` values go into ``anthropic-beta``. Schemas are sent as
    given unless ``sanitize_schemas`` (Anthropic accepts full JSON Schema). ``request_cache`` as
    for :class:`~bindloop.wire.OpenAIChatAdapter`."""

    __slots__ = ("_around", "_beta", "_cache", "_compaction", "_default_max_tokens", "_headers",
                 "_last_frame", "_names", "_sanitize")

    def __init__(self, *, default_max_tokens: int = 4096, beta: Sequence[str] = (),
                 sanitize_schemas: bool = False,
                 request_cache: int = DEFAULT_REQUEST_CACHE) -> None:
        self._default_max_tokens = default_max_tokens
        self._beta = tuple(beta)
        self._compaction = any(b.startswith("compact-") for b in self._beta)
        self._sanitize = sanitize_schemas
        self._names = ToolNames(OPENAI_NAMES)  # the same pattern: ^[a-zA-Z0-9_-]{1,64}$
        headers = JSON_HEADERS + (("anthropic-version", ANTHROPIC_VERSION),)
        if self._beta:
            headers = headers + (("anthropic-beta", ",".join(self._beta)),)
        self._headers = (headers, headers + SSE_ACCEPT)  # by options.stream
        self._cache = WireCache(request_cache) if check_cache_size(request_cache) else None
        # The last options' encoded body frame: (options, whether tools are sent, frame).
        self._last_frame: tuple[WireOptions, bool, tuple[bytes, bytes]] | None = None
        # The last cached body's bytes before and after its turns, by what they were written
        # from: (frame head, system blocks, tool array, frame tail, before, after).
        self._around: tuple[bytes, list[bytes], msgspec.Raw | None, bytes, bytes, bytes] | None \
            = None

    @property
    def wire(self) -> WireName:
        return "anthropic"

    def auth_headers(self, api_key: str) -> tuple[tuple[str, str], ...]:
        return (("x-api-key", api_key),)

    def build_request(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                      options: WireOptions) -> HttpRequest:
        cache = self._cache
        if cache is not None:
            try:
                return self._kept_request(*self._cached(cache, messages, tools, options))
            except Exception:
                # A request the wire refuses: the uncached build below raises the very error,
                # in the same words, as it always did.
                pass
        built = self._uncached(messages, tools, options)
        return self._request(built["system"], built["messages"], built["tools"],
                             built["_tools"], built["_options"])

    def _kept_request(self, system: list[bytes], turns: list[bytes], tool_defs: msgspec.Raw | None,
                      tools: Sequence[ToolDefinition], options: WireOptions) -> HttpRequest:
        """The request from the cached build's encoded pieces: its system blocks, its turns and
        its tool array."""
        if options.extra_body:  # merged over the top level: through the dict
            return self._request(array(system) if system else [], joined(turns),
                                 tool_defs if tool_defs is not None else [], tools, options)
        # The body is the options' encoded keys around the pieces, in the order the dict of
        # _request has (the bytes its encoding gives): the bytes before the turns and after
        # them, kept for the last frame, system blocks and tool array (a session's requests
        # share them: the resumed system list is replaced, never changed in place), around the
        # turns.
        head, tail = self._frame(options, bool(tools))
        kept = self._around
        if kept is not None and kept[0] is head and kept[1] is system and kept[2] is tool_defs \
                and kept[3] is tail:
            before, after = kept[4], kept[5]
        else:
            before = b"".join((head, b',"system":[', b",".join(system), b'],"messages":[')) \
                if system else head + b',"messages":['
            after = b"".join((b'],"tools":', tool_defs, tail)) if tool_defs is not None \
                else b"]" + tail
            self._around = (head, system, tool_defs, tail, before, after)
        stream = options.stream
        return HttpRequest(method="POST", path="/v1/messages", headers=self._headers[bool(stream)],
                           body=around(before, turns, after), stream=stream)

    def _request(self, system: Any, turns: Any, tool_defs: Any, tools: Sequence[ToolDefinition],
                 options: WireOptions) -> HttpRequest:
        """The request of a body built as a dict (its values objects or ``msgspec.Raw``)."""
        start, end = self._options(options, bool(tools))
        body = start.copy()
        if system:
            body["system"] = system
        body["messages"] = turns
        if tool_defs:
            body["tools"] = tool_defs
        body.update(end)
        stream = options.stream
        return HttpRequest(method="POST", path="/v1/messages", headers=self._headers[bool(stream)],
                           body=encode_body(body, options), stream=stream)

    def _frame(self, options: WireOptions, tools: bool) -> tuple[bytes, bytes]:
        """:meth:`_options` encoded: the body's bytes before ``system`` (no closing brace) and
        after ``tools`` (with it). Kept for the last options object when it holds no dict a
        caller could change in place (no ``response_format``; ``extra_body`` never comes here)."""
        kept = self._last_frame
        if kept is not None and kept[0] is options and kept[1] is tools:
            return kept[2]
        start, end = self._options(options, tools)
        frame = (encode_body(start, options)[:-1],
                 b"," + encode_body(end, options)[1:] if end else b"}")
        if options.response_format is None:
            self._last_frame = (options, tools, frame)
        return frame

    def _options(self, options: WireOptions, tools: bool,
                 ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The body's keys from ``options``: those before ``system`` and those after ``tools``
        (``tools``: whether the request sends any tool)."""
        start: dict[str, Any] = {
            "model": options.model,
            "max_tokens": options.max_tokens if options.max_tokens is not None
            else self._default_max_tokens,
        }
        body: dict[str, Any] = {}
        choice = tool_choice(options)
        if choice is not None and (tools or choice["type"] == "none"):
            body["tool_choice"] = choice
        if options.reasoning is not None:
            r = options.reasoning
            if r.budget_tokens is not None:
                body["thinking"] = {"type": "enabled", "budget_tokens": r.budget_tokens}
            elif r.effort is not None:
                body["thinking"] = {"type": "adaptive"}
        output: dict[str, Any] = {}
        if options.reasoning is not None and options.reasoning.effort is not None \
                and options.reasoning.budget_tokens is None:
            output["effort"] = "low" if options.reasoning.effort == "minimal" \
                else options.reasoning.effort
        if options.response_format is not None:
            output["format"] = {"type": "json_schema", "schema": options.response_format.schema}
        if output:
            body["output_config"] = output
        if options.temperature is not None or options.top_p is not None:
            # The current published Messages schema has neither; extra_body can still force them.
            raise WireRequestError("the Anthropic Messages API takes no temperature or top_p "
                                   "(send them through extra_body if your endpoint accepts them)")
        if options.stop:
            body["stop_sequences"] = list(options.stop)
        if options.stream:
            body["stream"] = True
        return start, body

    def _uncached(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                  options: WireOptions) -> dict[str, Any]:
        """System blocks, turns and tools converted from scratch (the build before issue 31)."""
        messages, tools, options = self._names.renamed(messages, tools, options)
        system: list[dict[str, Any]] = []
        turns: list[dict[str, Any]] = []
        for m in prepare_history(messages, "anthropic"):
            if isinstance(m, SystemMessage):
                text = text_of(parts_of(m.content), "a system message")
                if text.strip():  # a blank system block is refused like any blank text
                    system.append({"type": "text", "text": text})
                continue
            role, blocks = message_blocks(m, compaction=self._compaction)
            if not blocks:
                continue
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"].extend(blocks)
            else:
                turns.append({"role": role, "content": blocks})
        if not turns:
            raise WireRequestError(
                "messages: nothing to send to the Anthropic Messages API (it needs at least one "
                "message, and empty or whitespace-only text is left out)")
        for turn in turns:
            if turn["role"] == "user":
                turn["content"] = results_first(turn["content"])
        tool_defs = [self._tool(t) for t in tools]
        if options.cache is not None:
            cache_breakpoints(options.cache, system, tool_defs, turns)
        return {"system": system, "messages": turns, "tools": tool_defs, "_tools": tools,
                "_options": options}

    def _cached(self, cache: WireCache, messages: Sequence[Message],
                tools: Sequence[ToolDefinition], options: WireOptions,
                ) -> tuple[list[bytes], list[bytes], msgspec.Raw | None,
                           Sequence[ToolDefinition], WireOptions]:
        """:meth:`_uncached`'s values from each message's kept encoded form: the system blocks,
        the turns (a turn of one message is its kept bytes, a merged turn its messages' blocks
        joined), the tool array, the tools and options as sent."""
        prep = prepare(cache, self._names, messages, tools, options, "anthropic")
        found = prep.found
        for i in prep.missing:
            m = messages[i]
            found[i] = piece = self._piece(prep.message(m))
            prep.keep(m, piece, len(piece[1]))
        policy = options.cache
        left = policy.turns if policy is not None else 0
        # Resumed from the previous request of this session where no turn is marked (a mark
        # lands on the last user turns, which move every request): its system blocks, its
        # closed turns' bytes and its open turn (the next message may merge into it). They are
        # shared with that request's state, so they are replaced here, never changed in place.
        state = prep.state if left == 0 else None
        system: list[bytes]
        done: list[bytes]
        group: list[Any]
        if state is None:
            system, done, group, last, pieces = [], [], [], None, found
        else:
            system, done, group, last = state
            pieces = found[prep.start:]
        groups: list[list[Any]] = []  # the turns closed by this request's new messages
        for piece in pieces:
            role = piece[0]
            if role is None:  # a system message: its block, or b"" when blank
                if piece[1]:
                    system = system + [piece[1]]
            elif not piece[1]:
                continue
            elif role == last:
                group = group + [piece]
            else:
                if group:
                    groups.append(group)
                group = [piece]
                last = role
        if not group:
            raise WireRequestError("messages: nothing to send")  # the uncached build says why
        if left == 0:
            if groups:
                done = done + list(map(_turn, groups))
            prep.sent((system, done, group, last))
            turns = done + [_turn(group)]
        else:
            prep.sent()
            mark = cache_mark(policy) if policy is not None else b""
            groups.append(group)
            turns = []
            for group in reversed(groups):
                if left > 0 and group[0][0] == "user":
                    turns.append(_turn(group, mark))
                    left -= 1
                else:
                    turns.append(_turn(group))
            turns.reverse()
        if policy is not None and (policy.system and system or policy.tools and tools):
            mark = cache_mark(policy)
            if policy.system and system:
                system = system[:-1] + [marked(system[-1], mark)]
            tool_mark = mark if policy.tools else b""
        else:
            tool_mark = b""
        tool_defs = tool_array(cache, tools, prep.tools, self._tool, tool_mark, marked) \
            if tools else None
        return system, turns, tool_defs, prep.tools, prep.options

    def _piece(self, m: Message) -> tuple[str | None, bytes, bool]:
        """A message's kept form: ``(role, the encoded turn of this message alone, whether its
        blocks are tool results)`` (``b""`` when it has no block), or for a system message
        ``(None, its encoded block or b"" when blank, False)``. The turn is encoded in one call:
        its blocks need no reordering (a message's blocks are all tool results or none)."""
        exact = type(m)  # the usual classes first (a missed isinstance() on a Struct class is slow)
        if exact is not ToolMessage and exact is not AssistantMessage \
                and isinstance(m, SystemMessage):
            text = text_of(parts_of(m.content), "a system message")
            if not text.strip():  # a blank system block is refused like any blank text
                return None, b"", False
            return None, encoded({"type": "text", "text": text}), False
        role, blocks = message_blocks(m, compaction=self._compaction)
        if not blocks:
            return role, b"", False
        return role, encoded({"role": role, "content": blocks}), type(m) is ToolMessage

    def _tool(self, tool: ToolDefinition) -> dict[str, Any]:
        out: dict[str, Any] = {"name": tool.name}
        if tool.description:
            out["description"] = tool.description
        out["input_schema"] = tool_parameters(tool, sanitize=self._sanitize)
        if tool.strict:
            out["strict"] = True
        return out

    def parse_response(self, body: bytes) -> ModelTurnResult:
        return collect_turn(self.response_events(body))

    def response_events(self, body: bytes) -> list[StreamEvent]:
        msg: _Message = decode_json(body, _MESSAGE, "a message")
        events: list[StreamEvent] = []
        _whole_blocks(msg, events)
        if msg.usage is not None:
            events.append(UsageEvent(usage=_usage(msg.usage, msg.model), snapshot=True))
        reason = finish_reason(msg.stop_reason, _FINISH)
        if reason is not None:
            events.append(FinishEvent(finish_reason=reason))
        return self._names.restore(events)

    def stream_decoder(self) -> StreamDecoder:
        return self._names.decoder(_AnthropicStreamDecoder())

    def classify_error(self, status: int, headers: Headers, body: bytes, *,
                       now: Clock | None = None) -> ProviderHttpError:
        return classify_anthropic_error(status, headers, decode_error_body(body), body, now=now)


def _input_text(value: Any) -> str:
    return _ENCODE.encode(value if value is not None else {}).decode()


def _compaction(index: int, content: Any, encrypted: Any) -> ProviderItemEvent:
    """A server-side compaction block, carried opaquely: the next request must send it back (the
    API drops everything before it), and the canonical turn has no place of its own for it."""
    block: dict[str, Any] = {"type": "compaction", "content": content}
    if encrypted is not None:
        block["encrypted_content"] = encrypted
    return ProviderItemEvent(index=index, part=ProviderItemPart(
        wire="anthropic", kind="compaction", data=_ENCODE.encode(block).decode()))


def _whole_blocks(msg: _Message, out: list[StreamEvent]) -> None:
    """The events of blocks that arrive complete: a whole message's content, or content already
    in a stream's ``message_start`` (programmatic tool calling answers a turn that way: the
    ``tool_use`` and ``stop_reason`` sit in ``message_start``, and ``message_stop`` follows)."""
    for index, block in enumerate(msg.content or ()):
        if block.type == "text" and block.text:
            out.append(TextEvent(content=block.text))
        elif block.type in ("thinking", "redacted_thinking"):
            out.append(_reasoning(index, block, msg.model))
        elif block.type == "tool_use":
            out.append(ToolCallEvent(tool_call=ToolCallChunk(
                index=index, id=block.id, name=block.name or "", arguments=_input_text(block.input))))
        elif block.type == "compaction":
            out.append(_compaction(index, block.content, block.encrypted_content))


def _reasoning(index: int, block: _Block, model: str | None) -> ReasoningEvent:
    if block.type == "redacted_thinking":
        return ReasoningEvent(index=index, part=ReasoningPart(redacted=True, data=block.data,
                                                              provider="anthropic", model=model))
    return ReasoningEvent(index=index, part=ReasoningPart(text=block.thinking or "",
                                                          signature=block.signature,
                                                          provider="anthropic", model=model))


_SERVER_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use"})


class _AnthropicStreamDecoder:
    """Server-run tool blocks (``server_tool_use`` — web search, code execution — and their
    ``*_tool_result`` blocks) are the provider's own work, already done: they are never tool calls
    for the loop to dispatch, so their input deltas are dropped, as the non-streamed path drops the
    blocks. The answer text around them (with its citations, which the canonical turn has no
    place for) is kept as text."""

    __slots__ = ("_args", "_compactions", "_done", "_inputs", "_model", "_server", "_tools",
                 "_usage")

    def __init__(self) -> None:
        self._done = False
        self._model: str | None = None
        self._tools: set[int] = set()
        self._args: set[int] = set()
        self._inputs: dict[int, str] = {}  # input that arrived whole on content_block_start
        self._server: set[int] = set()  # block indexes of server-run tool calls
        self._usage: _Usage | None = None  # the counts reported so far, each field's last value
        self._compactions: dict[int, tuple[list[str], list[Any]]] = {}  # summary, encrypted

    def decode(self, events: Sequence[SseEvent]) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        one = self._event
        for sse in events:
            one(sse, out)
        return out

    def _event(self, sse: SseEvent, out: list[StreamEvent]) -> None:
        if self._done or not sse.data:
            return
        try:  # decode_json() inline: one call fewer per event on the hot path
            ev: _Event = _decode_event(sse.data)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            ev = decode_json(sse.data, _EVENT, "an Anthropic stream event")  # raises why
        kind = ev.type
        if kind == "content_block_delta":
            d = ev.delta
            if d is None:
                return
            if d.type == "text_delta":
                if d.text:
                    out.append(TextEvent(content=d.text))
            elif d.type == "input_json_delta":
                if d.partial_json and ev.index not in self._server:
                    self._args.add(ev.index)
                    out.append(ToolCallEvent(tool_call=ToolCallChunk(
                        index=ev.index, arguments=d.partial_json)))
            elif d.type == "thinking_delta":
                if d.thinking:
                    out.append(ReasoningEvent(index=ev.index, part=ReasoningPart(text=d.thinking,
                                                                                 provider="anthropic",
                                                                                 model=self._model)))
            elif d.type == "compaction_delta":
                pending = self._compactions.get(ev.index)
                if pending is not None:
                    if isinstance(d.content, str):
                        pending[0].append(d.content)
                    if d.encrypted_content is not None:
                        pending[1][:] = [d.encrypted_content]
            elif d.type == "signature_delta":
                out.append(ReasoningEvent(index=ev.index, part=ReasoningPart(signature=d.signature,
                                                                             provider="anthropic",
                                                                             model=self._model)))
        elif kind == "content_block_start" and ev.content_block is not None:
            block = ev.content_block
            if block.type == "text" and block.text:
                out.append(TextEvent(content=block.text))
            elif block.type in ("thinking", "redacted_thinking"):
                out.append(_reasoning(ev.index, block, self._model))
            elif block.type == "tool_use":
                self._tools.add(ev.index)
                if block.input:
                    # The input may arrive whole here, with no input_json_delta after it.
                    self._inputs[ev.index] = _input_text(block.input)
                out.append(ToolCallEvent(tool_call=ToolCallChunk(
                    index=ev.index, id=block.id, name=block.name)))
            elif block.type in _SERVER_BLOCKS:
                self._server.add(ev.index)
            elif block.type == "compaction":
                self._compactions[ev.index] = (
                    [block.content] if isinstance(block.content, str) else [],
                    [] if block.encrypted_content is None else [block.encrypted_content])
        elif kind == "content_block_stop":
            pending = self._compactions.pop(ev.index, None)
            if pending is not None:
                out.append(_compaction(ev.index, "".join(pending[0]),
                                       pending[1][0] if pending[1] else None))
            if ev.index in self._tools and ev.index not in self._args:
                # No input_json_delta came: the input is the block's own (a tool without
                # parameters streams no JSON at all, and its input is {}).
                self._args.add(ev.index)
                out.append(ToolCallEvent(tool_call=ToolCallChunk(
                    index=ev.index, arguments=self._inputs.get(ev.index, "{}"))))
        elif kind == "message_start" and ev.message is not None:
            msg = ev.message
            self._model = msg.model
            _whole_blocks(msg, out)
            if msg.usage is not None:
                self._usage = _merged(self._usage, msg.usage)
                out.append(UsageEvent(usage=_usage(self._usage, self._model), snapshot=True))
            reason = finish_reason(msg.stop_reason, _FINISH)
            if reason is not None:
                out.append(FinishEvent(finish_reason=reason))
        elif kind == "message_delta":
            if ev.usage is not None:
                self._usage = _merged(self._usage, ev.usage)
                out.append(UsageEvent(usage=_usage(self._usage, self._model), snapshot=True))
            if ev.delta is not None and ev.delta.stop_reason is not None:
                reason = finish_reason(ev.delta.stop_reason, _FINISH)
                assert reason is not None
                out.append(FinishEvent(finish_reason=reason))
        elif kind == "message_stop":
            self._done = True
        elif kind == "error":
            self._done = True
            out.append(ErrorEvent(error=classify_anthropic_error(
                None, (), {"error": ev.error}, sse.data.encode())))

    def end(self) -> list[StreamEvent]:
        if not self._done:
            raise IncompleteStreamError("the Anthropic stream ended before message_stop")
        return []


# -- errors --------------------------------------------------------------------------------------

_TYPE_CATEGORY: MappingProxyType[str, str] = MappingProxyType({
    "authentication_error": "auth",
    "permission_error": "auth",
    "billing_error": "auth",
    "not_found_error": "model_not_found",
    "rate_limit_error": "rate_limited",
    "api_error": "server_error",
    "overloaded_error": "server_error",
    "timeout_error": "timeout",
})


def classify_anthropic_error(status: int | None, headers: Headers, payload: object, body: bytes,
                             *, now: Clock | None = None) -> ProviderHttpError:
    """Classify ``{"type": "error", "error": {"type", "message"}}``. ``overloaded_error`` (529) is a
    server error; ``prompt is too long`` and ``request_too_large`` are prompt-too-long."""
    err = payload.get("error") if isinstance(payload, dict) else None
    message = str_field(err, "message") or body_snippet(body)
    kind = str_field(err, "type")
    lowered = message.lower()
    too_long = kind == "request_too_large" or status == 413 or (
        kind == "invalid_request_error" and ("prompt is too long" in lowered
                                             or "context window" in lowered))
    return classify("anthropic", status, headers, message=message, error_type=kind,
                    category=_TYPE_CATEGORY.get(kind or ""), prompt_too_long=too_long, now=now)
