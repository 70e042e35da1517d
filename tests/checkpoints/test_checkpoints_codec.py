"""Stored checkpoints: strict parsing that names the field, stable bytes, and a fuzzed parser that
never hands back a checkpoint breaking the schema's invariants."""

from __future__ import annotations

import copy
import math
from typing import Any

import msgspec
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from bindloop import AssistantMessage, RunStats, ToolCall, ToolMessage, UserMessage
from bindloop.contracts import ToolTime
from bindloop.loop import OpenSuspend
from bindloop.loop import LoopCounters
from bindloop.checkpoints import (
    CHECKPOINT_VERSION,
    CheckpointFormatError,
    CheckpointLineage,
    LoopBindings,
    LoopCheckpoint,
    UnsupportedCheckpointVersionError,
    create_loop_checkpoint,
    fork_loop_checkpoint,
    parse_loop_checkpoint,
    serialize_loop_checkpoint,
)
from bindloop.testing.strategies import transcripts

ASK = AssistantMessage(tool_calls=(ToolCall(id="c1", name="ask"), ToolCall(id="c2", name="add")))


def waiting() -> LoopCheckpoint:
    """A hand-built, valid waiting checkpoint (as a run would leave it)."""
    return LoopCheckpoint(
        execution_id="e", revision=3, status="waiting_for_reply", max_iterations=5, iterations=1,
        messages=(UserMessage(content="hi"), ASK,
                  ToolMessage(tool_call_id="c2", content="3", name="add")),
        open_suspends=(OpenSuspend(tool_call_id="c1", tool_name="ask", mode="waiting_for_reply",
                                   detail="which?"),),
        stats=RunStats(turns=1, tool_calls=2, input_tokens=10, model_ms=1.0, tool_ms=2.0,
                       tools={"add": ToolTime(calls=1, ms=1.0), "ask": ToolTime(calls=1, ms=1.0)}),
        counters=LoopCounters(requested_tool_calls=2, last_prompt_tokens=10),
        bindings=LoopBindings(config={"model": "m1", "temps": [0.5, 1]}, environment={"dir": "/w"}),
    )


def stored(cp: LoopCheckpoint) -> dict[str, Any]:
    value: dict[str, Any] = msgspec.json.decode(serialize_loop_checkpoint(cp))
    return value


def test_round_trip_is_exact_and_bytes_are_stable() -> None:
    cp = waiting()
    data = serialize_loop_checkpoint(cp)
    back = parse_loop_checkpoint(msgspec.json.decode(data))
    assert back == cp
    assert serialize_loop_checkpoint(back) == data
    # text and bytes are read too
    assert parse_loop_checkpoint(data) == cp and parse_loop_checkpoint(data.decode()) == cp
    assert stored(cp)["version"] == CHECKPOINT_VERSION == 1


def test_equal_checkpoints_give_equal_bytes_whatever_their_dict_order() -> None:
    a = create_loop_checkpoint(execution_id="e", messages=[UserMessage(content="x")],
                               max_iterations=3,
                               bindings=LoopBindings(config={"b": 1, "a": {"y": 2, "x": 1}}))
    b = create_loop_checkpoint(execution_id="e", messages=[UserMessage(content="x")],
                               max_iterations=3,
                               bindings=LoopBindings(config={"a": {"x": 1, "y": 2}, "b": 1}))
    assert a == b
    assert serialize_loop_checkpoint(a) == serialize_loop_checkpoint(b)
    assert b'"config":{"a":{"x":1,"y":2},"b":1}' in serialize_loop_checkpoint(a)
    s1 = msgspec.structs.replace(waiting(), stats=RunStats(
        turns=1, tool_calls=2, tools={"b": ToolTime(calls=1), "a": ToolTime(calls=1)}))
    s2 = msgspec.structs.replace(waiting(), stats=RunStats(
        turns=1, tool_calls=2, tools={"a": ToolTime(calls=1), "b": ToolTime(calls=1)}))
    assert serialize_loop_checkpoint(s1) == serialize_loop_checkpoint(s2)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=6), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None)
@given(messages=transcripts(max_turns=3), config=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
       env=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
       budget=st.integers(0, 10**6))
