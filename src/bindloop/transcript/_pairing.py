"""Wire-level pairing repair: every tool call answered right after it, every result next to its call.

The contract every provider enforces: the results of an assistant turn's tool calls sit in the tool
messages *immediately* following that turn (one per call), and a tool message answers a call of the
assistant turn directly before its block. A result two messages downstream of its call is an orphan,
even if the id matches.

Repair, not drop: a call without a result keeps its place and gets an error placeholder (encoded with
:func:`~bindloop.contracts.tool_error_message`, like every other tool error) so the model reads "I
tried X and the result was lost" instead of a history that silently forgot what it did. Only results
that cannot be paired, and call ids a provider would reject as duplicates, are removed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, Literal, TypeAlias

import msgspec

from ..contracts import AssistantMessage, Message, ToolCall, ToolMessage, tool_error_message
from ._common import Rewriter
from ._errors import ToolPairingError

__all__ = (
    "LOST_TOOL_RESULT_ERROR",
    "PairingRepair",
    "RepairKind",
    "ensure_tool_result_pairing",
    "lost_result_placeholder",
)

RepairKind: TypeAlias = Literal[
    "dangling_tool_call",
    "orphan_tool_result",
    "non_adjacent_tool_result",
    "duplicate_tool_result",
    "duplicate_tool_call",
    "reused_tool_call_id",
]
"""What a repair fixed.

- ``dangling_tool_call``: a call had no result in the block after it; an error placeholder was added.
- ``orphan_tool_result``: a tool message answers no call seen so far; removed.
- ``non_adjacent_tool_result``: a tool message answers an earlier call, but not the assistant turn
  directly before its block; removed (strict adjacency).
- ``duplicate_tool_result``: a second result for a call already answered in the block; removed.
- ``duplicate_tool_call``: a call repeats an id already used in the same turn; the later call removed.
- ``reused_tool_call_id``: a call reuses an id from an earlier turn; removed (providers reject
  duplicate ids across a request). :func:`~bindloop.transcript.remint_colliding_tool_call_ids`
  avoids this loss when run before the turn is persisted.
"""

LOST_TOOL_RESULT_ERROR: Final = (
    "tool result lost: the call was recorded but its result was not; it may or may not have run"
)


class PairingRepair(msgspec.Struct, frozen=True, kw_only=True):
    """One repair. ``index`` is the position in the *input* of the message concerned (the assistant
    turn for call repairs, the tool message for result repairs)."""

    kind: RepairKind
    tool_call_id: str
    index: int


def lost_result_placeholder(call: ToolCall) -> ToolMessage:
    """The error result that stands in for a call whose result was lost."""
    return tool_error_message(call.id, LOST_TOOL_RESULT_ERROR, "error", call.name)


def ensure_tool_result_pairing(
    messages: Sequence[Message],
    *,
    on_repair: Callable[[PairingRepair], None] | None = None,
    strict: bool = False,
) -> Sequence[Message]:
    """Rewrite ``messages`` so every tool call is answered in the tool block right after it and every
    tool message answers a call of the turn right before its block.

    Each repair is classified (:data:`RepairKind`) and passed to ``on_repair`` in transcript order.
    With ``strict=True`` nothing is repaired: :class:`ToolPairingError` is raised listing the
    violations (after ``on_repair`` saw each).

    Pure and linear: the input and its messages are never mutated; the input object itself is returned
    when nothing needed repair; the output is a fixed point (running it again changes nothing).
    Placeholders for dangling calls follow the results that did arrive, in call order.
    """
    repairs: list[PairingRepair] = []
    rw = Rewriter(messages)
    seen_calls: set[str] = set()
    n = len(messages)
    i = 0
    while i < n:
        m = messages[i]
        if isinstance(m, ToolMessage):
            kind: RepairKind = ("non_adjacent_tool_result" if m.tool_call_id in seen_calls
                                else "orphan_tool_result")
            repairs.append(PairingRepair(kind=kind, tool_call_id=m.tool_call_id, index=i))
            rw.edit(i, ())
            i += 1
            continue
        if not isinstance(m, AssistantMessage) or not m.tool_calls:
            rw.keep(i)
            i += 1
            continue

        # An assistant turn with calls: de-duplicate its ids, then walk its result block.
        turn_ids: set[str] = set()
        kept_calls: list[ToolCall] | None = None
        for k, call in enumerate(m.tool_calls):
            cid = call.id
            bad: RepairKind | None = None
            if cid in turn_ids:
                bad = "duplicate_tool_call"
            elif cid in seen_calls:
                bad = "reused_tool_call_id"
            if bad is None:
                turn_ids.add(cid)
                if kept_calls is not None:
                    kept_calls.append(call)
            else:
                repairs.append(PairingRepair(kind=bad, tool_call_id=cid, index=i))
                if kept_calls is None:
                    kept_calls = list(m.tool_calls[:k])
        seen_calls |= turn_ids
        if kept_calls is None:
            rw.keep(i)
            calls: Sequence[ToolCall] = m.tool_calls
        else:
            rw.edit(i, (msgspec.structs.replace(m, tool_calls=tuple(kept_calls)),))
            calls = kept_calls

        answered: set[str] = set()
        j = i + 1
        while j < n:
            t = messages[j]
            if not isinstance(t, ToolMessage):
                break
            tid = t.tool_call_id
            if tid in turn_ids and tid not in answered:
                answered.add(tid)
                rw.keep(j)
            else:
                kind = ("duplicate_tool_result" if tid in answered
                        else "non_adjacent_tool_result" if tid in seen_calls
                        else "orphan_tool_result")
                repairs.append(PairingRepair(kind=kind, tool_call_id=tid, index=j))
                rw.edit(j, ())
            j += 1
        if len(answered) != len(calls):
            placeholders = []
            for call in calls:
                if call.id not in answered:
                    repairs.append(PairingRepair(kind="dangling_tool_call", tool_call_id=call.id,
                                                 index=i))
                    placeholders.append(lost_result_placeholder(call))
            rw.insert(j, placeholders)
        i = j

    if repairs:
        if on_repair is not None:
            for r in repairs:
                on_repair(r)
        if strict:
            raise ToolPairingError(tuple(repairs))
    return rw.result()
