"""Each message's and tool definition's wire form, kept per adapter between requests.

An agent sends the same transcript again on every model call, one or two messages longer. Messages
are frozen Structs, and every step from a message to its bytes on a wire — the tool-name mapping
(:mod:`._names`, a pure function of each name), the reasoning-forwarding policy (a pure function of
each assistant message), the wire's own conversion — depends on that message alone (and on the
adapter's fixed settings). So an adapter keeps what a message became, encoded once as
``msgspec.Raw``, keyed by the message's identity (the entry holds the message, so its ``id`` is not
reused while the entry lives), and a request re-encodes only the messages it has not seen. Tool
definitions are kept the same way: their schemas are checked and sanitized once, not per request,
and the last tool list's whole encoded array is kept too, so a request with the same tools as the
one before costs the same however many tools it carries.
Bytes are those of the uncached build (a property test compares them for any transcript).

The memo is bounded in entries and in encoded bytes, oldest first out, so memory stays flat
however many sessions share the adapter; an evicted message is converted again when it returns.
A ``ToolDefinition``'s ``parameters`` dict must not be mutated after it was sent (a new definition
is a new key).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import is_
from typing import Any

import msgspec

from ..contracts import AssistantMessage, Message, ToolDefinition, ToolMessage
from ..transcript import ReasoningTarget, sanitize_history_for_provider
from ._names import ToolNames, rename_message, rename_rest
from ._types import ForcedTool, WireOptions

__all__ = ("DEFAULT_REQUEST_CACHE", "ArrayBody", "Prepared", "WireCache", "around", "array",
           "check_cache_size", "encoded", "joined", "prepare", "tool_array")

DEFAULT_REQUEST_CACHE = 16_384
"""Messages and tool definitions whose wire form one adapter keeps (``request_cache=``)."""

_MAX_BYTES = 64 << 20  # encoded bytes kept per adapter, whatever the entry count

_RECENT = 4  # transcripts remembered per adapter for the prefix shortcut
_ENCODE = msgspec.json.Encoder().encode

def check_cache_size(value: int) -> int:
    from ..errors import UsageError

    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"request_cache must be an int >= 0, got {value!r}")
    return value


# ``encoded(value)``: ``value``'s JSON, as the body's encoder writes it (the encoder's own
# method, so a message's conversion pays no extra call for it). A lone surrogate raises
# ``UnicodeEncodeError``: the adapter then builds the request uncached, whose encoding names
# where it sits.
encoded: Callable[[Any], bytes] = _ENCODE


def array(pieces: list[bytes]) -> msgspec.Raw:
    """A JSON array of encoded elements (empty pieces left out), the bytes the encoder writes."""
    return joined(list(filter(None, pieces)))


def joined(pieces: list[bytes]) -> msgspec.Raw:
    """:func:`array` of pieces none of which is empty. The elements' bytes are copied once:
    the brackets are stuck to the first and the last element of a copy of the list."""
    if not pieces:
        return msgspec.Raw(b"[]")
    parts = pieces[:]
    parts[0] = b"[" + parts[0]
    parts[-1] += b"]"
    return msgspec.Raw(b",".join(parts))


def around(before: bytes, pieces: list[bytes], after: bytes) -> bytes:
    """``before + b",".join(pieces) + after``, each piece's bytes copied once (a long
    transcript's turns are most of a body: joined apart first, they would be copied twice)."""
    n = len(pieces)
    if n < 32:  # small pieces: two joins cost less than building the list below
        return b"".join((before, b",".join(pieces), after))
    parts = [b","] * (2 * n + 1)
    parts[0] = before
    parts[1::2] = pieces
    parts[-1] = after
    return b"".join(parts)


class ArrayBody:
    """The body of a wire whose transcript is one array (the OpenAI wires): ``{"model":…,
    "<key>":[`` the encoded pieces ``],"tools":[…]`` and then the options' other keys -- the
    bytes the uncached build's dict ``{"model", key, "tools", **rest}`` encodes to (no
    ``extra_body``: that is merged over the dict). The bytes around the array are kept for the
    last options object and tool array, so a session's next request only joins its pieces
    (one copy of each). Options holding a ``response_format`` are not kept: it holds a dict a
    caller could change in place."""

    __slots__ = ("_after", "_frame", "_open")

    def __init__(self, key: str) -> None:
        self._open = b',"' + key.encode() + b'":['
        self._frame: tuple[WireOptions, bool, tuple[bytes, bytes]] | None = None
        self._after: tuple[msgspec.Raw, bytes, bytes] | None = None

    def write(self, options: WireOptions, pieces: list[bytes], wire_tools: msgspec.Raw,
              tools: bool, rest: Callable[[WireOptions, bool], dict[str, Any]]) -> bytes:
        """The body around ``pieces`` (empty ones left out); ``rest(options, tools)`` gives the
        options' keys after the tools (``tools``: whether the request sends any)."""
        kept = self._frame
        if kept is not None and kept[0] is options and kept[1] is tools:
            head, tail = kept[2]
        else:
            end = rest(options, tools)
            head = b'{"model":' + encoded(options.model) + self._open
            tail = b"," + encoded(end)[1:] if end else b"}"
            if options.response_format is None:
                self._frame = (options, tools, (head, tail))
        after_kept = self._after
        if after_kept is not None and after_kept[0] is wire_tools and after_kept[1] is tail:
            after = after_kept[2]
        else:
            after = b"".join((b'],"tools":', wire_tools, tail)) if tools else b"]" + tail
            self._after = (wire_tools, tail, after)
        return around(head, list(filter(None, pieces)), after)