def test_created_checkpoints_round_trip_to_the_same_bytes(messages: list[Any], config: dict[str, Any],
                                                          env: dict[str, Any], budget: int) -> None:
    cp = create_loop_checkpoint(execution_id="e", messages=messages, max_iterations=budget,
                                bindings=LoopBindings(config=config, environment=env))
    data = serialize_loop_checkpoint(cp)
    back = parse_loop_checkpoint(data)
    assert serialize_loop_checkpoint(back) == data
    assert back.messages == tuple(messages)
    # a rebuilt-from-scratch equal checkpoint has the same bytes (no hidden order or identity)
    again = create_loop_checkpoint(execution_id="e", messages=list(messages), max_iterations=budget,
                                   bindings=LoopBindings(config=copy.deepcopy(config),
                                                         environment=copy.deepcopy(env)))
    assert serialize_loop_checkpoint(again) == data


# ---- strict parsing: each refusal names its field ----------------------------------------------

def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    target = out
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


_DELETE = object()

BAD = [
    (("execution_id",), 7, "execution_id", "Expected `str`"),
    (("execution_id",), "", "execution_id", "non-empty"),
    (("revision",), -1, "revision", ">= 0"),
    (("iterations",), 9, "iterations", "exceed max_iterations"),
    (("max_iterations",), True, "max_iterations", "Expected `int`"),
    (("status",), "paused", "status", "Invalid enum value 'paused'"),
    (("status",), "finished", "open_suspends", "finished checkpoint has no open suspends"),
    (("status",), "resuming_later", "open_suspends", "all of mode resuming_later"),
    (("status",), "iteration_limit", "status", "iteration_limit with 1 of 5"),
    (("stats", "turns"), 2, "stats.turns", "2 model turns recorded but 1 iterations"),
    (("stats", "input_tokens"), -4, "stats.input_tokens", ">= 0"),
    (("stats", "tool_calls"), 3, "stats.tools", "add up to 2"),
    (("stats", "tools", "add", "calls"), "1", "stats.tools[...].calls", "Expected `int`"),
    (("stats", "tools", "add", "ms"), -1.0, "stats.tools.add.ms", ">= 0"),
    (("counters", "requested_tool_calls"), 1, "counters.requested_tool_calls", "2 ran"),
    (("counters", "surprise"), 1, "counters.surprise", "unknown field"),
    (("open_suspends", 0, "tool_call_id"), "zz", "open_suspends[0].tool_call_id",
     "no tool call 'zz'"),
    (("open_suspends", 0, "tool_call_id"), "c2", "open_suspends[0].tool_call_id",
     "already answered"),
    (("open_suspends", 0, "tool_name"), "add", "open_suspends[0].tool_name", "call was to 'ask'"),
    (("open_suspends", 0, "mode"), "maybe", "open_suspends[0].mode", "Invalid enum value"),
    (("messages", 1, "role"), "robot", "messages[1].role", "Invalid value 'robot'"),
    (("messages", 0, "content"), None, "messages[0].content", "Expected `str | array`"),
    (("bindings", "config"), [], "bindings.config", "Expected `object`"),
    (("lineage",), {"parent_execution_id": "e", "parent_revision": 0, "parent_iterations": 0,
                    "message_count": 1}, "lineage.parent_execution_id", "its own parent"),
    (("lineage",), {"parent_execution_id": "p"}, "lineage.parent_revision", "missing required"),
    (("messages",), _DELETE, "messages", "missing required field"),
    (("extra",), 1, "extra", "unknown field"),
]


@pytest.mark.parametrize(("path", "value", "field", "words"), BAD,
                         ids=[f"{'.'.join(map(str, b[0]))}={b[1]!r}"[:40] for b in BAD])
def test_each_impossible_or_malformed_field_is_refused_by_name(
        path: tuple[Any, ...], value: Any, field: str, words: str) -> None:
    doc = _set(stored(waiting()), path, value)
    with pytest.raises(CheckpointFormatError) as info:
        parse_loop_checkpoint(doc)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")
    assert words in str(info.value)


