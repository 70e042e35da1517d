"""Call ids on a wire that takes ``^[a-zA-Z0-9_-]+$`` only (Anthropic's ``tool_use`` ids):
:func:`plain_id` keeps an id that fits and maps any other to a plain one, deterministically."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from bindloop.wire._names import plain_id

PLAIN = re.compile(r"[a-zA-Z0-9_-]+")
ID_CHARS = st.sampled_from("abcXYZ019_-.:/ é\u00df\U0001f600\x00")


@given(st.one_of(st.text(), st.text(ID_CHARS), st.from_regex(PLAIN, fullmatch=True)))
def test_an_id_that_fits_is_kept_and_any_other_is_made_plain(value: str) -> None:
    out = plain_id(value)
    if PLAIN.fullmatch(value):
        assert out == value
    else:
        assert out != value
        assert out == plain_id(value)  # the same id always gives the same plain one
    assert PLAIN.fullmatch(out)


@given(st.text(ID_CHARS, min_size=1), st.text(ID_CHARS, min_size=1))
def test_two_ids_that_do_not_fit_never_merge(a: str, b: str) -> None:
    if a != b and not PLAIN.fullmatch(a) and not PLAIN.fullmatch(b):
        assert plain_id(a) != plain_id(b)


def test_identifiers_and_the_other_characters_of_the_pattern() -> None:
    for kept in ("call_000003", "toolu_01A09q90qw90lq917835lq9", "def", "_", "0", "0abc",
                 "a-b", "-", "call-1_x"):
        assert plain_id(kept) == kept
    # Unicode identifiers are not ASCII: mapped, as the pattern refuses them.
    for mapped in ("caf\u00e9", "\u00df", "functions.get_weather:0", "", " a"):
        assert plain_id(mapped) != mapped and PLAIN.fullmatch(plain_id(mapped))
