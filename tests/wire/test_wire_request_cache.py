"""Each adapter keeps every message's and tool definition's encoded wire form between requests
(issue 31): a request converts only what it has not sent before. The bytes must be the uncached
build's for any transcript, tools and options — also through one adapter across a transcript that
grows turn by turn, under a tiny bound, with names the wire maps and with input it refuses."""

from __future__ import annotations

import re
from typing import Any
from unittest.mock import patch

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bindloop.contracts import (
    AssistantMessage,
    Message,
    ProviderItemPart,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from bindloop.errors import UsageError
from bindloop.testing import strategies as kit
from bindloop.wire import (
    WIRE_NAMES,
    AnthropicAdapter,
    CachePolicy,
    ForcedTool,
    GeminiAdapter,
    JsonSchemaFormat,
    OpenAIChatAdapter,
    OpenAIResponsesAdapter,
    ReasoningOptions,
    WireOptions,
)

from bindloop.wire._cache import WireCache
from bindloop.wire._names import _KEEP, GEMINI_NAMES, OPENAI_NAMES, ToolNames

from . import wire_strategies

ADAPTERS: dict[str, Any] = {
    "openai_chat": OpenAIChatAdapter, "openai_responses": OpenAIResponsesAdapter,
    "anthropic": lambda **kw: AnthropicAdapter(beta=("compact-2026-01-12",), **kw),
    "gemini": GeminiAdapter,
}
# Names the wires refuse (mapped to wire names), a name that is another's wire name, long ids.
ODD_NAMES = st.sampled_from(["ns:tool", "has space", "slash/name", "x" * 70, "9lives", "ok_name",
                             "search", "ns_tool"])
ODD_IDS = st.sampled_from(["functions.get_weather:0", "c" * 70, "call 1"])


def _schema(name: str) -> dict[str, object]:
    return {"type": "object", "properties": {name: {"type": "string", "format": "uri"},
                                             "n": {"type": "integer", "minimum": 0}},
            "required": [name], "additionalProperties": False}


TOOLS = st.lists(
    st.builds(ToolDefinition, name=st.one_of(kit._ident, ODD_NAMES),
              description=st.sampled_from(["", "Does a thing."]),
              parameters=st.sampled_from(["q", "url"]).map(_schema),
              strict=st.sampled_from([None, True, False])),
    max_size=3, unique_by=lambda t: t.name)


@st.composite
def odd(draw: st.DrawFn, messages: list[Message]) -> list[Message]:
    """``messages`` with some tool names and ids the wires map, nameless tool results, opaque
    items, and now and then a lone surrogate."""
    out: list[Message] = []
    replace = msgspec.structs.replace
    for m in messages:
        if isinstance(m, AssistantMessage) and m.tool_calls and draw(st.booleans()):
            m = replace(m, tool_calls=tuple(
                replace(c, name=draw(ODD_NAMES)) if draw(st.booleans()) else c
                for c in m.tool_calls))
        elif isinstance(m, ToolMessage) and draw(st.booleans()):
            m = replace(m, name=draw(st.one_of(st.none(), ODD_NAMES)))
        elif isinstance(m, AssistantMessage) and draw(st.integers(0, 5)) == 0:
            item = ProviderItemPart(wire=draw(st.sampled_from(["anthropic", "openai_responses"])),
                                    kind="compaction", data='{"type":"compaction","x":1}')
            parts = (TextPart(text=m.content),) if isinstance(m.content, str) else m.content or ()
            m = replace(m, content=(*parts, item))
        out.append(m)
    if out and draw(st.integers(0, 9)) == 0:
        out.append(AssistantMessage(tool_calls=(ToolCall(id=draw(ODD_IDS), name="t",
                                                         arguments="{}"),)))
        out.append(ToolMessage(tool_call_id=out[-1].tool_calls[0].id,  # type: ignore[union-attr]
                               content="done"))
    if out and draw(st.integers(0, 19)) == 0:
        out.append(UserMessage(content="bad \udcff text"))
    return out


TRANSCRIPTS = st.one_of(kit.transcripts(), wire_strategies.transcripts(),
                        st.lists(kit.messages(), max_size=6)).flatmap(odd)
OPTIONS = st.builds(
    WireOptions, model=st.just("m"),
    tool_choice=st.one_of(st.none(), st.sampled_from(["auto", "required", "none"]),
                          ODD_NAMES.map(lambda n: ForcedTool(name=n))),
    cache=st.one_of(st.none(), st.builds(CachePolicy, system=st.booleans(), tools=st.booleans(),
                                         turns=st.integers(0, 2))),
    stream=st.booleans(), max_tokens=st.one_of(st.none(), st.just(64)),
    parallel_tool_calls=st.one_of(st.none(), st.booleans()),
    stop=st.sampled_from([(), ("END",), ("a", "b")]),
    reasoning=st.one_of(st.none(), st.builds(
        ReasoningOptions, effort=st.sampled_from([None, "minimal", "high"]),
        budget_tokens=st.one_of(st.none(), st.just(2048)))),
    response_format=st.one_of(st.none(), st.just(JsonSchemaFormat(
        name="answer", schema={"type": "object", "properties": {"n": {"type": "integer"}},
                               "required": ["n"], "additionalProperties": False}))),
    extra_body=st.one_of(st.none(), st.just({"metadata": {"user_id": "u-1"}, "stream": False})))


def outcome(adapter: Any, messages: list[Message], tools: list[ToolDefinition],
            options: WireOptions) -> tuple[Any, ...]:
    """What a build gives: its request, or the error it raises (type and text). A request a
    caching adapter sends must come from its cached path: the uncached build (which always maps
    names through ``ToolNames.renamed``) runs only to word a refusal."""
    uncached: list[object] = []
    real = ToolNames.renamed

    def spy(self: ToolNames, *args: Any) -> Any:
        uncached.append(self)
        return real(self, *args)

    try:
        with patch.object(ToolNames, "renamed", spy):
            request = adapter.build_request(messages, tools, options)
    except Exception as exc:  # the same refusal, word for word, is part of the contract
        return ("raised", type(exc).__name__, str(exc))
    if adapter._cache is not None:
        assert not uncached, "a request that could be sent fell back to the uncached build"
    return ("sent", request.method, request.path, request.headers, request.body, request.stream)


@pytest.mark.parametrize("wire", WIRE_NAMES)
@given(messages=TRANSCRIPTS, tools=TOOLS, options=OPTIONS, data=st.data())
@settings(max_examples=60, deadline=None)
def test_cached_builds_are_the_uncached_bytes(wire: str, messages: list[Message],
                                              tools: list[ToolDefinition], options: WireOptions,
                                              data: st.DataObject) -> None:
    make = ADAPTERS[wire]
    cached = make(request_cache=data.draw(st.sampled_from([1, 3, 16_384])))
    expected = outcome(make(request_cache=0), messages, tools, options)
    # Twice through the same adapter: the second build reads what the first one kept.
    assert outcome(cached, messages, tools, options) == expected
    assert outcome(cached, messages, tools, options) == expected
    # Equal but not identical messages (a transcript loaded again) give the same bytes too.
    copies = [msgspec.structs.replace(m) for m in messages]
    assert outcome(cached, copies, tools, options) == expected


@pytest.mark.parametrize("wire", WIRE_NAMES)
@given(messages=TRANSCRIPTS, tools=TOOLS, options=OPTIONS)
@settings(max_examples=40, deadline=None)
def test_a_transcript_growing_turn_by_turn_keeps_the_uncached_bytes(
        wire: str, messages: list[Message], tools: list[ToolDefinition],
        options: WireOptions) -> None:
    make = ADAPTERS[wire]
    cached = make()
    fresh = make(request_cache=0)
    transcript: list[Message] = []  # one list the agent appends to, as the loop does
    for m in messages:
        transcript.append(m)
        assert outcome(cached, transcript, tools, options) == outcome(
            fresh, list(transcript), tools, options)


@pytest.mark.parametrize("wire", WIRE_NAMES)
def test_a_second_request_converts_only_the_new_messages_and_no_schema(
        wire: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import bindloop.wire._common as common

    checked: list[object] = []
    real = common.sanitize_tool_schema
    monkeypatch.setattr(common, "sanitize_tool_schema",
                        lambda schema: checked.append(schema) or real(schema))
    adapter = ADAPTERS[wire](sanitize_schemas=True)
    tools = [ToolDefinition(name=f"tool_{i}", parameters=_schema("q")) for i in range(50)]
    transcript: list[Message] = [SystemMessage(content="Be brief."), UserMessage(content="hi")]
    options = WireOptions(model="m")
    adapter.build_request(transcript, tools, options)
    assert len(checked) == 50
    kept = len(adapter._cache)
    transcript += [AssistantMessage(tool_calls=(ToolCall(id="c1", name="tool_1",
                                                         arguments='{"q":"x"}'),)),
                   ToolMessage(tool_call_id="c1", content="ok", name="tool_1")]
    adapter.build_request(transcript, tools, options)
    assert len(checked) == 50  # the schemas were checked once, on the first request
    assert len(adapter._cache) == kept + 2  # the two new messages, nothing else


@pytest.mark.parametrize("wire", WIRE_NAMES)
def test_the_memo_stays_within_its_bound(wire: str) -> None:
    adapter = ADAPTERS[wire](request_cache=10)
    transcript: list[Message] = [UserMessage(content="start")]
    for i in range(100):
        transcript += [AssistantMessage(content=f"answer {i}"), UserMessage(content=f"q {i}")]
        adapter.build_request(transcript, [], WireOptions(model="m"))
        assert len(adapter._cache) <= 10
    uncached = ADAPTERS[wire](request_cache=0)
    assert adapter.build_request(transcript, [], WireOptions(model="m")).body == \
        uncached.build_request(transcript, [], WireOptions(model="m")).body


@pytest.mark.parametrize("wire", WIRE_NAMES)
@pytest.mark.parametrize("bad", [-1, True, 1.5, "10"])
def test_a_bad_request_cache_is_refused(wire: str, bad: object) -> None:
    with pytest.raises(UsageError, match="request_cache"):
        ADAPTERS[wire](request_cache=bad)


@pytest.mark.parametrize("wire", WIRE_NAMES)
@given(messages=TRANSCRIPTS, tools=TOOLS, options=OPTIONS, data=st.data())
@settings(max_examples=30, deadline=None)
def test_a_transcript_edited_in_place_keeps_the_uncached_bytes(
        wire: str, messages: list[Message], tools: list[ToolDefinition], options: WireOptions,
        data: st.DataObject) -> None:
    """A message replaced in the middle of the one list (a compaction, a repair), the list cut
    short, or another session's transcript in between: the previous request's prefix is reused
    only where every message is the same object."""
    make = ADAPTERS[wire]
    cached, fresh = make(), make(request_cache=0)
    transcript = list(messages)
    outcome(cached, transcript, tools, options)
    outcome(cached, data.draw(TRANSCRIPTS), data.draw(TOOLS), options)  # another session
    if transcript:
        i = data.draw(st.integers(0, len(transcript) - 1))
        transcript[i] = data.draw(kit.messages())
        transcript = transcript[:data.draw(st.integers(i, len(transcript)))] + [
            UserMessage(content="next")]
    assert outcome(cached, transcript, tools, options) == outcome(
        fresh, list(transcript), tools, options)


@pytest.mark.parametrize("wire", WIRE_NAMES)
@given(messages=TRANSCRIPTS, pool=st.lists(TOOLS.filter(bool), min_size=1, max_size=3),
       data=st.data())
@settings(max_examples=40, deadline=None)
def test_tool_sets_changing_between_requests_keep_the_uncached_bytes(
        wire: str, messages: list[Message], pool: list[list[ToolDefinition]],
        data: st.DataObject) -> None:
    """The tool list's whole encoded array is kept between requests: the same tuple passed
    again, a list edited in place (a tool replaced, added or dropped), another set, a reordered
    one, the cache policy's mark on the last tool switched on and off — every request's bytes
    are the uncached build's."""
    make = ADAPTERS[wire]
    cached, fresh = make(), make(request_cache=0)
    sets: list[Any] = [tuple(pool[0]), list(pool[0])] + [list(t) for t in pool[1:]]
    for _ in range(data.draw(st.integers(2, 6))):
        tools = data.draw(st.sampled_from(sets))
        edit = data.draw(st.sampled_from(["none", "replace", "append", "drop", "reverse"]))
        if isinstance(tools, list) and tools:
            if edit == "replace":
                i = data.draw(st.integers(0, len(tools) - 1))
                tools[i] = msgspec.structs.replace(tools[i], description="Changed.")
            elif edit == "append":
                tools.append(data.draw(TOOLS.filter(bool))[0])
                if len({t.name for t in tools}) < len(tools):
                    tools.pop()
            elif edit == "drop" and len(tools) > 1:
                tools.pop()
            elif edit == "reverse":
                tools.reverse()
        options = data.draw(OPTIONS)
        assert outcome(cached, messages, tools, options) == outcome(
            fresh, messages, list(tools), options)


@pytest.mark.parametrize("wire", WIRE_NAMES)
@given(messages=TRANSCRIPTS, tools=TOOLS, data=st.data())
@settings(max_examples=40, deadline=None)
def test_a_session_resumed_from_its_previous_request_keeps_the_uncached_bytes(
        wire: str, messages: list[Message], tools: list[ToolDefinition],
        data: st.DataObject) -> None:
    """Each request of a session resumes from what the adapter kept of the one before (its
    turns so far): whatever the options of each request (a cache policy marking the last user
    turns or not, Gemini's cachedContent leaving a prefix out or not) and whether the next
    request is one message longer, the same again, or another session's in between."""
    make = ADAPTERS[wire]
    cached, fresh = make(), make(request_cache=0)
    policies = st.one_of(
        st.none(), st.builds(CachePolicy, system=st.booleans(), tools=st.booleans(),
                             turns=st.integers(0, 2)),
        st.builds(CachePolicy, cached_content=st.just("cachedContents/c1"),
                  cached_messages=st.integers(0, 3)) if wire == "gemini" else st.nothing())
    transcript: list[Message] = []
    for m in messages:
        transcript.append(m)
        step = data.draw(st.sampled_from(["next", "again", "other"]))
        if step == "other":
            outcome(cached, data.draw(TRANSCRIPTS), tools, WireOptions(model="m"))
        for _ in range(2 if step == "again" else 1):
            options = WireOptions(model="m", cache=data.draw(policies))
            assert outcome(cached, transcript, tools, options) == outcome(
                fresh, list(transcript), tools, options)


@pytest.mark.parametrize("wire", WIRE_NAMES)
@given(turns=st.lists(st.tuples(st.lists(st.tuples(st.sampled_from(["c0", "c1", "c2"]),
                                                   st.sampled_from(["a", "b", "ns:c"])),
                                         min_size=1, max_size=2),
                                st.lists(st.sampled_from(["c0", "c1", "c2", "c9"]), max_size=2),
                                st.sampled_from(["next", "again", "other"])),
                      min_size=1, max_size=6),
       tools=TOOLS, skip=st.integers(0, 4))
@settings(max_examples=60, deadline=None)
def test_nameless_results_take_the_newest_call_of_their_id(
        wire: str, turns: list[tuple[list[tuple[str, str]], list[str], str]],
        tools: list[ToolDefinition], skip: int) -> None:
    """Call ids reused across turns under other names, answered by tool results without a
    name (Gemini sends the name, taken from the newest call of that id, also from a call in
    the prefix a ``cachedContent`` leaves out; an id no call had is refused): each request of
    the growing session, resumed or sent again, gives the uncached bytes or the same
    refusal."""
    make = ADAPTERS[wire]
    cached, fresh = make(), make(request_cache=0)
    options = WireOptions(model="m", cache=CachePolicy(
        cached_content="cachedContents/c1", cached_messages=skip)
        if wire == "gemini" and skip else None)
    transcript: list[Message] = [UserMessage(content="start")]
    for calls, answered, step in turns:
        transcript.append(AssistantMessage(tool_calls=tuple(
            ToolCall(id=i, name=n, arguments="{}") for i, n in calls)))
        transcript += [ToolMessage(tool_call_id=i, content=f"result of {i}") for i in answered]
        if step == "other":
            outcome(cached, [UserMessage(content="another session")], tools, options)
        for _ in range(2 if step == "again" else 1):
            assert outcome(cached, transcript, tools, options) == outcome(
                fresh, list(transcript), tools, options)


@pytest.mark.parametrize("wire", WIRE_NAMES)
@given(messages=TRANSCRIPTS.filter(bool), branches=st.lists(TRANSCRIPTS.filter(bool),
                                                             min_size=2, max_size=3),
       tools=TOOLS, data=st.data())
@settings(max_examples=40, deadline=None)
def test_requests_branching_from_one_sent_before_keep_the_uncached_bytes(
        wire: str, messages: list[Message], branches: list[list[Message]],
        tools: list[ToolDefinition], data: st.DataObject) -> None:
    """Several requests continue the same one (a retry that took another turn, a conversation
    forked), each merging its first message into the shared request's open turn: the first
    resumes from what the adapter kept of it, the others find its messages kept one by one;
    each branch, each branch continued again, and the shared request sent again give the
    uncached bytes."""
    make = ADAPTERS[wire]
    cached, fresh = make(), make(request_cache=0)
    options = WireOptions(model="m", cache=data.draw(st.one_of(
        st.none(), st.builds(CachePolicy, system=st.booleans(), tools=st.booleans(),
                             turns=st.just(0)))))
    # The shared request ends with an open user turn, into which each branch's first message
    # merges (Anthropic and Gemini join consecutive user messages into one turn).
    messages = messages + [UserMessage(content="go on")]
    outcome(cached, messages, tools, options)
    sent = [messages + [UserMessage(content=f"branch {i}")] + branch
            for i, branch in enumerate(branches)]
    for transcript in sent + [t + [UserMessage(content="and then?")] for t in sent]:
        assert outcome(cached, transcript, tools, options) == outcome(
            fresh, list(transcript), tools, options)
    assert outcome(cached, messages, tools, options) == outcome(
        fresh, list(messages), tools, options)


@pytest.mark.parametrize("wire", WIRE_NAMES)
@given(messages=TRANSCRIPTS, tools=TOOLS.filter(bool), pool=st.lists(OPTIONS, min_size=1,
                                                                    max_size=3),
       data=st.data())
@settings(max_examples=40, deadline=None)
def test_options_objects_sent_again_keep_the_uncached_bytes(
        wire: str, messages: list[Message], tools: list[ToolDefinition],
        pool: list[WireOptions], data: st.DataObject) -> None:
    """An adapter may keep what it derived from the last options object (the body's keys around
    the transcript): the same options objects sent again, in any order, with and without tools
    (a forced or "none" tool choice is sent only with them), give the uncached build's bytes."""
    make = ADAPTERS[wire]
    cached, fresh = make(), make(request_cache=0)
    for _ in range(data.draw(st.integers(2, 6))):
        options = data.draw(st.sampled_from(pool))
        sent = data.draw(st.sampled_from([tools, []]))
        assert outcome(cached, messages, sent, options) == outcome(
            fresh, messages, list(sent), options)


@given(names=st.lists(st.one_of(st.text(max_size=140), ODD_NAMES, kit._ident), max_size=20),
       rule=st.sampled_from([OPENAI_NAMES, GEMINI_NAMES]))
@settings(max_examples=30, deadline=None)
def test_fits_answers_by_the_wire_pattern_before_and_after_its_memo_is_emptied(
        names: list[str], rule: Any) -> None:
    """``ToolNames.fits`` keeps its answers by name (emptied when it holds as many as the
    adapter's name table): every answer is the wire pattern's, the first time, again, and
    after more distinct names than the memo holds went through it."""
    table = ToolNames(rule)
    valid = re.compile(rule.valid)
    expected = [valid.fullmatch(n) is not None for n in names]
    assert [table.fits(n) for n in names] == expected
    assert [table.fits(n) for n in names] == expected
    assert all(table.fits(f"t{i}") for i in range(_KEEP + 1))
    assert len(table.fit) <= _KEEP
    assert [table.fits(n) for n in names] == expected


@given(limit=st.integers(1, 40), max_bytes=st.integers(1, 400),
       sizes=st.lists(st.integers(0, 50), max_size=200),
       again=st.lists(st.integers(0, 199), max_size=20))
@settings(max_examples=80, deadline=None)
def test_the_memo_drops_its_oldest_entries_first(limit: int, max_bytes: int, sizes: list[int],
                                                  again: list[int]) -> None:
    """A full memo drops its oldest entries (in batches, down to 7/8 of its limit and of its
    byte bound, whichever it went over): it never holds more than either, always holds the
    entry just stored (unless that one alone is over the byte bound) and every entry stored
    after the oldest one it holds, counts exactly the bytes it holds, and an entry stored
    again counts as new."""
    memo = WireCache(limit, max_bytes)
    keys = [object() for _ in sizes]
    order: list[int] = []  # indexes of keys, oldest store first

    def store(i: int) -> None:
        nonlocal order
        expected = len(memo) + (memo.get(keys[i]) != i)  # the length if nothing is dropped
        memo.put(keys[i], i, sizes[i])
        if sizes[i] > max_bytes:
            assert memo.get(keys[i]) is None and len(memo) < expected
            order = [o for o in order if o != i]
            return
        order = [o for o in order if o != i] + [i]
        assert memo.get(keys[i]) == i
        if len(memo) < expected <= limit and len(memo) > 1:
            # A pass dropped entries for bytes: a batch, so the next stores do not each walk.
            assert memo.nbytes <= max_bytes - max_bytes // 8

    for i in range(len(sizes)):
        store(i)
        for j in again:
            if j < i and j % 7 == i % 7:  # now and then an earlier key stored again
                store(j)
        held = [o for o in order if memo.get(keys[o]) == o]
        assert len(memo) <= limit and len(held) == len(memo)
        assert held == order[len(order) - len(held):]  # the newest ones, none skipped
        assert memo.nbytes == sum(sizes[o] for o in held) <= max_bytes
