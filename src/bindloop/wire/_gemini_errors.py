"""Gemini API errors: the ``google.rpc.Status`` envelope read into the routing taxonomy, with
``ErrorInfo`` reasons and ``RetryInfo`` delays."""

from __future__ import annotations

import re
from types import MappingProxyType

from ..clock import Clock
from ._common import body_snippet, classify, str_field
from ._errors import ProviderHttpError
from ._types import Headers

__all__ = ("MAX_RETRY_DELAY_MS", "classify_gemini_error", "parse_retry_delay")


_STATUS_CATEGORY: MappingProxyType[str, str] = MappingProxyType({
    "INVALID_ARGUMENT": "invalid_request",
    "FAILED_PRECONDITION": "provider_bad_request",
    "UNAUTHENTICATED": "auth",
    "PERMISSION_DENIED": "auth",
    "NOT_FOUND": "model_not_found",
    "RESOURCE_EXHAUSTED": "rate_limited",
    "INTERNAL": "server_error",
    "UNAVAILABLE": "server_error",
    "DEADLINE_EXCEEDED": "timeout",
})


# google.rpc.ErrorInfo reasons that mean "your credential is bad", whatever the status says: the
# Gemini API answers a bad key with 400 INVALID_ARGUMENT, which must not read as a bad request.
_AUTH_REASONS: frozenset[str] = frozenset({
    "API_KEY_INVALID", "API_KEY_EXPIRED", "API_KEY_SERVICE_BLOCKED", "ACCESS_TOKEN_EXPIRED",
    "ACCESS_TOKEN_SCOPE_INSUFFICIENT", "SERVICE_DISABLED",
})


def _error_info_reasons(err: object) -> list[str]:
    details = err.get("details") if isinstance(err, dict) else None
    return [str(d.get("reason")) for d in (details if isinstance(details, list) else ())
            if isinstance(d, dict) and str(d.get("@type", "")).endswith("google.rpc.ErrorInfo")
            and isinstance(d.get("reason"), str)]


# google.protobuf.Duration in JSON: whole seconds, up to nine fractional digits, then "s". ASCII
# digits only, no sign (a negative or signed delay is not a wait), no exponent, no underscores.
_DURATION = re.compile(r"([0-9]{1,20})(?:\.([0-9]{1,9}))?s", re.ASCII)
# The longest retryDelay taken at its word (a day); a larger one is clamped to it, so a hostile or
# broken body can never make the delay infinite.
MAX_RETRY_DELAY_MS = 86_400_000.0


def parse_retry_delay(value: object) -> float | None:
    """``RetryInfo.retryDelay`` (a protobuf ``Duration`` string such as ``"41s"`` or ``"0.5s"``) in
    milliseconds, clamped to :data:`MAX_RETRY_DELAY_MS`; ``None`` for anything outside that
    grammar (``"1e308s"``, ``"1_0s"``, non-ASCII digits, ``"-0s"``, a number)."""
    if not isinstance(value, str):
        return None
    match = _DURATION.fullmatch(value)
    if match is None:
        return None
    whole, fraction = match.group(1), match.group(2) or ""
    ms = int(whole) * 1000 + int((fraction + "000000000")[:9]) / 1_000_000
    return min(float(ms), MAX_RETRY_DELAY_MS)


def _retry_delay_ms(err: object) -> float | None:
    details = err.get("details") if isinstance(err, dict) else None
    for d in details if isinstance(details, list) else ():
        if isinstance(d, dict) and str(d.get("@type", "")).endswith("google.rpc.RetryInfo"):
            return parse_retry_delay(d.get("retryDelay"))
    return None


def classify_gemini_error(status: int | None, headers: Headers, payload: object, body: bytes,
                          *, now: Clock | None = None) -> ProviderHttpError:
    """Classify ``{"error": {"code", "message", "status", "details"}}`` (also inside a one-element
    list, as the non-SSE stream sends it). ``RetryInfo.retryDelay`` backs up ``Retry-After``."""
    if isinstance(payload, list) and payload and isinstance(payload[0], dict):
        payload = payload[0]
    err = payload.get("error") if isinstance(payload, dict) else None
    message = str_field(err, "message") or body_snippet(body)
    kind = str_field(err, "status")
    lowered = message.lower()
    too_long = kind == "INVALID_ARGUMENT" and (
        "exceeds the maximum number of tokens" in lowered or "input token count" in lowered
        or "too many tokens" in lowered)
    category = _STATUS_CATEGORY.get(kind or "")
    if any(reason in _AUTH_REASONS for reason in _error_info_reasons(err)):
        category = "auth"
    return classify("gemini", status, headers, message=message, error_type=kind,
                    error_code=str_field(err, "code"), category=category,
                    prompt_too_long=too_long, body_retry_after_ms=_retry_delay_ms(err), now=now)
