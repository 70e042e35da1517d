"""The host's statements for ``PostgresStore.complete_once`` are checked before anything is sent:
one that would end or open the receipt's transaction, or change the session the store relies on,
is refused whatever whitespace and comments come before its keyword (PostgreSQL's block comments
nest), and the statements a host writes are accepted. No server: the check is the store's own."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bindloop.errors import UsageError
from bindloop.hosts.stores.postgres import _TRANSACTION_CONTROL, _host_statement

_SPACE = st.text(alphabet=" \t\n\r\f", min_size=1, max_size=3)
_LINE = st.builds(lambda text, end: f"--{text}{end}",
                  st.text(alphabet=st.characters(blacklist_characters="\n\r%",
                                                 blacklist_categories=("Cs",)), max_size=12),
                  st.sampled_from(["\n", "\r", "\r\n"]))
# Comment text that neither opens nor closes a comment itself ("/" and "*" never), and no "%":
# placeholders are found in comments too, as psycopg finds them (a literal "%" is "%%").
# (Lone surrogates are no text PostgreSQL reads: see the last test.)
_BLOCK_TEXT = st.text(alphabet=st.characters(blacklist_characters="/*%",
                                             blacklist_categories=("Cs",)), max_size=10)
_BLOCK = st.recursive(
    st.builds(lambda text: f"/*{text}*/", _BLOCK_TEXT),
    lambda inner: st.builds(lambda a, nested, b: f"/*{a}{nested}{b}*/",
                            _BLOCK_TEXT, inner, _BLOCK_TEXT),
    max_leaves=4)
_PREFIX = st.lists(st.one_of(_SPACE, _LINE, _BLOCK), max_size=4).map("".join)


def _any_case(word: str) -> st.SearchStrategy[str]:
    return st.lists(st.booleans(), min_size=len(word), max_size=len(word)).map(
        lambda upper: "".join(c.upper() if u else c for c, u in zip(word, upper)))


@given(prefix=_PREFIX, data=st.data(), rest=st.sampled_from([";", " TRANSACTION", " ALL",
                                                             "/* x */", "\n", ""]))
def test_a_statement_that_controls_the_transaction_is_refused_after_any_comments(
        prefix: str, data: st.DataObject, rest: str) -> None:
    keyword = data.draw(st.sampled_from(sorted(_TRANSACTION_CONTROL)))
    sql = prefix + data.draw(_any_case(keyword)) + rest
    with pytest.raises(UsageError, match=f"{keyword.upper()} is not allowed"):
        _host_statement(sql, ())


@given(prefix=_PREFIX, keyword=st.sampled_from(["INSERT", "update", "Delete", "SELECT", "with",
                                                "merge", "VALUES"]))
def test_the_statements_a_host_writes_are_accepted(prefix: str, keyword: str) -> None:
    numbered, values = _host_statement(f"{prefix}{keyword} %s", ("v",))
    assert numbered.endswith(b"$1") and values == ("v",)


@pytest.mark.parametrize("sql", [
    "/* /* */ SELECT */ COMMIT",  # nested: the comment ends after SELECT's "*/", then COMMIT
    "-- a note /* not a block\nROLLBACK",
    "/* unbalanced /* inner */ still a comment */ END",
])
def test_the_keyword_a_nested_comment_hides_is_found(sql: str) -> None:
    with pytest.raises(UsageError, match="is not allowed"):
        _host_statement(sql, ())


def test_text_that_only_looks_like_a_keyword_is_accepted() -> None:
    # Inside a comment, a quoted identifier or a longer word, the keyword is not the command.
    for sql in ("/* COMMIT */ INSERT INTO t VALUES (1)", "committed_rows_insert", "\"commit\""):
        assert _host_statement(sql, ())[0] == sql.encode()


@given(prefix=_PREFIX, surrogate=st.characters(whitelist_categories=("Cs",)),
       where=st.sampled_from(["comment", "literal", "identifier"]))
def test_a_statement_utf8_cannot_carry_is_a_usage_error(prefix: str, surrogate: str,
                                                         where: str) -> None:
    # A lone surrogate (a str decoded with surrogateescape, a broken JSON escape) cannot be sent:
    # the error says so, not an encoder's traceback from deep inside.
    sql = {"comment": f"{prefix}/* {surrogate} */ INSERT INTO t VALUES (%s)",
           "literal": f"{prefix}INSERT INTO t VALUES ('{surrogate}', %s)",
           "identifier": f'{prefix}INSERT INTO "t{surrogate}" VALUES (%s)'}[where]
    with pytest.raises(UsageError, match="lone surrogate") as info:
        _host_statement(sql, ("v",))
    assert repr(surrogate) in str(info.value)
