"""Independent checkers of each provider's transcript rules, written from the providers' documented
constraints (not from bindloop's repair code), used as oracles by the property tests.

Each returns a list of human-readable violations (empty when the provider would accept the request).
System messages are hoisted by every adapter (Anthropic ``system``, Gemini ``systemInstruction``), so
the conversational checks ignore them. A conversation with no non-system message is "nothing to send"
(the caller's guard) and is accepted here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bindloop.contracts import (
    AssistantMessage,
    Message,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolMessage,
    UserMessage,
)


def _has_payload(m: AssistantMessage) -> bool:
    if m.tool_calls:
        return True
    c = m.content
    if c is None:
        return False
    if isinstance(c, str):
        return c != ""
    return any(not isinstance(p, TextPart) or p.text for p in c)


def openai_chat_violations(messages: Sequence[Message]) -> list[str]:
    """OpenAI Chat Completions: every ``tool`` message must respond to a ``tool_calls`` entry of the
    assistant message that precedes its run of tool messages; every tool call must be answered before
    the next non-tool message; an assistant message needs content or tool calls; the request must not
    end on an assistant turn."""
    errs: list[str] = []
    pending: dict[str, int] | None = None  # call id -> times answered, for the open assistant turn
    prev_non_tool: Message | None = None
    for i, m in enumerate(messages):
        if isinstance(m, ToolMessage):
            if not isinstance(prev_non_tool, AssistantMessage) or pending is None:
                errs.append(f"{i}: tool message not preceded by an assistant with tool_calls")
            elif m.tool_call_id not in pending:
                errs.append(f"{i}: tool message answers unknown id {m.tool_call_id!r}")
            else:
                pending[m.tool_call_id] += 1
                if pending[m.tool_call_id] > 1:
                    errs.append(f"{i}: id {m.tool_call_id!r} answered twice")
            continue
        if pending is not None:
            missing = [k for k, v in pending.items() if v == 0]
            if missing:
                errs.append(f"{i}: tool_calls {missing} not answered before this message")
        pending = None
        prev_non_tool = m
        if isinstance(m, AssistantMessage):
            if not _has_payload(m):
                errs.append(f"{i}: assistant message with neither content nor tool_calls")
            if m.tool_calls:
                ids = [c.id for c in m.tool_calls]
                if len(set(ids)) != len(ids):
                    errs.append(f"{i}: duplicate tool call ids within one message")
                pending = dict.fromkeys(ids, 0)
    if pending is not None and any(v == 0 for v in pending.values()):
        errs.append("end: unanswered tool_calls")
    convo = [m for m in messages if not isinstance(m, SystemMessage)]
    if convo and isinstance(convo[-1], AssistantMessage):
        errs.append("end: conversation ends on an assistant turn")
    return errs


@dataclass
class _Turn:
    role: str
    tool_uses: list[str] = field(default_factory=list)
    tool_results: list[str] = field(default_factory=list)
    blocks: int = 0


def _role_turns(messages: Sequence[Message]) -> list[_Turn]:
    """Group into provider turns the way an Anthropic/Gemini adapter does: tool results and user
    messages form user-role turns (consecutive ones merged), each assistant message a model turn."""
    turns: list[_Turn] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            continue
        if isinstance(m, AssistantMessage):
            t = _Turn("assistant")
            t.tool_uses = [c.id for c in m.tool_calls]
            c = m.content
            if isinstance(c, str):
                t.blocks += 1 if c else 0
            elif c is not None:
                t.blocks += sum(1 for p in c if not isinstance(p, TextPart) or p.text)
            t.blocks += len(t.tool_uses)
            turns.append(t)
            continue
        if not turns or turns[-1].role != "user":
            turns.append(_Turn("user"))
        t = turns[-1]
        t.blocks += 1
        if isinstance(m, ToolMessage):
            t.tool_results.append(m.tool_call_id)
    return turns


def _paired_turn_violations(turns: list[_Turn], name: str) -> list[str]:
    errs: list[str] = []
    if turns and turns[0].role != "user":
        errs.append(f"{name}: first turn is not a user turn")
    if turns and turns[-1].role != "user":
        errs.append(f"{name}: last turn is not a user turn")
    for k, t in enumerate(turns):
        if k and turns[k - 1].role == t.role:
            errs.append(f"{name}: turns {k - 1} and {k} are both {t.role}")
        if t.blocks == 0:
            errs.append(f"{name}: turn {k} is empty")
        if t.role == "assistant" and t.tool_uses:
            nxt = turns[k + 1] if k + 1 < len(turns) else None
            got = nxt.tool_results if nxt is not None and nxt.role == "user" else []
            if sorted(got) != sorted(t.tool_uses):
                errs.append(f"{name}: turn {k} tool uses {t.tool_uses} answered by {got}")
        if t.role == "user" and t.tool_results:
            prev = turns[k - 1] if k else None
            uses = prev.tool_uses if prev is not None and prev.role == "assistant" else []
            for rid in t.tool_results:
                if rid not in uses:
                    errs.append(f"{name}: turn {k} result {rid!r} has no tool use right before")
    return errs


def anthropic_violations(messages: Sequence[Message]) -> list[str]:
    """Anthropic Messages: user first and last, strict alternation, no empty turn, each tool_use
    answered by a tool_result in the very next (user) turn and each tool_result answering a tool_use of
    the turn right before, tool_use ids unique across the request."""
    turns = _role_turns(messages)
    errs = _paired_turn_violations(turns, "anthropic")
    seen: set[str] = set()
    for k, t in enumerate(turns):
        for uid in t.tool_uses:
            if uid in seen:
                errs.append(f"anthropic: tool_use id {uid!r} repeated (turn {k})")
            seen.add(uid)
    return errs


def gemini_violations(messages: Sequence[Message]) -> list[str]:
    """Gemini contents: user/model alternation starting and ending with user, no empty content, a
    function-call model turn only right after a user or function-response turn, and each function call
    answered (by count and name-id) in the next turn."""
    return _paired_turn_violations(_role_turns(messages), "gemini")


def all_violations(messages: Sequence[Message]) -> list[str]:
    return (openai_chat_violations(messages) + anthropic_violations(messages)
            + gemini_violations(messages))


def reasoning_blocks(messages: Sequence[Message]) -> list[ReasoningPart]:
    out: list[ReasoningPart] = []
    for m in messages:
        if isinstance(m, AssistantMessage) and isinstance(m.content, tuple):
            out.extend(p for p in m.content if isinstance(p, ReasoningPart))
    return out


def human_messages(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if isinstance(m, (UserMessage, SystemMessage))]
