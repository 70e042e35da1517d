"""Prompt hashes: the fast canonical form of a message equals RFC 8785's, and a run's prompts hashed
incrementally (through one PromptHashCache) equal the full recompute, with today's values."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bindloop.agent._snapshot import _STRUCTS, PromptHash, PromptHashCache, PromptHasher, _plain, \
    canonical_message, canonical_value, prompt_hash
from bindloop.contracts import (
    AssistantMessage,
    FilePart,
    ImagePart,
    Message,
    ProviderItemPart,
    ReasoningPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from bindloop.errors import TranscriptFormatError
from bindloop.run import CanonicalJsonError, canonical_json
from bindloop.wire import ForcedTool

# Any text: every plane, control characters, escapes, and now and then a lone surrogate (which
# RFC 8785 refuses and msgspec cannot encode).
TEXT = st.one_of(
    st.text(max_size=12),
    st.text(st.characters(codec="utf-8"), max_size=12),
    st.text(st.sampled_from(['"', "\\", "\n", "\x00", "\x1f", "\x7f", "\u2028", "\ue000",
                             "\uffff", "\U0001f600", "\ud800", "\udfff", "é", "/"]), max_size=6),
)
OPT = st.none() | TEXT
PART = st.one_of(
    st.builds(lambda t: TextPart(text=t), TEXT),
    st.builds(lambda u, d, m, det: ImagePart(url=u, data=d, media_type=m, detail=det),
              OPT, OPT, OPT, st.sampled_from([None, "auto", "low", "high"])),
    st.builds(lambda u, f, n: FilePart(url=u, file_id=f, filename=n), OPT, OPT, OPT),
    st.builds(lambda t, p, s, r, e: ReasoningPart(text=t, provider=p, signature=s, redacted=r,
                                                  encrypted_content=e),
              TEXT, OPT, OPT, st.booleans(), OPT),
    st.builds(lambda w, k, d, i: ProviderItemPart(wire=w, kind=k, data=d, id=i),
              TEXT, TEXT, TEXT, OPT),
)
CONTENT = TEXT | st.lists(PART, min_size=1, max_size=3).map(tuple)
CALL = st.builds(lambda i, n, a: ToolCall(id=i, name=n, arguments=a), TEXT, TEXT, TEXT)
MESSAGE: st.SearchStrategy[Message] = st.one_of(
    st.builds(lambda c: SystemMessage(content=c), CONTENT),
    st.builds(lambda c, n: UserMessage(content=c, name=n), CONTENT, OPT),
    st.builds(lambda c, calls, n: AssistantMessage(content=c, tool_calls=tuple(calls), name=n),
              st.none() | CONTENT, st.lists(CALL, max_size=2), OPT),
    st.builds(lambda i, c, e: ToolMessage(tool_call_id=i, content=c, is_error=e),
              TEXT, CONTENT, st.booleans()),
)
# Values of the wrong type where a message's fields hold strings and booleans (msgspec's Struct
# does not check types at construction): numbers, nested dicts, bytes, raw JSON, lists.
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6)
ODD = st.one_of(JSONISH, st.binary(max_size=4), st.builds(msgspec.Raw, st.sampled_from(
    [b'"A"', b'"\\u0041"', b"1.0", b"{}", b'"\\/"'])))


def _odd(make: Any) -> Any:
    def build(value: object) -> Message:
        try:
            out: Message = make(value)
        except TranscriptFormatError:  # the fields a message checks at construction
            out = UserMessage(content="checked")
        return out
    return build


ODD_MESSAGE = st.one_of(
    st.builds(_odd(lambda c: UserMessage(content="x", name=c)), ODD),
    st.builds(_odd(lambda c: ToolMessage(tool_call_id="c", content="x", is_error=c)), ODD),
    st.builds(_odd(lambda c: ToolMessage(tool_call_id=c, content="x")), ODD),
    st.builds(_odd(lambda a: AssistantMessage(tool_calls=(ToolCall(id="c", name="n",
                                                                   arguments=a),))), ODD),
    st.builds(_odd(lambda a: AssistantMessage(tool_calls=(ToolCall(id=a, name="n"),))), ODD),
    st.builds(_odd(lambda t: UserMessage(content=(TextPart(text=t),))), ODD),
    st.builds(_odd(lambda r: AssistantMessage(content=(ReasoningPart(redacted=r),))), ODD),
    st.builds(_odd(lambda d: UserMessage(content=(ImagePart(detail=d),))), ODD),
)


def _reference(message: object) -> bytes | type[BaseException]:
    try:
        return canonical_json(msgspec.to_builtins(message)).encode()
    except (CanonicalJsonError, TypeError, ValueError) as exc:
        return type(exc)


def _fast(message: object) -> bytes | type[BaseException]:
    try:
        return canonical_message(message)
    except (CanonicalJsonError, TypeError, ValueError) as exc:
        return type(exc)


@settings(max_examples=400, deadline=None)
@given(st.one_of(MESSAGE, ODD_MESSAGE))
def test_canonical_message_is_rfc8785(message: Message) -> None:
    """The sorted msgspec encoding is taken only where it is the RFC 8785 text; every other
    message (lone surrogates, numbers, dicts, bytes, raw JSON in its fields) gets the pure-Python
    bytes or the same error as before."""
    assert _fast(message) == _reference(message)


@pytest.mark.parametrize("cls", sorted(_STRUCTS, key=lambda c: c.__name__))
def test_fast_path_structs_have_ascii_names_and_str_tags(cls: type) -> None:
    """What canonical_message relies on besides its leaves: RFC 8785 sorts keys by UTF-16 code
    units and msgspec by code points, which agree on ASCII names; a tag is written as a string."""
    info = msgspec.inspect.type_info(cls)
    assert isinstance(info, msgspec.inspect.StructType)
    assert all(f.encode_name.isascii() for f in info.fields)
    assert info.tag_field is None or (info.tag_field.isascii() and isinstance(info.tag, str))


@settings(max_examples=200, deadline=None)
@given(MESSAGE)
def test_well_typed_messages_take_the_fast_path(message: Message) -> None:
    """Every message built with its declared types is made of plain leaves (so the figures in
    docs/performance.md hold for them)."""
    assert _plain(message)


def test_msgspec_sorted_differs_from_rfc8785_outside_messages() -> None:
    """Why the fast path is limited to the message classes: numbers and some non-ASCII key orders
    differ (RFC 8785 sorts keys by UTF-16 code units, msgspec by code points)."""
    sorted_json = msgspec.json.Encoder(order="sorted")
    for value in (1.0, 1e21, -0.0, 2**60, {"\U0001f600": 1, "\uffff": 2}):
        assert sorted_json.encode(value) != canonical_json(value).encode()


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.booleans() | TEXT.filter(
    lambda t: not any("\ud800" <= c <= "\udfff" for c in t)),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(st.characters(max_codepoint=127), max_size=4), inner, max_size=3),
    max_leaves=8))
def test_msgspec_sorted_is_rfc8785_without_numbers(value: Any) -> None:
    """Strings (every plane), booleans, nulls, arrays and ASCII-keyed objects: the same text."""
    assert msgspec.json.Encoder(order="sorted").encode(value) == canonical_json(value).encode()


# -- a run's prompts through one cache ------------------------------------------------------------

TOOLS = (ToolDefinition(name="t", description="d", parameters={"type": "object"}),)
SMALL = st.lists(MESSAGE.filter(lambda m: not isinstance(_reference(m), type)), max_size=3)
EQUAL_BUT_NOT_SAME = st.sampled_from([
    # == to ToolMessage(..., is_error=True) for msgspec's __eq__, but another canonical text
    ToolMessage(tool_call_id="c", content="x", is_error=1),  # type: ignore[arg-type]
    ToolMessage(tool_call_id="c", content="x", is_error=True),
    SystemMessage(content="sys"),
])
STEP = st.one_of(
    st.tuples(st.just("append"), SMALL),
    st.tuples(st.just("append"), st.lists(EQUAL_BUT_NOT_SAME, max_size=2)),
    st.tuples(st.just("replace_all"), SMALL),
    st.tuples(st.just("truncate"), st.integers(0, 5)),
    # a new prompt of the run: a rebuilt (equal or not) system message, a slice of an earlier
    # transcript (same objects) or its copies (equal objects), a new instruction
    st.tuples(st.just("prompt"), st.tuples(
        st.sampled_from(["same", "copy", "other", "none"]), st.integers(0, 9),
        st.integers(0, 40), st.booleans(), SMALL)),
    st.tuples(st.just("choose"), st.sampled_from([None, "required", ForcedTool(name="t")])),
)


def _copy(m: Message) -> Message:
    return msgspec.structs.replace(m)


@settings(max_examples=250, deadline=None)
@given(SMALL, st.lists(STEP, max_size=14), st.integers(1, 20), st.integers(1, 4),
       st.integers(1, 4), st.sampled_from([None, {"type": "object", "properties": {}}]),
       st.booleans(), st.data())
def test_incremental_hash_equals_full_recompute(first: list[Message], steps: list[Any],
                                                limit: int, trails: int, marks: int,
                                                schema: Any, deferred: bool,
                                                data: st.DataObject) -> None:
    """Any growth of any prompt, any new prompt built from earlier transcripts, and any cache
    bound: every hash equals prompt_hash of the transcript as sent. Deferred (``defer``), each
    call's hash is read later, in any order, after the list was appended to, truncated or
    replaced and after other prompts hashed: still the value of the transcript as sent."""
    cache = PromptHashCache(limit=limit, trails=trails, marks=marks)
    unread: list[tuple[PromptHash, str]] = []

    def read_some(everything: bool) -> None:
        order = data.draw(st.permutations(range(len(unread))))
        if not everything:
            order = order[:data.draw(st.integers(0, len(order)))]
        for i in order:
            assert unread[i][0].value() == unread[i][1]
        for i in sorted(order, reverse=True):
            del unread[i]

    history: list[list[Message]] = []
    choice: Any = None
    hasher = PromptHasher(TOOLS, schema, choice, cache)
    messages = [SystemMessage(content="sys"), *first]
    for step in [("call", None), *[s for pair in zip(steps, [("call", None)] * len(steps))
                                   for s in pair]]:
        kind, arg = step
        if kind == "call":
            expected = prompt_hash(messages, TOOLS, schema, choice)
            if deferred:
                unread.append((hasher.defer(messages), expected))
                read_some(False)
            else:
                assert hasher(messages) == expected
            assert len(cache._canon) <= limit and len(cache._trails) <= trails
        elif kind == "append":
            messages.extend(arg)
        elif kind == "replace_all":
            messages[:] = arg
        elif kind == "truncate":
            del messages[arg:]
        elif kind == "choose":
            choice = arg
            hasher.choose(arg)
        else:
            system, which, cut, copy, new = arg
            history.append(messages)
            old = history[which % len(history)]
            body = old[1:cut] if old and isinstance(old[0], SystemMessage) else old[:cut]
            if copy:
                body = [_copy(m) for m in body]
            head = {"same": [SystemMessage(content="sys")], "copy": [SystemMessage(content="sys")],
                    "other": [SystemMessage(content="other")], "none": []}[system]
            messages = [*head, *body, *new]
            hasher = PromptHasher(TOOLS, schema, choice, cache)
    read_some(True)


def test_a_trail_resumes_no_further_than_its_first_unread_call() -> None:
    """A list truncated and grown back to equal messages: the new trail, read only after it
    grew, resumes from the earlier transcript no further than its own first call's messages."""
    cache = PromptHashCache()
    messages: list[Message] = [SystemMessage(content="sys"), UserMessage(content="a"),
                               UserMessage(content="b")]
    hasher = PromptHasher(TOOLS, None, None, cache)
    assert hasher(messages) == prompt_hash(messages, TOOLS, None, None)
    del messages[1:]
    short = hasher.defer(messages)
    messages.extend([UserMessage(content="a"), UserMessage(content="b")])
    full = hasher.defer(messages)
    assert short.value() == prompt_hash(messages[:1], TOOLS, None, None)
    assert full.value() == prompt_hash(messages, TOOLS, None, None)


