"""Snapshots: every frame's memory and a journal of model responses and tool outputs, with stable
bytes; replay serves the journal (zero model calls, zero tool runs) until it runs out."""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from itertools import compress, count
from operator import is_not
from typing import Any

import msgspec

from ..contracts import AssistantMessage, FilePart, ImagePart, Message, ModelTurnResult, \
    ProviderItemPart, ReasoningPart, SystemMessage, TextPart, ToolCall, ToolDefinition, \
    ToolMessage, ToolOutcome, UserMessage
from ..errors import UsageError
from ..checkpoints import CheckpointFormatError
from ._errors import SnapshotDivergenceError
from ..run import canonical_json

__all__ = (
    "SNAPSHOT_VERSION",
    "canonical_message",
    "canonical_value",
    "AgentSnapshot",
    "FrameSnapshot",
    "Journal",
    "JournalTurn",
    "PromptHashCache",
    "PromptHasher",
    "ReplayCursor",
    "encode_snapshot",
    "parse_snapshot",
    "prompt_hash",
)

SNAPSHOT_VERSION = 1


class JournalTurn(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One model call: its prompt hash, the turn it returned, and the outcomes of the tool calls
    that turn asked for, by call id."""

    prompt_hash: str
    turn: ModelTurnResult
    tools: dict[str, ToolOutcome] = {}


class FrameSnapshot(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One agent invocation (``agent_id`` ``None``: the run's root): its memory at snapshot time,
    its journal and its sub-agents in call order."""

    agent_id: str | None
    memory: dict[str, Any] = {}
    journal: tuple[JournalTurn, ...] = ()
    children: tuple[FrameSnapshot, ...] = ()


class AgentSnapshot(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A whole run's snapshot. ``encode_snapshot`` gives its stable bytes; ``parse_snapshot`` reads
    them back (refusing another version with :class:`~bindloop.checkpoints.CheckpointFormatError`)."""

    version: int = SNAPSHOT_VERSION
    root: FrameSnapshot


_ENCODER = msgspec.json.Encoder(order="deterministic")


def encode_snapshot(snapshot: AgentSnapshot) -> bytes:
    """Stable JSON bytes: equal snapshots give equal bytes (dict keys sorted)."""
    return _ENCODER.encode(snapshot)


def parse_snapshot(data: bytes | str | Mapping[str, Any]) -> AgentSnapshot:
    """Read a snapshot from its JSON bytes/text or the decoded object.

    Raises :class:`~bindloop.checkpoints.CheckpointFormatError` naming the field for another version, a
    wrong shape or an unknown field."""
    try:
        value: Any = msgspec.json.decode(data) if isinstance(data, (bytes, str)) else data
    except msgspec.DecodeError as exc:
        raise CheckpointFormatError("", f"not JSON: {exc}", document="snapshot") from exc
    if not isinstance(value, Mapping):
        raise CheckpointFormatError("", f"expected an object, got {type(value).__name__}",
                                    document="snapshot")
    version = value.get("version")
    if version != SNAPSHOT_VERSION or isinstance(version, bool):
        raise CheckpointFormatError("version", f"this bindloop reads snapshot version "
                                    f"{SNAPSHOT_VERSION}, got {version!r}", document="snapshot")
    try:
        return msgspec.convert(value, AgentSnapshot)
    except msgspec.ValidationError as exc:
        text = str(exc)
        field = text.rsplit("at `", 1)[-1].rstrip("`") if "at `" in text else ""
        raise CheckpointFormatError(field, text, document="snapshot") from exc


class Journal:
    """A frame's live journal: turns in call order; tool outcomes land on the turn that asked
    (the latest turn holding the call's id when the outcome was recorded).

    Recording only appends (the turns; their hashes, a deferred one as its trail and call
    index, so a journaled turn keeps no object of its own alive beside the turn; each outcome
    with its call id and the number of turns then): :meth:`freeze` computes the deferred hashes,
    finds the turn each outcome lands on and builds the turns' ``tools``."""

    __slots__ = ("_at", "_calls", "_hashes", "_ids", "_outcomes", "turns")

    def __init__(self) -> None:
        self.turns: list[ModelTurnResult] = []
        self._hashes: list[str | _Trail] = []  # each turn's hash, or the trail computing it
        self._calls: list[int] = []  # and the call's index in that trail
        self._ids: list[str] = []  # each recorded outcome's call id,
        self._outcomes: list[ToolOutcome] = []  # the outcome,
        self._at: list[int] = []  # and how many turns were journaled then

    def record_turn(self, prompt_hash: str | PromptHash, turn: ModelTurnResult) -> None:
        """Journal a turn; a :class:`PromptHash` is read when the journal is frozen."""
        self.turns.append(turn)
        if type(prompt_hash) is PromptHash:
            self._hashes.append(prompt_hash.trail)
            self._calls.append(prompt_hash.index)
        else:
            self._hashes.append(prompt_hash)  # type: ignore[arg-type]  # narrowed: a str
            self._calls.append(-1)

    def record_call(self, hasher: PromptHasher, messages: Sequence[Message],
                    turn: ModelTurnResult) -> None:
        """Journal the turn a model call of ``messages`` returned, the call placed on
        ``hasher``'s trail only now (:meth:`PromptHasher.place`): what :meth:`record_turn` does
        with a deferred hash, for a caller that has not taken the call's hash."""
        trail = hasher.place(messages)
        self.turns.append(turn)
        self._hashes.append(trail)
        self._calls.append(len(trail.calls) - 1)

    def record_tool(self, call_id: str, outcome: ToolOutcome) -> None:
        """Journal a call's outcome (on no turn if none asked for ``call_id``)."""
        self._ids.append(call_id)
        self._outcomes.append(outcome)
        self._at.append(len(self.turns))

    def freeze(self) -> tuple[JournalTurn, ...]:
        turns, hashes, calls = self.turns, self._hashes, self._calls
        for trail, index in zip(reversed(hashes), reversed(calls)):
            # a trail's last call first: its calls are hashed in one pass
            if not isinstance(trail, str) and index >= len(trail.digests):
                trail.cache.settle(trail, index)
        asking: dict[str, list[int]] = {}  # call id -> the turns holding it, ascending
        for index, turn in enumerate(turns):
            for call in turn.tool_calls:
                held = asking.setdefault(call.id, [])
                if not held or held[-1] != index:
                    held.append(index)
        tools: list[dict[str, ToolOutcome]] = [{} for _ in turns]
        for call_id, outcome, at in zip(self._ids, self._outcomes, self._at):
            holding = asking.get(call_id)
            if holding is not None:
                i = bisect_right(holding, at - 1) - 1  # the latest turn before ``at`` holding it
                if i >= 0:
                    tools[holding[i]][call_id] = outcome
        return tuple(JournalTurn(prompt_hash=h if isinstance(h, str) else h.digests[i], turn=t,
                                 tools=d)
                     for h, i, t, d in zip(hashes, calls, turns, tools))


def prompt_hash(messages: Sequence[Message], tools: Sequence[ToolDefinition],
                schema: Mapping[str, Any] | None, tool_choice: object) -> str:
    """SHA-256 of the request's canonical JSON (RFC 8785): equal prompts, equal hashes, on every
    runtime."""
    payload = {"messages": msgspec.to_builtins(list(messages)),
               "tools": msgspec.to_builtins(list(tools)),
               "schema": schema, "tool_choice": msgspec.to_builtins(tool_choice)}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


# Structs whose fields have ASCII names and whose tags are strings (tests/agent/test_hashing.py
# checks it): with leaves that are exactly str, bool or None, msgspec's sorted encoding of them is
# their RFC 8785 text (same key order, same minimal escapes, non-ASCII written as is).
_STRUCTS = frozenset({SystemMessage, UserMessage, AssistantMessage, ToolMessage, ToolCall,
                      TextPart, ImagePart, FilePart, ReasoningPart, ProviderItemPart})
_LEAVES = frozenset({str, bool, type(None)})
_SORTED = msgspec.json.Encoder(order="sorted")
_HEAD = b'{"messages":['


def _plain(value: object) -> bool:
    """Whether ``value`` is made only of the Structs above, tuples, lists and exact str / bool /
    None leaves (a number, a mapping, bytes, a str subclass or any other object is not)."""
    kind = type(value)
    if kind in _STRUCTS:
        for item in msgspec.structs.astuple(value):  # type: ignore[arg-type]
            if type(item) not in _LEAVES and not _plain(item):
                return False
        return True
    if kind is tuple or kind is list:
        for item in value:  # type: ignore[attr-defined]
            if type(item) not in _LEAVES and not _plain(item):
                return False
        return True
    return kind in _LEAVES


def canonical_message(message: object) -> bytes:
    """The RFC 8785 canonical JSON bytes of one message: ``canonical_json(to_builtins(message))``
    as UTF-8, raising :class:`~bindloop.run.CanonicalJsonError` where it does.

    A message made of strings, booleans and nulls (every well-typed one) is msgspec's sorted
    encoding: RFC 8785 and msgspec write such values alike (key order, minimal escapes, literal
    non-ASCII). Anything else in a field (a number, a dict, bytes, a str subclass; msgspec does
    not check types at construction), and a lone surrogate (msgspec refuses to encode it), goes
    the pure-Python way (``canonical_json``), which gives its canonical bytes or raises."""
    if _plain(message):
        try:
            return _SORTED.encode(message)
        except UnicodeEncodeError:  # a lone surrogate: canonical_json names it below
            pass
    return canonical_json(msgspec.to_builtins(message)).encode()


def _no_float(text: str) -> object:
    raise ValueError(f"a float ({text}): RFC 8785 may print it otherwise")


# Decodes JSON refusing every float literal (msgspec writes a float with "." or an exponent, RFC
# 8785 prints 1.0 as 1 and 1e21 as 1e+21). An integer of 16 digits or more may be past 2**53,
# which RFC 8785 prints as a double: such text (in a string too, to keep the check one C scan)
# goes the pure-Python way.
_NO_FLOAT = msgspec.json.Decoder(float_hook=_no_float)
_LONG_INT = re.compile(rb"[0-9]{16}")


def canonical_value(value: object, *, builtins: bool = True) -> bytes:
    """The RFC 8785 bytes of a tool definition, schema or tool choice:
    ``canonical_json(to_builtins(value))`` (``canonical_json(value)`` with ``builtins=False``) as
    UTF-8, raising where it does.

    msgspec's sorted encoding is taken when it is that text: it is ASCII (so every key sorts the
    same by code point and by UTF-16 unit), holds no float and no integer of 16 digits or more,
    and decodes back to the value's builtins (which rules out what JSON cannot hold faithfully:
    NaN and the infinities, which msgspec writes as null, or a key that is not a string).
    Otherwise the pure-Python encoder writes it."""
    reference = msgspec.to_builtins(value) if builtins else value
    try:
        data = _SORTED.encode(value)
        same = data.isascii() and _LONG_INT.search(data) is None \
            and _NO_FLOAT.decode(data) == reference
    except (TypeError, ValueError, msgspec.MsgspecError):  # a lone surrogate, a float, odd types
        same = False
    return data if same else canonical_json(reference).encode()


class _Trail:
    """One transcript as hashed: its messages (``objs``, every message a call has sent so far),
    the canonical bytes of the first ``len(canon)`` of them and the running SHA-256 state after
    ``{"messages":[`` and those (``None`` until the state it resumes from, ``base``, is known).

    The model calls recorded on it, in order: call ``i`` sent the first ``calls[i]`` messages
    with the payload suffix ``suffixes[i]``; the first ``len(digests)`` calls are hashed. The
    points another prompt can resume from: any call not hashed yet, and the ``marks`` (call
    indexes, ``-1`` the trail's start at ``start`` messages; their message counts
    ``mark_counts``, ascending; the last call of each hashing pass, at most the cache's
    ``marks``). ``states`` keeps the hash states at the marks and at the calls other trails
    resume from (``bases``). No :class:`PromptHash` is referenced from here."""

    __slots__ = ("base", "bases", "cache", "calls", "candidates", "canon", "digests",
                 "mark_counts", "marks", "objs", "start", "state", "states", "suffixes")

    def __init__(self, cache: PromptHashCache, candidates: tuple[_Trail, ...]) -> None:
        self.cache = cache
        self.candidates = candidates  # the transcripts it may resume from, until hashed
        self.objs: list[object] = []
        self.canon: list[bytes] = []
        self.start = 0
        self.calls: list[int] = []
        self.suffixes: list[_Suffix] = []
        self.digests: list[str] = []
        self.marks = [-1]
        self.mark_counts = [0]
        head = hashlib.sha256(_HEAD)
        self.states: dict[int, hashlib._Hash] = {-1: head}
        self.bases: set[int] = set()
        self.state: hashlib._Hash | None = head.copy()
        self.base: tuple[_Trail, int] | None = None

    def thin(self) -> None:
        """Thin the older marks, keep the newest (a dropped mark keeps its state only when a
        trail resumes from it)."""
        marks, states, bases = self.marks, self.states, self.bases
        for dropped in marks[-3::-2]:
            if dropped not in bases:
                states.pop(dropped, None)
        kept = self.marks = marks[-2::-2][::-1] + marks[-1:]
        calls = self.calls
        self.mark_counts = [calls[m] if m >= 0 else self.start for m in kept]


class PromptHash(msgspec.Struct):
    """One model call's :func:`prompt_hash`, computed when first read (:meth:`value`): call
    ``index`` of its trail (the transcript's first messages as sent, kept by the trail, which
    only ever appends, and the call's tools, schema and tool choice). Reading it hashes the
    trail up to that call, computing every earlier call's hash of that trail on the way, so a
    run that never reads its hashes (a snapshot not dumped) never computes them; the value is
    the one an eager hash would have given.

    One is made per model call of a recorded run: a Struct for its constructor in C, two fields,
    in no reference cycle (the trail refers to none), so it is freed as soon as its reader drops
    it (a :class:`Journal` keeps the trail and the index instead). Never encoded."""

    trail: _Trail
    index: int

    def value(self) -> str:
        trail, index = self.trail, self.index
        if index >= len(trail.digests):
            trail.cache.settle(trail, index)
        return trail.digests[index]


class PromptHashCache:
    """A run's memory for its prompt hashes (one per ``run_with``, shared by its prompts and
    sub-agents; a cache in an instance, never global).

    It keeps the canonical bytes of up to ``limit`` messages by identity (messages are frozen:
    equal identity, equal bytes; each entry holds its message, so an id is never reused while
    cached) and the last ``trails`` transcripts with their model calls (at most ``marks`` per
    transcript). A new prompt's transcript resumes from the longest prefix it shares with one
    of them -- same objects, or messages with the same canonical bytes (a system message rebuilt
    per generation) -- so only the messages after it are encoded and hashed. Finding that prefix
    compares the lists by identity in C (tens of ns per message). That search, the encoding and
    the hashing are deferred to the first read of a call's :class:`PromptHash`: a trail
    resumed from a call not hashed yet hashes that one first when read."""

    __slots__ = ("_canon", "_limit", "_trails", "_max_trails", "marks")

    def __init__(self, *, limit: int = 8192, trails: int = 8, marks: int = 64) -> None:
        self._canon: dict[int, tuple[object, bytes]] = {}
        self._limit = limit
        self._trails: list[_Trail] = []
        self._max_trails = trails
        self.marks = marks

    def canonical(self, message: object) -> bytes:
        """:func:`canonical_message`, computed once per message object while it stays cached."""
        hit = self._canon.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        data = canonical_message(message)
        canon = self._canon
        if len(canon) >= self._limit:
            del canon[next(iter(canon))]  # the oldest entry
        canon[id(message)] = (message, data)
        return data

    def _shared(self, messages: Sequence[object], trail: _Trail, upto: int) -> int:
        """How many of the first ``upto`` messages have the trail's canonical bytes (identity
        first)."""
        objs, canon = trail.objs, trail.canon
        upto = min(upto, len(messages), len(objs))
        for i in compress(count(), map(is_not, messages, objs)):
            if i >= upto:
                break
            theirs = canon[i] if i < len(canon) else self.canonical(objs[i])
            if self.canonical(messages[i]) != theirs:
                return i
        return upto

    def start(self) -> _Trail:
        """A new trail, empty (the caller appends its messages). Where it resumes from is found
        when it is first hashed (:meth:`_resume`): a prompt whose hashes are never read
        compares nothing with the transcripts before it."""
        trails = self._trails
        trail = _Trail(self, tuple(trails))
        trails.insert(0, trail)
        for dropped in trails[self._max_trails:]:
            if dropped.candidates:  # resumed now: no chain of older trails kept through it
                self._resume(dropped)
        del trails[self._max_trails:]
        return trail

    def _resume(self, trail: _Trail) -> None:
        """Resume a trail about to be hashed for the first time from the best point of the
        transcripts cached when it started: the last call or mark inside the longest prefix its
        messages share with one of them."""
        candidates, trail.candidates = trail.candidates, ()
        objs = trail.objs
        upto = trail.calls[0] if trail.calls else len(objs)  # its first call's messages
        best, source, point = 0, None, -1
        for other in candidates:
            shared = self._shared(objs, other, upto)
            # the last point inside the shared prefix: a call not hashed yet, else a mark
            calls, hashed = other.calls, len(other.digests)
            i = bisect_right(calls, shared, lo=hashed) - 1
            if i >= hashed:
                at = calls[i]
            else:
                j = bisect_right(other.mark_counts, shared) - 1
                if j < 0:
                    continue
                at, i = other.mark_counts[j], other.marks[j]
            if at > best:
                best, source, point = at, other, i
                if shared == upto or shared == len(other.objs):
                    break
        if source is None:
            return  # from the start, as made
        state = source.states.get(point)
        trail.start = best
        trail.mark_counts = [best]
        trail.canon = source.canon[:best]
        if state is not None:
            trail.states = {-1: state}
            trail.state = state.copy()
        else:  # that point is not hashed yet either: hashed first, when this one is
            trail.states = {}
            trail.state = None
            trail.base = (source, point)
            source.bases.add(point)

    def settle(self, trail: _Trail, upto: int) -> None:
        """Hash the trail's calls up to call ``upto`` (``-1``: only its start), keeping the
        states of the marks and of the points other trails resume from on the way."""
        if trail.candidates:
            self._resume(trail)
        base = trail.base
        if base is not None:  # resumed from another trail's point: that one's state first
            source, point = base
            self.settle(source, point)
            at = source.calls[point] if point >= 0 else source.start
            trail.canon.extend(source.canon[len(trail.canon):at])
            resumed = source.states[point]  # a based point keeps its state
            if -1 in trail.bases or trail.marks[0] == -1:
                trail.states[-1] = resumed
            trail.state = resumed.copy()
            trail.base = None
        digests = trail.digests
        first = len(digests)
        if upto < first:
            return
        calls, suffixes, bases, states = trail.calls, trail.suffixes, trail.bases, trail.states
        objs, canon, state = trail.objs, trail.canon, trail.state
        assert state is not None
        update = state.update
        for k in range(first, upto + 1):
            for i in range(len(canon), calls[k]):
                data = self.canonical(objs[i])
                update(b"," + data if i else data)
                canon.append(data)
            if k in bases:  # a point another trail resumes from
                states[k] = state.copy()
            out = state.copy()
            out.update(suffixes[k].data())
            digests.append(out.hexdigest())
        # The last call hashed: a point another prompt may resume from (the state is there).
        if calls[upto] != trail.mark_counts[-1]:
            if upto not in states:
                states[upto] = state.copy()
            trail.marks.append(upto)
            trail.mark_counts.append(calls[upto])
            if len(trail.marks) > self.marks:
                trail.thin()


class _Suffix:
    """What follows a call's messages in its payload, `],"schema":S,"tool_choice":C,"tools":T}`:
    encoded when a hash is first read."""

    __slots__ = ("_choice", "_data", "_hasher")

    def __init__(self, hasher: PromptHasher, choice: object) -> None:
        self._hasher = hasher
        self._choice = choice
        self._data: bytes | None = None

    def data(self) -> bytes:
        if self._data is None:
            head, tail = self._hasher.payload()
            self._data = head + canonical_value(self._choice) + tail
        return self._data


class PromptHasher:
    """:func:`prompt_hash` for one prompt's successive model calls, in time proportional to the
    messages added since the previous call rather than to the whole transcript.

    RFC 8785 writes an array as its elements' canonical texts joined by ``,`` and sorts the
    payload's keys (``messages`` < ``schema`` < ``tool_choice`` < ``tools``), so the hash state
    after ``{"messages":[m1,...,mk`` is reused and only the fixed suffix is appended per call. The
    value equals :func:`prompt_hash` exactly. Messages are frozen Structs; the transcript is one
    list the loop only appends to, and a list that is not the same one, shrank, or no longer holds
    the recorded first and last messages at their places is matched again against the
    :class:`PromptHashCache` (a compaction's wholesale replacement, a truncation, a resumed list, a
    new prompt of the run): it resumes from the longest prefix it shares with a transcript hashed
    before. A message edited in place in the middle, keeping the length and the first and last,
    would go unseen: the loop never does that and a :class:`~bindloop.model.Model` must not mutate the
    transcript. ``cache`` is the run's (a private one when omitted).

    Calling it hashes at once; :meth:`defer` takes the call's messages and returns its
    :class:`PromptHash` to compute when read (a journal read only when a snapshot is taken)."""

    __slots__ = ("_cache", "_list", "_schema", "_suffix", "_tools", "_trail", "fixed")

    def __init__(self, tools: Sequence[ToolDefinition], schema: Mapping[str, Any] | None,
                 tool_choice: object, cache: PromptHashCache | None = None) -> None:
        self._cache = PromptHashCache() if cache is None else cache
        self._tools = tools
        self._schema = schema
        self.fixed: tuple[bytes, bytes] | None = None  # the schema's and the tools' payload
        self.choose(tool_choice)
        self._list: object = None  # the list the trail was last extended from
        self._trail: _Trail | None = None

    def choose(self, tool_choice: object) -> None:
        """The next calls' tool choice (a per-turn tool-choice policy changes it between turns)."""
        self._suffix = _Suffix(self, tool_choice)

    def payload(self) -> tuple[bytes, bytes]:
        """The payload's canonical bytes around the tool choice: `],"schema":S,"tool_choice":`
        and `,"tools":T}` (computed once, when the first hash is read)."""
        if self.fixed is None:
            self.fixed = (b'],"schema":' + canonical_value(self._schema, builtins=False)
                          + b',"tool_choice":',
                          b',"tools":[' + b",".join(canonical_value(t) for t in self._tools)
                          + b"]}")
        return self.fixed

    def __call__(self, messages: Sequence[Message]) -> str:
        return self.defer(messages).value()

    def defer(self, messages: Sequence[Message]) -> PromptHash:
        """This call's hash, computed when first read. ``messages`` are taken by reference (the
        trail keeps the objects), so appending to the list afterwards changes nothing."""
        trail = self.place(messages)
        return PromptHash(trail, len(trail.calls) - 1)

    def place(self, messages: Sequence[Message]) -> _Trail:
        """Record a call of ``messages`` (by reference) as the last call of the trail returned,
        hashed when first read: :meth:`defer` without the :class:`PromptHash`."""
        trail = self._trail
        n = len(messages)
        if messages is self._list and trail is not None:
            objs = trail.objs  # the list's first len(objs) messages when last called
            k = len(objs)
            if n < k or (k and (messages[0] is not objs[0] or messages[k - 1] is not objs[k - 1])):
                trail = self._restart(messages)
                objs = trail.objs
                k = len(objs)
        else:
            trail = self._restart(messages)
            objs = trail.objs
            k = len(objs)
        if k < n:  # the call's messages into the trail, by reference
            objs += messages[k:]
        trail.calls.append(n)
        trail.suffixes.append(self._suffix)
        return trail

    def _restart(self, messages: Sequence[Message]) -> _Trail:
        trail = self._trail = self._cache.start()
        self._list = messages
        return trail


class ReplayCursor:
    """Where a replay stands in one frame's journal; children matched by call order."""

    __slots__ = ("agent_id", "children", "journal", "position", "served_tools")

    def __init__(self, frame: FrameSnapshot) -> None:
        self.agent_id = frame.agent_id
        self.journal = frame.journal
        self.children = frame.children
        self.position = 0
        self.served_tools: dict[str, ToolOutcome] = {}

    def child(self, index: int, agent_id: str) -> ReplayCursor | None:
        if index >= len(self.children):
            return None
        snap = self.children[index]
        if snap.agent_id != agent_id:
            raise SnapshotDivergenceError(
                f"replay: sub-agent call #{index + 1} of {self.agent_id or 'the root'} is "
                f"{agent_id!r}, but the snapshot recorded {snap.agent_id!r} there")
        return ReplayCursor(snap)

    def next_turn(self, hash_: str, where: str) -> JournalTurn | None:
        """The recorded turn for this call, or ``None`` once the journal ran out (go live)."""
        if self.position >= len(self.journal):
            return None
        entry = self.journal[self.position]
        self.position += 1
        if entry.prompt_hash and entry.prompt_hash != hash_:
            raise SnapshotDivergenceError(
                f"replay: model call #{self.position} of {where} sent a different prompt than "
                f"the snapshot recorded (hash {hash_[:12]} != {entry.prompt_hash[:12]}); the "
                "handler, its tools or its inputs changed since the snapshot was taken")
        self.served_tools.update(entry.tools)
        return entry

    def tool_outcome(self, call_id: str) -> ToolOutcome | None:
        return self.served_tools.pop(call_id, None)


def memory_builtins(agent_id: str | None, memory: Mapping[str, Any]) -> dict[str, Any]:
    out = {}
    for key, value in memory.items():
        try:
            out[key] = msgspec.to_builtins(value)
        except TypeError as exc:
            raise UsageError(
                f"dump_snapshot: memory key {key!r} of agent {agent_id!r} holds a value that is "
                f"not JSON ({exc}); keep plain data in equip_memory and objects in "
                "equip_resource") from exc
    return out