@pytest.mark.parametrize("version", [2, 0, "1", None, True, 1.5])
def test_unknown_versions_are_refused(version: Any) -> None:
    with pytest.raises(UnsupportedCheckpointVersionError) as info:
        parse_loop_checkpoint(_set(stored(waiting()), ("version",), version))
    assert info.value.field == "version" and info.value.version == version
    assert info.value.supported == (1,)


@pytest.mark.parametrize(("value", "words"), [
    (b"{not json", "not JSON"), ([1, 2], "expected a JSON object, got list"), (None, "got NoneType"),
    ({"execution_id": "e"}, "version: missing"),
])
def test_documents_that_are_not_checkpoints(value: Any, words: str) -> None:
    with pytest.raises(CheckpointFormatError, match=words):
        parse_loop_checkpoint(value)


def test_hand_built_checkpoints_are_checked_before_they_reach_storage() -> None:
    bad = msgspec.structs.replace(waiting(), status="finished")
    with pytest.raises(CheckpointFormatError, match="open_suspends"):
        serialize_loop_checkpoint(bad)
    wrong_type = msgspec.structs.replace(waiting(), iterations="1")
    with pytest.raises(CheckpointFormatError) as info:
        serialize_loop_checkpoint(wrong_type)
    assert info.value.field == "iterations"
    with pytest.raises(CheckpointFormatError, match="must be a LoopCheckpoint"):
        serialize_loop_checkpoint({"version": 1})  # type: ignore[arg-type]


@pytest.mark.parametrize(("config", "field"), [
    ({"x": math.nan}, "bindings.config.x"), ({"x": {1: "a"}}, "bindings.config.x"),
    ({"x": {"y": {1, 2}}}, "bindings.config.x.y"), ({"x": [0, math.inf]}, "bindings.config.x[1]"),
    ({"x": 2**64}, "bindings.config.x"), ({"x": object()}, "bindings.config.x"),
])
def test_bindings_must_be_json(config: dict[str, Any], field: str) -> None:
    with pytest.raises(CheckpointFormatError) as info:
        create_loop_checkpoint(execution_id="e", messages=[], max_iterations=1,
                               bindings=LoopBindings(config=config))
    assert info.value.field == field
    hand_built = msgspec.structs.replace(waiting(), bindings=LoopBindings(config=config))
    with pytest.raises(CheckpointFormatError):
        serialize_loop_checkpoint(hand_built)


def test_negative_zero_is_stored_as_zero_so_equal_bindings_stay_equal_bytes() -> None:
    a = create_loop_checkpoint(execution_id="e", messages=[], max_iterations=1,
                               bindings=LoopBindings(config={"t": -0.0}))
    b = create_loop_checkpoint(execution_id="e", messages=[], max_iterations=1,
                               bindings=LoopBindings(config={"t": 0.0}))
    assert serialize_loop_checkpoint(a) == serialize_loop_checkpoint(b)


def test_negative_zero_times_in_stats_are_stored_as_zero() -> None:
    zero = RunStats(turns=1, tool_calls=2, model_ms=0.0, tool_ms=0.0,
                    tools={"add": ToolTime(calls=1, ms=0.0), "ask": ToolTime(calls=1, ms=0.0)})
    negative = RunStats(turns=1, tool_calls=2, model_ms=-0.0, tool_ms=-0.0,
                        tools={"add": ToolTime(calls=1, ms=-0.0), "ask": ToolTime(calls=1, ms=-0.0)})
    a = msgspec.structs.replace(waiting(), stats=zero)
    b = msgspec.structs.replace(waiting(), stats=negative)
    assert a == b
    assert serialize_loop_checkpoint(a) == serialize_loop_checkpoint(b)
    assert b"-0.0" not in serialize_loop_checkpoint(b)
    # read back from storage, a -0.0 is a 0.0 too
    doc = stored(a)
    doc["stats"]["model_ms"] = -0.0
    doc["stats"]["tools"]["add"]["ms"] = -0.0
    parsed = parse_loop_checkpoint(msgspec.json.encode(doc))
    assert math.copysign(1.0, parsed.stats.model_ms) == 1.0
    assert math.copysign(1.0, parsed.stats.tools["add"].ms) == 1.0


