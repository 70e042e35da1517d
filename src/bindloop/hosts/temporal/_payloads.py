"""What the Temporal workers keep outside workflow history: transcript chunks, the journal of each
tool batch's outcomes, and the references that stand in for large tool results.

All three live in one :class:`~bindloop.stores.ToolCallReceiptStore` the workers share, as completed
receipts under tenant :data:`PAYLOAD_TENANT` and run ``execution_id``; the ``tool_name`` says what
a row is (``"transcript"`` or ``"tool-outcome"``) and the ``args_hash`` names it. Names carry the
Temporal run id, so a second workflow run of the same execution (resumed from a checkpoint) never
reads the rows of the first.

A **reference** is a :class:`~bindloop.contracts.ToolResult` whose ``content`` is
:data:`REFERENCE_PREFIX` followed by the journal row's name: the workflow's transcript (and so its
history, its ``checkpoint`` query and its result) holds that short string; the model-turn activity
puts the stored content back before the model reads it, and :func:`resolve_references` does the
same for a host reading a checkpoint.

A journal row holds what a call *answered*: the outcome it returned, or — for a tool that raised
(not fatally) — a :class:`JournaledRaise`, the loop's ``ToolRaised`` answer as plain data: the
:class:`~bindloop.contracts.ToolError` the model read and the exception's type name. Never the
exception itself (its message may hold what must not be stored).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec

from bindloop.contracts import Message, ToolError, ToolMessage, ToolOutcome, ToolResult
from bindloop.run import ReceiptCompleted, ToolCallReceiptKey
from bindloop.checkpoints import LoopCheckpoint
from bindloop.stores import StoreError, ToolCallReceiptStore

__all__ = ("PAYLOAD_TENANT", "REFERENCE_PREFIX", "JournaledRaise", "chunk_key", "journal_key", "journal_outcome",
           "read_payload", "record_outcome", "resolve_messages", "resolve_references",
           "stub_if_large", "write_payload")

PAYLOAD_TENANT = "bindloop-temporal"
REFERENCE_PREFIX = "\x00bindloop-ref:"
"""Starts the content of a result kept by reference (a NUL no tool text starts with by accident;
a reference only ever names a row of its own execution)."""

JOURNAL_LEASE_MS = 2_000.0
"""How long a journal write's claim holds before a retried attempt may take it over (the claim
is taken after the tool returned and completed right away; only a kill between the two leaves
one behind)."""

PAYLOAD_LEASE_MS = 1.0
"""A transcript chunk's claim: every attempt writes the same bytes under the same name (the
workflow is deterministic), so an attempt that finds another's claim may take it over at once —
whichever completes, the row holds the same text."""


class JournaledRaise(msgspec.Struct, frozen=True, kw_only=True, tag_field="outcome", tag="raised"):
    """A call whose tool raised (not fatally): ``error`` is what the model read (the loop's
    ``tool_exception_error`` of the exception), ``exception_type`` the exception's type name —
    the data of the loop's ``ToolRaised`` answer, without its batch index and time."""

    error: ToolError
    exception_type: str


JournalEntry = ToolOutcome | JournaledRaise
"""What one journal row answers for its call."""

_OUTCOME = msgspec.json.Decoder(JournalEntry)


def chunk_key(execution_id: str, chunk: str) -> ToolCallReceiptKey:
    return ToolCallReceiptKey(tenant_id=PAYLOAD_TENANT, run_id=execution_id,
                              tool_name="transcript", args_hash=chunk)


def journal_key(execution_id: str, name: str) -> ToolCallReceiptKey:
    return ToolCallReceiptKey(tenant_id=PAYLOAD_TENANT, run_id=execution_id,
                              tool_name="tool-outcome", args_hash=name)


async def read_payload(store: ToolCallReceiptStore, key: ToolCallReceiptKey) -> str | None:
    """The stored text of a completed row, or ``None`` when there is none."""
    state = await store.read(key)
    if isinstance(state, ReceiptCompleted) and isinstance(state.result, str):
        return state.result
    return None