class WireCache:
    """Identity-keyed, bounded memo of wire forms (see the module docstring). Concurrent requests
    on one adapter only ever store equal values for one key."""

    __slots__ = ("_bytes", "_entries", "_limit", "_max_bytes", "recent", "tools")

    def __init__(self, limit: int, max_bytes: int = _MAX_BYTES) -> None:
        self._limit = limit
        self._max_bytes = max_bytes
        # id(key) -> (key, value, encoded size, whether key holds a name the wire refuses),
        # oldest first.
        self._entries: dict[int, tuple[object, Any, int, bool]] = {}
        self._bytes = 0
        # The last few transcripts sent (a copy of the list, its pieces, whether it maps names,
        # the adapter's state over them), newest first: a transcript that starts with one of
        # them skips that many look-ups, and the adapter resumes from its state.
        self.recent: list[tuple[list[Message], list[Any], bool, Any]] = []
        # The last tool list sent: the object passed, a copy of it, whether every name fits the
        # wire, and its encoded arrays by the cache_control mark on the last tool (b"": none).
        self.tools: tuple[object, list[ToolDefinition], bool, dict[bytes, msgspec.Raw]] = (
            None, [], True, {})

    def get(self, key: object) -> Any:
        entry = self._entries.get(id(key))
        return entry[1] if entry is not None and entry[0] is key else None

    def put(self, key: object, value: Any, size: int, renamed: bool = False) -> None:
        """Keep ``value`` for ``key`` (``size`` encoded bytes); a value larger than the byte
        bound is not kept."""
        if size > self._max_bytes:
            return
        entries = self._entries
        k = id(key)
        if k in entries:  # stored again: it moves to the newest end
            self._bytes -= entries.pop(k)[2]
        entries[k] = (key, value, size, renamed)
        self._bytes += size
        if len(entries) > self._limit or self._bytes > self._max_bytes:
            self._evict()

    def _evict(self) -> None:
        """Drop the oldest entries, down to 7/8 of the limit and of the byte bound, in one
        pass. A dict reaches its oldest live entry by walking past every entry deleted before
        it, so dropping one entry per store would walk thousands on every store of a full memo
        (whichever bound is reached); one walk per batch is constant per store."""
        entries = self._entries
        keep = self._limit - self._limit // 8
        keep_bytes = self._max_bytes - self._max_bytes // 8
        count, size = len(entries), self._bytes
        gone: list[int] = []
        for k, entry in entries.items():
            if count <= keep and size <= keep_bytes or count == 1:  # the newest one stays
                break
            gone.append(k)
            count -= 1
            size -= entry[2]
        for k in gone:
            del entries[k]
        self._bytes = size

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def nbytes(self) -> int:
        """Encoded bytes held."""
        return self._bytes


class Prepared:
    """One request against an adapter's memo: ``found[i]`` is message ``i``'s kept piece or
    ``None``; :meth:`message` gives a missing message's renamed and sanitized form to convert,
    :meth:`keep` stores its piece. ``tools`` and ``options`` carry wire names where needed.

    When the request starts with a transcript sent before (the same objects), ``start`` is that
    transcript's length and ``state`` what the adapter kept of it with :meth:`sent` (its work
    over those messages' pieces, to resume from); otherwise ``0`` and ``None``."""

    __slots__ = ("_cache", "_matched", "_messages", "_names", "_refused", "_target", "found",
                 "missing", "options", "start", "state", "tools", "wire")

    def __init__(self, cache: WireCache, names: ToolNames, target: ReasoningTarget,
                 messages: Sequence[Message], found: list[Any], missing: list[int],
                 tools: Sequence[ToolDefinition], options: WireOptions,
                 wire: dict[str, str] | None, start: int, state: Any, matched: int,
                 refused: bool) -> None:
        self._cache = cache
        self._names = names
        self._target = target
        self._messages = messages
        self._matched = matched
        self._refused = refused
        self.start = start
        self.state = state
        self.found = found
        self.missing = missing
        self.tools = tools
        self.options = options
        self.wire = wire

    def message(self, m: Message) -> Message:
        """``m`` as the uncached build converts it: wire names, then the reasoning policy."""
        if self.wire is not None:
            m = rename_message(m, self.wire)
        # The content first: a tool result, whose content is text, then skips the slower check.
        if isinstance(m.content, tuple) and isinstance(m, AssistantMessage):
            m = sanitize_history_for_provider((m,), self._target)[0]
        return m

    def keep(self, m: Message, piece: Any, size: int) -> None:
        self._cache.put(m, piece, size, self.wire is not None and _refused(self._names, m))

    def sent(self, state: Any = None) -> None:
        """Remember this request's transcript and pieces (every ``found`` is filled in, and
        neither is changed afterwards: :func:`prepare` copies the pieces it starts from) for the
        next request of the same session, which starts with the same message objects, with the
        adapter's ``state`` over them (which it must not change afterwards)."""
        recent = self._cache.recent
        if self._matched >= 0:
            del recent[self._matched]
        recent.insert(0, (list(self._messages), self.found, self._refused, state))
        del recent[_RECENT:]

    def call_name(self, name: str) -> str:
        """A call's name as sent (its wire name where this request maps names)."""
        return name if self.wire is None else self.wire[name]