def test_hash_values_are_unchanged() -> None:
    """The values snapshots and traces recorded before the incremental hashing (computed by the
    pure-Python prompt_hash of that time) are still produced: old journals replay."""
    messages: list[Message] = [
        SystemMessage(content="sys \u00e9\U0001f600"),
        UserMessage(content='hi\n"x"\x01', name="u"),
        AssistantMessage(content=(TextPart(text="t"), ReasoningPart(text="r", signature="s",
                                                                    redacted=True)),
                         tool_calls=(ToolCall(id="c1", name="t", arguments='{"a":1}'),)),
        ToolMessage(tool_call_id="c1", content="ok", is_error=True)]
    tools = [ToolDefinition(name="t", description="d", parameters={
        "type": "object", "properties": {"a": {"type": "number", "minimum": 1.5}}})]
    full = "8802307b331d964de44964c3c673dbb7118f2b68c536c7ed98dfa2e468f0a429"
    short = "6bac8f825c36f3338f8ebbe944788110066a2d1ce46e12beb15cb3748fc14a6d"
    assert prompt_hash(messages, tools, {"type": "object"}, ForcedTool(name="t")) == full
    assert prompt_hash(messages[:2], [], None, None) == short
    cache = PromptHashCache()
    assert PromptHasher([], None, None, cache)(messages[:2]) == short
    assert PromptHasher(tools, {"type": "object"}, ForcedTool(name="t"), cache)(messages) == full


