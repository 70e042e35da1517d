"""The transcript package's errors: a transcript whose tool-call pairing is broken."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import TranscriptFormatError

if TYPE_CHECKING:  # the repairs a ToolPairingError lists
    from ._pairing import PairingRepair

__all__ = (
    "ToolPairingError",
)


class ToolPairingError(TranscriptFormatError):
    """Raised by ``ensure_tool_result_pairing(strict=True)`` instead of repairing. ``repairs`` lists
    every violation found, in transcript order."""

    def __init__(self, repairs: tuple[PairingRepair, ...]) -> None:
        first = repairs[0]
        super().__init__(
            f"transcript breaks tool-call pairing: {len(repairs)} violation(s), first "
            f"{first.kind} for tool call {first.tool_call_id!r} at message {first.index}"
        )
        self.repairs = repairs
