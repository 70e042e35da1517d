"""What the host stores (SQLite, Postgres, Redis) share: argument checks, the size bound, and the
sliding-window answer of :class:`bindloop.agent.LimitStore` (the same arithmetic as
:class:`bindloop.agent.InMemoryLimitStore`, so every store answers alike)."""

from __future__ import annotations


from bindloop.errors import UsageError
from bindloop.run import ToolCallReceiptKey
from bindloop.session import LoopCheckpoint, serialize_loop_checkpoint

__all__ = ("check_attempt", "check_lease", "check_max_bytes", "encode_checkpoint", "key_parts")


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

