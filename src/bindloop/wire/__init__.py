"""JSON-only wire adapters: SSE decoding and the OpenAI Chat Completions, OpenAI Responses,
Anthropic Messages and Gemini wires, plus their composition with a host transport (the call, its
stall watchdog, retries and routes).

The adapters are pure (bytes and JSON in, bytes and JSON out); the host performs HTTP through the
:class:`Transport` port (``bindloop.hosts`` ships httpx and JS ``fetch`` transports). See docs/wire.md.

Each wire's module (its adapter, and ``gemini_schema``) is imported the first time one of its names
is read, or its adapter is made by :func:`create_wire_adapter`: importing ``bindloop.wire`` (or
the agent, which uses its model call) loads no wire.
"""

from typing import TYPE_CHECKING, Any

from ._chat_request import message_to_openai_request as message_to_openai_request
from ._errors import (
    IncompleteStreamError as IncompleteStreamError,
    ProviderHttpError as ProviderHttpError,
    ProviderPromptTooLongError as ProviderPromptTooLongError,
    SseError as SseError,
    SseLimitError as SseLimitError,
    StreamStalledError as StreamStalledError,
    TransportError as TransportError,
    WireDecodeError as WireDecodeError,
    WireRequestError as WireRequestError,
)
from ._fallback import fallback_route as fallback_route
# Defined with the model protocol (a ModelRequest carries them) and exported here too: WireOptions'
# fields are typed with them, so a wire user imports them beside it.
from ..model import (
    ForcedTool as ForcedTool,
    JsonSchemaFormat as JsonSchemaFormat,
    ToolChoice as ToolChoice,
)
from ._adapter import ModelAdapter as ModelAdapter
from ._registry import (
    LAZY_NAMES as _LAZY,
    WIRE_NAMES as WIRE_NAMES,
    create_wire_adapter as create_wire_adapter,
    load_wire_name as _load,
)
from ._retry import (
    RetryAttempt as RetryAttempt,
    RetryPolicy as RetryPolicy,
    failure_category as failure_category,
    is_content_event as is_content_event,
    is_retryable as is_retryable,
    retry_attempts as retry_attempts,
)
from ._routed import (
    RouteStreaming as RouteStreaming,
    RoutedModel as RoutedModel,
    TextStreamSource as TextStreamSource,
    attempt_error_from as attempt_error_from,
)
from ._secrets import Redactor as Redactor, transport_redactor as transport_redactor
from ._sse import SseDecoder as SseDecoder, SseEvent as SseEvent
from ._stream import WireStream as WireStream, decode_stream as decode_stream
from ._transport import (
    Transport as Transport,
    TransportResponse as TransportResponse,
    request_url as request_url,
    transport_settings as transport_settings,
)
from ._types import (
    ANTHROPIC_CACHE_BREAKPOINTS as ANTHROPIC_CACHE_BREAKPOINTS,
    CachePolicy as CachePolicy,
    Headers as Headers,
    HttpRequest as HttpRequest,
    ReasoningOptions as ReasoningOptions,
    StreamDecoder as StreamDecoder,
    WireAdapter as WireAdapter,
    WireName as WireName,
    WireOptions as WireOptions,
)
from ._watchdog import (
    ChunkKind as ChunkKind,
    StallKind as StallKind,
    StreamBudgets as StreamBudgets,
    StreamStall as StreamStall,
    StreamWatchdog as StreamWatchdog,
    create_stream_watchdog as create_stream_watchdog,
)

__all__ = (
    "ANTHROPIC_CACHE_BREAKPOINTS",
    "WIRE_NAMES",
    "AnthropicAdapter",
    "CachePolicy",
    "GeminiAdapter",
    "Headers",
    "HttpRequest",
    "ForcedTool",
    "IncompleteStreamError",
    "JsonSchemaFormat",
    "ModelAdapter",
    "OpenAIChatAdapter",
    "OpenAIResponsesAdapter",
    "ProviderHttpError",
    "ProviderPromptTooLongError",
    "ReasoningOptions",
    "Redactor",
    "RetryAttempt",
    "RetryPolicy",
    "RouteStreaming",
    "RoutedModel",
    "SseDecoder",
    "SseError",
    "SseEvent",
    "SseLimitError",
    "StreamDecoder",
    "TextStreamSource",
    "ToolChoice",
    "Transport",
    "TransportError",
    "TransportResponse",
    "WireAdapter",
    "WireDecodeError",
    "WireName",
    "WireOptions",
    "WireRequestError",
    "WireStream",
    "attempt_error_from",
    "create_wire_adapter",
    "decode_stream",
    "failure_category",
    "fallback_route",
    "gemini_schema",
    "is_content_event",
    "is_retryable",
    "request_url",
    "retry_attempts",
    "transport_redactor",
    "transport_settings",
    # The stall watchdog for streamed completions (_watchdog).
    "ChunkKind",
    "StallKind",
    "StreamBudgets",
    "StreamStall",
    "StreamWatchdog",
    "create_stream_watchdog",
    # The abort reason the watchdog fires with.
    "StreamStalledError",
    # The OpenAI Chat Completions request form of a message (_chat_request).
    "message_to_openai_request",
)

if TYPE_CHECKING:
    from ._anthropic import AnthropicAdapter as AnthropicAdapter
    from ._gemini import GeminiAdapter as GeminiAdapter, gemini_schema as gemini_schema
    from ._openai_chat import OpenAIChatAdapter as OpenAIChatAdapter
    from ._openai_responses import OpenAIResponsesAdapter as OpenAIResponsesAdapter

from .._public import publish as _publish

_publish(__name__, globals(), [name for name in __all__ if name not in _LAZY])


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = _load(name)
    _publish(__name__, {name: value}, (name,))
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
