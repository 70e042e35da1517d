from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.compaction import (
    estimate_tokens,
    format_token_summary,
    utf8_byte_length,
)
from bindloop.contracts import RunStats, TurnUsage


def test_utf8_byte_length() -> None:
    assert utf8_byte_length("abc") == 3
    assert utf8_byte_length("é€🙂") == 2 + 3 + 4
    assert utf8_byte_length("\ud83d\ude42") == 4        # a surrogate pair is one 4-byte sequence
    assert utf8_byte_length("\ud83d") == 3              # a lone surrogate
    assert utf8_byte_length("a\ud83d\ude42\ud83d") == 1 + 4 + 3


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_utf8_byte_length_matches_the_encoder_on_well_formed_text(text: str) -> None:
    assert utf8_byte_length(text) == len(text.encode("utf-8"))


def test_estimate_tokens_uses_utf16_length() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("🙂🙂") == 1  # 4 UTF-16 units


def test_format_token_summary() -> None:
    assert format_token_summary(TurnUsage(input_tokens=52413, cached_input_tokens=50000,
                                          output_tokens=4075)) == "in 52413 (cache 50000) / 4075 out"
    assert format_token_summary(RunStats(input_tokens=5, output_tokens=2)) == "in 5 / 2 out"
