"""Text arithmetic shared by the budget gates: byte lengths, token estimates, summaries, commands."""

from __future__ import annotations

from typing import Final, Protocol

__all__ = (
    "BYTES_PER_TOKEN",
    "TokenUsageLike",
    "estimate_tokens",
    "format_token_summary",
    "utf16_length",
    "utf8_byte_length",
    "utf8_prefix",
)

BYTES_PER_TOKEN: Final = 4


def _char_bytes(code: int) -> int:
    if code < 0x80:
        return 1
    if code < 0x800:
        return 2
    if code < 0x10000:
        return 3  # includes a lone surrogate (counted as its 3-byte replacement)
    return 4


def utf8_byte_length(text: str) -> int:
    """UTF-8 byte length of ``text``. A high surrogate followed by a low surrogate (a pair, as text
    from a JavaScript host may carry) counts as one 4-byte sequence, not two 3-byte ones; a lone
    surrogate counts 3 bytes. Identical on every runtime; cheap for well-formed text."""
    if text.isascii():
        return len(text)
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        pass
    total = 0
    pending_high = False
    for ch in text:
        code = ord(ch)
        if 0xDC00 <= code <= 0xDFFF and pending_high:
            total += 1  # 3 counted for the high half + 1 = 4 for the pair
            pending_high = False
            continue
        pending_high = 0xD800 <= code <= 0xDBFF
        total += _char_bytes(code)
    return total


def utf8_prefix(text: str, max_bytes: int) -> str:
    """The longest prefix of ``text`` whose UTF-8 length is at most ``max_bytes``, never splitting a
    character or a surrogate pair. Walks at most ``max_bytes`` characters."""
    if max_bytes <= 0:
        return ""
    if len(text) <= max_bytes and text.isascii():
        return text
    total = 0
    i = 0
    n = len(text)
    while i < n:
        code = ord(text[i])
        width = 1
        size = _char_bytes(code)
        if 0xD800 <= code <= 0xDBFF and i + 1 < n and 0xDC00 <= ord(text[i + 1]) <= 0xDFFF:
            width, size = 2, 4
        if total + size > max_bytes:
            break
        total += size
        i += width
    return text[:i]


def utf16_length(text: str) -> int:
    """Length in UTF-16 code units (what JavaScript's ``length`` reports)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def estimate_tokens(text: str) -> int:
    """A rough token count: UTF-16 length / :data:`BYTES_PER_TOKEN`, rounded up. For budget gates
    where being off by some percent is fine; use a real tokenizer for billing or hard caps."""
    return -(-utf16_length(text) // BYTES_PER_TOKEN)


class TokenUsageLike(Protocol):
    """Anything with token counts: :class:`~bindloop.contracts.TurnUsage`,
    :class:`~bindloop.contracts.RunStats`."""

    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cached_input_tokens(self) -> int: ...


def format_token_summary(usage: TokenUsageLike) -> str:
    """One line such as ``in 52413 (cache 50000) / 4075 out``. ``in`` includes cached input (cached
    tokens are a subset of input); the ``(cache N)`` part is omitted when N is 0."""
    cache = f" (cache {usage.cached_input_tokens})" if usage.cached_input_tokens else ""
    return f"in {usage.input_tokens}{cache} / {usage.output_tokens} out"
