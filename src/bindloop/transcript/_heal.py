"""One call that makes any transcript acceptable to every provider: the healing pipeline."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, Literal, NamedTuple, TypeAlias

import msgspec

from ..contracts import (
    AssistantMessage,
    ContentPart,
    Message,
    SystemMessage,
    TextPart,
    UserMessage,
)
from ..errors import TranscriptFormatError
from ._common import EMPTY_TURN_PLACEHOLDER, is_empty_assistant
from ._pairing import PairingRepair, RepairKind, ensure_tool_result_pairing
from ._remint import remint_colliding_tool_call_ids
from ._resume import DEFAULT_USER_TAIL_DIRECTIVE, ensure_user_tail

__all__ = (
    "LEADING_USER_PLACEHOLDER",
    "HealIssue",
    "HealIssueKind",
    "HealResult",
    "normalize_turn_structure",
    "validate_and_heal_messages",
)

# The message classes, from the Message union itself (a tuple: isinstance's quickest form).
_MESSAGE_TYPES: Final = Message.__args__
_EXACT_MESSAGE_TYPES: Final = frozenset(_MESSAGE_TYPES)  # looked up first: a missed isinstance()
# against a Struct class is a call of its metaclass's __instancecheck__

LEADING_USER_PLACEHOLDER: Final = "(earlier conversation omitted)"
"""User text placed before a conversation whose first non-system message is an assistant turn (a
truncated history), because Gemini refuses a model turn — with calls — that follows no user turn."""

HealIssueKind: TypeAlias = (
    RepairKind
    | Literal[
        "reminted_tool_call_id",
        "merged_assistant_turns",
        "empty_assistant",
        "dropped_empty_assistant",
        "leading_assistant",
        "trailing_assistant",
    ]
)


class HealIssue(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One problem found and repaired. ``index`` is the message's position in the transcript as it
    stood when the stage that found it ran (stages run in the order documented on
    :func:`validate_and_heal_messages`)."""

    kind: HealIssueKind
    index: int
    tool_call_id: str | None = None
    detail: str | None = None


class HealResult(NamedTuple):
    """The healed transcript (the input object itself when ``issues`` is empty) and what was fixed."""

    messages: Sequence[Message]
    issues: tuple[HealIssue, ...]


def _parts(content: object) -> tuple[ContentPart, ...]:
    if content is None or content == "":
        return ()
    if isinstance(content, str):
        return (TextPart(text=content),)
    assert isinstance(content, tuple)
    return tuple(p for p in content if not (isinstance(p, TextPart) and not p.text))


def normalize_turn_structure(messages: Sequence[Message],
                             issues: list[HealIssue] | None = None) -> Sequence[Message]:
    """Fix turn structure on an already pair-repaired transcript, ignoring system messages (providers
    hoist them): consecutive assistant turns are merged into the last one (content concatenated in
    order, its tool calls kept — only the last of a run can have calls once pairing holds); an empty
    assistant turn is dropped when it is the first or last non-system message and otherwise replaced by
    :data:`EMPTY_TURN_PLACEHOLDER`; a conversation whose first non-system message is an assistant turn
    gets :data:`LEADING_USER_PLACEHOLDER` before it. System messages never move.

    Found problems are appended to ``issues`` when given. Pure, linear, idempotent; returns the input
    object itself when nothing changed.
    """
    replace: dict[int, Message | None] = {}   # None: drop
    insert_before: dict[int, Message] = {}
    first_non_system = -1
    last_non_system = -1
    run: list[int] = []
    runs: list[list[int]] = []
    for i, m in enumerate(messages):
        if isinstance(m, SystemMessage):
            continue
        if first_non_system < 0:
            first_non_system = i
        last_non_system = i
        if isinstance(m, AssistantMessage):
            run.append(i)
        elif run:
            runs.append(run)
            run = []
    if run:
        runs.append(run)

    for run in runs:
        end = run[-1]
        a = messages[end]
        assert isinstance(a, AssistantMessage)
        if len(run) > 1:
            if issues is not None:
                issues.append(HealIssue(kind="merged_assistant_turns", index=end,
                                        detail=f"{len(run)} consecutive assistant turns"))
            parts: list[ContentPart] = []
            name: str | None = None
            for k in run:
                member = messages[k]
                assert isinstance(member, AssistantMessage)
                parts.extend(_parts(member.content))
                if name is None:
                    name = member.name
                if k != end:
                    replace[k] = None
            a = AssistantMessage(content=tuple(parts) if parts else None,
                                 tool_calls=a.tool_calls, name=name)
            replace[end] = a
        if is_empty_assistant(a):
            if end == last_non_system or run[0] == first_non_system:
                replace[end] = None
                if issues is not None:
                    issues.append(HealIssue(kind="dropped_empty_assistant", index=end))
            else:
                replace[end] = msgspec.structs.replace(a, content=EMPTY_TURN_PLACEHOLDER)
                if issues is not None:
                    issues.append(HealIssue(kind="empty_assistant", index=end))

    if runs and runs[0][0] == first_non_system:
        lead = runs[0]
        if not (lead[-1] in replace and replace[lead[-1]] is None):
            insert_before[lead[0]] = UserMessage(content=LEADING_USER_PLACEHOLDER)
            if issues is not None:
                issues.append(HealIssue(kind="leading_assistant", index=lead[0]))

    if not replace and not insert_before:
        return messages
    out: list[Message] = []
    for i, m in enumerate(messages):
        ins = insert_before.get(i)
        if ins is not None:
            out.append(ins)
        if i in replace:
            r = replace[i]
            if r is not None:
                out.append(r)
        else:
            out.append(m)
    return out