def test_a_new_prompt_encodes_only_its_new_messages() -> None:
    """A run's second prompt over the first one's transcript (a rebuilt, equal system message
    first) encodes the system message and the new instruction, not the history."""
    cache = PromptHashCache()
    history: list[Message] = [UserMessage(content=f"q{i}") for i in range(50)]
    first = [SystemMessage(content="sys"), *history]
    PromptHasher(TOOLS, None, None, cache)(first)
    before = dict(cache._canon)
    second = [SystemMessage(content="sys"), *history, UserMessage(content="next")]
    assert PromptHasher(TOOLS, None, None, cache)(second) == prompt_hash(second, TOOLS, None,
                                                                         None)
    added = [entry[0] for key, entry in cache._canon.items() if key not in before]
    assert added == [second[0], second[-1]]


def test_deferred_hashes_leave_no_trail_behind() -> None:
    """Once a run's hashers, cache and hashes (read or not, resumed from or not) are dropped,
    every trail they made is freed at the next collection."""
    import gc

    def trails() -> int:
        return sum(type(o).__name__ == "_Trail" for o in gc.get_objects())

    gc.collect()
    before = trails()
    cache = PromptHashCache(marks=2)
    messages: list[Message] = [SystemMessage(content="sys")]
    hasher = PromptHasher(TOOLS, None, None, cache)
    kept: list[PromptHash] = []
    for i in range(6):
        messages.append(UserMessage(content=f"q{i}"))
        kept.append(hasher.defer(messages))
    kept[2].value()  # a hashing pass: a mark with its state
    # another prompt resumes from a call not hashed yet, a third from that one's start
    second = PromptHasher(TOOLS, None, None, cache)
    kept.append(second.defer([*messages, UserMessage(content="next")]))
    kept.append(PromptHasher(TOOLS, None, None, cache).defer(messages[:3]))
    assert [h.value() for h in reversed(kept)][::-1] == [
        prompt_hash(messages[:i + 2], TOOLS, None, None) for i in range(6)] + [
        prompt_hash([*messages, UserMessage(content="next")], TOOLS, None, None),
        prompt_hash(messages[:3], TOOLS, None, None)]
    assert trails() > before
    del cache, hasher, second, kept
    gc.collect()
    assert trails() == before