# ---- tool-call pairing: the last tool-call turn is answered or suspended ----------------------

def _ready(*messages: Any, **kw: Any) -> LoopCheckpoint:
    return LoopCheckpoint(execution_id="e", revision=1, status=kw.pop("status", "ready"),
                          max_iterations=5, iterations=0, messages=messages, **kw)


CALL_X = AssistantMessage(tool_calls=(ToolCall(id="x", name="add"), ToolCall(id="y", name="add")))
ANSWER_X = ToolMessage(tool_call_id="x", content="1", name="add")
ANSWER_Y = ToolMessage(tool_call_id="y", content="2", name="add")
HI = UserMessage(content="hi")


@pytest.mark.parametrize(("messages", "suspends", "status", "field", "words"), [
    ((HI, CALL_X), (), "ready", "messages[1].tool_calls[0]", "'x' is neither answered"),
    ((HI, CALL_X, ANSWER_Y), (), "ready", "messages[1].tool_calls[0]", "'x' is neither answered"),
    ((HI, CALL_X, ANSWER_X), (), "ready", "messages[1].tool_calls[1]", "'y' is neither answered"),
    ((HI, CALL_X, ANSWER_X, UserMessage(content="more")), (), "ready",
     "messages[1].tool_calls[1]", "'y'"),
    ((HI, CALL_X, ANSWER_X, AssistantMessage(content="done")), (), "finished",
     "messages[1].tool_calls[1]", "'y'"),
    ((HI, CALL_X), (), "aborted", "messages[1].tool_calls[0]", "'x'"),
    ((HI, CALL_X), ("x",), "waiting_for_reply", "messages[1].tool_calls[1]", "'y'"),
    ((HI, CALL_X, ANSWER_X), ("x", "y"), "waiting_for_reply", "open_suspends[0].tool_call_id",
     "already answered"),
    # a suspend on an earlier turn's call: only the last tool-call turn can have one open
    ((HI, AssistantMessage(tool_calls=(ToolCall(id="old", name="add"),)), CALL_X, ANSWER_X),
     ("y", "old"), "waiting_for_reply", "open_suspends[1].tool_call_id", "no tool call 'old'"),
    ((HI, AssistantMessage(tool_calls=(ToolCall(id="x", name="add"), ToolCall(id="x", name="add"))),
      ANSWER_X), (), "ready", "messages[1].tool_calls[1].id", "repeats id 'x'"),
])
def test_the_last_tool_call_turn_is_answered_or_suspended(
        messages: tuple[Any, ...], suspends: tuple[str, ...], status: str, field: str,
        words: str) -> None:
    cp = _ready(*messages, status=status, open_suspends=tuple(
        OpenSuspend(tool_call_id=i, tool_name="add", mode="waiting_for_reply") for i in suspends))
    for read in (lambda: parse_loop_checkpoint(msgspec.to_builtins(cp)),
                 lambda: serialize_loop_checkpoint(cp)):
        with pytest.raises(CheckpointFormatError) as info:
            read()
        assert info.value.field == field
        assert words in str(info.value)


@pytest.mark.parametrize(("messages", "suspends", "status"), [
    ((HI,), (), "ready"),
    ((HI, CALL_X, ANSWER_Y, ANSWER_X), (), "ready"),
    ((HI, CALL_X, ANSWER_X, ANSWER_Y, UserMessage(content="more")), (), "ready"),
    ((HI, CALL_X, ANSWER_Y), ("x",), "waiting_for_reply"),
    ((HI, CALL_X), ("y", "x"), "aborted"),
    # an earlier turn may reuse an id: only the last tool-call turn's answers count
    ((HI, AssistantMessage(tool_calls=(ToolCall(id="x", name="add"),)), ANSWER_X, CALL_X, ANSWER_Y),
     ("x",), "waiting_for_reply"),
])
def test_paired_transcripts_still_parse(messages: tuple[Any, ...], suspends: tuple[str, ...],
                                        status: str) -> None:
    cp = _ready(*messages, status=status, open_suspends=tuple(
        OpenSuspend(tool_call_id=i, tool_name="add", mode="waiting_for_reply") for i in suspends))
    assert parse_loop_checkpoint(serialize_loop_checkpoint(cp)) == cp