def _check_transcript(messages: object) -> None:
    if isinstance(messages, (str, bytes, bytearray)) or not isinstance(messages, Sequence):
        raise TranscriptFormatError(
            f"messages must be a sequence of Message structs, got {type(messages).__name__}")
    for k, m in enumerate(messages):
        if type(m) not in _EXACT_MESSAGE_TYPES and not isinstance(m, _MESSAGE_TYPES):
            raise TranscriptFormatError(
                f"messages[{k}] is a {type(m).__name__}, not a Message (SystemMessage, "
                "UserMessage, AssistantMessage or ToolMessage)")


def validate_and_heal_messages(
    messages: Sequence[Message], *, directive: str = DEFAULT_USER_TAIL_DIRECTIVE,
    for_request: bool = True,
) -> HealResult:
    """Detect and repair everything that makes a provider reject a transcript, in this order:

    1. colliding tool-call ids are re-minted (:func:`remint_colliding_tool_call_ids`), so no call is
       lost to the next stage;
    2. pairing is repaired (:func:`ensure_tool_result_pairing`): dangling calls get an error
       placeholder result, orphan / non-adjacent / duplicate results are removed;
    3. turn structure is normalized (:func:`normalize_turn_structure`): consecutive assistant turns
       merged, empty assistant turns filled (or dropped at the tail), a leading assistant turn given a
       user turn before it;
    4. a trailing assistant turn gets a user directive (:func:`ensure_user_tail`) — only with
       ``for_request=True`` (the default: the transcript is about to be sent). A stored history of a
       finished run legitimately ends with the assistant's answer; check it with
       ``for_request=False``.

    Never removes or edits a user or system message, so no text a person wrote is lost. Pure, linear
    and idempotent: healing a healed transcript reports no issue and returns it by reference.

    Raises :class:`~bindloop.errors.TranscriptFormatError` when ``messages`` is not a sequence of
    messages (a ``str``, ``None``, a list holding a dict): decode stored JSON first
    (``bindloop.contracts``), since nothing here can be healed from the wrong type.
    """
    _check_transcript(messages)
    issues: list[HealIssue] = []

    def reminted(old: str, new: str, index: int) -> None:
        issues.append(HealIssue(kind="reminted_tool_call_id", index=index, tool_call_id=old,
                                detail=f"re-minted as {new!r}"))

    def repaired(r: PairingRepair) -> None:
        issues.append(HealIssue(kind=r.kind, index=r.index, tool_call_id=r.tool_call_id))

    out = remint_colliding_tool_call_ids(messages, on_remint=reminted)
    out = ensure_tool_result_pairing(out, on_repair=repaired)
    out = normalize_turn_structure(out, issues)
    if not for_request:
        return HealResult(out, tuple(issues))
    tailed = ensure_user_tail(out, directive=directive)
    if tailed is not out:
        issues.append(HealIssue(kind="trailing_assistant", index=len(out)))
    return HealResult(tailed, tuple(issues))
