"""Tool-call dedup: replay identical re-calls, and break tight loops by refusing them.

A model fixated on one failing call keeps re-issuing it. ``replay`` answers identical re-calls with
the earlier result (cheap, but the model may keep trying); ``block-after`` replays until the streak
reaches ``threshold`` identical calls, then refuses with a model-visible reason. A different input to
the same tool resets the streak.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Final, Literal, TypeAlias

import msgspec

from ..contracts import ToolCall, ToolMessage, tool_error_message
from ..errors import UsageError

__all__ = (
    "DEFAULT_BLOCK_REASON",
    "DedupMode",
    "DedupRule",
    "DedupVerdict",
    "ToolCallDedup",
    "canonicalize_shell_command",
)

DedupMode: TypeAlias = Literal["replay", "block-after"]
DEFAULT_BLOCK_REASON: Final = (
    "this exact call was already made several times with the same input; try a different approach"
)
Hasher: TypeAlias = Callable[[ToolCall], "str | None"]


class DedupRule(msgspec.Struct, frozen=True, kw_only=True):
    """``hasher(call)`` gives the dedup key (``None`` or ``""`` opts this call out: it runs and nothing
    is recorded). ``reason`` is the refusal text, or a function of the call and the streak count."""

    hasher: Hasher
    mode: DedupMode = "replay"
    threshold: int = 3
    reason: str | Callable[[ToolCall, int], str] = DEFAULT_BLOCK_REASON

    def __post_init__(self) -> None:
        if self.mode not in ("replay", "block-after"):
            raise UsageError(f"unknown dedup mode {self.mode!r}")
        if self.threshold < 1:
            raise UsageError(f"dedup threshold must be >= 1, got {self.threshold}")


class DedupVerdict(msgspec.Struct, frozen=True, kw_only=True):
    """``run`` the call, or send ``message`` instead (``replay`` / ``block``). ``count`` is the length
    of the identical-call streak including this call (0 when the call was not deduplicated)."""

    action: Literal["run", "replay", "block"]
    count: int = 0
    message: ToolMessage | None = None


class _Streak:
    __slots__ = ("count", "key", "result")

    def __init__(self, key: str) -> None:
        self.key = key
        self.count = 0
        self.result: ToolMessage | None = None


class ToolCallDedup:
    """Per-run dedup state for the tools named in ``rules`` (make one per run; it holds streaks).

    Call :meth:`check` before running a call and :meth:`record` with the result of a call that ran.
    """

    __slots__ = ("_rules", "_streaks")

    def __init__(self, rules: Mapping[str, DedupRule | Hasher]) -> None:
        self._rules = {name: r if isinstance(r, DedupRule) else DedupRule(hasher=r)
                       for name, r in rules.items()}
        self._streaks: dict[str, _Streak] = {}

    def check(self, call: ToolCall) -> DedupVerdict:
        """What to do with ``call``. A block lands on the call that brings the streak to
        ``threshold`` and every identical call after it (sticky until the input changes)."""
        rule = self._rules.get(call.name)
        key = rule.hasher(call) if rule is not None else None
        if rule is None or not key or not isinstance(key, str):
            return DedupVerdict(action="run")
        streak = self._streaks.get(call.name)
        if streak is None or streak.key != key:
            streak = self._streaks[call.name] = _Streak(key)
        streak.count += 1
        if rule.mode == "block-after" and streak.count >= rule.threshold:
            text = rule.reason if isinstance(rule.reason, str) else rule.reason(call, streak.count)
            return DedupVerdict(action="block", count=streak.count,
                                message=tool_error_message(call.id, f"Blocked: {text}",
                                                           "rejected", call.name))
        if streak.result is not None:
            replay = msgspec.structs.replace(streak.result, tool_call_id=call.id)
            return DedupVerdict(action="replay", count=streak.count, message=replay)
        return DedupVerdict(action="run", count=streak.count)

    def record(self, call: ToolCall, result: ToolMessage) -> None:
        """Remember ``result`` for replay if ``call`` belongs to the current streak of its tool."""
        rule = self._rules.get(call.name)
        streak = self._streaks.get(call.name)
        if rule is None or streak is None:
            return
        if rule.hasher(call) == streak.key:
            streak.result = result


_CD_PREFIX: Final = re.compile(r"^\s*cd\s+(?:\"[^\"]*\"|'[^']*'|[^\s;&|]+)\s*(?:&&|;)\s*")
_VERIFY_TAIL: Final = re.compile(r"\s*(?:&|;|&&)\s*sleep\s+\d+(?:\.\d+)?\s*(?:;|&&).*$", re.DOTALL)
_SPACES: Final = re.compile(r"\s+")


def canonicalize_shell_command(command: str) -> str:
    """Collapse semantically identical shell invocations to one key: strip one leading
    ``cd <path> &&`` / ``cd <path>;``, strip a trailing poll tail (``& sleep N ; …`` or
    ``; sleep N && …``), collapse whitespace and trim. Deliberately conservative: it never parses or
    reorders the command."""
    out = _CD_PREFIX.sub("", command, count=1)
    out = _VERIFY_TAIL.sub("", out, count=1)
    return _SPACES.sub(" ", out).strip()