def test_the_benchmark_runs_and_its_report_section_renders() -> None:
    """bench/hashing.py (its figures feed docs/performance.md through bench/report.py)."""
    import importlib.util
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[2] / "bench"
    env = {**os.environ, "PYTHONPATH": str(bench.parent / "src")}
    out = subprocess.run([sys.executable, str(bench / "hashing.py"), "--ns", "2", "--hs", "4",
                          "--budget", "0", "--json"], capture_output=True, text=True, env=env,
                         check=True, timeout=300)
    fig = json.loads(out.stdout)
    assert len(fig["in_prompt"]["2"]) == 3 and len(fig["prompt_start"]["4"]) == 4
    assert all(v > 0 for cells in fig.values() for row in cells.values() for v in row)
    spec = importlib.util.spec_from_file_location("bench_report", bench / "report.py")
    assert spec is not None and spec.loader is not None
    report = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(report)
    lines = report.section_hashing(fig, 1)
    assert lines[0] == report.HASHING_SECTION and "| N=2 (~4 msgs) |" in "\n".join(lines)
    page = report.splice("# Performance\n\n## Soak under faults\n\nx\n", [lines])
    assert page.index("## Soak under faults") < page.index(report.HASHING_SECTION)


ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.integers(-2**60, 2**60) | st.floats()
    | TEXT | st.sampled_from([0.0, -0.0, 1.0, 1e21, 1e-7, 5e-324, 2.0**53, 2**53, 2**53 + 1]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3)
    | st.dictionaries(st.integers(0, 3), inner, max_size=2),
    max_leaves=10)


