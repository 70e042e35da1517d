"""Resume safety: what to do with a transcript whose run died between a tool call and its result."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal, TypeAlias

from ..contracts import AssistantMessage, Message, SystemMessage, ToolMessage, UserMessage
from ._common import Rewriter

__all__ = (
    "DEFAULT_USER_TAIL_DIRECTIVE",
    "ResumeState",
    "classify_resume_state",
    "ensure_user_tail",
    "filter_unresolved_tool_uses",
)

ResumeState: TypeAlias = Literal["clean", "interrupted", "completed"]
"""``clean``: the transcript is empty or the model would speak next (it ends with a user or tool
message whose turn is fully answered). ``interrupted``: the last assistant turn has a call with no
result — the run stopped between recording the call and recording its result. ``completed``: it ends
with an assistant turn that has nothing left unanswered (a new prompt is needed to go on)."""

DEFAULT_USER_TAIL_DIRECTIVE: Final = "Continue."


def filter_unresolved_tool_uses(messages: Sequence[Message]) -> Sequence[Message]:
    """Drop every assistant turn all of whose tool calls are unresolved (no tool message with the id
    anywhere later). A turn with at least one answered call is kept whole (pairing repairs the rest);
    turns without calls are never touched.

    Never mints ids: re-id'ing on every resume would grow the transcript on each resume of an
    interrupted session. Pure and linear; returns the input object itself when nothing was dropped.
    """
    n = len(messages)
    answered_later: set[str] = set()
    drop: set[int] = set()
    for i in range(n - 1, -1, -1):
        m = messages[i]
        if isinstance(m, ToolMessage):
            answered_later.add(m.tool_call_id)
        elif isinstance(m, AssistantMessage) and m.tool_calls:
            if not any(c.id in answered_later for c in m.tool_calls):
                drop.add(i)
    if not drop:
        return messages
    return [m for i, m in enumerate(messages) if i not in drop]


def classify_resume_state(messages: Sequence[Message]) -> ResumeState:
    """Classify the transcript's tail for resuming (see :data:`ResumeState`). System messages are
    ignored. Run :func:`filter_unresolved_tool_uses` first on the resume path so the answer reflects
    the cleaned transcript (a turn whose orphans were dropped reads as ``completed``).
    Pure; looks only at the last assistant turn and the tool block after it.
    """
    last = len(messages) - 1
    while last >= 0 and isinstance(messages[last], SystemMessage):
        last -= 1
    if last < 0 or isinstance(messages[last], UserMessage):
        return "clean"
    # Find the assistant turn that owns the trailing tool block (or is itself the tail).
    k = last
    answered: set[str] = set()
    while k >= 0 and isinstance(messages[k], (ToolMessage, SystemMessage)):
        m = messages[k]
        if isinstance(m, ToolMessage):
            answered.add(m.tool_call_id)
        k -= 1
    owner = messages[k] if k >= 0 else None
    if isinstance(owner, AssistantMessage) and any(c.id not in answered for c in owner.tool_calls):
        return "interrupted"
    return "clean" if isinstance(messages[last], ToolMessage) else "completed"


def ensure_user_tail(messages: Sequence[Message], *,
                     directive: str = DEFAULT_USER_TAIL_DIRECTIVE) -> Sequence[Message]:
    """Make the transcript end on the user side by appending ``UserMessage(directive)`` when its last
    non-system message is an assistant turn (prefill that one provider refuses outright and others
    misread).

    A tool message counts as the user side (every provider carries results in a user-role turn). Run
    pairing repair first: an assistant turn with unanswered calls then already ends in results and this
    is a no-op. Empty input, or input with only system messages, is returned unchanged: deciding that
    there is nothing to send is the caller's business. Idempotent; returns the input object itself
    when no directive is needed.
    """
    last = len(messages) - 1
    while last >= 0 and isinstance(messages[last], SystemMessage):
        last -= 1
    if last < 0 or not isinstance(messages[last], AssistantMessage):
        return messages
    rw = Rewriter(messages)
    rw.insert(len(messages), (UserMessage(content=directive),))
    return rw.result()
