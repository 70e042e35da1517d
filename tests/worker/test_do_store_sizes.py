"""The Durable Object checkpoint store's size rule, on CPython (checkpoints.py has no Workers API
in it; the store itself runs in workerd: test_workerd_store_kit.py)."""

from __future__ import annotations


from hypothesis import given, strategies as st

from bindloop.hosts.workers.checkpoints import MAX_VALUE_BYTES, stored_size


def test_stored_size_counts_what_v8_keeps() -> None:
    assert stored_size("abc") == 3
    assert stored_size("caf\u00e9") == 4                 # Latin-1: one byte a character
    assert stored_size("\u0100") == 2                     # past Latin-1: two bytes a unit
    assert stored_size("a\U0001f600") == 6                # a surrogate pair is two units
    assert MAX_VALUE_BYTES == 2_000_000


@given(st.text())
def test_stored_size_is_never_below_one_byte_a_character(text: str) -> None:
    assert len(text) <= stored_size(text) <= 4 * len(text)
