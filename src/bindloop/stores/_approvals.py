"""The pending-approvals port of a chat server (``bindloop.hosts.chat.agent``): the calls each chat
waits to have approved, as the server recorded them, and its in-memory version."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ..contracts import ToolCall
from ..errors import UsageError

__all__ = ("MemoryPendingApprovals", "PendingApprovals")


class PendingApprovals(Protocol):
    """The server's own record of the calls each chat waits to have approved: a decision is
    applied only to a call recorded here, with the tool and arguments the model sent, and once
    (``take`` forgets it). A client cannot approve a call the model never made, change what it
    runs with, or replay a decision."""

    def record(self, chat_id: str, calls: Sequence[ToolCall]) -> None: ...

    def take(self, chat_id: str, call_id: str) -> ToolCall | None: ...

    def forget(self, chat_id: str) -> int:
        """Drop every call chat ``chat_id`` waits on (its owner deleted it): a decision on one
        is refused from then on. Answers how many there were."""
        ...


class MemoryPendingApprovals:
    """:class:`PendingApprovals` in this process's memory, for the newest ``max_chats`` chats
    (the oldest chat's pending calls are forgotten first: its decisions are then refused). Several
    processes serving one chat need a shared implementation."""

    def __init__(self, max_chats: int = 10_000) -> None:
        if max_chats < 1:
            raise UsageError(f"max_chats must be at least 1, got {max_chats}")
        self._max = max_chats
        self._pending: dict[str, dict[str, ToolCall]] = {}

    def record(self, chat_id: str, calls: Sequence[ToolCall]) -> None:
        waiting = self._pending.pop(chat_id, {})
        waiting.update((c.id, c) for c in calls)
        self._pending[chat_id] = waiting  # newest last
        while len(self._pending) > self._max:
            del self._pending[next(iter(self._pending))]

    def take(self, chat_id: str, call_id: str) -> ToolCall | None:
        waiting = self._pending.get(chat_id)
        call = None if waiting is None else waiting.pop(call_id, None)
        if waiting is not None and not waiting:
            del self._pending[chat_id]
        return call

    def forget(self, chat_id: str) -> int:
        return len(self._pending.pop(chat_id, {}))