async def write_payload(store: ToolCallReceiptStore, key: ToolCallReceiptKey, text: str) -> None:
    """Store ``text`` as the completed row ``key``: done when it is there, whoever wrote it.

    A claim left behind by an attempt that died between its claim and its completion (a killed
    worker, a cut connection) is taken over with the next attempt number rather than trusted:
    the row is only ever written with these same bytes. Raises :class:`StoreError` when the
    store fails, or when other writers keep taking the row over (it never completed)."""
    for _ in range(8):
        state = await store.read(key)
        if isinstance(state, ReceiptCompleted):
            return
        attempt = 1 if state is None else state.attempt + 1
        if await store.claim(key, attempt, PAYLOAD_LEASE_MS) and \
                await store.complete(key, attempt, text):
            return
    raise StoreError(type(store).__name__, "write", f"row {key.args_hash!r} of {key.run_id!r} "
                     "was taken over by other writers eight times without completing")


async def journal_outcome(store: ToolCallReceiptStore, key: ToolCallReceiptKey
                          ) -> tuple[JournalEntry | None, int]:
    """The journaled answer (``None`` if the call has not finished under any attempt) and the
    attempt number the next write must use."""
    state = await store.read(key)
    if state is None:
        return None, 1
    if isinstance(state, ReceiptCompleted):
        if not isinstance(state.result, str):
            raise StoreError(type(store).__name__, "read", f"journal row {key.args_hash!r} "
                             f"holds {type(state.result).__name__}, not an encoded outcome")
        return _OUTCOME.decode(state.result), state.attempt
    return None, state.attempt + 1


async def record_outcome(store: ToolCallReceiptStore, key: ToolCallReceiptKey, attempt: int,
                         outcome: JournalEntry) -> JournalEntry | None:
    """Journal ``outcome`` as ``attempt``; the answer the journal holds afterwards (another
    attempt's, if it wrote first), or ``None`` when the row is held by a live claim of another
    attempt (retry later)."""
    text = msgspec.json.encode(outcome).decode()
    if await store.claim(key, attempt, JOURNAL_LEASE_MS) and \
            await store.complete(key, attempt, text):
        return outcome
    stored, _ = await journal_outcome(store, key)
    return stored


def stub_if_large(outcome: ToolOutcome, name: str, inline_bytes: int) -> ToolOutcome:
    """``outcome``, or a reference to journal row ``name`` when it is a result whose content
    encodes to more than ``inline_bytes``."""
    if not isinstance(outcome, ToolResult):
        return outcome
    content = outcome.content
    size = len(content.encode()) if isinstance(content, str) else len(msgspec.json.encode(content))
    if size <= inline_bytes:
        return outcome
    return msgspec.structs.replace(outcome, content=REFERENCE_PREFIX + name)


async def resolve_messages(messages: Sequence[Message], *, execution_id: str,
                           payloads: ToolCallReceiptStore) -> list[Message]:
    """``messages`` with every referenced tool result's content put back from the journal."""
    out: list[Message] = []
    for message in messages:
        content = getattr(message, "content", None)
        if isinstance(message, ToolMessage) and isinstance(content, str) and \
                content.startswith(REFERENCE_PREFIX):
            name = content[len(REFERENCE_PREFIX):]
            stored, _ = await journal_outcome(payloads, journal_key(execution_id, name))
            if not isinstance(stored, ToolResult):
                raise StoreError(type(payloads).__name__, "read", f"tool result {name!r} of "
                                 f"{execution_id!r} is missing from the payload store")
            message = msgspec.structs.replace(message, content=stored.content)
        out.append(message)
    return out


async def resolve_references(checkpoint: LoopCheckpoint, payloads: Any) -> LoopCheckpoint:
    """``checkpoint`` (a workflow's result or ``checkpoint`` query, parsed) with the tool results
    its transcript holds by reference read back from ``payloads``, the store the workers share.
    Raises :class:`~bindloop.errors.StoreError` when a referenced row is missing."""
    messages = await resolve_messages(checkpoint.messages, execution_id=checkpoint.execution_id,
                                      payloads=payloads)
    return msgspec.structs.replace(checkpoint, messages=tuple(messages))
