"""Tool names every wire accepts, and ids the Responses wire accepts.

A provider refuses a request whose tool names fall outside its documented pattern (OpenAI and
Anthropic: ``^[a-zA-Z0-9_-]{1,64}$``; Gemini: a letter or ``_`` first, then letters, digits and
``_ . : -``, at most 128), but MCP servers and skills name tools ``ns:tool``, ``has space`` or
``slash/name``. So each adapter sends such a name under a wire name — its characters outside the
pattern replaced by ``_``, cut to fit, and an 8-hex-digit suffix of the name's SHA-256 — and maps
the calls of its responses back. A name the pattern accepts is sent unchanged (so a request of
valid names keeps its bytes), and the wire name of a name is always the same (so prompt caches
keep hitting across turns and processes).

The way back needs the table: each adapter keeps one (:class:`ToolNames`), filled as requests are
built and read by its decoders. Every entry is a pure function of its name, so concurrent
requests on one adapter only ever write the same values; the table is bounded, oldest first out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence

import msgspec

from ..completion import StreamEvent, ToolCallEvent
from ..contracts import AssistantMessage, Message, ToolDefinition, ToolMessage
from ._errors import WireRequestError
from ._sse import SseEvent
from ._types import ForcedTool, StreamDecoder, WireOptions

__all__ = ("NameRule", "ToolNames", "GEMINI_NAMES", "OPENAI_NAMES", "plain_id", "rename_message",
           "rename_rest", "short_id")


class NameRule(msgspec.Struct, frozen=True):
    """A wire's documented tool-name pattern: the whole ``valid`` pattern, the ``bad`` characters
    it excludes, the ``max_len``, and whether the first character must be a letter or ``_``."""

    valid: str
    bad: str
    max_len: int
    letter_first: bool = False


OPENAI_NAMES = NameRule(valid=r"[a-zA-Z0-9_-]{1,64}", bad=r"[^a-zA-Z0-9_-]", max_len=64)
"""OpenAI Chat and Responses (openai/openai-openapi ``FunctionObject.name``) and Anthropic (the
tool-use guide: ``^[a-zA-Z0-9_-]{1,64}$``)."""

GEMINI_NAMES = NameRule(valid=r"[a-zA-Z_][a-zA-Z0-9_.:-]{0,127}", bad=r"[^a-zA-Z0-9_.:-]",
                        max_len=128, letter_first=True)
"""Gemini ``FunctionDeclaration.name``: "Must start with a letter or an underscore. Must be a-z,
A-Z, 0-9, or contain underscores, dots, colons and dashes, with a maximum length of 128"."""

_DIGEST = 8
_KEEP = 4096  # wire names remembered per adapter for the way back


def _digest(text: str, size: int) -> str:
    # surrogatepass: a name holding a lone surrogate still has one stable digest.
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:size]


class ToolNames:
    """One adapter's tool names: :meth:`request` gives a request's canonical-to-wire map (and
    remembers the way back), :meth:`decoder` and :meth:`restore` put canonical names back into a
    response's tool calls."""

    __slots__ = ("_back", "_bad", "_rule", "_valid", "fit")

    def __init__(self, rule: NameRule) -> None:
        self._rule = rule
        self._valid = re.compile(rule.valid)
        self._bad = re.compile(rule.bad)
        self._back: dict[str, str] = {}
        self.fit: dict[str, bool] = {}
        """:meth:`fits` by name, as it answered (emptied when it reaches ``_KEEP`` names)."""

    def wire_name(self, name: str) -> str:
        """``name`` itself when the wire accepts it, else its deterministic wire name."""
        if self._valid.fullmatch(name):
            return name
        rule = self._rule
        base = self._bad.sub("_", name)
        if rule.letter_first and not re.match(r"[a-zA-Z_]", base):
            base = "_" + base
        return f"{base[:rule.max_len - _DIGEST - 1]}_{_digest(name, _DIGEST)}"

    def request(self, names: Iterable[str]) -> dict[str, str]:
        """The wire name of each of a request's tool names (definitions, calls in the history, a
        forced choice). Two names that would go out as one (a name that is another's wire
        name, or a digest collision) raise :class:`~bindloop.wire.WireRequestError`: the model
        could not tell them apart."""
        out: dict[str, str] = {}
        taken: dict[str, str] = {}
        for name in names:
            if name in out:
                continue
            wire = out[name] = self.wire_name(name)
            other = taken.setdefault(wire, name)
            if other != name:
                raise WireRequestError(
                    f"tools: the names {other!r} and {name!r} would both be sent as {wire!r}; "
                    "rename one of them")
        back = self._back
        for name, wire in out.items():
            if wire != name:
                back.pop(wire, None)
                back[wire] = name  # newest last: the oldest goes first when the table is full
        while len(back) > _KEEP:
            del back[next(iter(back))]
        return out

    def fits(self, name: str) -> bool:
        """Whether the wire accepts ``name`` as it is."""
        fit = self.fit
        ok = fit.get(name)
        if ok is None:
            ok = self._valid.fullmatch(name) is not None
            if len(fit) >= _KEEP:
                fit.clear()
            fit[name] = ok
        return ok

    @staticmethod
    def request_names(messages: Sequence[Message], tools: Sequence[ToolDefinition],
                      options: WireOptions) -> list[str]:
        """Every tool name a request carries, in the order :meth:`request` checks them: tool
        definitions, calls in the history, tool results' names, a forced choice."""
        names = [t.name for t in tools]
        for m in messages:
            if isinstance(m, AssistantMessage):
                names.extend(c.name for c in m.tool_calls)
            elif isinstance(m, ToolMessage) and m.name is not None:
                names.append(m.name)
        if isinstance(options.tool_choice, ForcedTool):
            names.append(options.tool_choice.name)
        return names

    def renamed(self, messages: Sequence[Message], tools: Sequence[ToolDefinition],
                options: WireOptions,
                ) -> tuple[Sequence[Message], Sequence[ToolDefinition], WireOptions]:
        """The request's input with every tool name the wire would refuse replaced by its wire
        name: tool definitions, calls in the history, tool results' names, a forced choice.
        Input whose names all fit is returned as it is (no copy, the same bytes)."""
        names = self.request_names(messages, tools, options)
        valid = self._valid.fullmatch
        if all(valid(n) for n in names):
            return messages, tools, options
        wire = self.request(names)
        tools, options = rename_rest(tools, options, wire)
        return [rename_message(m, wire) for m in messages], tools, options

    def canonical(self, name: str) -> str:
        """The canonical name of a name a response carries (itself unless this adapter sent it
        under a wire name)."""
        return self._back.get(name, name)

    def restore(self, events: list[StreamEvent]) -> list[StreamEvent]:
        """``events`` with every tool call's wire name replaced by its canonical name, in place.
        A wire name arrives whole in one fragment on every wire (the name is never split)."""
        back = self._back
        if back:
            for i, event in enumerate(events):
                if type(event) is ToolCallEvent:
                    name = event.tool_call.name
                    if name and name in back:
                        events[i] = ToolCallEvent(tool_call=msgspec.structs.replace(
                            event.tool_call, name=back[name]))
        return events

    def decoder(self, inner: StreamDecoder) -> StreamDecoder:
        """``inner`` behind :meth:`restore`. The table is read at each batch, so a decoder made
        before its request was built still maps back; while no name was ever mapped a batch
        costs one call and a truth test."""
        return _Restoring(inner, self)


