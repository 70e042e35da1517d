"""Transcript hygiene: make any canonical transcript acceptable to every provider, safely.

Pairing repair, healing, user tail, resume classification and cleanup, tool-call id re-minting, and the
one policy for forwarding reasoning blocks. Every function is pure (never mutates its input), returns
the input object itself when nothing needed changing, and is idempotent.
"""

from ._common import EMPTY_TURN_PLACEHOLDER as EMPTY_TURN_PLACEHOLDER
from ._heal import (
    LEADING_USER_PLACEHOLDER as LEADING_USER_PLACEHOLDER,
    HealIssue as HealIssue,
    HealIssueKind as HealIssueKind,
    HealResult as HealResult,
    normalize_turn_structure as normalize_turn_structure,
    validate_and_heal_messages as validate_and_heal_messages,
)
from ._pairing import (
    LOST_TOOL_RESULT_ERROR as LOST_TOOL_RESULT_ERROR,
    PairingRepair as PairingRepair,
    RepairKind as RepairKind,
    ensure_tool_result_pairing as ensure_tool_result_pairing,
    lost_result_placeholder as lost_result_placeholder,
)
from ._errors import ToolPairingError as ToolPairingError
from ._reasoning import (
    REASONING_TARGETS as REASONING_TARGETS,
    ReasoningTarget as ReasoningTarget,
    ReasoningWireAction as ReasoningWireAction,
    reasoning_wire_action as reasoning_wire_action,
    sanitize_history_for_provider as sanitize_history_for_provider,
)
from ._remint import remint_colliding_tool_call_ids as remint_colliding_tool_call_ids
from ._resume import (
    DEFAULT_USER_TAIL_DIRECTIVE as DEFAULT_USER_TAIL_DIRECTIVE,
    ResumeState as ResumeState,
    classify_resume_state as classify_resume_state,
    ensure_user_tail as ensure_user_tail,
    filter_unresolved_tool_uses as filter_unresolved_tool_uses,
)

__all__ = (
    "DEFAULT_USER_TAIL_DIRECTIVE",
    "EMPTY_TURN_PLACEHOLDER",
    "LEADING_USER_PLACEHOLDER",
    "LOST_TOOL_RESULT_ERROR",
    "REASONING_TARGETS",
    "HealIssue",
    "HealIssueKind",
    "HealResult",
    "PairingRepair",
    "ReasoningTarget",
    "ReasoningWireAction",
    "RepairKind",
    "ResumeState",
    "ToolPairingError",
    "classify_resume_state",
    "ensure_tool_result_pairing",
    "ensure_user_tail",
    "filter_unresolved_tool_uses",
    "lost_result_placeholder",
    "normalize_turn_structure",
    "reasoning_wire_action",
    "remint_colliding_tool_call_ids",
    "sanitize_history_for_provider",
    "validate_and_heal_messages",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
