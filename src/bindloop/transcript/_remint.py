"""Re-minting tool-call ids that collide, so pairing never has to strip a call.

Some serving stacks emit ids that are not globally unique (per-turn counters like ``call_0``, replayed
retries). The pairing pass can only strip a reused id, which erases the call and its result from what
the model sees and repeats the repair every turn because the stored transcript keeps the bad id.
Re-minting when the turn is persisted fixes it once: the call, its execution and its result all carry
the fresh id.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import msgspec

from ..contracts import AssistantMessage, Message, ToolCall, ToolMessage
from ._common import Rewriter

__all__ = ("remint_colliding_tool_call_ids",)


def remint_colliding_tool_call_ids(
    messages: Sequence[Message], *, on_remint: Callable[[str, str, int], None] | None = None
) -> Sequence[Message]:
    """Give every tool call whose id already appeared (in an earlier turn, or earlier in the same
    turn) a fresh id ``{old}_r{n}``, with ``n`` counting up from 1 until the id is unused anywhere in
    the transcript.

    The two views of a call stay aligned: the tool messages in the block right after the turn that
    carry the old id are renamed positionally (the k-th result with id X answers the k-th call with
    id X), so intra-turn duplicates map to distinct fresh ids on both sides. Results outside that
    block are left to the pairing pass. The first occurrence of an id keeps it, so re-running this
    (e.g. on every resume) changes nothing and never grows ids.

    ``on_remint(old_id, new_id, index)`` is told about each re-minted call (``index`` is the position
    of its assistant turn). Pure and linear; returns the input object itself when no id collides.
    """
    n = len(messages)
    taken: set[str] | None = None  # every id in the transcript; built only if a collision appears
    next_suffix: dict[str, int] = {}
    seen: set[str] = set()
    rw = Rewriter(messages)
    i = 0
    while i < n:
        m = messages[i]
        if not isinstance(m, AssistantMessage) or not m.tool_calls:
            rw.keep(i)
            i += 1
            continue
        fresh_calls: list[ToolCall] | None = None
        renames: dict[str, list[str]] = {}
        for k, call in enumerate(m.tool_calls):
            cid = call.id
            if cid not in seen:
                seen.add(cid)
                renames.setdefault(cid, []).append(cid)
                if fresh_calls is not None:
                    fresh_calls.append(call)
                continue
            if taken is None:
                taken = _all_ids(messages)
            suffix = next_suffix.get(cid, 1)
            while f"{cid}_r{suffix}" in taken:
                suffix += 1
            new_id = f"{cid}_r{suffix}"
            next_suffix[cid] = suffix + 1
            taken.add(new_id)
            seen.add(new_id)
            renames.setdefault(cid, []).append(new_id)
            if on_remint is not None:
                on_remint(cid, new_id, i)
            if fresh_calls is None:
                fresh_calls = list(m.tool_calls[:k])
            fresh_calls.append(msgspec.structs.replace(call, id=new_id))
        if fresh_calls is None:
            rw.keep(i)
            i += 1
            continue
        rw.edit(i, (msgspec.structs.replace(m, tool_calls=tuple(fresh_calls)),))
        used: dict[str, int] = {}
        j = i + 1
        while j < n:
            t = messages[j]
            if not isinstance(t, ToolMessage):
                break
            targets = renames.get(t.tool_call_id)
            k = used.get(t.tool_call_id, 0)
            if targets is not None and k < len(targets):
                used[t.tool_call_id] = k + 1
                if targets[k] != t.tool_call_id:
                    rw.edit(j, (msgspec.structs.replace(t, tool_call_id=targets[k]),))
                    j += 1
                    continue
            rw.keep(j)
            j += 1
        i = j
    return rw.result()


def _all_ids(messages: Sequence[Message]) -> set[str]:
    ids: set[str] = set()
    for m in messages:
        if isinstance(m, AssistantMessage):
            ids.update(c.id for c in m.tool_calls)
        elif isinstance(m, ToolMessage):
            ids.add(m.tool_call_id)
    return ids