def rename_message(m: Message, wire: dict[str, str]) -> Message:
    """``m`` with its tool names replaced by their wire names in ``wire`` (:meth:`ToolNames.request`'s
    map); ``m`` itself when none changes."""
    replace = msgspec.structs.replace
    if isinstance(m, AssistantMessage) and any(wire[c.name] != c.name for c in m.tool_calls):
        return replace(m, tool_calls=tuple(replace(c, name=wire[c.name]) for c in m.tool_calls))
    if isinstance(m, ToolMessage) and m.name is not None and wire[m.name] != m.name:
        return replace(m, name=wire[m.name])
    return m


def rename_rest(tools: Sequence[ToolDefinition], options: WireOptions, wire: dict[str, str],
                ) -> tuple[Sequence[ToolDefinition], WireOptions]:
    """Tool definitions and a forced choice under their wire names in ``wire``."""
    choice = options.tool_choice
    replace = msgspec.structs.replace
    if isinstance(choice, ForcedTool) and wire[choice.name] != choice.name:
        options = replace(options, tool_choice=ForcedTool(name=wire[choice.name]))
    return [t if wire[t.name] == t.name else replace(t, name=wire[t.name]) for t in tools], options


class _Restoring:
    __slots__ = ("_inner", "_names")

    def __init__(self, inner: StreamDecoder, names: ToolNames) -> None:
        self._inner = inner
        self._names = names

    def decode(self, events: Sequence[SseEvent]) -> list[StreamEvent]:
        out = self._inner.decode(events)
        names = self._names
        return names.restore(out) if names._back else out  # once per read: no call when unmapped

    def end(self) -> list[StreamEvent]:
        return self._names.restore(self._inner.end())


_ID_MAX = 64


def short_id(value: str, limit: int = _ID_MAX) -> str:
    """``value`` itself when it has at most ``limit`` characters, else a deterministic id of
    ``limit`` characters: its first characters and 16 hex digits of its SHA-256. The same long
    id always gives the same short one, so a call and its output still pair up."""
    if len(value) <= limit:
        return value
    return f"{value[:limit - 17]}_{_digest(value, 16)}"


_PLAIN_ID = re.compile(r"[a-zA-Z0-9_-]+")
_NOT_PLAIN = re.compile(r"[^a-zA-Z0-9_-]")


def plain_id(value: str) -> str:
    """``value`` itself when it matches ``^[a-zA-Z0-9_-]+$`` (Anthropic's pattern for a
    ``tool_use`` id), else its characters outside the pattern replaced by ``_`` and 16 hex digits
    of its SHA-256 added: ids from other providers and gateways (``functions.get_weather:0``)
    keep pairing their call and result, and two ids never merge into one."""
    # An ASCII identifier ([A-Za-z_][A-Za-z0-9_]*) matches the pattern: two C calls, a third of
    # the regex's time, for the ids providers hand out (call_…, toolu_…).
    if value.isascii() and value.isidentifier() or _PLAIN_ID.fullmatch(value):
        return value
    return f"{_NOT_PLAIN.sub('_', value)}_{_digest(value, 16)}"
