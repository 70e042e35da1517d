"""Helpers every adapter shares: JSON in and out, tool schemas, content parts, error classification."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgspec

from ..clock import Clock, epoch_ms
from ..completion import FinishReason
from ..contracts import (
    Content,
    ContentPart,
    FilePart,
    ImagePart,
    Message,
    TextPart,
    ToolDefinition,
    openai_image_url,
)
from ..errors import TranscriptFormatError
from ..routing.failures import neutral_status_category, retry_after_ms_from_headers
from ..schema import sanitize_tool_schema
from ..transcript import ReasoningTarget, sanitize_history_for_provider
from ._chat_request import request_file_data, request_text
from ._errors import (
    ProviderHttpError,
    ProviderPromptTooLongError,
    WireDecodeError,
    WireRequestError,
)
from ._secrets import scrub_shapes
from ._types import Headers, WireOptions

__all__ = (
    "JSON_HEADERS",
    "classify",
    "decode_arguments",
    "decode_error_body",
    "decode_json",
    "encode_body",
    "file_data_url",
    "image_data_url",
    "inline_media_type",
    "SSE_ACCEPT",
    "body_snippet",
    "finish_reason",
    "mint_ids",
    "parts_of",
    "prepare_history",
    "str_field",
    "text_of",
    "tool_parameters",
)

_ENCODER = msgspec.json.Encoder()
_ANY = msgspec.json.Decoder()
JSON_HEADERS: tuple[tuple[str, str], ...] = (("content-type", "application/json"),)
SSE_ACCEPT: tuple[tuple[str, str], ...] = (("accept", "text/event-stream"),)


def encode_body(body: dict[str, Any], options: WireOptions) -> bytes:
    """The JSON body, with ``options.extra_body`` merged over the top level last. A string that
    is not Unicode text (a lone surrogate, which no UTF-8 body can carry) raises
    :class:`~bindloop.wire.WireRequestError` naming where it sits (``messages[1].content``)."""
    if options.extra_body:
        body = {**body, **options.extra_body}
    try:
        return _ENCODER.encode(body)
    except UnicodeEncodeError:
        where = _surrogate_path(body, "") or "the body"
        raise WireRequestError(
            f"the request's {where} holds a lone surrogate (a str that is not Unicode text); "
            "no JSON body can carry it: repair the text (e.g. encode('utf-8', 'replace')) "
            "before sending") from None


def _surrogate_path(value: object, path: str) -> str | None:
    """Where the first string holding a lone surrogate is (a key or a value), as a JSON path."""
    if isinstance(value, str):
        return path if not _is_text(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            step = f"{path}.{key}" if path else str(key)
            if isinstance(key, str) and not _is_text(key):
                return f"{path or 'body'} key {key.encode('utf-8', 'backslashreplace')!r}"
            found = _surrogate_path(item, step)
            if found is not None:
                return found
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _surrogate_path(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def _is_text(value: str) -> bool:
    try:
        value.encode()
    except UnicodeEncodeError:
        return False
    return True


def decode_json(data: bytes | str, decoder: msgspec.json.Decoder[Any], what: str) -> Any:
    """``data`` through ``decoder``; anything but the documented shape raises
    :class:`~bindloop.wire.WireDecodeError`, including JSON nested deeper than the decoder
    recurses (msgspec raises ``RecursionError`` there, which would read as a bug in routing)."""
    try:
        return decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise WireDecodeError(f"{what} is not the documented JSON shape: {exc}") from exc
    except RecursionError:
        raise WireDecodeError(f"{what} is nested too deeply to decode") from None


def decode_error_body(body: bytes) -> object:
    """An error body as JSON if it is JSON, else ``None`` (a proxy's HTML page, an empty body, or
    JSON nested too deeply to decode)."""
    try:
        return _ANY.decode(body)
    except (msgspec.DecodeError, RecursionError):
        return None


def decode_arguments(arguments: str) -> dict[str, Any] | None:
    """A tool call's raw argument text as the JSON object some wires must send, or ``None`` when
    it is not one (not JSON, not an object, or nested too deeply to decode)."""
    try:
        value = _ANY.decode(arguments) if arguments.strip() else {}
    except (msgspec.DecodeError, RecursionError, UnicodeEncodeError):
        # A lone surrogate is not JSON text either; the raw text then fails the body's encoding,
        # which names where it sits.
        return None
    return value if isinstance(value, dict) else None


def tool_parameters(tool: ToolDefinition, *, sanitize: bool) -> dict[str, object]:
    """The one call site where a tool's JSON Schema passes the strict-provider sanitizer."""
    if not sanitize:
        return tool.parameters
    return sanitize_tool_schema(tool.parameters)