# ---- fuzz: whatever parses satisfies the invariants ---------------------------------------------

def independent_invariants(cp: LoopCheckpoint) -> None:
    """The schema's promises, restated without the parser's code."""
    assert cp.version == 1 and isinstance(cp.execution_id, str) and cp.execution_id
    for n in (cp.revision, cp.iterations, cp.max_iterations, cp.stats.turns, cp.stats.tool_calls,
              cp.stats.input_tokens, cp.stats.output_tokens, cp.stats.cached_input_tokens,
              cp.counters.requested_tool_calls, cp.counters.last_prompt_tokens,
              cp.counters.last_output_tokens):
        assert type(n) is int and n >= 0
    assert cp.iterations <= cp.max_iterations and cp.stats.turns == cp.iterations
    assert cp.stats.model_ms >= 0 and cp.stats.tool_ms >= 0
    assert math.isfinite(cp.stats.model_ms) and math.isfinite(cp.stats.tool_ms)
    assert sum(t.calls for t in cp.stats.tools.values()) == cp.stats.tool_calls
    assert cp.counters.requested_tool_calls >= cp.stats.tool_calls
    if cp.status in ("ready", "finished", "iteration_limit"):
        assert cp.open_suspends == ()
    if cp.status == "iteration_limit":
        assert cp.iterations == cp.max_iterations
    if cp.status == "waiting_for_reply":
        assert any(s.mode == "waiting_for_reply" for s in cp.open_suspends)
    if cp.status == "resuming_later":
        assert cp.open_suspends and all(s.mode == "resuming_later" for s in cp.open_suspends)
    turns = [k for k, m in enumerate(cp.messages) if isinstance(m, AssistantMessage) and m.tool_calls]
    calls: dict[str, str] = {}
    answered: set[str] = set()
    if turns:
        last = cp.messages[turns[-1]]
        assert isinstance(last, AssistantMessage)
        calls = {c.id: c.name for c in last.tool_calls}
        assert len(calls) == len(last.tool_calls)
        answered = {m.tool_call_id for m in cp.messages[turns[-1] + 1:] if isinstance(m, ToolMessage)}
    ids = [s.tool_call_id for s in cp.open_suspends]
    assert len(ids) == len(set(ids))
    # every call of the last tool-call turn is answered after it or open, and nothing else is open
    assert set(calls) - answered == set(ids)
    for s in cp.open_suspends:
        assert calls.get(s.tool_call_id) == s.tool_name
    if cp.lineage is not None:
        assert cp.lineage.parent_execution_id not in ("", cp.execution_id)
    # and it can be stored and read back unchanged
    assert parse_loop_checkpoint(serialize_loop_checkpoint(cp)) == cp


def _seeds() -> list[dict[str, Any]]:
    base = create_loop_checkpoint(execution_id="root", messages=[UserMessage(content="q")],
                                  max_iterations=4)
    fork = fork_loop_checkpoint(waiting(), execution_id="fork")
    spent = LoopCheckpoint(
        execution_id="spent", revision=2, status="iteration_limit", max_iterations=2,
        iterations=2, messages=(UserMessage(content="q"),), stats=RunStats(turns=2, tool_calls=0))
    return [stored(waiting()), stored(base), stored(fork), stored(spent)]


SEEDS = _seeds()


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*prefix, i))
    return out


@st.composite
def mutated(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 2))):
        paths = _paths(doc)
        if draw(st.booleans()):  # the transcript has most leaves; aim at the counters half the time
            paths = [p for p in paths if p[0] not in ("messages", "bindings")] or paths
        path = draw(st.sampled_from(paths))
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "delete", "number", "add"]))
        last = path[-1]
        if action == "delete":
            if isinstance(parent, dict):
                del parent[last]
            else:
                parent.pop(last)
        elif action == "number":
            parent[last] = draw(st.integers(-3, 12) | st.floats(allow_nan=True))
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=6))] = draw(json_values)
        else:
            parent[last] = draw(json_values)
    return doc


