"""Idempotency receipts: the row that lets a redelivered turn find out a tool already ran.

The key is content, not position: (tenant, run, tool, hash of the canonical arguments). A retried turn
is a fresh completion and may reorder its calls, so position-keyed receipts would match calls that are
not the same call; content keys fail safe (a new call finds no receipt and runs).

:func:`decide_tool_call_receipt` is the pure decision table. The store is the host's; its contract
(:class:`~bindloop.stores.ToolCallReceiptStore`) is an *attempt fence*: every write names the attempt it
belongs to and lands only while that attempt still owns the receipt;
:class:`~bindloop.stores.MemoryToolCallReceiptStore` is the reference implementation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeAlias

import msgspec

from ..clock import Clock, epoch_ms
from ..errors import PortContractError, UsageError
from ._canonical_json import canonical_json

__all__ = (
    "DigestFn",
    "ReceiptAmbiguous",
    "ReceiptCompleted",
    "ReceiptDecision",
    "ReceiptExecute",
    "ReceiptFailed",
    "ReceiptReplay",
    "ReceiptRunning",
    "ReceiptState",
    "ReceiptWait",
    "ToolCallReceiptKey",
    "ToolEffect",
    "decide_tool_call_receipt",
    "sha256_hex",
    "tool_call_args_hash",
)

DigestFn: TypeAlias = Callable[[str], str]
"""Hash a canonical JSON string to a stable hex (or other printable) digest."""

ToolEffect: TypeAlias = Literal["resumable", "opaque"]
"""``resumable``: the host records each sub-operation as it lands, so a reclaimed attempt skips what
already happened. ``opaque``: one indivisible effect with no trail; after a crash nobody can tell
"never happened" from "happened, then crashed"."""


def sha256_hex(text: str) -> str:
    """The default :data:`DigestFn`: SHA-256 of the UTF-8 bytes, lower-case hex."""
    import hashlib  # on first use: hashlib is ~2.5 ms of import every loop would otherwise pay

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def tool_call_args_hash(args: object, digest: DigestFn = sha256_hex) -> str:
    """``digest(canonical_json(args))``. Hash the raw parsed arguments, not a schema-coerced copy:
    coercion can make two different calls look alike. Unrepresentable values raise
    :class:`~bindloop.run.CanonicalJsonError`; a digest returning a non-``str`` or empty value raises
    :class:`~bindloop.errors.PortContractError`."""
    out = digest(canonical_json(args))
    if not isinstance(out, str) or not out:
        raise PortContractError(f"digest returned {out!r}; expected a non-empty str")
    return out


class ToolCallReceiptKey(msgspec.Struct, frozen=True, kw_only=True):
    """Identity of one tool call's effect. The tenant is part of it so receipts can be partitioned
    and moved per tenant."""

    tenant_id: str
    run_id: str
    tool_name: str
    args_hash: str


class ReceiptRunning(msgspec.Struct, frozen=True, kw_only=True, tag="running", tag_field="status"):
    """Attempt ``attempt`` claimed the call; its lease ends at ``lease_expires_at_ms`` (the store's
    clock)."""

    attempt: int
    lease_expires_at_ms: float


class ReceiptCompleted(msgspec.Struct, frozen=True, kw_only=True, tag="completed",
                       tag_field="status"):
    """Attempt ``attempt`` finished; ``result`` is what to replay."""

    attempt: int
    result: Any = None


class ReceiptFailed(msgspec.Struct, frozen=True, kw_only=True, tag="failed", tag_field="status"):
    """Attempt ``attempt`` ended in a failure it reported cleanly (no effect landed, or the host's
    trail says what did)."""

    attempt: int
    error: str | None = None


ReceiptState: TypeAlias = ReceiptRunning | ReceiptCompleted | ReceiptFailed


class ReceiptExecute(msgspec.Struct, frozen=True, kw_only=True, tag="execute", tag_field="kind"):
    """Run the tool as attempt ``attempt`` — after claiming it in the store. ``reclaim`` says an
    expired lease of a resumable effect is being taken over."""

    attempt: int
    reclaim: bool = False


class ReceiptReplay(msgspec.Struct, frozen=True, kw_only=True, tag="replay", tag_field="kind"):
    """The call already completed: return ``result`` without running the tool."""

    attempt: int
    result: Any = None


class ReceiptWait(msgspec.Struct, frozen=True, kw_only=True, tag="wait", tag_field="kind"):
    """Another attempt owns the call and its lease is live: retry later."""

    attempt: int
    lease_expires_at_ms: float
    reason: str


class ReceiptAmbiguous(msgspec.Struct, frozen=True, kw_only=True, tag="ambiguous",
                       tag_field="kind"):
    """An opaque effect was claimed and its lease expired without an outcome: it may or may not
    have happened. Refuse and surface it; re-running could do it twice."""

    attempt: int
    reason: str


ReceiptDecision: TypeAlias = ReceiptExecute | ReceiptReplay | ReceiptWait | ReceiptAmbiguous


def decide_tool_call_receipt(
    *, state: ReceiptState | None, effect: ToolEffect, now: Clock = epoch_ms
) -> ReceiptDecision:
    """The receipt table.

    ========================================  =====================================
    receipt state                             decision
    ========================================  =====================================
    absent (``None``)                         execute, attempt 1
    completed                                 replay
    failed (attempt n)                        execute, attempt n+1
    running, lease live                       wait
    running, lease expired, ``resumable``     execute, attempt n+1 (reclaim)
    running, lease expired, ``opaque``        ambiguous
    ========================================  =====================================

    ``now`` must read the *store's* clock (application clocks drift enough to steal a live lease). A
    lease is live while ``now() < lease_expires_at_ms``.
    """
    if effect not in ("resumable", "opaque"):
        raise UsageError(f"effect must be 'resumable' or 'opaque', got {effect!r}")
    if state is None:
        return ReceiptExecute(attempt=1)
    if isinstance(state, ReceiptCompleted):
        return ReceiptReplay(attempt=state.attempt, result=state.result)
    if isinstance(state, ReceiptFailed):
        return ReceiptExecute(attempt=state.attempt + 1)
    if not isinstance(state, ReceiptRunning):
        raise UsageError(f"state must be a ReceiptState or None, got {state!r}")
    if now() < state.lease_expires_at_ms:
        return ReceiptWait(attempt=state.attempt, lease_expires_at_ms=state.lease_expires_at_ms,
                           reason=f"attempt {state.attempt} holds a live lease")
    if effect == "resumable":
        return ReceiptExecute(attempt=state.attempt + 1, reclaim=True)
    return ReceiptAmbiguous(
        attempt=state.attempt,
        reason=f"attempt {state.attempt} of an opaque effect lost its lease without an outcome; "
               "it may have happened",
    )