def prepare_history(messages: Sequence[Message], target: ReasoningTarget) -> Sequence[Message]:
    """The reasoning-forwarding policy, applied once per request for every adapter."""
    return sanitize_history_for_provider(messages, target)


def parts_of(content: Content | None) -> tuple[ContentPart, ...]:
    if content is None:
        return ()
    if isinstance(content, str):
        return (TextPart(text=content),) if content else ()
    return content


def image_data_url(part: ImagePart) -> str:
    """An image as one URL, by the OpenAI-chat codec's rule (contracts): inline data must name its
    media type, never guessed. Raises :class:`~bindloop.wire.WireRequestError`."""
    try:
        return openai_image_url(part)
    except TranscriptFormatError as exc:
        raise WireRequestError(str(exc)) from None


def file_data_url(part: FilePart) -> str:
    """Inline file bytes as a ``data:`` URL, by the same codec rule. Raises
    :class:`~bindloop.wire.WireRequestError`."""
    try:
        return request_file_data(part)
    except TranscriptFormatError as exc:
        raise WireRequestError(str(exc)) from None


def inline_media_type(part: ImagePart | FilePart) -> str:
    """The media type inline bytes must carry on every wire (the codec's rule)."""
    if isinstance(part, ImagePart):
        return image_data_url(part).partition(";")[0][5:]
    return file_data_url(part).partition(";")[0][5:]


def text_of(parts: Sequence[ContentPart], where: str) -> str:
    """The text of parts that must be text only on this wire (reasoning parts are skipped), by the
    request form's rule (``request_text`` in wire/_chat_request.py). Raises
    :class:`~bindloop.wire.WireRequestError`."""
    try:
        return request_text(tuple(parts), where)
    except TranscriptFormatError as exc:
        raise WireRequestError(str(exc)) from None


def finish_reason(value: str | None, table: Mapping[str, FinishReason]) -> FinishReason | None:
    if value is None:
        return None
    return table.get(value, "unknown")


def classify(
    wire: str,
    status: int | None,
    headers: Headers,
    *,
    message: str,
    error_type: str | None = None,
    error_code: str | None = None,
    category: str | None = None,
    prompt_too_long: bool = False,
    body_retry_after_ms: float | None = None,
    now: Clock | None = None,
) -> ProviderHttpError:
    """Build the classified error: ``category`` wins when given, else the neutral HTTP mapping (and
    ``server_error`` for an in-stream error without a status). The provider's texts pass the
    shape rule of :func:`~bindloop.wire._secrets.scrub_shapes` (an echoed ``Bearer`` token or
    ``key=`` parameter is blanked even where no transport says which key was sent)."""
    message = scrub_shapes(message)
    error_type = None if error_type is None else scrub_shapes(error_type)
    error_code = None if error_code is None else scrub_shapes(error_code)
    retry = retry_after_ms_from_headers(headers, now=now or epoch_ms)
    if retry is None:
        retry = body_retry_after_ms
    if prompt_too_long:
        return ProviderPromptTooLongError(message, wire=wire, category="context_length",
                                          status_code=status, retry_after_ms=retry,
                                          error_type=error_type, error_code=error_code)
    if category is None:
        if status is None and error_code is not None and _is_error_status(error_code):
            # An in-stream error whose code is a number ({"code": 400, ...}, as OpenAI-compatible
            # gateways send) says which HTTP status the upstream meant: a 400 is not retried.
            category = neutral_status_category(int(error_code))
        else:
            category = "server_error" if status is None else neutral_status_category(status)
    return ProviderHttpError(message, wire=wire, category=category, status_code=status,
                             retry_after_ms=retry, error_type=error_type, error_code=error_code)


def _is_error_status(code: str) -> bool:
    return len(code) == 3 and code.isascii() and code.isdigit() and 400 <= int(code) <= 599


def str_field(obj: object, key: str) -> str | None:
    if isinstance(obj, dict):
        value = obj.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
    return None


def body_snippet(body: bytes, limit: int = 300) -> str:
    return body[:limit].decode("utf-8", "replace").strip() or "(empty body)"


def mint_ids(prefix: str) -> Callable[[int], str]:
    """Deterministic ids for calls a provider sent without one (Gemini before ``id`` existed)."""
    return lambda index: f"{prefix}_{index}"
