"""``Retry-After`` parsing (RFC 9110 §10.2.3) against an injected clock.

The header is either delay-seconds (``1*DIGIT``) or an HTTP-date, and a recipient must accept all
three date formats of RFC 9110 §5.6.7 (IMF-fixdate, the obsolete RFC 850 form, asctime). Anything
else is ``None``: a garbage header is no reason to wait. The value is the upstream's choice and RFC
9110 puts no ceiling on it, so use :func:`clamp_retry_after_ms` before sleeping on it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone

from ..clock import Clock, epoch_ms
from ..errors import UsageError

__all__ = ("clamp_retry_after_ms", "parse_retry_after", "retry_after_ms_from_headers")

_DAYS = "Mon|Tue|Wed|Thu|Fri|Sat|Sun"
_LONG_DAYS = "Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_MON = "|".join(_MONTHS)
_IMF = re.compile(rf"(?:{_DAYS}), (\d\d) ({_MON}) (\d{{4}}) (\d\d):(\d\d):(\d\d) GMT", re.ASCII)
_RFC850 = re.compile(rf"(?:{_LONG_DAYS}), (\d\d)-({_MON})-(\d\d) (\d\d):(\d\d):(\d\d) GMT", re.ASCII)
_ASCTIME = re.compile(rf"(?:{_DAYS}) ({_MON}) ([ \d]\d) (\d\d):(\d\d):(\d\d) (\d{{4}})", re.ASCII)
_DIGITS = re.compile(r"[0-9]+")
_MS_VALUE = re.compile(r"[0-9]+(?:\.[0-9]+)?")
# Saturate instead of overflowing a float on an absurd delay; clamp before use anyway.
_MAX_SECONDS = 10**12


def parse_retry_after(value: str, *, now: Clock = epoch_ms) -> float | None:
    """Milliseconds to wait according to one ``Retry-After`` value, or ``None`` if it is not valid.

    A date in the past gives ``0.0``. ``now`` must be a wall clock (epoch milliseconds), because an
    HTTP-date is absolute.
    """
    if not isinstance(value, str):
        return None
    text = value.strip(" \t")
    if _DIGITS.fullmatch(text):
        return float(_saturating_int(text, _MAX_SECONDS) * 1000)
    at = _http_date_ms(text, now)
    if at is None:
        return None
    return max(0.0, at - now())


def _saturating_int(digits: str, cap: int) -> int:
    """``min(int(digits), cap)`` without calling ``int`` on a long string: CPython refuses more than
    4300 digits (and the conversion is quadratic below that), and the header is hostile."""
    significant = digits.lstrip("0")
    if len(significant) > len(str(cap)):
        return cap
    return min(int(significant or "0"), cap)


def _http_date_ms(text: str, now: Clock) -> float | None:
    m = _IMF.fullmatch(text)
    if m is not None:
        day, mon, year, hh, mm, ss = m.groups()
        return _epoch_ms(int(year), mon, int(day), int(hh), int(mm), int(ss))
    m = _RFC850.fullmatch(text)
    if m is not None:
        day, mon, yy, hh, mm, ss = m.groups()
        # RFC 9110: a two-digit year more than 50 years in the future is the most recent past year
        # with the same last two digits.
        current = datetime.fromtimestamp(now() / 1000.0, tz=timezone.utc).year
        year = current - current % 100 + int(yy)
        if year > current + 50:
            year -= 100
        return _epoch_ms(year, mon, int(day), int(hh), int(mm), int(ss))
    m = _ASCTIME.fullmatch(text)
    if m is not None:
        mon, day, hh, mm, ss, year = m.groups()
        return _epoch_ms(int(year), mon, int(day.strip()), int(hh), int(mm), int(ss))
    return None


def _epoch_ms(year: int, mon: str, day: int, hh: int, mm: int, ss: int) -> float | None:
    try:
        # A leap second (:60) is legal in the grammar; datetime cannot hold it, so fold it to :59.
        at = datetime(year, _MONTHS.index(mon) + 1, day, hh, mm, min(ss, 59), tzinfo=timezone.utc)
    except ValueError:
        return None
    return at.timestamp() * 1000.0


def retry_after_ms_from_headers(
    headers: Mapping[str, str] | Iterable[tuple[str, str]], *, now: Clock = epoch_ms
) -> float | None:
    """The upstream's requested delay in milliseconds from response headers, or ``None``.

    Header names match case-insensitively. The non-standard ``retry-after-ms`` (milliseconds, sent
    by some OpenAI-compatible gateways) wins when it is a valid non-negative number; otherwise
    ``retry-after`` is parsed per RFC 9110. Repeated headers: the first valid value wins.
    """
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    ms_values: list[str] = []
    standard: list[str] = []
    for name, value in pairs:
        if not isinstance(name, str) or not isinstance(value, str):
            continue
        lowered = name.lower()
        if lowered == "retry-after-ms":
            ms_values.append(value)
        elif lowered == "retry-after":
            standard.append(value)
    for raw in ms_values:
        text = raw.strip(" \t")
        if _MS_VALUE.fullmatch(text):
            whole, _, fraction = text.partition(".")
            cap_ms = _MAX_SECONDS * 1000
            if _saturating_int(whole, cap_ms) >= cap_ms:  # huge saturates (never float('inf'))
                return float(cap_ms)
            return float(f"{whole.lstrip('0') or '0'}.{fraction[:32] or '0'}")
    for raw in standard:
        delay = parse_retry_after(raw, now=now)
        if delay is not None:
            return delay
    return None


def clamp_retry_after_ms(
    value: float | None, *, max_ms: float, min_ms: float = 0.0
) -> float | None:
    """``value`` bounded to ``[min_ms, max_ms]`` (``None`` stays ``None``). Use before turning an
    upstream's ``Retry-After`` into a sleep: the upstream chose it, not you."""
    if not (math.isfinite(min_ms) and math.isfinite(max_ms)) or min_ms < 0 or max_ms < min_ms:
        raise UsageError(f"need 0 <= min_ms <= max_ms, finite; got min_ms={min_ms!r}, max_ms={max_ms!r}")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise UsageError(f"retry-after must be a number or None, got {value!r}")
    return float(min(max(value, min_ms), max_ms))