def _refused(names: ToolNames, m: Message) -> bool:
    """Whether ``m`` holds a tool name the wire refuses (so the request must map names)."""
    # The exact classes first: a missed isinstance() on a Struct class is slow.
    if type(m) is AssistantMessage or (type(m) is not ToolMessage
                                       and isinstance(m, AssistantMessage)):
        if m.tool_calls:
            fit = names.fit  # fits() by name, read here without the call
            for call in m.tool_calls:
                if not (fit.get(call.name) or names.fits(call.name)):
                    return True
        return False
    return (type(m) is ToolMessage or isinstance(m, ToolMessage)) and m.name is not None and not (
        names.fit.get(m.name) or names.fits(m.name))


def prepare(cache: WireCache, names: ToolNames, messages: Sequence[Message],
            tools: Sequence[ToolDefinition], options: WireOptions,
            target: ReasoningTarget) -> Prepared:
    """Look every message up. When any name in the request is one the wire refuses, map the
    request's names as :meth:`ToolNames.renamed` does (the same checks, errors and table); the
    flag is kept with each message, so a request of fitting names reads no name again."""
    entries = cache._entries
    found: list[Any] = []
    missing: list[int] = []
    refused = False
    start = 0
    matched = -1
    state = None
    count = len(messages)
    for index, (sent, pieces, flag, kept) in enumerate(cache.recent):
        k = len(sent)
        # The same objects in the same places (identity, in C): their pieces are already known.
        if 0 < k <= count and messages[k - 1] is sent[-1] and messages[0] is sent[0] \
                and all(map(is_, sent, messages)):
            found = pieces[:]
            start, refused, matched, state = k, flag, index, kept
            break
    append = found.append
    for i in range(start, count):
        m = messages[i]
        entry = entries.get(id(m))
        if entry is not None and entry[0] is m:
            append(entry[1])
            if entry[3]:
                refused = True
        else:
            append(None)
            missing.append(i)
            if not refused and _refused(names, m):
                refused = True
    fits = names.fits
    choice = options.tool_choice
    forced = choice.name if isinstance(choice, ForcedTool) else None
    obj, last, fitting, _ = cache.tools
    # A tuple passed again is the same definitions (the agent passes one per prompt); a list is
    # compared element by element, in C.
    if not (tools is obj and type(tools) is tuple) and (
            len(last) != len(tools) or not all(map(is_, last, tools))):
        fitting = all([fits(t.name) for t in tools])
        cache.tools = (tools, list(tools), fitting, {})
    if not refused and fitting and (forced is None or fits(forced)):
        return Prepared(cache, names, target, messages, found, missing, tools, options, None,
                        start, state, matched, refused)
    wire = names.request(names.request_names(messages, tools, options))
    renamed, options = rename_rest(tools, options, wire)
    return Prepared(cache, names, target, messages, found, missing, renamed, options, wire,
                    start, state, matched, refused)


def tool_array(cache: WireCache, tools: Sequence[ToolDefinition],
               sent: Sequence[ToolDefinition], convert: Callable[[ToolDefinition], Any],
               mark: bytes = b"", marked: Callable[[bytes, bytes], bytes] | None = None,
               ) -> msgspec.Raw:
    """The encoded array of each tool's converted form, the last one as ``marked(piece, mark)``
    when ``mark`` is given (a wire's prompt-cache breakpoint). Each definition's piece is kept by the identity of
    the definition the caller passed (``tools``; ``sent`` are the same definitions under their
    wire names), and the whole array by the tool list :func:`prepare` just saw: a request with
    the same tools as the one before joins nothing."""
    arrays = cache.tools[3]
    out = arrays.get(mark)
    if out is not None:
        return out
    pieces: list[bytes] = []
    for tool, wire_tool in zip(tools, sent):
        piece = cache.get(tool)
        if piece is None:
            piece = encoded(convert(wire_tool))
            cache.put(tool, piece, len(piece))
        pieces.append(piece)
    if mark and marked is not None and pieces:
        pieces[-1] = marked(pieces[-1], mark)
    out = msgspec.Raw(b"[" + b",".join(pieces) + b"]")
    arrays[mark] = out
    return out