def _reference_value(value: object, builtins: bool) -> bytes | type[BaseException]:
    try:
        return canonical_json(msgspec.to_builtins(value) if builtins else value).encode()
    except (CanonicalJsonError, TypeError, ValueError) as exc:
        return type(exc)


@settings(max_examples=500, deadline=None)
@given(ANY_JSON, st.booleans())
@example(float("nan"), True)
@example([float("inf")], False)
@example({"\uffff": 1, "\U0001f600": 2}, True)
@example({"a": 2**53 + 1}, True)
@example({"a": [1.0, -0.0]}, False)
@example({"k": "\ud800"}, True)
def test_canonical_value_is_rfc8785(value: Any, builtins: bool) -> None:
    """Floats, big integers, non-ASCII and non-string keys, nested objects, lone surrogates:
    msgspec's sorted encoding is used only where it is the RFC 8785 text, the pure-Python
    encoder (and its errors) everywhere else."""
    try:
        fast: bytes | type[BaseException] = canonical_value(value, builtins=builtins)
    except (CanonicalJsonError, TypeError, ValueError) as exc:
        fast = type(exc)
    assert fast == _reference_value(value, builtins)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(TEXT, ANY_JSON, max_size=3), max_size=3),
       st.none() | st.dictionaries(TEXT, ANY_JSON, max_size=3),
       st.sampled_from([None, "auto", "required", ForcedTool(name="t")]))
def test_prompt_hasher_suffix_equals_prompt_hash(params: list[dict[str, Any]], schema: Any,
                                                 choice: Any) -> None:
    """The tools, schema and tool choice part of the hash, for any JSON in them."""
    tools = [ToolDefinition(name=f"t{i}", parameters=p) for i, p in enumerate(params)]
    messages: list[Message] = [UserMessage(content="q")]
    try:
        expected: str | type[BaseException] = prompt_hash(messages, tools, schema, choice)
    except (CanonicalJsonError, TypeError, ValueError) as exc:
        expected = type(exc)
    try:
        got: str | type[BaseException] = PromptHasher(tools, schema, choice)(messages)
    except (CanonicalJsonError, TypeError, ValueError) as exc:
        got = type(exc)
    assert got == expected
