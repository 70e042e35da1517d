"""Protocols real frontends speak, as pure encoders and decoders: the Vercel AI SDK UI message
stream (v1), AG-UI (1.0) and, in the sub-namespace :mod:`bindloop.protocols.a2a`, A2A 1.0 (the
JSON-RPC binding's wire types and a run as an A2A task).

No I/O: run events in, protocol chunks out (the same bytes on every runtime); request bodies in,
bindloop's transcript out, read with their size and depth bounded first. A host (the ASGI app in
``bindloop.hosts.asgi.chat``, the Worker) carries the bytes. See docs/protocols.md.
"""

from __future__ import annotations

from .._public import publish as _publish
from ._ag_ui import AgUiEncoder as AgUiEncoder
from ._ag_ui_input import (
    AgUiResume as AgUiResume,
    AgUiRunInput as AgUiRunInput,
    ag_ui_messages_to_transcript as ag_ui_messages_to_transcript,
    decode_run_agent_input as decode_run_agent_input,
)
from ._ag_ui_types import (
    AG_UI_HEADERS as AG_UI_HEADERS,
    AgUiEvent as AgUiEvent,
    AgUiInterrupt as AgUiInterrupt,
    AgUiMessage as AgUiMessage,
    encode_ag_ui_event as encode_ag_ui_event,
)
from ._errors import ProtocolRequestError as ProtocolRequestError
from ._input import (
    DataEvent as DataEvent,
    EncoderInput as EncoderInput,
    StateDeltaEvent as StateDeltaEvent,
    StateSnapshotEvent as StateSnapshotEvent,
    agent_event_input as agent_event_input,
)
from ._sse import (
    RUN_ID_PATTERN as RUN_ID_PATTERN,
    SSE_DONE as SSE_DONE,
    parse_last_event_id as parse_last_event_id,
    parse_run_event_id as parse_run_event_id,
    sse_frame as sse_frame,
)
from ._ui_chunks import (
    UI_STREAM_HEADERS as UI_STREAM_HEADERS,
    UIChunk as UIChunk,
    UIFinishReason as UIFinishReason,
    encode_ui_chunk as encode_ui_chunk,
    ui_chunk_types as ui_chunk_types,
)
from ._ui_request import (
    ToolApproval as ToolApproval,
    UIChatRequest as UIChatRequest,
    UIChatTrigger as UIChatTrigger,
    decode_ui_chat_request as decode_ui_chat_request,
    ui_messages_to_transcript as ui_messages_to_transcript,
)
from ._ui_stream import UIStreamEncoder as UIStreamEncoder, usage_metadata as usage_metadata

__all__ = (
    # what an encoder reads besides the agent's run events (_input)
    "DataEvent",
    "EncoderInput",
    "StateDeltaEvent",
    "StateSnapshotEvent",
    "agent_event_input",
    # SSE framing and resumption (_sse)
    "RUN_ID_PATTERN",
    "SSE_DONE",
    "parse_last_event_id",
    "parse_run_event_id",
    "sse_frame",
    # the AI SDK UI message stream (_ui_chunks, _ui_stream, _ui_request)
    "UI_STREAM_HEADERS",
    "ToolApproval",
    "UIChatRequest",
    "UIChatTrigger",
    "UIChunk",
    "UIFinishReason",
    "UIStreamEncoder",
    "decode_ui_chat_request",
    "encode_ui_chunk",
    "ui_chunk_types",
    "ui_messages_to_transcript",
    "usage_metadata",
    # AG-UI (_ag_ui_types, _ag_ui, _ag_ui_input)
    "AG_UI_HEADERS",
    "AgUiEncoder",
    "AgUiEvent",
    "AgUiInterrupt",
    "AgUiMessage",
    "AgUiResume",
    "AgUiRunInput",
    "ag_ui_messages_to_transcript",
    "decode_run_agent_input",
    "encode_ag_ui_event",
    # A2A 1.0, JSON-RPC binding (_a2a_types, _a2a)
    # errors (_errors)
    "ProtocolRequestError",
)

_publish(__name__, globals(), __all__)

# The sub-namespaces load with the package, so each object reports its public home from the first
# import on.
from . import a2a  # noqa: E402, F401
