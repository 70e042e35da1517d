"""Snapshots: every frame's memory and a journal of model responses and tool outputs, with stable
bytes; replay serves the journal (zero model calls, zero tool runs) until it runs out."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ..contracts import Message, ModelTurnResult, ToolDefinition, ToolOutcome
from ..errors import UsageError
from ..session import CheckpointFormatError
from ._errors import SnapshotDivergenceError
from ..run import canonical_json

__all__ = (
    "SNAPSHOT_VERSION",
    "AgentSnapshot",
    "FrameSnapshot",
    "Journal",
    "JournalTurn",
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
    them back (refusing another version with :class:`~bindloop.session.CheckpointFormatError`)."""

    version: int = SNAPSHOT_VERSION
    root: FrameSnapshot


_ENCODER = msgspec.json.Encoder(order="deterministic")


def encode_snapshot(snapshot: AgentSnapshot) -> bytes:
    """Stable JSON bytes: equal snapshots give equal bytes (dict keys sorted)."""
    return _ENCODER.encode(snapshot)


def parse_snapshot(data: bytes | str | Mapping[str, Any]) -> AgentSnapshot:
    """Read a snapshot from its JSON bytes/text or the decoded object.

    Raises :class:`~bindloop.session.CheckpointFormatError` naming the field for another version, a
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
    """A frame's live journal: turns in call order; tool outcomes land on the turn that asked."""

    __slots__ = ("turns",)

    def __init__(self) -> None:
        self.turns: list[tuple[str, ModelTurnResult, dict[str, ToolOutcome]]] = []

    def record_turn(self, prompt_hash: str, turn: ModelTurnResult) -> None:
        self.turns.append((prompt_hash, turn, {}))

    def record_tool(self, call_id: str, outcome: ToolOutcome) -> None:
        for _, turn, tools in reversed(self.turns):
            if any(c.id == call_id for c in turn.tool_calls):
                tools[call_id] = outcome
                return

    def freeze(self) -> tuple[JournalTurn, ...]:
        return tuple(JournalTurn(prompt_hash=h, turn=t, tools=dict(tools))
                     for h, t, tools in self.turns)


def prompt_hash(messages: Sequence[Message], tools: Sequence[ToolDefinition],
                schema: Mapping[str, Any] | None, tool_choice: object) -> str:
    """SHA-256 of the request's canonical JSON (RFC 8785): equal prompts, equal hashes, on every
    runtime."""
    payload = {"messages": msgspec.to_builtins(list(messages)),
               "tools": msgspec.to_builtins(list(tools)),
               "schema": schema, "tool_choice": msgspec.to_builtins(tool_choice)}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


class PromptHasher:
    """:func:`prompt_hash` for one prompt's successive model calls, in time proportional to the
    messages added since the previous call rather than to the whole transcript.

    RFC 8785 writes an array as its elements' canonical texts joined by ``,`` and sorts the
    payload's keys (``messages`` < ``schema`` < ``tool_choice`` < ``tools``), so the hash state
    after ``{"messages":[m1,...,mk`` is reused and only the fixed suffix is appended per call. The
    value equals :func:`prompt_hash` exactly. Messages are frozen Structs; the transcript is one
    list the loop only appends to, and a list that is not the same one, shrank, or no longer holds
    the hashed first and last messages at their places is hashed again from the start (a
    compaction's wholesale replacement, a truncation, a resumed list). A message edited in place
    in the middle, keeping the length and the first and last, would go unseen: the loop never
    does that and a :class:`~bindloop.model.Model` must not mutate the transcript."""

    __slots__ = ("_count", "_first", "_last", "_list", "_schema", "_state", "_suffix", "_tools")

    def __init__(self, tools: Sequence[ToolDefinition], schema: Mapping[str, Any] | None,
                 tool_choice: object) -> None:
        self._tools = msgspec.to_builtins(list(tools))
        self._schema = schema
        self.choose(tool_choice)
        self._list: object = None
        self._reset()

    def choose(self, tool_choice: object) -> None:
        """The next calls' tool choice (a per-turn tool-choice policy changes it between turns)."""
        self._suffix = ("]," + canonical_json({
            "schema": self._schema, "tool_choice": msgspec.to_builtins(tool_choice),
            "tools": self._tools})[1:]).encode()

    def _reset(self) -> None:
        self._state = hashlib.sha256(b'{"messages":[')
        self._count = 0
        self._first: object = None
        self._last: object = None

    def __call__(self, messages: list[Message]) -> str:
        count = self._count
        if messages is not self._list or len(messages) < count or (count and (
                messages[0] is not self._first or messages[count - 1] is not self._last)):
            self._reset()
            self._list = messages
            count = 0
        state = self._state
        for i in range(count, len(messages)):
            text = canonical_json(msgspec.to_builtins(messages[i]))
            state.update((text if i == 0 else "," + text).encode())
        if len(messages) > count:
            self._count = len(messages)
            self._first = messages[0]
            self._last = messages[-1]
        out = state.copy()
        out.update(self._suffix)
        return out.hexdigest()


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