@st.composite
def recounted(draw: st.DrawFn) -> Any:
    """Small integer edits to the numbers and statuses outside the transcript: mostly well-typed,
    so the invariants (not the type checks) are what stands between them and a parsed checkpoint."""
    doc = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    numeric = [p for p in _paths(doc) if p[0] not in ("messages", "version") and len(p) <= 2
               and isinstance(_get(doc, p), int)]
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(numeric))
        near = _get(doc, path)
        _put(doc, path, draw(st.sampled_from([0, -1, near - 1, near + 1])))
    if draw(st.booleans()):
        doc["status"] = draw(st.sampled_from(["ready", "waiting_for_reply", "resuming_later",
                                              "finished", "aborted", "iteration_limit"]))
    return doc


def _get(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        doc = doc[key]
    return doc


def _put(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    _get(doc, path[:-1])[path[-1]] = value


@settings(max_examples=200, deadline=None)
@given(st.one_of(mutated(), mutated(), mutated(), json_values, st.binary(max_size=40)))
def test_fuzzed_documents_parse_to_valid_checkpoints_or_raise_a_format_error(doc: Any) -> None:
    _parses_valid_or_refuses(doc)


@settings(max_examples=300, deadline=None)
@given(recounted())
def test_recounted_documents_parse_to_valid_checkpoints_or_raise_a_format_error(doc: Any) -> None:
    _parses_valid_or_refuses(doc)


def _parses_valid_or_refuses(doc: Any) -> None:
    try:
        cp = parse_loop_checkpoint(doc)
    except CheckpointFormatError as exc:
        assert isinstance(exc.field, str)
        event(f"refused at {exc.field.split('.')[0].split('[')[0] or '<document>'}")
        return
    event("parsed")
    independent_invariants(cp)


@settings(max_examples=100, deadline=None)
@given(mutated())
def test_fuzz_from_json_text_behaves_like_the_parsed_value(doc: Any) -> None:
    if any(isinstance(v, float) and not math.isfinite(v) for v in _leaves(doc)):
        return  # JSON text cannot carry these (msgspec writes null), so the two inputs differ
    outcomes: list[bytes | str] = []
    for value in (doc, msgspec.json.encode(doc)):
        try:
            outcomes.append(serialize_loop_checkpoint(parse_loop_checkpoint(value)))
        except CheckpointFormatError as exc:
            outcomes.append(f"{type(exc).__name__} at {exc.field}")
    assert outcomes[0] == outcomes[1]


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [x for v in value.values() for x in _leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [value]


def test_lineage_is_stored() -> None:
    fork = fork_loop_checkpoint(waiting(), execution_id="f")
    assert stored(fork)["lineage"] == {"parent_execution_id": "e", "parent_revision": 3,
                                       "parent_iterations": 1, "message_count": 3}
    assert parse_loop_checkpoint(stored(fork)).lineage == CheckpointLineage(
        parent_execution_id="e", parent_revision=3, parent_iterations=1, message_count=3)


def test_hand_built_values_are_rebuilt_or_refused_never_passed_through() -> None:
    listed = msgspec.structs.replace(waiting(), messages=list(waiting().messages))
    fork = fork_loop_checkpoint(listed, execution_id="f")
    assert isinstance(fork.messages, tuple) and fork.messages == waiting().messages
    odd = msgspec.structs.replace(waiting(), messages=(UserMessage(content="hi"), object()))
    with pytest.raises(CheckpointFormatError, match="JSON cannot carry"):
        serialize_loop_checkpoint(odd)
    bad_role = msgspec.structs.replace(waiting(), messages=({"role": "robot"},))
    with pytest.raises(CheckpointFormatError) as info:
        fork_loop_checkpoint(bad_role, execution_id="f")
    assert info.value.field == "messages[0].role"
    # what comes back never aliases the caller's dicts
    env: dict[str, Any] = {"box": [1]}
    made = create_loop_checkpoint(execution_id="e", messages=[], max_iterations=1,
                                  bindings=LoopBindings(environment=env))
    env["box"].append(2)
    assert made.bindings.environment == {"box": [1]}
