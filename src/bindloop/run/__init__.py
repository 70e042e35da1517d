"""Run control: deadlines, cancellation scopes, idempotency receipts over RFC 8785 canonical JSON,
and coalesced heartbeats. See docs/run.md."""

from ._canonical_json import (
    canonical_json as canonical_json,
    canonical_json_bytes as canonical_json_bytes,
    format_number as format_number,
)
from ._errors import CanonicalJsonError as CanonicalJsonError
from ._deadline import (
    RunDeadline as RunDeadline,
    RunFailureStatus as RunFailureStatus,
    classify_run_failure as classify_run_failure,
    create_run_deadline as create_run_deadline,
)
from ._heartbeat import (
    CoalescedHeartbeat as CoalescedHeartbeat,
    HeartbeatStatistics as HeartbeatStatistics,
    create_coalesced_heartbeat as create_coalesced_heartbeat,
)
from ._receipts import (
    DigestFn as DigestFn,
    ReceiptAmbiguous as ReceiptAmbiguous,
    ReceiptCompleted as ReceiptCompleted,
    ReceiptDecision as ReceiptDecision,
    ReceiptExecute as ReceiptExecute,
    ReceiptFailed as ReceiptFailed,
    ReceiptReplay as ReceiptReplay,
    ReceiptRunning as ReceiptRunning,
    ReceiptState as ReceiptState,
    ReceiptWait as ReceiptWait,
    ToolCallReceiptKey as ToolCallReceiptKey,
    ToolEffect as ToolEffect,
    decide_tool_call_receipt as decide_tool_call_receipt,
    sha256_hex as sha256_hex,
    tool_call_args_hash as tool_call_args_hash,
)
from ._window import window_wait as window_wait
from ._scopes import (
    call_with_deadline as call_with_deadline,
    cancel_on_signal as cancel_on_signal,
    watch_deadline as watch_deadline,
)

__all__ = (
    "CanonicalJsonError",
    "CoalescedHeartbeat",
    "DigestFn",
    "HeartbeatStatistics",
    "ReceiptAmbiguous",
    "ReceiptCompleted",
    "ReceiptDecision",
    "ReceiptExecute",
    "ReceiptFailed",
    "ReceiptReplay",
    "ReceiptRunning",
    "ReceiptState",
    "ReceiptWait",
    "RunDeadline",
    "RunFailureStatus",
    "ToolCallReceiptKey",
    "ToolEffect",
    "call_with_deadline",
    "cancel_on_signal",
    "canonical_json",
    "canonical_json_bytes",
    "classify_run_failure",
    "create_coalesced_heartbeat",
    "create_run_deadline",
    "decide_tool_call_receipt",
    "format_number",
    "sha256_hex",
    "tool_call_args_hash",
    "watch_deadline",
    "window_wait",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
