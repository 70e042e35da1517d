"""What the host stores (SQLite, Postgres, Redis) share: argument checks, the size bound, a driver
error's first line, and the
sliding-window answer of :class:`bindloop.stores.LimitStore` (the same arithmetic as
:class:`bindloop.stores.MemoryLimitStore`, so every store answers alike)."""

from __future__ import annotations

import uuid

from bindloop.errors import UsageError
from bindloop.run import ToolCallReceiptKey
from bindloop.checkpoints import LoopCheckpoint, serialize_loop_checkpoint

__all__ = ("DEFAULT_SLOT_LEASE_MS", "HeldSlots", "check_attempt", "check_lease",
           "check_max_bytes", "check_seconds", "encode_checkpoint", "first_line", "key_parts")

DEFAULT_SLOT_LEASE_MS = 60_000.0
"""How long a concurrency slot of a shared store stands without a renewal (``create_limit_middleware`` renews
every 10 s while a call streams)."""


def key_parts(key: ToolCallReceiptKey) -> tuple[str, str, str, str]:
    if not isinstance(key, ToolCallReceiptKey):
        raise UsageError(f"key must be a ToolCallReceiptKey, got {type(key).__name__}")
    return (key.tenant_id, key.run_id, key.tool_name, key.args_hash)


def check_attempt(attempt: object) -> int:
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 1:
        raise UsageError(f"attempt must be an int >= 1, got {attempt!r}")
    return attempt


def check_lease(lease_ms: object) -> float:
    if isinstance(lease_ms, bool) or not isinstance(lease_ms, (int, float)) or not (
            0 < lease_ms < float("inf")):
        raise UsageError(f"lease_ms must be a finite number > 0, got {lease_ms!r}")
    return float(lease_ms)


def check_seconds(name: str, value: object, *, allow_zero: bool = False) -> float:
    """A finite number of seconds, > 0 (>= 0 with ``allow_zero``); anything else is a
    :class:`UsageError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            (0 <= value if allow_zero else 0 < value) and value < float("inf")):
        raise UsageError(f"{name} must be a finite number of seconds "
                         f"{'>= 0' if allow_zero else '> 0'}, got {value!r}")
    return float(value)


def check_max_bytes(max_checkpoint_bytes: object) -> int | None:
    if max_checkpoint_bytes is not None and (
            isinstance(max_checkpoint_bytes, bool) or not isinstance(max_checkpoint_bytes, int)
            or max_checkpoint_bytes < 1):
        raise UsageError(f"max_checkpoint_bytes must be a positive int or None, "
                         f"got {max_checkpoint_bytes!r}")
    return max_checkpoint_bytes


def encode_checkpoint(checkpoint: LoopCheckpoint, max_checkpoint_bytes: int | None) -> bytes:
    """The bytes to store, refused past the bound before anything is written."""
    body = serialize_loop_checkpoint(checkpoint)
    if max_checkpoint_bytes is not None and len(body) > max_checkpoint_bytes:
        raise UsageError(f"checkpoint {checkpoint.execution_id!r} is {len(body)} bytes, over "
                         f"max_checkpoint_bytes={max_checkpoint_bytes}")
    return body


class HeldSlots:
    """The concurrency slots one store handle holds (see :class:`bindloop.stores.LimitStore`'s slot
    leases): each slot is a row named ``<holder>:<n>`` with an expiry, ``holder`` a random id of
    this handle, so a killed process's slots lapse and a late ``leave`` frees only its own."""

    def __init__(self, lease_ms: float | None) -> None:
        self.lease_ms = None if lease_ms is None else check_lease(lease_ms)
        self.holder = uuid.uuid4().hex
        self._count = 0
        self._held: dict[str, list[str]] = {}

    def expiry(self, now: float) -> float:
        return float("inf") if self.lease_ms is None else now + self.lease_ms

    def new_slot(self) -> str:
        self._count += 1
        return f"{self.holder}:{self._count}"

    def took(self, key: str, slot: str) -> None:
        self._held.setdefault(key, []).append(slot)

    def give_back(self, key: str) -> str | None:
        """The slot a ``leave`` of ``key`` returns (``None``: this handle holds none there)."""
        held = self._held.get(key)
        return held.pop() if held else None

    def all(self) -> list[tuple[str, str]]:
        return [(key, slot) for key, slots in self._held.items() for slot in slots]


def first_line(exc: BaseException) -> str:
    """``exc`` as a :class:`~bindloop.stores.StoreError` detail: its type and the first line of
    its message (a driver's later lines carry the query and its parameters)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
