"""Protocols real frontends speak, as pure encoders and decoders: the Vercel AI SDK UI message
stream (v1), AG-UI (1.0) and
A2A 1.0 (the JSON-RPC binding's wire types and a run as an A2A task).

No I/O: run events in, protocol chunks out (the same bytes on every runtime); request bodies in,
bindloop's transcript out, read with their size and depth bounded first. A host (the ASGI app in
``bindloop.hosts.asgi.chat``, the Worker) carries the bytes. See docs/protocols.md.
"""

from __future__ import annotations

from .._public import publish as _publish
from ._a2a import (
    A2aPending as A2aPending,
    A2aTaskEncoder as A2aTaskEncoder,
    RunRecorder as RunRecorder,
    a2a_reply as a2a_reply,
    pending_message as pending_message,
)
from ._a2a_types import (
    A2A_AGENT_CARD_PATH as A2A_AGENT_CARD_PATH,
    A2A_METHODS as A2A_METHODS,
    A2A_PROTOCOL_VERSION as A2A_PROTOCOL_VERSION,
    TERMINAL_STATES as TERMINAL_STATES,
    A2aAgentCapabilities as A2aAgentCapabilities,
    A2aAgentCard as A2aAgentCard,
    A2aAgentInterface as A2aAgentInterface,
    A2aAgentProvider as A2aAgentProvider,
    A2aAgentSkill as A2aAgentSkill,
    A2aArtifact as A2aArtifact,
    A2aArtifactUpdate as A2aArtifactUpdate,
    A2aCancelTaskRequest as A2aCancelTaskRequest,
    A2aErrorCode as A2aErrorCode,
    A2aGetTaskRequest as A2aGetTaskRequest,
    A2aMessage as A2aMessage,
    A2aPart as A2aPart,
    A2aRpcCall as A2aRpcCall,
    A2aSendConfiguration as A2aSendConfiguration,
    A2aSendMessageRequest as A2aSendMessageRequest,
    A2aStatusUpdate as A2aStatusUpdate,
    A2aStreamResponse as A2aStreamResponse,
    A2aSubscribeRequest as A2aSubscribeRequest,
    A2aTask as A2aTask,
    A2aTaskState as A2aTaskState,
    A2aTaskStatus as A2aTaskStatus,
    decode_a2a_call as decode_a2a_call,
    decode_a2a_params as decode_a2a_params,
    encode_a2a_error as encode_a2a_error,
    encode_a2a_result as encode_a2a_result,
)
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
from ._errors import A2aRpcError as A2aRpcError, ProtocolRequestError as ProtocolRequestError
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
    "A2A_AGENT_CARD_PATH",
    "A2A_METHODS",
    "A2A_PROTOCOL_VERSION",
    "TERMINAL_STATES",
    "A2aAgentCapabilities",
    "A2aAgentCard",
    "A2aAgentInterface",
    "A2aAgentProvider",
    "A2aAgentSkill",
    "A2aArtifact",
    "A2aArtifactUpdate",
    "A2aCancelTaskRequest",
    "A2aErrorCode",
    "A2aGetTaskRequest",
    "A2aMessage",
    "A2aPart",
    "A2aPending",
    "A2aRpcCall",
    "A2aRpcError",
    "A2aSendConfiguration",
    "A2aSendMessageRequest",
    "A2aStatusUpdate",
    "A2aStreamResponse",
    "A2aSubscribeRequest",
    "A2aTask",
    "A2aTaskEncoder",
    "A2aTaskState",
    "A2aTaskStatus",
    "RunRecorder",
    "a2a_reply",
    "decode_a2a_call",
    "decode_a2a_params",
    "encode_a2a_error",
    "encode_a2a_result",
    "pending_message",
    # errors (_errors)
    "ProtocolRequestError",
)

_publish(__name__, globals(), __all__)
