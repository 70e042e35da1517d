"""A2A 1.0, the JSON-RPC binding: its wire types (the agent card, messages, parts, tasks, their
status and artifact updates, the requests) with :func:`decode_a2a_call` / :func:`decode_a2a_params`
and :func:`encode_a2a_result` / :func:`encode_a2a_error` (:class:`A2aRpcError`); and a run as an A2A
task -- :class:`A2aTaskEncoder` turns the run's events into the task's updates, :class:`RunRecorder`
keeps the run as canonical messages so the next message continues it, and :func:`a2a_reply` reads
a client's reply to an ``input-required`` task. No I/O: the ASGI binding is
``bindloop.hosts.a2a``. See docs/a2a.md.
"""

from ._a2a import (
    A2aPending as A2aPending,
    A2aTaskEncoder as A2aTaskEncoder,
    RunRecorder as RunRecorder,
    a2a_reply as a2a_reply,
    pending_message as pending_message,
)
from ._a2a_task import (
    a2a_agent_card as a2a_agent_card,
    a2a_interface as a2a_interface,
    a2a_open_calls as a2a_open_calls,
    a2a_user_content as a2a_user_content,
    check_a2a_version as check_a2a_version,
    check_user_message as check_user_message,
    fold_a2a_task as fold_a2a_task,
    join_a2a_text_parts as join_a2a_text_parts,
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
from ._errors import (
    A2aRpcError as A2aRpcError,
)

__all__ = (
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
    "a2a_agent_card",
    "a2a_interface",
    "a2a_open_calls",
    "a2a_user_content",
    "check_a2a_version",
    "check_user_message",
    "fold_a2a_task",
    "join_a2a_text_parts",
)

from .._public import publish as _publish

_publish(__name__, globals(), __all__)
