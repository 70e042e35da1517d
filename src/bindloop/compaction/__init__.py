"""Compaction: summary markers and the wire view, when and what to compact, running a compaction,
persisted-output stubs, and the text measures they use (UTF-8/UTF-16 lengths, token estimates).

Pure except where a port is named: the model call, the blob write and the loop's state are injected.
"""

from ._errors import (
    CompactEmptySummaryError as CompactEmptySummaryError,
    CompactError as CompactError,
    CompactInvalidInputError as CompactInvalidInputError,
    CompactPromptTooLongError as CompactPromptTooLongError,
)
from ._markers import (
    SUMMARY_PREFIX as SUMMARY_PREFIX,
    CompactMarker as CompactMarker,
    SessionItem as SessionItem,
    Span as Span,
    WireView as WireView,
    decode_session as decode_session,
    elided_positions as elided_positions,
    encode_session as encode_session,
    render_summary as render_summary,
    spans_from_positions as spans_from_positions,
    summary_to_turn as summary_to_turn,
    wire_view as wire_view,
    wire_view_with_sources as wire_view_with_sources,
)
from ._partition import (
    CompactScope as CompactScope,
    FromScope as FromScope,
    Partition as Partition,
    TailScope as TailScope,
    UpToScope as UpToScope,
    partition_for_compaction as partition_for_compaction,
    round_starts as round_starts,
    shrink_for_prompt_too_long as shrink_for_prompt_too_long,
    strip_attachments as strip_attachments,
)
from ._persist import (
    DEFAULT_PERSIST_THRESHOLD_BYTES as DEFAULT_PERSIST_THRESHOLD_BYTES,
    PERSISTED_OUTPUT_PREFIX as PERSISTED_OUTPUT_PREFIX,
    PREVIEW_SIZE_BYTES as PREVIEW_SIZE_BYTES,
    PersistPlan as PersistPlan,
    build_persisted_stub as build_persisted_stub,
    decide_persist_tool_output as decide_persist_tool_output,
    persist_tool_output as persist_tool_output,
)
from ._policy import (
    DEFAULT_AUTO_COMPACT_THRESHOLD as DEFAULT_AUTO_COMPACT_THRESHOLD,
    DEFAULT_MIN_GROWTH_FRACTION as DEFAULT_MIN_GROWTH_FRACTION,
    OUTPUT_RESERVE_TOKENS as OUTPUT_RESERVE_TOKENS,
    AutoCompactDecision as AutoCompactDecision,
    AutoCompactInput as AutoCompactInput,
    AutoCompactReason as AutoCompactReason,
    effective_context_window as effective_context_window,
    should_auto_compact as should_auto_compact,
)
from ._port import (
    DEFAULT_KEEP_TURNS as DEFAULT_KEEP_TURNS,
    PromptSizeSource as PromptSizeSource,
    append_compaction as append_compaction,
    compaction_port as compaction_port,
)
from ._runner import (
    DEFAULT_SUMMARY_INSTRUCTIONS as DEFAULT_SUMMARY_INSTRUCTIONS,
    SUMMARY_REQUEST as SUMMARY_REQUEST,
    CompactResult as CompactResult,
    build_summary_prompt as build_summary_prompt,
    compact_conversation as compact_conversation,
)
from ._text import (
    BYTES_PER_TOKEN as BYTES_PER_TOKEN,
    TokenUsageLike as TokenUsageLike,
    estimate_tokens as estimate_tokens,
    format_token_summary as format_token_summary,
    utf8_byte_length as utf8_byte_length,
    utf8_prefix as utf8_prefix,
    utf16_length as utf16_length,
)

__all__ = (
    "BYTES_PER_TOKEN",
    "DEFAULT_AUTO_COMPACT_THRESHOLD",
    "DEFAULT_KEEP_TURNS",
    "PromptSizeSource",
    "DEFAULT_MIN_GROWTH_FRACTION",
    "DEFAULT_PERSIST_THRESHOLD_BYTES",
    "DEFAULT_SUMMARY_INSTRUCTIONS",
    "OUTPUT_RESERVE_TOKENS",
    "PERSISTED_OUTPUT_PREFIX",
    "PREVIEW_SIZE_BYTES",
    "SUMMARY_PREFIX",
    "SUMMARY_REQUEST",
    "AutoCompactDecision",
    "AutoCompactInput",
    "AutoCompactReason",
    "CompactEmptySummaryError",
    "CompactError",
    "CompactInvalidInputError",
    "CompactMarker",
    "CompactPromptTooLongError",
    "CompactResult",
    "CompactScope",
    "FromScope",
    "Partition",
    "PersistPlan",
    "SessionItem",
    "Span",
    "TailScope",
    "TokenUsageLike",
    "UpToScope",
    "WireView",
    "append_compaction",
    "build_persisted_stub",
    "build_summary_prompt",
    "compact_conversation",
    "compaction_port",
    "decide_persist_tool_output",
    "decode_session",
    "effective_context_window",
    "elided_positions",
    "encode_session",
    "estimate_tokens",
    "format_token_summary",
    "partition_for_compaction",
    "persist_tool_output",
    "render_summary",
    "round_starts",
    "shrink_for_prompt_too_long",
    "should_auto_compact",
    "spans_from_positions",
    "strip_attachments",
    "summary_to_turn",
    "utf16_length",
    "utf8_byte_length",
    "utf8_prefix",
    "wire_view",
    "wire_view_with_sources",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
